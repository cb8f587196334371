// Loader of bpf/clamps.bpf.c: receive-window clamps per memcg, from the
// first attach type the kernel accepts (fexit, kprobe on
// __tcp_select_window, else tp_btf or raw_tp on tcp_rcv_space_adjust).
// Not thread-safe: built at start-up, then used by the sampler thread.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "exporter/sources/bpf/bpf_loader.h"

struct sp_clamps;

namespace sockpressure {

class ClampsLoader : public ProgramLoader<sp_clamps> {
 public:
  // Null when no attach type in `attach` worked; each attempt is in `log`.
  static std::unique_ptr<ClampsLoader> Attach(const BpfEnv& env, const std::vector<std::string>& attach,
                                              ProbeLog& log);
  // Adds the clamp counters to `sample`; returns events lost.
  uint64_t Collect(Sample& sample, bool program_stats);

 private:
  ClampsLoader();
  GuardedHashMap<uint64_t> clamps_;  // bumps SP_STAT_CLAMPS after each write
};

}  // namespace sockpressure
