// Benchmarks for the eBPF tiers and the sock_diag census (root only).
//
//   bpf_bench throughput [GiB] [all|clamps|pressure|vmpressure|prunes] [pairs]
//                                loopback TCP throughput and CPU per byte, the
//                                probes vs none, ABBA-interleaved in one run
//   bpf_bench census [sockets]   census of N loopback sockets (in a private
//                                network namespace): the eBPF iterator and
//                                sock_diag tiers vs `ss -tmi`
//   bpf_bench event [calls]      per-event cost of the window-clamp handler
//   bpf_bench drop-event [calls] per-event cost of the skb:kfree_skb handler
//                                of bpf/prunes.bpf.c on a drop it ignores
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
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <bpf/bpf.h>

#include "exporter/sources/bpf/bpf_source.h"
#include "exporter/sources/shared/kernel_probe.h"
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

// One transfer of `bytes` over a fresh loopback pair, sender pinned to CPU 0
// and receiver to CPU 1 (on a 2-CPU VM unpinned threads migrate and the
// round-to-round spread hides a 2 % effect). Returns wall seconds and the
// CPU seconds of both threads (user + sys, softirq work included as it runs
// in their context on loopback).
struct Transfer {
  double wall = 0, cpu = 0;
};
static double ThreadCpu() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}
static void PinTo(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu % std::max(1, static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN))), &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}
static bool PinnedTransfer(size_t bytes, Transfer& out) {
  sp::testing::TcpPair p;
  if (!sp::testing::MakeTcpPair(p)) return false;
  double reader_cpu = 0;
  auto t0 = Clock::now();
  std::thread reader([&] {
    PinTo(1);
    double c0 = ThreadCpu();
    sp::testing::ReadAll(p.server, bytes);
    reader_cpu = ThreadCpu() - c0;
  });
  PinTo(0);
  double c0 = ThreadCpu();
  size_t sent = sp::testing::WriteAll(p.client, bytes);
  double sender_cpu = ThreadCpu() - c0;
  reader.join();
  out.wall = Secs(t0, Clock::now());
  out.cpu = sender_cpu + reader_cpu;
  return sent == bytes;
}

// Calls fn(pair, probes, src) for `pairs` pairs of rounds in ABBA order
// (off on, on off, ...) so that a drift of the machine cancels out. In the
// probe rounds src is a freshly loaded BpfSource with `opt`; the other
// rounds run with nothing attached (src == nullptr).
template <typename Fn>
static void AbbaPairs(int pairs, const sp::BpfOptions& opt, Fn&& fn) {
  for (int pair = 0; pair < pairs; ++pair) {
    for (int k = 0; k < 2; ++k) {
      const bool probes = (pair % 2 == 0) ? k == 1 : k == 0;
      std::unique_ptr<sp::BpfSource> src = probes ? sp::NewBpfSource(opt) : nullptr;
      fn(pair, probes, src.get());
    }
  }
}

static uint64_t ClampRuns(sp::BpfSource* src) {
  std::vector<uint64_t> st = src ? src->Stats("window_clamps") : std::vector<uint64_t>{};
  return st.empty() ? 0 : st[SP_STAT_RUNS];
}

static void PrintBpfStats(sp::BpfSource* src) {
  if (!sp::BpfStatsFlag("/proc", 0).Enabled()) return;  // never switched on here
  for (auto& [name, fd] : src->ProgramFds()) {
    bpf_prog_info info = {};
    uint32_t len = sizeof info;
    if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0 && info.run_cnt) {
      std::printf("bpf_stats %s: %llu runs, %.1f ns/run\n", name.c_str(), static_cast<unsigned long long>(info.run_cnt),
                  static_cast<double>(info.run_time_ns) / static_cast<double>(info.run_cnt));
    }
  }
}

// Per-event cost of the window-clamp handler, natively and without
// kernel.bpf_stats_enabled: recv(MSG_PEEK) of one byte runs
// tcp_rcv_space_adjust() (the tp_btf/raw_tp attach point) once per call and
// leaves the data queued, so one syscall = one handler run. The difference
// in ns per call, probe attached vs not, is what each event costs, dispatch
// included. Returns the median delta per handler run (ns), or -1.
static double EventCost(long calls) {
  sp::testing::TcpPair p;
  if (!sp::testing::MakeTcpPair(p)) return -1;
  if (::write(p.client, "0123456789abcdef", 16) != 16) return -1;
  char c;
  while (::recv(p.server, &c, 1, MSG_PEEK) != 1) {
  }
  PinTo(1);
  sp::BpfOptions o;
  o.pressure = o.vmpressure = false;
  std::vector<double> off, on, delta;
  double runs_per_call = 0, ns[2] = {0, 0};
  std::string attach;
  AbbaPairs(10, o, [&](int, bool probes, sp::BpfSource* src) {
    for (const sp::ProbeStatus& ps : src ? src->Probes() : std::vector<sp::ProbeStatus>{}) {
      if (ps.attached) attach = ps.attach;
    }
    uint64_t before = ClampRuns(src);
    auto t0 = Clock::now();
    for (long i = 0; i < calls; ++i) (void)::recv(p.server, &c, 1, MSG_PEEK);
    ns[probes] = Secs(t0, Clock::now()) * 1e9 / static_cast<double>(calls);
    (probes ? on : off).push_back(ns[probes]);
    if (src) runs_per_call = static_cast<double>(ClampRuns(src) - before) / static_cast<double>(calls);
    if (on.size() == off.size()) delta.push_back(ns[1] - ns[0]);
  });
  double d = Median(delta);
  std::printf("clamp handler (%s) per event: recv(MSG_PEEK) %.0f ns without, %.0f ns with the probe (median of 10 "
              "ABBA pairs x %ld calls); handler runs per call %.2f; cost %.0f ns per event (pairs:",
              attach.c_str(), Median(off), Median(on), calls, runs_per_call, d);
  for (double x : delta) std::printf(" %.0f", x);
  std::printf(")\n");
  return runs_per_call > 0.5 ? d / runs_per_call : -1;
}

