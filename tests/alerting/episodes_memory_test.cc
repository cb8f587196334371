// What an open episode holds for the other cgroups reclaiming meanwhile.
// Its own binary: it replaces the global operator new and delete to count
// the bytes alive on the heap, which would disturb the other tests' binaries.
//
// Why it matters: at 10,000 cgroups with 1 % of the containers reclaiming,
// 100 episodes are open and each follows the sample's 64 biggest reclaimers.
// When that map copied each Kubernetes-length path (as key and as value), it
// held about 4 MB, a tenth of the agent's heap; it is meant to hold the
// walk's own shared path (shared_path.h) under the cgroup id.
#include <malloc.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "exporter/alerting/episodes.h"
#include "gtest/gtest.h"

namespace {
std::atomic<long long> g_live_bytes{0};
}  // namespace

// Counted by malloc_usable_size on both sides, so that new and delete agree
// whatever size the allocator rounded to.
void* operator new(size_t n) {
  void* p = std::malloc(n == 0 ? 1 : n);
  if (p == nullptr) throw std::bad_alloc();
  g_live_bytes += static_cast<long long>(malloc_usable_size(p));
  return p;
}
void* operator new[](size_t n) { return operator new(n); }
void operator delete(void* p) noexcept {
  if (p == nullptr) return;
  g_live_bytes -= static_cast<long long>(malloc_usable_size(p));
  std::free(p);
}
void operator delete[](void* p) noexcept { operator delete(p); }
void operator delete(void* p, size_t) noexcept { operator delete(p); }
void operator delete[](void* p, size_t) noexcept { operator delete(p); }

namespace sockpressure {
namespace {

constexpr int kVictims = 100;     // cgroups whose episode is open
constexpr int kReclaimers = 64;   // other cgroups reclaiming meanwhile
constexpr int kSamples = 5;

// A kubelet-shaped container path, about 170 characters, unique per n.
std::string ContainerPath(int n) {
  char pod[40], id[80];
  std::snprintf(pod, sizeof pod, "%08x_1234_5678_9abc_%012d", n, n);
  std::snprintf(id, sizeof id, "%064d", n);
  return std::string("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod") + pod +
         ".slice/cri-containerd-" + id + ".scope";
}

// A node whose paths live once, as the cgroupfs walk keeps them: every
// snapshot shares the same SharedPath for a cgroup.
struct Node {
  std::vector<SharedPath> paths;
  std::vector<TierValues> best;
  int64_t ms = 1'700'000'000'000;
  uint64_t seq = 0;

  Node() {
    paths.emplace_back("/");
    for (int i = 0; i < kVictims + kReclaimers; ++i) paths.emplace_back(ContainerPath(i));
    best.resize(paths.size());
  }
  bool IsVictim(size_t i) const { return i >= 1 && i <= kVictims; }
  bool IsReclaimer(size_t i) const { return i > kVictims; }

  // One second: every victim is under socket pressure; the reclaimers'
  // counters move when `reclaimers_move`.
  Snapshot Step(bool reclaimers_move) {
    ms += 1000;
    Snapshot s;
    s.sequence = ++seq;
    s.unix_millis = ms;
    s.interval_seconds = 1.0;
    s.cgroup_mode = CgroupMode::kUnified;
    s.swap_enabled = true;
    s.signal_tier[static_cast<int>(Signal::kReclaim)] = Tier::kMemoryStat;
    s.signal_tier[static_cast<int>(Signal::kSocketPressure)] = Tier::kMemoryStat;
    for (size_t i = 0; i < paths.size(); ++i) {
      TierValues& b = best[i];
      b.pressure_asserted = IsVictim(i);
      if (IsVictim(i)) {
        b.pressure_events_total += 2;
        b.pressure_seconds_total += 1.0;
        b.ratio = 0.9995;  // no reclaim of their own: they are not reclaimers
      }
      if (IsReclaimer(i) && reclaimers_move) {
        b.scanned_total += 6000 + i;
        b.reclaimed_total += 3000 + i;
      }
      CgroupView v;
      v.path = paths[i];
      v.id = i + 1;
      v.parent = i == 0 ? -1 : 0;
      v.best = b;
      v.tier[static_cast<int>(Signal::kReclaim)] = Tier::kMemoryStat;
      v.tier[static_cast<int>(Signal::kSocketPressure)] = Tier::kMemoryStat;
      v.pressure_active = b.pressure_asserted;
      s.cgroups.push_back(v);
    }
    return s;
  }
};

// Heap bytes a tracker holds after kSamples samples with every victim's
// episode open, counted while it is alive; the snapshots are gone by then.
long long HeldBytes(bool reclaimers_move) {
  Node n;
  long long before = g_live_bytes.load();
  EpisodeTracker t({/*quiet_seconds=*/30, /*history=*/256, /*top_reclaimers=*/5});
  for (int i = 0; i < kSamples; ++i) t.Observe(n.Step(reclaimers_move));
  EXPECT_EQ(t.active_count(), static_cast<size_t>(kVictims));
  long long held = g_live_bytes.load() - before;
  // The reclaimers are really followed (not trimmed away) when they move.
  if (reclaimers_move) {
    std::vector<Episode> open = t.OpenAndJustClosed();
    EXPECT_FALSE(open.empty());
    if (!open.empty()) {
      EXPECT_EQ(open[0].top_reclaimers.size(), 5u);
    }
  }
  return held;
}

TEST(EpisodesMemory, OpenEpisodesFollowOtherReclaimersWithoutCopyingTheirPaths) {
  long long still = HeldBytes(false);
  long long moving = HeldBytes(true);
  long long entries = static_cast<long long>(kVictims) * kReclaimers;
  long long per_entry = (moving - still) / entries;
  // An entry is a map node with an id, two counters and a shared pointer
  // (tens of bytes); one copied path alone is about 170.
  std::printf("held: %lld B still, %lld B with %d reclaimers moving: %lld B per (episode, reclaimer)\n", still,
              moving, kReclaimers, per_entry);
  EXPECT_GT(moving, still);
  EXPECT_LT(per_entry, static_cast<long long>(ContainerPath(0).size()));
}

}  // namespace
}  // namespace sockpressure
