#include "exporter/sources/sock_diag/sock_diag_source.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <deque>
#include <vector>

#include "absl/strings/str_cat.h"
#include "exporter/common/file_reader.h"
#include "exporter/common/logging.h"
#include "exporter/sources/shared/capabilities.h"
#include "exporter/sources/shared/kernel_probe.h"
#include "exporter/sources/cgroupfs_source.h"
#include "exporter/sources/shared/cgroup_mapper.h"
#include "exporter/sources/shared/netns.h"

namespace sockpressure {
namespace {

// linux/inet_diag.h names it since v5.8; older UAPI headers lack the enum
// value, the kernel numbering is fixed.
constexpr int kInetDiagCgroupId = 21;
// tcpi_rcv_wnd follows tcpi_snd_wnd (71fc704768f6, v6.2); older UAPI headers
// end at tcpi_snd_wnd.
constexpr size_t kRcvWndOffset = offsetof(struct tcp_info, tcpi_snd_wnd) + sizeof(uint32_t);

// TCP_LISTEN = 10, TCP_TIME_WAIT = 6, TCP_NEW_SYN_RECV = 12 carry no
// receive window (or no full socket); everything else is dumped.
constexpr uint32_t kStates = ((1u << 13) - 1) & ~((1u << 10) | (1u << 6) | (1u << 12) | 1u);

absl::Status DumpFamily(int fd, int family, const std::function<void(const TcpSocketInfo&)>& fn,
                        std::vector<char>& buf) {
  struct {
    nlmsghdr nlh;
    inet_diag_req_v2 req;
  } msg;
  std::memset(&msg, 0, sizeof msg);
  msg.nlh.nlmsg_len = sizeof msg;
  msg.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  msg.nlh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  msg.nlh.nlmsg_seq = static_cast<uint32_t>(family);
  msg.req.sdiag_family = static_cast<uint8_t>(family);
  msg.req.sdiag_protocol = IPPROTO_TCP;
  msg.req.idiag_states = kStates;
  msg.req.idiag_ext = (1u << (INET_DIAG_INFO - 1)) | (1u << (INET_DIAG_SKMEMINFO - 1));
  sockaddr_nl sa{};
  sa.nl_family = AF_NETLINK;
  if (::sendto(fd, &msg, sizeof msg, 0, reinterpret_cast<sockaddr*>(&sa), sizeof sa) < 0) {
    return absl::InternalError(absl::StrCat("inet_diag request: ", std::strerror(errno)));
  }
  for (;;) {
    ssize_t n = ::recv(fd, buf.data(), buf.size(), 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::InternalError(absl::StrCat("inet_diag recv: ", std::strerror(errno)));
    }
    if (n == 0) return absl::OkStatus();
    size_t len = static_cast<size_t>(n);
    for (auto* h = reinterpret_cast<nlmsghdr*>(buf.data()); NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
      if (h->nlmsg_type == NLMSG_DONE) return absl::OkStatus();
      if (h->nlmsg_type == NLMSG_ERROR) {
        auto* e = static_cast<nlmsgerr*>(NLMSG_DATA(h));
        if (e->error == -ENOENT) return absl::OkStatus();  // family not available (e.g. no IPv6)
        return absl::InternalError(absl::StrCat("inet_diag: ", std::strerror(-e->error)));
      }
      if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY) continue;
      auto* d = static_cast<inet_diag_msg*>(NLMSG_DATA(h));
      TcpSocketInfo s;
      s.state = d->idiag_state;
      s.inode = d->idiag_inode;
      int alen = static_cast<int>(h->nlmsg_len - NLMSG_LENGTH(sizeof *d));
      for (auto* a = reinterpret_cast<rtattr*>(d + 1); RTA_OK(a, alen); a = RTA_NEXT(a, alen)) {
        const char* p = static_cast<const char*>(RTA_DATA(a));
        size_t plen = RTA_PAYLOAD(a);
        if (a->rta_type == INET_DIAG_INFO) {
          struct tcp_info ti;
          std::memset(&ti, 0, sizeof ti);
          std::memcpy(&ti, p, std::min(plen, sizeof ti));
          s.rcv_ssthresh = ti.tcpi_rcv_ssthresh;
          s.advmss = ti.tcpi_advmss;
          s.rcv_space = ti.tcpi_rcv_space;
          s.bytes_received = ti.tcpi_bytes_received;
          if (plen >= kRcvWndOffset + sizeof(uint32_t)) std::memcpy(&s.rcv_wnd, p + kRcvWndOffset, sizeof s.rcv_wnd);
        } else if (a->rta_type == INET_DIAG_SKMEMINFO && plen >= (SK_MEMINFO_RCVBUF + 1) * sizeof(uint32_t)) {
          const auto* m = reinterpret_cast<const uint32_t*>(p);
          s.rmem_alloc = m[SK_MEMINFO_RMEM_ALLOC];
          s.rcvbuf = m[SK_MEMINFO_RCVBUF];
          s.has_skmem = true;
        } else if (a->rta_type == kInetDiagCgroupId && plen >= sizeof(uint64_t)) {
          std::memcpy(&s.cgroup2_id, p, sizeof s.cgroup2_id);
        }
      }
      fn(s);
    }
  }
}

class SockDiagSource final : public Source {
 public:
  SockDiagSource(const Paths& paths, bool all_tiers)
      : paths_(paths), mapper_(paths.cgroupfs), netns_(paths.procfs), all_tiers_(all_tiers) {
    // Entering other network namespaces: setns(CLONE_NEWNET) needs
    // CAP_SYS_ADMIN, opening other users' /proc/PID/ns/net CAP_SYS_PTRACE.
    NeedCapabilities(CapBit(CAP_SYS_ADMIN) | CapBit(CAP_SYS_PTRACE), "sock_diag in other network namespaces");
  }
  absl::string_view name() const override { return "sock_diag"; }

