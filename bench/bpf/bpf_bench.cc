// Benchmarks for the eBPF tiers and the sock_diag census (root only).
//
//   bpf_bench throughput [GiB]   loopback TCP throughput, all probes vs none,
//                                interleaved rounds in one run; per-event cost
//   bpf_bench census [sockets]   census of N loopback sockets (in a private
//                                network namespace): the eBPF iterator and
//                                sock_diag tiers vs `ss -tmi`
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
#include <sys/wait.h>
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
#include "exporter/sources/bpf/tcp_census_source.h"
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
  const int rounds = 8;
  for (int round = 0; round < rounds; ++round) {
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
  double b_off = *std::max_element(off.begin(), off.end()), b_on = *std::max_element(on.begin(), on.end());
  std::printf("rounds (GB/s, off/on):");
  for (size_t i = 0; i < off.size(); ++i) std::printf(" %.2f/%.2f", off[i], on[i]);
  std::printf("\nloopback throughput, %.1f GiB x %d interleaved rounds each: no probes %.2f GB/s, all probes "
              "%.2f GB/s (median), loss %.2f%%; best round %.2f vs %.2f GB/s, loss %.2f%%\n",
              gib, rounds, m_off, m_on, 100.0 * (m_off - m_on) / m_off, b_off, b_on, 100.0 * (b_off - b_on) / b_off);
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
  // RLIMIT_NOFILE: raise the soft limit to the hard one for this process
  // only (raising the hard limit needs CAP_SYS_RESOURCE), and spread the
  // sockets over child processes that each stay below it.
  rlimit rl{};
  ::getrlimit(RLIMIT_NOFILE, &rl);
  rl.rlim_cur = rl.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &rl);
  const long per_child = std::min<long>(static_cast<long>(rl.rlim_cur) - 256, 50000) / 2 * 2;
  int ready[2], done[2];
  if (::pipe(ready) != 0 || ::pipe(done) != 0) return 1;
  auto t0 = Clock::now();
  int children = 0;
  for (long left = n_sockets; left > 0; left -= per_child, ++children) {
    const int pairs = static_cast<int>(std::min(left, per_child) / 2);
    pid_t pid = ::fork();
    if (pid < 0) {
      std::perror("fork");
      return 1;
    }
    if (pid > 0) continue;
    ::close(ready[0]);
    ::close(done[1]);
    int lfd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (::bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) || ::listen(lfd, 4096) ||
        ::getsockname(lfd, reinterpret_cast<sockaddr*>(&addr), &len)) {
      std::perror("listen");
      _exit(1);
    }
    for (int i = 0; i < pairs; ++i) {
      int c = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (c < 0 || ::connect(c, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        std::perror("connect");
        _exit(1);
      }
      int sfd = ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
      if (sfd < 0) {
        std::perror("accept");
        _exit(1);
      }
      if (i % 16 == 0) (void)!::write(c, "hello", 5);  // some sockets with data
    }
    char b = 1;
    (void)!::write(ready[1], &b, 1);
    (void)!::read(done[0], &b, 1);  // until the parent closes it
    _exit(0);
  }
  ::close(ready[1]);
  ::close(done[0]);
  for (int i = 0; i < children; ++i) {
    char b;
    if (::read(ready[0], &b, 1) != 1) {
      std::fprintf(stderr, "a child failed to create its sockets\n");
      return 1;
    }
  }
  std::printf("created %ld connected sockets in %d processes in %.1f s\n", n_sockets, children,
              Secs(t0, Clock::now()));

  std::vector<double> census_t, ss_t, iter_t;
  double (*us)(const timeval&) = nullptr;
  size_t seen = 0, iter_seen = 0;
  std::string why;
  std::unique_ptr<sp::TcpCensusIter> iter = sp::TcpCensusIter::Open(&why);
  if (!iter) std::printf("TCP census iterator unavailable: %s\n", why.c_str());
  const int rounds = 7;
  for (int r = 0; r < rounds; ++r) {
    if (iter) {
      // The agent's tier: one walk in the kernel, counts per cgroup back.
      auto a = Clock::now();
      rusage ru0, ru1;
      ::getrusage(RUSAGE_SELF, &ru0);
      sp::TcpCensusResult res = iter->Run({sp::NetnsRef{0, "", true}});
      iter_t.push_back(Secs(a, Clock::now()));
      ::getrusage(RUSAGE_SELF, &ru1);
      iter_seen = res.sockets;
      auto tv = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6; };
      if (r == 0) {
        std::printf("iter census cpu: user %.3f s, sys %.3f s; %zu sockets%s%s\n",
                    tv(ru1.ru_utime) - tv(ru0.ru_utime), tv(ru1.ru_stime) - tv(ru0.ru_stime), res.sockets,
                    res.first_error.empty() ? "" : ", error: ", res.first_error.c_str());
      }
    }
    auto a = Clock::now();
    rusage ru0, ru1;
    ::getrusage(RUSAGE_SELF, &ru0);
    size_t count = 0, clamped = 0;
    absl::Status st = sp::DumpTcpSockets(-1, [&](const sp::TcpSocketInfo& s) {
      ++count;
      clamped += sp::IsMemcgClamp(s);
    });
    census_t.push_back(Secs(a, Clock::now()));
    ::getrusage(RUSAGE_SELF, &ru1);
    us = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6; };
    if (r == 0) {
      std::printf("census cpu: user %.3f s, sys %.3f s\n", us(ru1.ru_utime) - us(ru0.ru_utime),
                  us(ru1.ru_stime) - us(ru0.ru_stime));
    }
    if (!st.ok()) {
      std::fprintf(stderr, "census: %s\n", std::string(st.message()).c_str());
      return 1;
    }
    seen = count;
    a = Clock::now();
    rusage c0, c1;
    ::getrusage(RUSAGE_CHILDREN, &c0);
    int rc = std::system("ss -tmi > /dev/null");
    ss_t.push_back(Secs(a, Clock::now()));
    ::getrusage(RUSAGE_CHILDREN, &c1);
    if (r == 0) {
      std::printf("census cpu %.3f s vs ss -tmi cpu %.3f s (user+sys) -> %.1fx less cpu\n",
                  us(ru1.ru_utime) - us(ru0.ru_utime) + us(ru1.ru_stime) - us(ru0.ru_stime),
                  us(c1.ru_utime) - us(c0.ru_utime) + us(c1.ru_stime) - us(c0.ru_stime),
                  (us(c1.ru_utime) - us(c0.ru_utime) + us(c1.ru_stime) - us(c0.ru_stime)) /
                      (us(ru1.ru_utime) - us(ru0.ru_utime) + us(ru1.ru_stime) - us(ru0.ru_stime)));
    }
    if (rc != 0) {
      std::fprintf(stderr, "ss failed\n");
      return 1;
    }
  }
  double c = Median(census_t), s = Median(ss_t);
  std::printf("census of %zu sockets: sock_diag %.3f s, ss -tmi %.3f s (median of %d) -> %.1fx faster\n", seen, c, s, rounds,
              s / c);
  if (!iter_t.empty()) {
    double i = Median(iter_t);
    std::printf("census of %zu sockets: eBPF iter/tcp %.3f s, ss -tmi %.3f s (median of %d) -> %.1fx faster "
                "(%.1fx faster than sock_diag); per round (ms, iter/ss):",
                iter_seen, i, s, rounds, s / i, c / i);
    for (size_t k = 0; k < iter_t.size(); ++k) std::printf(" %.0f/%.0f", iter_t[k] * 1e3, ss_t[k] * 1e3);
    std::printf("\n");
  }
  ::close(done[1]);  // children exit
  while (::wait(nullptr) > 0) {
  }
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
