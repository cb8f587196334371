// Benchmarks for the eBPF tiers and the sock_diag census (root only).
//
//   bpf_bench throughput [GiB]   loopback TCP throughput, all probes vs none,
//                                interleaved rounds in one run; per-event cost
//   bpf_bench census [sockets]   census of N loopback sockets (in a private
//                                network namespace) vs `ss -tmi`
//   bpf_bench iter [rounds]      cost of one cgroup-iterator walk
//
// Changes no sysctl: bpf_stats run time is reported only when
// kernel.bpf_stats_enabled is already 1; RLIMIT_NOFILE is raised for this
// process only.
#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <bpf/bpf.h>

#include "exporter/sources/bpf/bpf_source.h"
#include "exporter/sources/bpf/kernel_probe.h"
#include "exporter/sources/sock_diag/sock_diag_source.h"
#include "sockpressure_bpf.h"
#include "tests/bpf/net_util.h"

namespace sp = sockpressure;
using Clock = std::chrono::steady_clock;

static double Secs(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

static double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

static int Throughput(double gib) {
  const size_t bytes = static_cast<size_t>(gib * (1ull << 30));
  sp::testing::TcpPair warm;
  if (!sp::testing::MakeTcpPair(warm)) return 1;
  sp::testing::PumpBytes(warm, 256 << 20);
  std::vector<double> off, on;
  uint64_t runs = 0;
  double on_time = 0, off_time = 0;
  for (int round = 0; round < 5; ++round) {
    for (bool probes : {false, true}) {
      std::unique_ptr<sp::BpfSource> src;
      if (probes) {
        sp::BpfOptions o;
        o.drop_capabilities = false;
        src = sp::NewBpfSource(o);
      }
      std::vector<uint64_t> before = src ? src->Stats("window_clamps") : std::vector<uint64_t>{};
      sp::testing::TcpPair p;
      if (!sp::testing::MakeTcpPair(p)) return 1;
      auto t0 = Clock::now();
      sp::testing::PumpBytes(p, bytes);
      double s = Secs(t0, Clock::now());
      (probes ? on : off).push_back(static_cast<double>(bytes) / s / 1e9);
      (probes ? on_time : off_time) += s;
      if (src) {
        std::vector<uint64_t> after = src->Stats("window_clamps");
        if (!after.empty()) runs += after[SP_STAT_RUNS] - before[SP_STAT_RUNS];
        if (round == 0) {
          for (const sp::ProbeStatus& ps : src->Probes()) {
            if (ps.attached) std::printf("attached: %s/%s\n", ps.probe.c_str(), ps.attach.c_str());
          }
        }
        if (sp::BpfStatsEnabled("/proc")) {
          for (auto& [name, fd] : src->ProgramFds()) {
            bpf_prog_info info = {};
            uint32_t len = sizeof info;
            if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0 && info.run_cnt) {
              std::printf("bpf_stats %s: %llu runs, %.1f ns/run\n", name.c_str(),
                          static_cast<unsigned long long>(info.run_cnt),
                          static_cast<double>(info.run_time_ns) / static_cast<double>(info.run_cnt));
            }
          }
        }
      }
    }
  }
  double m_off = Median(off), m_on = Median(on);
  std::printf("loopback throughput, %.1f GiB x 5 rounds each: no probes %.2f GB/s, all probes %.2f GB/s "
              "(median), loss %.2f%%\n",
              gib, m_off, m_on, 100.0 * (m_off - m_on) / m_off);
  if (runs) {
    std::printf("clamp handler: %llu runs in %.2f s with probes; wall-time delta per event %.0f ns "
                "(noisy upper bound; kernel.bpf_stats_enabled is %s)\n",
                static_cast<unsigned long long>(runs), on_time, (on_time - off_time) * 1e9 / static_cast<double>(runs),
                sp::BpfStatsEnabled("/proc") ? "on" : "off, not changed");
  }
  return 0;
}

static bool LoopbackUp() {
  int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  bool ok = ::ioctl(fd, SIOCGIFFLAGS, &ifr) == 0;
  ifr.ifr_flags |= IFF_UP;
  ok = ok && ::ioctl(fd, SIOCSIFFLAGS, &ifr) == 0;
  ::close(fd);
  return ok;
}

