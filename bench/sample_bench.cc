// Sampling and serialisation cost on a generated cgroup v2 tree.
//
// usage: sample_bench CGROUP_ROOT CYCLES [RECLAIMING_PERCENT...]
// For each RECLAIMING_PERCENT (default: 1 and 100), a fresh agent samples the
// tree for one full-pass period (warm-up, printed on its own), then CYCLES
// times (a multiple of 10 keeps the full passes in proportion). Before
// every cycle the bench moves the pgscan/pgsteal
// counters of that share of the leaf cgroups and of their ancestors (v2
// memory.stat is hierarchical), rewriting memory.stat in place as the kernel
// does; that work is outside the measured CPU. Measured in the same run: the
// agent's CPU per sampling cycle (cgroupfs walk + state update) and the peer
// -- open/read/close of exactly the files the agent serves at the same
// cadence (every memory.stat every cycle, the ten slow files on the full
// pass), no parsing. Then one late starter: a cgroup silent for the whole run
// starts reclaiming, and the bench says in how many cycles its scans are
// in a snapshot. Finally /metrics render time and RSS.
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <string>
#include <vector>

#include "exporter/outputs/proto_writer.h"
#include "exporter/outputs/snapshot_metrics.h"
#include "exporter/outputs/text_writer.h"
#include "exporter/sampler/sampler.h"
#include "exporter/sources/cgroupfs_source.h"

namespace {

using namespace sockpressure;

constexpr uint64_t kFullPassEvery = 10;  // as the agent at --sample.interval=1s

double CpuSeconds() {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

long StatusKb(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(key, 0) == 0) return std::stol(line.substr(std::string(key).size()));
  }
  return -1;
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// memory.stat of one cgroup with its pgscan/pgsteal lines, rewritten in place.
struct StatFile {
  std::string path, before, after;  // text around "pgscan N\npgsteal M\n"
  uint64_t scan = 0, steal = 0;
  void Load() {
    std::string text = ReadFile(path);
    size_t a = text.find("\npgscan ");
    size_t b = text.find('\n', text.find("\npgsteal ") + 1);
    before = text.substr(0, a + 1);
    after = text.substr(b + 1);
    scan = std::stoull(text.substr(a + 8));
    steal = std::stoull(text.substr(text.find("\npgsteal ") + 9));
  }
  void Bump(uint64_t pages) {
    scan += pages;
    steal += pages / 4;
    std::string text = before + "pgscan " + std::to_string(scan) + "\npgsteal " + std::to_string(steal) + "\n" + after;
    int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return;
    if (::pwrite(fd, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size())) std::perror("pwrite");
    if (::ftruncate(fd, static_cast<off_t>(text.size())) != 0) std::perror("ftruncate");
    ::close(fd);
  }
};

struct Tree {
  std::string root;
  std::vector<std::string> paths;      // every cgroup, parents first ("/" first)
  std::vector<int> parent;             // index of the parent, -1 for the root
  std::vector<bool> leaf;
  std::vector<StatFile> stats;
};

Tree LoadTree(const std::string& root) {
  // One sample of a throwaway agent lists the tree in the same order.
  Paths paths;
  paths.cgroupfs = root;
  std::vector<std::unique_ptr<Source>> sources;
  sources.push_back(NewCgroupfsSource(paths, CgroupfsOptions(10000000, 1)));
  Sample s;
  if (absl::Status st = sources[0]->Collect(s); !st.ok()) std::fprintf(stderr, "walk: %s\n", std::string(st.message()).c_str());
  Tree t;
  t.root = root;
  t.leaf.assign(s.cgroups.size(), true);
  for (const CgroupReading& c : s.cgroups) {
    t.paths.push_back(c.path);
    t.parent.push_back(c.parent);
    if (c.parent >= 0) t.leaf[static_cast<size_t>(c.parent)] = false;
    StatFile f;
    f.path = root + (c.path == "/" ? "" : c.path.str()) + "/memory.stat";
    f.Load();
    t.stats.push_back(std::move(f));
  }
  return t;
}

// Moves the counters of `cgroups` (and of all their ancestors, once each).
void Reclaim(Tree& t, const std::vector<size_t>& cgroups, uint64_t pages) {
  std::vector<uint64_t> add(t.paths.size(), 0);
  for (size_t i : cgroups) {
    for (int p = static_cast<int>(i); p >= 0; p = t.parent[static_cast<size_t>(p)]) add[static_cast<size_t>(p)] += pages;
  }
  for (size_t i = 0; i < add.size(); ++i) {
    if (add[i] > 0) t.stats[i].Bump(add[i]);
  }
}

std::unique_ptr<Sampler> NewAgent(const std::string& root, bool context) {
  Paths paths;
  paths.cgroupfs = root;
  CgroupfsOptions o(10000000, kFullPassEvery);
  o.read_context = context;
  // The generated tree is plain files rewritten in place, as cgroupfs: keep
  // them open as the agent does on a real cgroupfs.
  o.keep_files = CgroupfsOptions::KeepFiles::kAlways;
  std::vector<std::unique_ptr<Source>> sources;
  sources.push_back(NewCgroupfsSource(paths, std::move(o)));
  return std::make_unique<Sampler>(std::move(sources), std::make_unique<StateTracker>(), 1.0);
}

// Open/read/close of every memory.stat each cycle and, for the context
// profile, of the slow files on the full pass: the same files at the same
// cadence, no parsing.
double PeerCpuPerCycle(const Tree& t, int cycles, bool context) {
  const char* slow_names[] = {"memory.current", "memory.max", "memory.high", "memory.low", "memory.min",
                              "memory.swap.current", "memory.swap.max", "memory.events", "memory.events.local",
                              "memory.pressure"};
  std::vector<std::string> slow_files;
  for (const std::string& p : t.paths) {
    for (const char* n : slow_names) slow_files.push_back(t.root + (p == "/" ? "" : p) + "/" + n);
  }
  std::vector<char> buf(65536);
  auto read_all = [&](auto get, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      int fd = ::open(get(i).c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) continue;
      while (::read(fd, buf.data(), buf.size()) > 0) {
      }
      ::close(fd);
    }
  };
  double cpu = 0;
  for (int c = 0; c < cycles; ++c) {
    double t0 = CpuSeconds();
    read_all([&](size_t i) -> const std::string& { return t.stats[i].path; }, t.stats.size());
    if (context && c % kFullPassEvery == 0) read_all([&](size_t i) -> const std::string& { return slow_files[i]; }, slow_files.size());
    cpu += CpuSeconds() - t0;
  }
  return cpu / cycles;
}

