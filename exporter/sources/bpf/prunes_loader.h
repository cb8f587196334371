// Loader of bpf/prunes.bpf.c: what tcp_prune_queue() does to a receiver, per
// memcg. The object is loaded twice, each from its own skeleton (one refused
// program fails a whole object):
//   kDrops      skb:kfree_skb, tp_btf else raw_tp, with rx_sk where the
//               tracepoint has it (6.11+): memory drops, pruned segments
//   kFunctions  tcp_collapse + tcp_prune_ofo_queue, fentry else kprobe:
//               receive-queue collapses, out-of-order prunes
// Not thread-safe: built at start-up, then used by the sampler thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "exporter/sources/bpf/bpf_loader.h"

struct sp_prunes;

namespace sockpressure {

class PrunesLoader : public ProgramLoader<sp_prunes> {
 public:
  enum class Kind { kDrops, kFunctions };
  // Probe names in sockpressure_probe_attached and BpfSource::Stats().
  static constexpr const char* kDropsProbe = "tcp_drops";
  static constexpr const char* kFunctionsProbe = "tcp_prunes";

  // Null when no attach type in `attach` worked; each attempt is in `log`.
  static std::unique_ptr<PrunesLoader> Attach(const BpfEnv& env, Kind kind, const std::vector<std::string>& attach,
                                              ProbeLog& log);
  // Adds this instance's counters to `sample`; returns events lost.
  uint64_t Collect(Sample& sample, bool program_stats);

 private:
  explicit PrunesLoader(Kind kind);
  Kind kind_;
  GuardedHashMap<sp_prune_val> prunes_;  // bumps SP_STAT_COUNTED after each write
};

}  // namespace sockpressure
