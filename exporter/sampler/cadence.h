// Which collectors run in which sampling cycle: the one place that decides
// (docs/sampling.md, "Cadence"); which collector is which is its
// registration's cadence (sources/registry.cc).
//
// Signal collectors (cgroupfs, bpf) run every cycle: the verdicts and their
// latency (first scan -> metric within one interval) depend on them. Context
// collectors (the node files and the socket census) run every cycle while
// anything moves on the node, else every `context_every` cycles; in between
// the sampler puts their last output into the sample again (HeldContext), so
// counters hold their value (rate() sees no reset) and gauges keep the last
// reading.
#pragma once

#include <array>
#include <bitset>
#include <cstdint>
#include <vector>

#include "absl/strings/string_view.h"
#include "exporter/sources/sample.h"
#include "exporter/sources/source.h"
#include "exporter/state/snapshot.h"

namespace sockpressure {

// A collector's cadence, as its registration says (sources/registry.cc);
// a name that is no registered collector runs every cycle.
CollectorCadence CadenceOf(absl::string_view collector);

// Decides, after the signal collectors filled a sample, whether the context
// collectors run in this cycle. The node is active when, since the previous
// cycle, any reclaim, socket-pressure, clamp, prune or sock_throttled counter
// of any tier moved, or a cgroup is under socket pressure now, or the last
// census saw a clamped socket, or global TCP memory is above tcp_mem[1].
// The first cycle always runs them.
// Not thread-safe: the sampler's cycle lock guards it.
class ContextGate {
 public:
  // context_every: run the context collectors at least every this many
  // cycles (1 = every cycle, the behaviour without a gate).
  explicit ContextGate(uint64_t context_every);

  // Called once per cycle after the signal collectors ran.
  bool Due(const Sample& sample);
  // Called after the context collectors ran or were replayed into `sample`.
  void Saw(const Sample& sample);

  // Whether the last Due() found the node active (for tests and logs).
  bool active() const { return active_; }
  // Neither the last Due() nor the last context reading (Saw) asks for the
  // next cycle: nothing moved and nothing is under pressure.
  bool idle() const { return !active_ && !context_active_; }
  uint64_t context_every() const { return every_; }

 private:
  uint64_t every_;
  uint64_t since_run_ = 0;  // cycles since the context collectors last ran
  bool first_ = true;
  bool active_ = false;
  uint64_t last_fingerprint_ = 0;
  bool context_active_ = false;  // the last context reading itself asks for the next one
};

// What the context collectors wrote into a sample, kept to be replayed into
// the samples of the cycles in which they do not run. Only context
// collectors write Sample::node and Sample::census (sources/*.cc), so those
// are kept whole; the rest is what the context collectors appended.
// Not thread-safe: owned by the sampler's cycle.
class HeldContext {
 public:
  // Marks what the sample holds before the context collectors run.
  void Begin(const Sample& sample);
  // Keeps what they added, with their results and the time they ran.
  void Capture(const Sample& sample, std::vector<CollectorResult> results);
  // Puts the kept output into a sample whose context collectors did not run.
  // Returns their last results (each with ran_unix_millis of that run).
  std::vector<CollectorResult> Replay(Sample& sample) const;
  bool empty() const { return !captured_; }

 private:
  // Markers from Begin().
  std::array<std::bitset<kTierCount>, kSignalCount> live_before_{};
  size_t probes_before_ = 0, stats_before_ = 0;
  uint64_t lost_before_ = 0;

  bool captured_ = false;
  NodeReading node_;
  ByTier<SocketCensus> census_;
  std::array<std::bitset<kTierCount>, kSignalCount> live_{};
  std::vector<ProbeStatus> probes_;
  std::vector<ProgramStats> program_stats_;
  uint64_t events_lost_ = 0;
  std::vector<CollectorResult> results_;
};

}  // namespace sockpressure