// Per-event cost of the prunes drop handler (skb:kfree_skb) on the drops it
// does not count, which is every drop on a node that is not pruning: UDP
// datagrams to a loopback socket whose tiny receive buffer is full and never
// read are freed with reason SOCKET_RCVBUFF, one kfree_skb per sendto and no
// ICMP. Same ABBA pairing as EventCost, against no probe, same run.
static int DropEventCost(long calls) {
  int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  int rx = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int tiny = 1;  // the kernel rounds it up to its minimum
  if (fd < 0 || rx < 0 || ::setsockopt(rx, SOL_SOCKET, SO_RCVBUF, &tiny, sizeof tiny) != 0 ||
      ::bind(rx, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(rx, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    return 1;
  }
  for (int i = 0; i < 64; ++i) (void)::sendto(fd, "x", 1, 0, reinterpret_cast<sockaddr*>(&a), sizeof a);
  PinTo(1);
  sp::BpfOptions o;
  o.pressure = o.vmpressure = o.clamps = false;
  o.prunes_attach = {};  // the drop handler only
  std::vector<double> off, on, delta;
  double ns[2] = {0, 0};
  std::string attach;
  AbbaPairs(10, o, [&](int, bool probes, sp::BpfSource* src) {
    for (const sp::ProbeStatus& ps : src ? src->Probes() : std::vector<sp::ProbeStatus>{}) {
      if (ps.attached && ps.probe == "tcp_drops") attach = ps.attach;
    }
    auto t0 = Clock::now();
    for (long i = 0; i < calls; ++i) {
      (void)::sendto(fd, "x", 1, MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&a), sizeof a);
    }
    ns[probes] = Secs(t0, Clock::now()) * 1e9 / static_cast<double>(calls);
    (probes ? on : off).push_back(ns[probes]);
    if (on.size() == off.size()) delta.push_back(ns[1] - ns[0]);
  });
  ::close(fd);
  ::close(rx);
  if (attach.empty()) {
    std::printf("drop handler: not attached on this kernel\n");
    return 1;
  }
  double d = Median(delta);
  std::printf("drop handler (%s) per ignored drop: sendto to a full UDP socket %.0f ns without, %.0f ns with the probe "
              "(median of 10 ABBA pairs x %ld calls), ratio %.4f; cost %.0f ns per event (pairs:",
              attach.c_str(), Median(off), Median(on), calls, Median(on) / Median(off), d);
  for (double x : delta) std::printf(" %.0f", x);
  std::printf(")\n");
  return 0;
}

static int Throughput(double gib, const std::string& which, int pairs) {
  const size_t bytes = static_cast<size_t>(gib * (1ull << 30));
  Transfer warm;
  if (!PinnedTransfer(256 << 20, warm)) return 1;
  sp::BpfOptions o;
  if (which != "all") {
    o.clamps = which == "clamps";
    o.pressure = which == "pressure";
    o.vmpressure = which == "vmpressure";
    o.prunes = which == "prunes";
  }
  std::vector<double> off, on, off_cpu, on_cpu, ratio;
  uint64_t runs = 0, prune_runs = 0;
  double tp[2] = {0, 0};
  bool failed = false;
  AbbaPairs(pairs, o, [&](int pair, bool probes, sp::BpfSource* src) {
    if (src && pair == 0) {
      for (const sp::ProbeStatus& ps : src->Probes()) {
        if (ps.attached) std::printf("attached: %s/%s\n", ps.probe.c_str(), ps.attach.c_str());
      }
    }
    uint64_t before = ClampRuns(src);
    std::vector<uint64_t> drops_before = src ? src->Stats("tcp_drops") : std::vector<uint64_t>{};
    Transfer t;
    failed |= !PinnedTransfer(bytes, t);
    tp[probes] = static_cast<double>(bytes) / t.wall / 1e9;
    (probes ? on : off).push_back(tp[probes]);
    (probes ? on_cpu : off_cpu).push_back(t.cpu / static_cast<double>(bytes) * 1e9);  // CPU s per GB
    std::vector<uint64_t> drops_after = src ? src->Stats("tcp_drops") : std::vector<uint64_t>{};
    if (!drops_after.empty()) prune_runs += drops_after[SP_STAT_RUNS] - drops_before[SP_STAT_RUNS];
    if (src) {
      runs += ClampRuns(src) - before;
      PrintBpfStats(src);
    }
    if (on.size() == off.size()) ratio.push_back(tp[1] / tp[0]);
  });
  if (failed) return 1;
  std::printf("rounds (GB/s, off/on):");
  for (size_t i = 0; i < off.size(); ++i) std::printf(" %.2f/%.2f", off[i], on[i]);
  double m_off = Median(off), m_on = Median(on), m_ratio = Median(ratio);
  std::vector<double> sorted = ratio;
  std::sort(sorted.begin(), sorted.end());
  const double q1 = sorted[sorted.size() / 4], q3 = sorted[sorted.size() * 3 / 4];
  double c_off = Median(off_cpu), c_on = Median(on_cpu);
  std::printf("\nloopback throughput, %.1f GiB x %d ABBA pairs, sender/receiver pinned to CPU 0/1: no probes "
              "%.2f GB/s, all probes %.2f GB/s (median), loss %.2f%%; median paired on/off ratio %.4f "
              "(loss %.2f%%, interquartile %.3f-%.3f: the noise of this machine)\n",
              gib, pairs, m_off, m_on, 100.0 * (m_off - m_on) / m_off, m_ratio, 100.0 * (1 - m_ratio), q1, q3);
  std::printf("cpu per GB moved (sender + receiver threads): no probes %.3f s, all probes %.3f s (median), "
              "+%.2f%%\n",
              c_off, c_on, 100.0 * (c_on - c_off) / c_off);
  if (o.prunes) {
    std::printf("prunes drop handler: %llu memory drops or prunes counted during the probe rounds (node-wide)\n",
                static_cast<unsigned long long>(prune_runs));
  }
  if (runs) {
    std::printf("clamp handler: %llu runs during the probe rounds (kernel.bpf_stats_enabled is %s)\n",
                static_cast<unsigned long long>(runs), sp::BpfStatsFlag("/proc", 0).Enabled() ? "on" : "off, not changed");
    // The same loss from its parts, each measured here and far less noisy
    // than bulk throughput on a shared VM: events per GB x cost per event,
    // against the CPU one GB costs without probes.
    double per_event_ns = EventCost(1000000);
    double events_per_gb = static_cast<double>(runs) / (static_cast<double>(pairs) * static_cast<double>(bytes) / 1e9);
    if (per_event_ns >= 0) {
      std::printf("estimated loss: %.0f events/GB x %.0f ns = %.2f ms CPU per GB = %.2f%% of the %.3f s CPU per GB "
                  "without probes\n",
                  events_per_gb, per_event_ns, events_per_gb * per_event_ns * 1e-6,
                  100.0 * events_per_gb * per_event_ns * 1e-9 / c_off, c_off);
    }
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

static double TvSecs(const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6; }

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
      if (r == 0) {
        std::printf("iter census cpu: user %.3f s, sys %.3f s; %zu sockets%s%s\n",
                    TvSecs(ru1.ru_utime) - TvSecs(ru0.ru_utime), TvSecs(ru1.ru_stime) - TvSecs(ru0.ru_stime), res.sockets,
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
    if (r == 0) {
      std::printf("census cpu: user %.3f s, sys %.3f s\n", TvSecs(ru1.ru_utime) - TvSecs(ru0.ru_utime),
                  TvSecs(ru1.ru_stime) - TvSecs(ru0.ru_stime));
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
                  TvSecs(ru1.ru_utime) - TvSecs(ru0.ru_utime) + TvSecs(ru1.ru_stime) - TvSecs(ru0.ru_stime),
                  TvSecs(c1.ru_utime) - TvSecs(c0.ru_utime) + TvSecs(c1.ru_stime) - TvSecs(c0.ru_stime),
                  (TvSecs(c1.ru_utime) - TvSecs(c0.ru_utime) + TvSecs(c1.ru_stime) - TvSecs(c0.ru_stime)) /
                      (TvSecs(ru1.ru_utime) - TvSecs(ru0.ru_utime) + TvSecs(ru1.ru_stime) - TvSecs(ru0.ru_stime)));
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
  if (mode == "throughput") return Throughput(argc > 2 ? std::atof(argv[2]) : 1.0, argc > 3 ? argv[3] : "all",
                                                 argc > 4 ? std::max(1, std::atoi(argv[4])) : 20);
  if (mode == "drop-event") return DropEventCost(argc > 2 ? std::atol(argv[2]) : 1000000);
  if (mode == "event") return EventCost(argc > 2 ? std::atol(argv[2]) : 2000000) >= 0 ? 0 : 1;
  if (mode == "census") return Census(argc > 2 ? std::atol(argv[2]) : 100000);
  if (mode == "iter") return Iter(argc > 2 ? std::atoi(argv[2]) : 1000);
  std::fprintf(stderr, "usage: %s throughput [GiB] [all|clamps|pressure|vmpressure|prunes] [pairs] | event [calls] | drop-event [calls] | census [sockets] | iter [rounds]\n",
               argv[0]);
  return 2;
}
