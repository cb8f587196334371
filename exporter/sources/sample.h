// One sample: everything the sources read during one sampling interval.
//
// Sources fill a Sample; the state layer (exporter/state) turns consecutive
// samples into per-cgroup state and an immutable Snapshot. A Sample is owned
// by the sampler thread and is never shared, so it needs no locking.
#pragma once

#include "absl/strings/string_view.h"
#include <array>
#include <bitset>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "exporter/common/parse.h"
#include "exporter/common/shared_path.h"
#include "exporter/sources/signals.h"

namespace sockpressure {

// The TcpExt counters the netstat collector keeps in NodeReading::tcp_ext,
// in the order they are exported (sockpressure_node_tcp_<snake>_total).
const std::vector<absl::string_view>& ExportedTcpExtCounters();  // netstat_source.cc

enum class CgroupMode { kUnknown, kUnified, kHybrid, kLegacy };
absl::string_view CgroupModeName(CgroupMode mode);

// A cgroup's limits and context from cgroupfs (read on the full pass, every
// ~10 s, with the context series only). Read once into an immutable object
// that the walk's node, the samples and the snapshots share until the next
// full pass: 256 bytes a cgroup held once, not in each stage.
struct CgroupLimits {
  // memory.current/max/high/low/min, memory.swap.current/max (v1: usage/limit).
  std::optional<uint64_t> memory_current, memory_max, memory_high, memory_low, memory_min;
  std::optional<uint64_t> swap_current, swap_max;
  // memory.events (hierarchical).
  std::optional<uint64_t> events_oom_kill;
  // memory.pressure.
  std::optional<PsiLine> psi_some, psi_full;
  // v1 only: memory.kmem.tcp.* (v1 sockets are throttled by tcpmem pressure).
  std::optional<uint64_t> kmem_tcp_usage, kmem_tcp_limit, kmem_tcp_failcnt;

  // memory.max when a limit is set: absent when unread or "max" (read as
  // UINT64_MAX, no limit).
  std::optional<uint64_t> memory_limit() const {
    return memory_max && *memory_max != UINT64_MAX ? memory_max : std::nullopt;
  }
};
// nullptr: none read (the core profile, or not yet).
using SharedLimits = std::shared_ptr<const CgroupLimits>;
// The limits, or an empty set (every value unset) for nullptr.
inline const CgroupLimits& LimitsOf(const SharedLimits& limits) {
  static const CgroupLimits kNone;
  return limits ? *limits : kNone;
}

// One memory cgroup as read from cgroupfs. Counters are as the kernel reports
// them: memory.stat is hierarchical on v2 (includes descendants).
struct CgroupReading {
  SharedLimits limits;
  SharedPath path;     // relative to the memory hierarchy root, "/" for the root; the walk's own string
  uint64_t id = 0;     // cgroup id == inode of the directory == kernfs id
  int parent = -1;     // index into Sample::cgroups, -1 for the root
  bool v1 = false;     // read from the cgroup v1 memory hierarchy
  // Passes --cgroup.include/exclude/level. A cgroup that does not is still
  // read (the hierarchy needs it) and its counts fold into its nearest
  // exported ancestor (StateTracker).
  bool exported = true;

