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
  static std::unique_ptr<MemcgIterLoader> Attach(const BpfEnv& env, int hz, ProbeLog& log);
  ~MemcgIterLoader();
  void Collect(Sample& sample, bool program_stats);
  int hz() const { return hz_; }
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
  void MeasureHz();
  void CollectPressure(Sample& sample);

  int hz_ = 0;
  uint64_t gen_ = 0;
  bool error_logged_ = false;
  std::vector<uint64_t> last_ids_;
  // The last walk's records: read from the map, or, when the walk changed
  // nothing, the last read's refreshed in place (Unchanged).
  std::vector<Record> records_;
  std::unordered_map<uint64_t, State> state_;
};

}  // namespace sockpressure
