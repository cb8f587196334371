// Loader of bpf/clamps.bpf.c: receive-window clamps per memcg, from the
// first attach type the kernel accepts (fexit, kprobe on
// __tcp_select_window, else tp_btf or raw_tp on tcp_rcv_space_adjust).
// The program stays loaded for the agent's life; its link comes and goes
// (Detach, Reattach) with the memcgs' socket pressure (clamp_arming.h): a
// detached program costs the kernel nothing per packet, and its maps, clamp
// counts and program stats survive.
// Not thread-safe: built at start-up, then used by the collecting thread.
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
  // With `reattach` (clamps on demand) an attach type must also attach again
  // after a detach; if none does, the first that attached once is loaded
  // and reattachable() is false: it stays attached.
  static std::unique_ptr<ClampsLoader> Attach(const BpfEnv& env, const std::vector<std::string>& attach,
                                              bool reattach, ProbeLog& log);
  bool reattachable() const { return reattachable_; }
  // Adds the clamp counters to `sample`; returns events lost.
  uint64_t Collect(Sample& sample, bool program_stats);
  bool attached() const { return skel_.linked(); }
  // Destroys the link: the program stops running. Needs no capability.
  void Detach() { skel_.Unlink(); }
  // Attaches again at the tier it loaded as; "" or why not (counted in the
  // program's attach_failures). Needs BpfAttachCapabilities().
  std::string Reattach() {
    detached_reads_ = 0;  // its attach counts move
    return skel_.Relink();
  }

 private:
  ClampsLoader();
  bool reattachable_ = true;
  GuardedHashMap<uint64_t> clamps_;  // bumps SP_STAT_CLAMPS after each write
  // A detached program does not run, so the counters and run statistics of
  // the second read after the detach (a run in flight at the detach has
  // ended by then) stand from the third on: a healthy node's samples reuse
  // them instead of making two bpf(2) calls each.
  int detached_reads_ = 0;
  bool held_timed_ = false;
  std::vector<uint64_t> held_stats_;
  std::vector<ProgramStats> held_programs_;
};

}  // namespace sockpressure
