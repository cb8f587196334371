// Loader of bpf/vmpressure.bpf.c: vmpressure() verdicts per memcg (reclaim
// windows and socket pressure), from fentry/fexit, else kprobe/kretprobe.
// Not thread-safe: built at start-up, then used by the sampler thread.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "exporter/sources/bpf/bpf_loader.h"
#include "sockpressure_bpf.h"

struct sp_vmpressure;

namespace sockpressure {

class VmpressureLoader : public ProgramLoader<sp_vmpressure> {
 public:
  // Null when no attach type in `attach` worked; each attempt is in `log`.
  static std::unique_ptr<VmpressureLoader> Attach(const BpfEnv& env, const std::vector<std::string>& attach,
                                                  ProbeLog& log);
  // Adds reclaim and, with `socket_pressure`, pressure per memcg to
  // `sample`; returns events lost. `hz` converts the kernel's jiffies
  // deadlines (0 = unknown, 250 assumed).
  uint64_t Collect(Sample& sample, int hz, bool program_stats, bool socket_pressure);

 private:
  VmpressureLoader();
  // Bumps SP_STAT_COUNTED after each write: an idle node's map is not
  // walked (16,384 buckets) every sample.
  GuardedHashMap<sp_reclaim_val> reclaim_;
};

}  // namespace sockpressure