  // memory.stat (v2): reclaim activity, hierarchical.
  std::optional<uint64_t> pgscan, pgsteal, pgscan_proactive, pgsteal_proactive;
  // memory.stat sizes in bytes (v2 names; v1 rss/cache/swap are mapped).
  std::optional<uint64_t> anon_bytes, file_bytes, sock_bytes, swap_bytes;
  // memory.events.local sock_throttled (6.19+): read every sample once seen.
  std::optional<uint64_t> sock_throttled_local;
};

// Node-wide readings from procfs.
struct NodeReading {
  std::optional<std::string> kernel_release;
  std::optional<bool> nosocket;            // cgroup.memory=nosocket on the command line
  // /sys/kernel/mm/lru_gen/enabled (bit 0: the multi-generational LRU does reclaim); absent
  // without CONFIG_LRU_GEN. With MGLRU on, hot anon sits in the youngest generation and is not
  // scanned, so the scan-without-reclaim that arms socket pressure does not happen there.
  std::optional<uint32_t> mglru_caps;
  // Reclaim runs MGLRU (lru_gen/enabled has its base bit): the one test of it.
  bool MglruOn() const { return mglru_caps && (*mglru_caps & 1); }
  std::optional<Swaps> swaps;
  std::map<std::string, uint64_t, std::less<>> tcp_ext;   // /proc/net/netstat TcpExt
  std::optional<uint64_t> tcp_mem_pages;                  // sockstat "TCP: mem"
  std::optional<std::vector<uint64_t>> tcp_mem_limits;    // tcp_mem min/pressure/max (pages)
  std::optional<uint64_t> vm_pgscan, vm_pgsteal;          // /proc/vmstat sums
  std::optional<PsiLine> psi_some, psi_full;              // /proc/pressure/memory
};

// Per-cgroup values from the tiers above memory.stat (eBPF, sock_diag).
// Counters are cumulative as kept by the source (e.g. a BPF map); the state
// layer turns them into deltas, so a source may restart from zero.
struct ReclaimCounters {
  uint64_t scanned = 0, reclaimed = 0;
  uint64_t windows[3] = {0, 0, 0};  // low, medium, critical
  uint64_t assertions = 0;          // socket_pressure deadline moved forward
};
struct PressureState {
  bool active = false;       // deadline in the future right now
  uint64_t assertions = 0;   // new deadlines seen (cumulative)
  double seconds = 0;        // time under pressure (cumulative)
};
struct ClampCounters {
  uint64_t clamps = 0;  // clamp transitions (cumulative)
};
// What tcp_prune_queue() did to a cgroup's sockets (bpf/prunes.bpf.c). The
// drop tier fills the first two, the function tier the last two.
struct PruneCounters {
  uint64_t rcv_mem_drops = 0;    // arriving segments dropped: no receive memory
  uint64_t ofo_pruned_segs = 0;  // queued out-of-order segments dropped by pruning
  uint64_t collapses = 0;        // receive-queue collapse passes (tcp_prune_queue)
  uint64_t ofo_prunes = 0;       // tcp_prune_ofo_queue() runs that dropped data
};
struct SocketCensus {
  uint64_t sockets = 0, clamped = 0;  // gauges
  SocketCensus& operator+=(const SocketCensus& o) {
    sockets += o.sockets;
    clamped += o.clamped;
    return *this;
  }
};

// What a probe did at start-up and where it is now, for
// sockpressure_probe_attached and sockpressure_probe_loaded.
struct ProbeStatus {
  std::string probe;   // e.g. "vmpressure"
  std::string attach;  // e.g. "fentry"
  bool attached = false;  // its programs' links are up now: they run
  // Loaded and in use: attached now, or (the window-clamp program while no
  // memcg is under socket pressure, clamp_arming.h) detached until needed.
  // False for a variant tried and skipped.
  bool loaded = false;
};

// One BPF program's runs as the kernel counts them (bpf_prog_info).
struct ProgramStats {
  std::string program;
  uint64_t run_count = 0;    // only with kernel.bpf_stats_enabled (`timed`)
  uint64_t run_time_ns = 0;  // likewise
  // Runs the kernel skipped because a BPF program was already running on
  // that CPU (recursion_misses, 5.12+): always counted for fentry, tp_btf
  // and raw_tp; for kprobes from 6.7 only (docs/kernel.md, "A kprobe can
  // miss a prune"). Events in a skipped run are not in any counter.
  uint64_t missed_runs = 0;
  bool timed = false;  // kernel.bpf_stats_enabled=1 when read
  // The program's link: up now, seconds it was up (cumulative since the
  // agent loaded it), and how many times it was attached (1 for a program
  // attached once at start-up; more for one detached while idle).
  bool attached = false;
  double attached_seconds = 0;
  uint64_t attaches = 0;
  uint64_t attach_failures = 0;  // re-attaches the kernel refused
};

// Cgroup id -> index into Sample::cgroups. Shared between samples whose
// cgroups are the same in the same order (the collector keeps the last one),
// so a still tree does not rebuild a map of every cgroup each sample; a write
// copies it first when it is shared.
// Not thread-safe (a Sample's, like the rest of it).
class IdIndex {
 public:
  using Map = std::unordered_map<uint64_t, int>;
  int& operator[](uint64_t id) { return Own()[id]; }
  void erase(uint64_t id) { Own().erase(id); }
  void reserve(size_t n) { Own().reserve(n); }
  size_t size() const { return map_ ? map_->size() : 0; }
  // The index of `id`, or -1.
  int Find(uint64_t id) const {
    if (!map_) return -1;
    auto it = map_->find(id);
    return it == map_->end() ? -1 : it->second;
  }
  // Both now hold the same map (until one of them writes).
  void ShareWith(IdIndex& other) const { other.map_ = map_; }

