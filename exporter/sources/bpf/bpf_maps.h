// Reading the BPF maps and program statistics of the eBPF collectors.
// Header-only: included only where SOCKPRESSURE_WITH_BPF is defined.
#pragma once

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <cerrno>
#include <cstdint>
#include <string>
#include <vector>

#include "exporter/sources/sample.h"
#include "sockpressure_bpf.h"

namespace sockpressure {

// The SP_STAT_* slots of a per-CPU `stats` array, each summed over CPUs.
inline std::vector<uint64_t> ReadStats(int fd) {
  std::vector<uint64_t> out(SP_STAT_NR, 0);
  int ncpu = libbpf_num_possible_cpus();
  if (fd < 0 || ncpu <= 0) return out;
  std::vector<uint64_t> per_cpu(static_cast<size_t>(ncpu));
  for (uint32_t slot = 0; slot < SP_STAT_NR; ++slot) {
    if (bpf_map_lookup_elem(fd, &slot, per_cpu.data()) != 0) continue;
    for (uint64_t v : per_cpu) out[slot] += v;
  }
  return out;
}

// Reads a hash map: batched (one syscall per `chunk` entries, kernel 5.6+)
// and, where batching is refused, key by key. Returns the entries read.
template <typename V, typename K = uint64_t, typename Fn>
int ReadHashMap(int fd, Fn&& fn) {
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
      if (!first) return total;  // map changed under us; next sample re-reads
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

// Run count and time of one program (kernel.bpf_stats_enabled=1 only).
inline void AddProgramStats(Sample& sample, const std::string& name, int prog_fd) {
  struct bpf_prog_info info = {};
  uint32_t len = sizeof info;
  if (prog_fd < 0 || bpf_obj_get_info_by_fd(prog_fd, &info, &len) != 0) return;
  sample.program_stats.push_back({name, info.run_cnt, info.run_time_ns});
}
inline void AddProgramStats(Sample& sample, const std::string& name, bpf_program* prog) {
  if (prog) AddProgramStats(sample, name, bpf_program__fd(prog));
}

}  // namespace sockpressure