static int Census(long n_sockets) {
  // A private network namespace: the sockets, ss and the census see only
  // each other, and the host's namespaces are untouched.
  if (::unshare(CLONE_NEWNET) != 0 || !LoopbackUp()) {
    std::perror("unshare(CLONE_NEWNET)/lo up");
    return 1;
  }
  rlimit rl{static_cast<rlim_t>(n_sockets + 1000), static_cast<rlim_t>(n_sockets + 1000)};
  if (::setrlimit(RLIMIT_NOFILE, &rl) != 0) {
    std::perror("setrlimit(RLIMIT_NOFILE)");
    return 1;
  }
  // Several listeners: one (dst ip, port) allows only ~28k ephemeral ports.
  const int pairs = static_cast<int>(n_sockets / 2), listeners = pairs / 20000 + 1;
  std::vector<int> lfd(static_cast<size_t>(listeners));
  std::vector<sockaddr_in> addr(static_cast<size_t>(listeners));
  for (int i = 0; i < listeners; ++i) {
    lfd[i] = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    addr[i] = {};
    addr[i].sin_family = AF_INET;
    addr[i].sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr[i];
    if (::bind(lfd[i], reinterpret_cast<sockaddr*>(&addr[i]), sizeof addr[i]) || ::listen(lfd[i], 4096) ||
        ::getsockname(lfd[i], reinterpret_cast<sockaddr*>(&addr[i]), &len)) {
      std::perror("listen");
      return 1;
    }
  }
  std::vector<int> fds;
  fds.reserve(static_cast<size_t>(n_sockets));
  auto t0 = Clock::now();
  for (int i = 0; i < pairs; ++i) {
    int l = i % listeners;
    int c = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c < 0 || ::connect(c, reinterpret_cast<sockaddr*>(&addr[l]), sizeof addr[l]) != 0) {
      std::perror("connect");
      return 1;
    }
    int s = ::accept4(lfd[l], nullptr, nullptr, SOCK_CLOEXEC);
    if (s < 0) {
      std::perror("accept");
      return 1;
    }
    if (i % 16 == 0) {  // some bytes on a fraction, so tcp_info is not all zeros
      (void)!::write(c, "hello", 5);
    }
    fds.push_back(c);
    fds.push_back(s);
  }
  std::printf("created %zu connected sockets in %.1f s\n", fds.size(), Secs(t0, Clock::now()));

  std::vector<double> census_t, ss_t;
  size_t seen = 0;
  for (int r = 0; r < 3; ++r) {
    auto a = Clock::now();
    size_t count = 0, clamped = 0;
    absl::Status st = sp::DumpTcpSockets(-1, [&](const sp::TcpSocketInfo& s) {
      ++count;
      clamped += sp::IsMemcgClamp(s);
    });
    census_t.push_back(Secs(a, Clock::now()));
    if (!st.ok()) {
      std::fprintf(stderr, "census: %s\n", std::string(st.message()).c_str());
      return 1;
    }
    seen = count;
    a = Clock::now();
    int rc = std::system("ss -tmi > /dev/null");
    ss_t.push_back(Secs(a, Clock::now()));
    if (rc != 0) {
      std::fprintf(stderr, "ss failed\n");
      return 1;
    }
  }
  double c = Median(census_t), s = Median(ss_t);
  std::printf("census of %zu sockets: sock_diag %.3f s, ss -tmi %.3f s (median of 3) -> %.1fx faster\n", seen, c, s,
              s / c);
  return 0;
}

static int Iter(int rounds) {
  sp::BpfOptions o;
  o.clamps = false;
  o.vmpressure = false;
  o.drop_capabilities = false;
  std::unique_ptr<sp::BpfSource> src = sp::NewBpfSource(o);
  sp::Sample warm;
  (void)src->Collect(warm);
  size_t n = src->LastIterCgroupIds().size();
  if (n == 0) {
    std::printf("cgroup iterator not attached\n");
    return 1;
  }
  auto t0 = Clock::now();
  for (int i = 0; i < rounds; ++i) {
    sp::Sample s;
    (void)src->Collect(s);
  }
  double per = Secs(t0, Clock::now()) / rounds;
  std::printf("cgroup iterator: %zu memory cgroups per walk, %.1f us per sample (%.2f us per cgroup, incl. "
              "syscalls and state update)\n",
              n, per * 1e6, per * 1e6 / static_cast<double>(n));
  return 0;
}

int main(int argc, char** argv) {
  if (::geteuid() != 0) {
    std::printf("SKIP: needs root\n");
    return 77;
  }
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "throughput") return Throughput(argc > 2 ? std::atof(argv[2]) : 2.0);
  if (mode == "census") return Census(argc > 2 ? std::atol(argv[2]) : 100000);
  if (mode == "iter") return Iter(argc > 2 ? std::atoi(argv[2]) : 1000);
  std::fprintf(stderr, "usage: %s throughput [GiB] | census [sockets] | iter [rounds]\n", argv[0]);
  return 2;
}
