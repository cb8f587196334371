// The TCP census iterator with its program built in. Compiled only when the
// eBPF programs are (exporter/sources/bpf/CMakeLists.txt); bpf_stub.cc
// stands in otherwise. The collector around it is in bpf_collectors.cc.
#include "exporter/sources/bpf/tcp_census_source.h"

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "exporter/sources/bpf/bpf_loader.h"
#include "exporter/sources/bpf/bpf_maps.h"
#include "exporter/sources/shared/capabilities.h"
#include "sockpressure_bpf.h"
#include "tcp_census.skel.h"

namespace sockpressure {
namespace {

// The TCP iterator on the shared Skeleton<> sequence (bpf_loader.h): a fresh
// instance, load, attach iter/tcp; links and skeleton go with the object.
class TcpCensusIterImpl final : public TcpCensusIter, private ProgramLoader<sp_tcp_census> {
 public:
  TcpCensusIterImpl() : ProgramLoader({sp_tcp_census__open, sp_tcp_census__load, sp_tcp_census__destroy}) {}

  // "" when the iterator is attached, else why not.
  std::string Attach() {
    std::string why = skel_.Load(
        [](sp_tcp_census* s) -> Skeleton<sp_tcp_census>::Programs { return {{"tcp_census", s->progs.tcp_census}}; },
        [](bpf_program* prog) { return bpf_program__attach_iter(prog, nullptr); });
    if (!why.empty()) return why;
    tier_ = Tier::kIter;
    stats_fd_ = bpf_map__fd(skel_->maps.stats);
    return "";
  }

  TcpCensusResult Run(const std::vector<NetnsRef>& namespaces) override {
    TcpCensusResult out;
    out.namespaces = namespaces.size();
    // bpf_iter_create() binds the iterator to the creating task's network
    // namespace (bpf_iter_init_seq_net), hence one fd per namespace, made
    // on a thread that entered it.
    const int link_fd = bpf_link__fd(skel_.link(0));
    std::vector<int> fds = OpenInNamespaces(
        namespaces,
        [&](std::string* err) {
          int fd = bpf_iter_create(link_fd);
          if (fd < 0) *err = absl::StrCat("bpf_iter_create: ", std::strerror(errno));
          return fd;
        },
        &out.first_error);
    for (int fd : fds) {
      if (fd < 0) {
        ++out.namespaces_failed;
        continue;
      }
      // A walk that ended early never flushed its pending counts; they
      // must not leak into the next namespace's walk.
      skel_->bss->acc.sockets = 0;
      skel_->bss->acc.clamped = 0;
      std::string err = Walk(fd);
      ::close(fd);
      if (!err.empty()) {
        ++out.namespaces_failed;
        if (out.first_error.empty()) out.first_error = err;
      }
    }
    // The map accumulated every namespace's walk: read it, then empty it
    // for the next census.
    const int map_fd = bpf_map__fd(skel_->maps.census);
    std::vector<sp_census_key> seen;
    ReadHashMap<sp_census_val, sp_census_key>(map_fd, [&](const sp_census_key& k, const sp_census_val& v) {
      (k.kind == SP_CENSUS_MEMCG ? out.by_memcg : out.by_cgroup2)[k.id] += SocketCensus{v.sockets, v.clamped};
      out.sockets += v.sockets;
      seen.push_back(k);
    });
    for (const sp_census_key& k : seen) bpf_map_delete_elem(map_fd, &k);
    return out;
  }

  uint64_t Lost() const override { return Stats()[SP_STAT_LOST]; }
  void AddProgramStats(Sample& sample, bool timed) const override {
    skel_.AddProgramStats(sample, timed);  // "tcp_census", with its link's history
  }

 private:
  // The walk happens inside read(); the program writes only the end marker.
  static std::string Walk(int fd) {
    uint64_t buf[8];
    bool done = false;
    for (;;) {
      ssize_t n = ::read(fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return absl::StrCat("iterator read: ", std::strerror(errno));
      if (n == 0) break;
      for (ssize_t i = 0; i + 8 <= n; i += 8) done |= buf[i / 8] == SP_CENSUS_DONE;
    }
    // bpf_seq_read stops a read after a million objects; a walk that ended
    // without the marker did not see every socket.
    return done ? "" : "TCP iterator walk ended early";
  }
};

}  // namespace

std::unique_ptr<TcpCensusIter> TcpCensusIter::Open(std::string* why) {
  std::string priv = MissingBpfPrivilege();
  if (!priv.empty()) {
    *why = priv;
    return nullptr;
  }
  btf* vmlinux = btf__load_vmlinux_btf();
  if (!vmlinux) {
    *why = absl::StrCat("no kernel BTF (/sys/kernel/btf/vmlinux: ", std::strerror(errno), ")");
    return nullptr;
  }
  bool has_iter = btf__find_by_name_kind(vmlinux, "bpf_iter__tcp", BTF_KIND_STRUCT) > 0;
  btf__free(vmlinux);
  if (!has_iter) {
    *why = "kernel has no TCP iterator (needs 5.9+)";
    return nullptr;
  }
  auto census = std::make_unique<TcpCensusIterImpl>();
  *why = census->Attach();
  if (!why->empty()) return nullptr;
  return census;
}

}  // namespace sockpressure
