// Sampling and serialisation cost on a generated cgroup v2 tree.
//
// usage: sample_bench CGROUP_ROOT CYCLES
// Prints one line of key=value results: CPU time per sampling cycle (the
// cgroupfs walk + state update), peak RSS, and the time to render /metrics
// in the text and protobuf formats. bench/run.sh generates the trees and
// measures a peer (reading the same files with cat) in the same run.
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <string>

#include "exporter/outputs/proto_writer.h"
#include "exporter/outputs/snapshot_metrics.h"
#include "exporter/outputs/text_writer.h"
#include "exporter/sampler/sampler.h"
#include "exporter/sources/cgroupfs_source.h"

namespace {

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

}  // namespace

int main(int argc, char** argv) {
  using namespace sockpressure;
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s CGROUP_ROOT CYCLES\n", argv[0]);
    return 2;
  }
  Paths paths;
  paths.cgroupfs = argv[1];
  int cycles = std::stoi(argv[2]);
  std::vector<std::unique_ptr<Source>> sources;
  // As the agent at --sample.interval=1s: the slow files every 10th sample.
  sources.push_back(NewCgroupfsSource(paths, {1000000, 10}));
  Sampler sampler(std::move(sources), std::make_unique<StateTracker>(), 1.0);
  sampler.SampleOnce();  // warm-up: first walk builds the state

  double cpu0 = CpuSeconds();
  std::shared_ptr<const Snapshot> snap;
  for (int i = 0; i < cycles; ++i) snap = sampler.SampleOnce();
  double cpu_per_cycle = (CpuSeconds() - cpu0) / cycles;
  const long sampling_rss_kb = StatusKb("VmRSS:");  // before any rendering

  // Peer in the same run: the floor for any reader of these files -- open,
  // read and close exactly the files the agent reads per cycle (memory.stat
  // of every cgroup, plus the ten slow files one cycle in ten), no parsing.
  std::vector<std::string> fast_files, slow_files;
  const char* slow_names[] = {"memory.current", "memory.max", "memory.high", "memory.low", "memory.min",
                              "memory.swap.current", "memory.swap.max", "memory.events", "memory.events.local",
                              "memory.pressure"};
  for (const CgroupView& c : snap->cgroups) {
    std::string dir = std::string(argv[1]) + (c.path == "/" ? "" : c.path);
    fast_files.push_back(dir + "/memory.stat");
    for (const char* n : slow_names) slow_files.push_back(dir + "/" + n);
  }
  std::vector<char> buf(65536);
  auto read_all = [&](const std::vector<std::string>& files) {
    for (const std::string& f : files) {
      int fd = ::open(f.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) continue;
      while (::read(fd, buf.data(), buf.size()) > 0) {
      }
      ::close(fd);
    }
  };
  double peer0 = CpuSeconds();
  for (int i = 0; i < cycles; ++i) {
    read_all(fast_files);
    if (i % 10 == 0) read_all(slow_files);
  }
  double peer_per_cycle = (CpuSeconds() - peer0) / cycles;

  BuildInfo build{"bench", "bench", "bench"};
  auto time_render = [&](bool proto, size_t* bytes) {
    auto t0 = std::chrono::steady_clock::now();
    const int reps = 5;
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
  std::printf(
      "cgroups=%zu cycles=%d cpu_ms_per_cycle=%.2f peer_read_only_cpu_ms_per_cycle=%.2f agent_over_peer=%.2f "
      "sampling_rss_mib=%.1f rss_mib=%.1f peak_rss_mib=%.1f text_render_ms=%.2f "
      "text_bytes=%zu proto_render_ms=%.2f proto_bytes=%zu\n",
      snap->cgroups.size(), cycles, cpu_per_cycle * 1e3, peer_per_cycle * 1e3, cpu_per_cycle / peer_per_cycle,
      sampling_rss_kb / 1024.0, StatusKb("VmRSS:") / 1024.0, StatusKb("VmHWM:") / 1024.0,
      text_s * 1e3, text_bytes, proto_s * 1e3, proto_bytes);
  return 0;
}