uint64_t ScannedOf(const Snapshot& snap, const std::string& path) {
  for (const CgroupView& c : snap.cgroups) {
    if (c.path == path) return c.best.scanned_total;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s CGROUP_ROOT CYCLES [RECLAIMING_PERCENT...]\n", argv[0]);
    return 2;
  }
  const std::string root = argv[1];
  const int cycles = std::stoi(argv[2]);
  if (cycles <= 0 || cycles % kFullPassEvery != 0) {
    std::fprintf(stderr, "CYCLES must be a positive multiple of %llu (one full pass in every %llu samples)\n",
                 static_cast<unsigned long long>(kFullPassEvery), static_cast<unsigned long long>(kFullPassEvery));
    return 2;
  }
  std::vector<double> percents;
  for (int i = 3; i < argc; ++i) percents.push_back(std::stod(argv[i]));
  if (percents.empty()) percents = {1, 100};

  Tree tree = LoadTree(root);
  std::vector<size_t> leaves;
  for (size_t i = 0; i < tree.leaf.size(); ++i) {
    if (tree.leaf[i]) leaves.push_back(i);
  }
  std::shared_ptr<const Snapshot> snap;
  // core: the default profile's files (memory.stat; the directories on the
  // full pass). context: also the ten slow files on the full pass.
  for (bool context : {false, true}) {
    for (double pct : percents) {
      // Every k-th leaf reclaims, spread over the whole tree; at 100 % every
      // cgroup moves (all leaves, so every ancestor too).
      std::vector<size_t> reclaiming;
      size_t want = static_cast<size_t>(static_cast<double>(tree.paths.size()) * pct / 100.0 + 0.5);
      if (want >= leaves.size()) {
        reclaiming = leaves;
      } else if (want > 0) {
        for (size_t k = 0; k < want; ++k) reclaiming.push_back(leaves[k * leaves.size() / want]);
      }
      std::unique_ptr<Sampler> agent = NewAgent(root, context);
      // Warm-up, measured on its own: the first walk builds the state (a
      // full pass), and the first few snapshots fault in fresh pages (until
      // glibc's malloc, after freeing the first large blocks, serves them
      // from its heap). An agent pays this once per start, not per cycle.
      double warmup_cpu = CpuSeconds();
      agent->SampleOnce();
      for (uint64_t c = 1; c < kFullPassEvery; ++c) {
        Reclaim(tree, reclaiming, 600);
        snap = agent->SampleOnce();
      }
      warmup_cpu = (CpuSeconds() - warmup_cpu) / kFullPassEvery;
      double agent_cpu = 0, collect_wall = 0, full_cpu = 0;
      int full_cycles = 0;
      for (int c = 0; c < cycles; ++c) {
        Reclaim(tree, reclaiming, 600);  // outside the measurement
        double t0 = CpuSeconds();
        snap = agent->SampleOnce();
        double cpu = CpuSeconds() - t0;
        agent_cpu += cpu;
        // Sample kFullPassEvery + c: every kFullPassEvery-th one is a full pass.
        if (c % kFullPassEvery == 0) {
          full_cpu += cpu;
          ++full_cycles;
        }
        collect_wall += snap->collectors.at(0).duration_seconds;
        if (std::getenv("BENCH_TRACE")) {
          std::fprintf(stderr, "cycle %d walk %.2f ms\n", c, snap->collectors.at(0).duration_seconds * 1e3);
        }
      }
      double agent_per_cycle = agent_cpu / cycles;
      double peer_per_cycle = PeerCpuPerCycle(tree, cycles, context);
      // The average includes the full passes; both kinds of cycle are also
      // printed on their own (a full pass every kFullPassEvery samples).
      int inc_cycles = cycles - full_cycles;
      double inc_per_cycle = inc_cycles > 0 ? (agent_cpu - full_cpu) / inc_cycles : 0;
      double full_per_cycle = full_cycles > 0 ? full_cpu / full_cycles : 0;
      std::printf("profile=%s cgroups=%zu reclaiming=%zu (%g%%) cycles=%d agent_cpu_ms_per_cycle=%.2f "
                  "(cgroupfs_walk_wall_ms=%.2f) peer_open_read_close_cpu_ms_per_cycle=%.2f agent_over_peer=%.3f "
                  "between_full_passes_cpu_ms=%.2f (%.3f of peer) full_pass_cpu_ms=%.2f (%.3f of peer) "
                  "warmup_cpu_ms_per_cycle=%.2f\n",
                  context ? "context" : "core", tree.paths.size(), reclaiming.size(), pct, cycles,
                  agent_per_cycle * 1e3, collect_wall / cycles * 1e3, peer_per_cycle * 1e3,
                  agent_per_cycle / peer_per_cycle, inc_per_cycle * 1e3, inc_per_cycle / peer_per_cycle,
                  full_per_cycle * 1e3, full_per_cycle / peer_per_cycle, warmup_cpu * 1e3);
      std::fflush(stdout);
    }
  }

  // The late starter: silent through warm-up and `cycles` samples, then one
  // leaf reclaims once. It must be in the very next snapshot.
  {
    std::unique_ptr<Sampler> agent = NewAgent(root, false);
    agent->SampleOnce();
    for (int c = 0; c < cycles; ++c) agent->SampleOnce();
    size_t late = leaves[leaves.size() / 2 + 1];
    uint64_t before = ScannedOf(*agent->Latest(), tree.paths[late]);
    Reclaim(tree, {late}, 1024);
    int after = 0;
    while (after < 3 && ScannedOf(*agent->SampleOnce(), tree.paths[late]) == before) ++after;
    std::printf("late_starter=%s silent_cycles=%d seen_after_cycles=%d\n", tree.paths[late].c_str(), cycles + 1,
                after + 1);
  }

  const long sampling_rss_kb = StatusKb("VmRSS:");  // before any rendering
  BuildInfo build{"bench", "bench", "bench"};
  auto time_render = [&](bool proto, size_t* bytes) {
    auto t0 = std::chrono::steady_clock::now();
    const int reps = 3;
    for (int i = 0; i < reps; ++i) {
      std::unique_ptr<MetricWriter> w = proto ? NewProtoWriter() : NewTextWriter();
      WriteSnapshotMetrics(*snap, build, {}, *w);
      *bytes = w->Finish().size();
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
  };
  size_t text_bytes = 0, proto_bytes = 0;
  double text_s = time_render(false, &text_bytes);
  double proto_s = time_render(true, &proto_bytes);
  std::printf("cgroups=%zu sampling_rss_mib=%.1f rss_mib=%.1f peak_rss_mib=%.1f text_render_ms=%.2f "
              "text_bytes=%zu proto_render_ms=%.2f proto_bytes=%zu\n",
              snap->cgroups.size(), sampling_rss_kb / 1024.0, StatusKb("VmRSS:") / 1024.0,
              StatusKb("VmHWM:") / 1024.0, text_s * 1e3, text_bytes, proto_s * 1e3, proto_bytes);
  return 0;
}