 private:
  Map& Own() {
    if (!map_) {
      map_ = std::make_shared<Map>();
    } else if (map_.use_count() > 1) {
      map_ = std::make_shared<Map>(*map_);
    }
    return *map_;
  }
  std::shared_ptr<Map> map_;
};

template <typename T>
using ByTier = std::map<Tier, std::unordered_map<uint64_t, T>>;  // tier -> cgroup id -> value

struct Sample {
  double monotonic_seconds = 0;  // CLOCK_MONOTONIC when the sample started
  int64_t unix_millis = 0;

  CgroupMode cgroup_mode = CgroupMode::kUnknown;
  std::vector<CgroupReading> cgroups;  // parents before children (breadth-first)
  size_t cgroups_skipped = 0;          // beyond --cgroup.max, not read
  // Every cgroup of the hierarchy was read: none cut by --cgroup.max, none
  // unreadable. Only then is a path missing from `cgroups` really gone, and
  // one that was not there before really new (see StateTracker).
  bool cgroups_complete = false;
  // The same cgroups (ids and paths) in the same order as the previous
  // sample of the same collector: the state layer may reuse its matching.
  bool cgroups_same_as_last = false;
  // Cgroups (with their subtrees) left out of this sample, by reason; a
  // small fixed set: path_too_long, symlink, unreadable.
  std::map<std::string, size_t> cgroups_left_out;
  NodeReading node;

  ByTier<ReclaimCounters> reclaim;
  ByTier<PressureState> pressure;
  ByTier<ClampCounters> clamps;
  ByTier<PruneCounters> prunes;  // drop tiers and function tiers never share a Tier
  ByTier<SocketCensus> census;

  // Which tiers produced each signal in this sample. A live tier with no
  // entry for a cgroup means "nothing happened there", not "unknown".
  std::array<std::bitset<kTierCount>, kSignalCount> live{};
  void MarkLive(Signal s, Tier t) { live[static_cast<int>(s)].set(static_cast<int>(t)); }
  bool IsLive(Signal s, Tier t) const { return live[static_cast<int>(s)].test(static_cast<int>(t)); }

  std::vector<ProbeStatus> probes;
  std::vector<ProgramStats> program_stats;
  uint64_t events_lost = 0;  // cumulative, from all BPF sources
  // CPU time collectors spent on the privileged worker for this sample
  // (the sampler measures its own thread).
  double worker_cpu_seconds = 0;
  // The sampler's own pacing, carried to the snapshot: the wall time of the
  // cycle before this one (from its first hook to its last listener), and
  // how many cycles started late because the one before ran past their tick.
  double previous_cycle_seconds = 0;
  uint64_t overruns_total = 0;

  // Idle waits (docs/sampling.md, "Where nothing can move"). Set by the
  // sampler: this sample follows a wait of a context interval, so every
  // collector makes its full pass (as it would have in the samples skipped).
  bool after_wait = false;
  // Signal collectors that found nothing their signals can show move
  // between samples without the kernel counting it for them: the sampler
  // may wait a context interval only when every signal collector says so.
  // A collector that does not add itself keeps the sampling interval.
  size_t signal_collectors_quiet = 0;
  // Set by the sampler after the collectors: seconds until the next cycle.
  double next_sample_seconds = 0;

  // Index of a cgroup id in `cgroups`, or -1. Valid after the cgroupfs source ran.
  int IndexOfId(uint64_t id) const;
  IdIndex id_index;
};

}  // namespace sockpressure
