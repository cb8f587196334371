// Loader of bpf/memcg_iter.bpf.c: a cgroup iterator over the memory
// hierarchy reading every memcg's socket_pressure deadline, turned into
// pressure seconds and assertions per memcg. Also measures CONFIG_HZ when
// the kernel config cannot be read.
// Not thread-safe: built at start-up, then used by the sampler thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "exporter/sources/bpf/bpf_loader.h"

struct sp_memcg_iter;

namespace sockpressure {

class MemcgIterLoader : public ProgramLoader<sp_memcg_iter> {
 public:
  // Null when the iterator could not be attached (why is in `log`). `hz`
  // is the kernel's CONFIG_HZ, 0 when unknown: then measured, else 250.
  // `uncharged_walk_seconds`: how often the walk runs on a cgroup v1 node
  // where no memcg charges sockets (WalkCanWait); every sample otherwise.
  static std::unique_ptr<MemcgIterLoader> Attach(const BpfEnv& env, int hz, double uncharged_walk_seconds,
                                                 ProbeLog& log);
  ~MemcgIterLoader();
  void Collect(Sample& sample, bool program_stats);
  int hz() const { return hz_; }
  // The last walk found that no memcg can throttle a socket (cgroup v1, no
  // memcg charging sockets, nothing live): see WalkCanWait.
  bool NothingCanThrottle() const;
  // Memory cgroup ids the last Collect() visited.
  const std::vector<uint64_t>& LastIds() const { return last_ids_; }

 private:
  struct Record;  // one memcg of one walk (memcg_iter_loader.cc)
  // What the last walk saw of a memcg, and what it added up to.
  struct State {
    uint64_t deadline = 0, now = 0;
    PressureState st;
  };
  MemcgIterLoader();
  // One walk; records_ then holds what it found. False (with why) when the
  // walk could not run, records_ then as they were.
  bool Run(std::string* err);
  // Whether the walk just made left the map as the last read found it
  // (bar gen and now), from the program's .bss counters before the walk:
  // it rewrote no record and visited as many memcgs as records_ holds.
  bool Unchanged(uint64_t changed_before, uint64_t visited_before) const;
  // On cgroup v1 a socket is charged to its memcg (sk_memcg) only once a
  // memory.kmem.tcp.limit_in_bytes was written there (tcpmem_active), and
  // memcg socket pressure throttles only charged sockets. When the last
  // walk counted no such memcg and saw no live deadline or tcpmem flag, no
  // memcg can throttle a socket until a limit is written: the samples reuse
  // that walk's records until uncharged_walk_ns_ has passed, and the next
  // walk sees a limit written meanwhile. Exact for what the records say
  // (nothing live, and nothing can go live unseen that throttles a socket).
  bool WalkCanWait() const;
  void MeasureHz();
  void CollectPressure(Sample& sample, bool walk);

  int hz_ = 0;
  bool v1_ = false;
  uint64_t uncharged_walk_ns_ = 0;
  // The last walk: when it ran, and the memcgs it counted as charging
  // sockets (the program's `charged`; UINT64_MAX before the first).
  uint64_t walked_ns_ = 0, charged_ = UINT64_MAX;
  // The program's statistics at the last walk: it runs only inside one.
  std::vector<ProgramStats> held_programs_;
  bool held_timed_ = false;
  uint64_t gen_ = 0;
  bool error_logged_ = false;
  std::vector<uint64_t> last_ids_;
  // The last walk's records: read from the map, or, when the walk changed
  // nothing, the last read's refreshed in place (Unchanged).
  std::vector<Record> records_;
  std::unordered_map<uint64_t, State> state_;
};

}  // namespace sockpressure