  absl::Status Collect(Sample& sample) override {
    if (!all_tiers_ && sample.IsLive(Signal::kClampedSockets, Tier::kIter)) {
      if (!logged_skip_) {
        logged_skip_ = true;
        SP_LOG_INFO("sock_diag: census comes from the eBPF TCP iterator; inet_diag dumps skipped");
      }
      return absl::OkStatus();
    }
    logged_skip_ = false;  // say it again if the iterator fails and comes back
    TcpCensusResult raw = CensusAllNamespaces(paths_, true, &netns_);
    if (absl::Status st = raw.Check("sock_diag", "readable", &logged_); !st.ok()) return st;
    mapper_.Begin();
    if (mapper_.v1() && !logged_hybrid_) {
      logged_hybrid_ = true;
      SP_LOG_INFO("sock_diag: memory controller on cgroup v1: socket cgroup ids (unified hierarchy) are "
                  "attributed by matching paths in the v1 memory tree, else to /");
    }
    mapper_.AddCensus(raw.by_cgroup2, sample, sample.census[Tier::kSockDiag]);
    sample.MarkLive(Signal::kClampedSockets, Tier::kSockDiag);
    return absl::OkStatus();
  }

 private:
  Paths paths_;
  CgroupMapper mapper_;
  NetnsScanner netns_;  // the namespace list, kept between samples
  bool all_tiers_;
  bool logged_ = false, logged_hybrid_ = false, logged_skip_ = false;
};

}  // namespace

bool IsMemcgClamp(const TcpSocketInfo& s) {
  if (s.advmss == 0 || s.bytes_received == 0) return false;
  if (s.rcv_ssthresh != 4 * s.advmss) return false;
  // The window cannot exceed what the receive buffer allows (about half of
  // sk_rcvbuf, tcp_win_from_space()); a buffer that small explains the
  // window by itself (SO_RCVBUF, tcp_clamp_window()).
  if (s.has_skmem && s.rcvbuf / 2 <= 4 * s.advmss) return false;
  return true;
}

absl::Status DumpTcpSockets(int nl_fd, const std::function<void(const TcpSocketInfo&)>& fn) {
  int fd = nl_fd;
  if (fd < 0) fd = ::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (fd < 0) return absl::InternalError(absl::StrCat("NETLINK_SOCK_DIAG socket: ", std::strerror(errno)));
  static thread_local std::vector<char> buf(1 << 20);
  absl::Status st = DumpFamily(fd, AF_INET, fn, buf);
  if (st.ok()) st = DumpFamily(fd, AF_INET6, fn, buf);
  if (nl_fd < 0) ::close(fd);
  return st;
}

TcpCensusResult CensusAllNamespaces(const Paths& paths, bool all_namespaces, NetnsScanner* scanner) {
  TcpCensusResult out;
  std::vector<NetnsRef> ns = scanner ? scanner->List() : ListNetworkNamespaces(paths.procfs);
  if (!all_namespaces && ns.size() > 1) ns.resize(1);
  std::vector<int> fds = OpenSocketsInNamespaces(ns, AF_NETLINK, SOCK_DGRAM, NETLINK_SOCK_DIAG, &out.first_error);
  out.namespaces = ns.size();
  for (int fd : fds) {
    if (fd < 0) {
      ++out.namespaces_failed;
      continue;
    }
    absl::Status st = DumpTcpSockets(fd, [&](const TcpSocketInfo& s) {
      SocketCensus& c = out.by_cgroup2[s.cgroup2_id];
      ++c.sockets;
      if (IsMemcgClamp(s)) ++c.clamped;
      ++out.sockets;
    });
    ::close(fd);
    if (!st.ok()) {
      ++out.namespaces_failed;
      if (out.first_error.empty()) out.first_error = std::string(st.message());
    }
  }
  return out;
}

// Stands in when the census cannot be attributed (see KernelTiersUnusableReason).
class NoSockDiagSource final : public Source {
 public:
  explicit NoSockDiagSource(std::string why) : why_(std::move(why)) {}
  absl::string_view name() const override { return "sock_diag"; }
  absl::Status Collect(Sample&) override {
    if (!logged_) {
      logged_ = true;
      SP_LOG_INFO("sock_diag census off: ", why_);
    }
    return absl::OkStatus();
  }

 private:
  std::string why_;
  bool logged_ = false;
};

std::unique_ptr<Source> NewSockDiagSource(const Paths& paths, bool all_tiers) {
  std::string unusable = KernelTiersUnusableReason(paths.cgroupfs);
  if (!unusable.empty()) return std::make_unique<NoSockDiagSource>(unusable);
  return std::make_unique<SockDiagSource>(paths, all_tiers);
}

}  // namespace sockpressure
