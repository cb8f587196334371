// Reading the BPF maps and program statistics of the eBPF collectors.
// Header-only: included only by the files built with the programs.
#pragma once

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <cerrno>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "exporter/sources/sample.h"
#include "sockpressure_bpf.h"

namespace sockpressure {

// The SP_STAT_* slots of a per-CPU `stats` array, each summed over CPUs.
inline std::vector<uint64_t> ReadStats(int fd) {
  std::vector<uint64_t> out(SP_STAT_NR, 0);
  int ncpu = libbpf_num_possible_cpus();
  if (fd < 0 || ncpu <= 0) return out;
  // One batched lookup of every slot (5.6+) instead of one syscall per
  // slot: the loaders read these every sample. Per-CPU values come as
  // ncpu u64s per key.
  {
    std::vector<uint32_t> keys(SP_STAT_NR);
    std::vector<uint64_t> values(static_cast<size_t>(SP_STAT_NR) * static_cast<size_t>(ncpu));
    uint32_t out_batch = 0, count = SP_STAT_NR;
    LIBBPF_OPTS(bpf_map_batch_opts, opts);
    int err = bpf_map_lookup_batch(fd, nullptr, &out_batch, keys.data(), values.data(), &count, &opts);
    if ((err == 0 || errno == ENOENT) && count == SP_STAT_NR) {
      for (uint32_t i = 0; i < count; ++i) {
        if (keys[i] >= SP_STAT_NR) continue;
        for (int cpu = 0; cpu < ncpu; ++cpu) out[keys[i]] += values[static_cast<size_t>(i) * ncpu + cpu];
      }
      return out;
    }
  }
  std::vector<uint64_t> per_cpu(static_cast<size_t>(ncpu));
  for (uint32_t slot = 0; slot < SP_STAT_NR; ++slot) {
    if (bpf_map_lookup_elem(fd, &slot, per_cpu.data()) != 0) continue;
    for (uint64_t v : per_cpu) out[slot] += v;
  }
  return out;
}

// Reads a hash map: batched (one syscall per `chunk` entries, kernel 5.6+)
// and, where batching is refused, key by key. Returns the entries read;
// `complete` (if given) is false when the map changed under a batched read.
template <typename V, typename K = uint64_t, typename Fn>
int ReadHashMap(int fd, Fn&& fn, bool* complete = nullptr) {
  if (complete) *complete = true;
  constexpr uint32_t chunk = 1024;
  std::vector<K> keys(chunk);
  std::vector<V> values(chunk);
  K in_batch{}, out_batch{};
  bool first = true;
  int total = 0;
  for (;;) {
    uint32_t count = chunk;
    LIBBPF_OPTS(bpf_map_batch_opts, opts);
    // The hash map's batch cursor is a bucket index (u32); K-sized storage
    // is large enough for it.
    int err = bpf_map_lookup_batch(fd, first ? nullptr : &in_batch, &out_batch, keys.data(), values.data(), &count,
                                   &opts);
    int e = err ? errno : 0;
    if (err && e != ENOENT) {
      if (!first) {  // map changed under us; next sample re-reads
        if (complete) *complete = false;
        return total;
      }
      break;                     // batch ops unsupported: fall back below
    }
    for (uint32_t i = 0; i < count; ++i) fn(keys[i], values[i]);
    total += static_cast<int>(count);
    if (e == ENOENT) return total;
    in_batch = out_batch;
    first = false;
  }
  K key{}, next{};
  const K* prev = nullptr;
  while (bpf_map_get_next_key(fd, prev, &next) == 0) {
    V v{};
    if (bpf_map_lookup_elem(fd, &next, &v) == 0) {
      fn(next, v);
      ++total;
    }
    key = next;
    prev = &key;
  }
  return total;
}

// A hash map whose program bumps one stats slot after every write to it
// (clamps, prunes): re-read only when that slot's sum moved since the last
// complete read, else the entries of that read stand. A batched read walks
// every bucket of the map (max_entries), whatever the number of entries, so
// an idle node saves a walk of SP_MAX_CGROUPS buckets per map per sample.
// Exact: a write is followed by its bump, so a write not yet seen by the
// last read moves the slot before or at the next sample's stats read.
// Not thread-safe: owned by a loader.
template <typename V, typename K = uint64_t>
class GuardedHashMap {
 public:
  template <typename Fn>
  void Read(int fd, uint64_t writes, Fn&& fn) {
    if (!valid_ || writes != writes_) {
      entries_.clear();
      bool complete = true;
      ReadHashMap<V, K>(fd, [this](const K& k, const V& v) { entries_.emplace_back(k, v); }, &complete);
      valid_ = complete;
      writes_ = writes;
    }
    for (const auto& [k, v] : entries_) fn(k, v);
  }

 private:
  bool valid_ = false;
  uint64_t writes_ = 0;
  std::vector<std::pair<K, V>> entries_;
};

// Skipped runs of one program, and its run count and time when `timed`
// (kernel.bpf_stats_enabled=1; the kernel counts neither otherwise).
inline void AddProgramStats(Sample& sample, const std::string& name, int prog_fd, bool timed) {
  struct bpf_prog_info info = {};
  uint32_t len = sizeof info;
  if (prog_fd < 0 || bpf_obj_get_info_by_fd(prog_fd, &info, &len) != 0) return;
  // A kernel older than 5.12 leaves recursion_misses out of what it copies
  // (len comes back shorter) and it stays 0.
  ProgramStats p;
  p.program = name;
  p.run_count = info.run_cnt;
  p.run_time_ns = info.run_time_ns;
  p.missed_runs = info.recursion_misses;
  p.timed = timed;
  sample.program_stats.push_back(std::move(p));
}

}  // namespace sockpressure
