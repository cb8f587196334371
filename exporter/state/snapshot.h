// The immutable result of one sampling cycle. The sampler builds a new
// Snapshot after every sample and publishes it with one atomic pointer swap;
// outputs (HTTP /metrics, JSON API, alert push) only ever read snapshots, so
// a scrape never blocks on cgroupfs and never sees half an update.
// Thread-safe: const after construction, shared via shared_ptr<const>.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "exporter/sources/sample.h"
#include "exporter/sources/signals.h"
#include "exporter/state/tier_judge.h"
#include "exporter/state/vmpressure_window.h"

namespace sockpressure {

using LabelPairs = std::vector<std::pair<std::string, std::string>>;

// The value of `key` in `labels`, "" when absent.
inline std::string LabelValue(const LabelPairs& labels, absl::string_view key) {
  for (const auto& [k, v] : labels) {
    if (k == key) return v;
  }
  return "";
}
// How pages, alerts and doctor name a pod: "namespace/pod", "pod" without a
// namespace, "" without a pod.
inline std::string NamespacedPod(absl::string_view ns, absl::string_view pod) {
  if (pod.empty()) return "";
  return ns.empty() ? std::string(pod) : absl::StrCat(ns, "/", pod);
}
using SignalTiers = std::array<Tier, kSignalCount>;

constexpr SignalTiers NoTiers() {
  SignalTiers t{};
  for (Tier& x : t) x = Tier::kNone;
  return t;
}

// What one tier says about one cgroup (totals are agent-side cumulative).
struct TierValues {
  uint64_t scanned_total = 0, reclaimed_total = 0;
  uint64_t windows_total[3] = {0, 0, 0};
  std::optional<double> ratio;  // last completed window
  uint64_t pressure_events_total = 0;
  double pressure_seconds_total = 0;
  bool pressure_asserted = false;  // this cgroup's own deadline is live
  uint64_t clamps_total = 0;
  PruneCounters prunes_total;  // agent-side cumulative, like clamps_total
  std::optional<SocketCensus> census;
  std::optional<uint64_t> sock_throttled_total;
};

struct CgroupView {
  SharedLimits limits;  // context series only; shared with the walk and the sample (sample.h)
  SharedPath path;  // shared with the sample and the walk (shared_path.h)
  uint64_t id = 0;
  int parent = -1;  // index into Snapshot::cgroups
  bool v1 = false;
  LabelPairs identity;  // namespace/pod/container when known (issue: k8s identity)

  // Best tier per signal for this cgroup (Tier::kNone = no data).
  SignalTiers tier = NoTiers();
  TierValues best;
  bool pressure_active = false;  // own or an ancestor's socket pressure is live
  // TCP sockets charged to this cgroup or any cgroup below it, from the best
  // census tier: the sockets its own socket pressure throttles
  // (mem_cgroup_under_socket_pressure walks up from each socket's memcg).
  // Absent without a census; 0 is a census that found none.
  std::optional<uint64_t> subtree_sockets;
  // Every tier that produced data, for --signal.all-tiers and the lab.
  std::map<Tier, TierValues> tiers;

  // Sizes from memory.stat; limits and context (the base) from cgroupfs.
  std::optional<uint64_t> anon_bytes, file_bytes, sock_bytes, swap_bytes;
};

// A snapshot's cgroups, parents before children. Each view is held by
// shared pointer, so that a snapshot shares with the previous one every view
// that did not change: a still cgroup costs a pointer per sample, not a new
// view (state_tracker.h). Reads look like a vector of CgroupView.
// Thread-safe once built (the views are immutable); building is not.
class CgroupTable {
 public:
  using Shared = std::shared_ptr<const CgroupView>;
  class const_iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = CgroupView;
    using difference_type = std::ptrdiff_t;
    using pointer = const CgroupView*;
    using reference = const CgroupView&;
    explicit const_iterator(std::vector<Shared>::const_iterator it) : it_(it) {}
    reference operator*() const { return **it_; }
    pointer operator->() const { return it_->get(); }
    const_iterator& operator++() {
      ++it_;
      return *this;
    }
    bool operator==(const const_iterator& o) const { return it_ == o.it_; }
    bool operator!=(const const_iterator& o) const { return it_ != o.it_; }

   private:
    std::vector<Shared>::const_iterator it_;
  };

  CgroupTable() = default;
  CgroupTable(std::initializer_list<CgroupView> views) {
    for (const CgroupView& v : views) push_back(v);
  }

  size_t size() const { return views_.size(); }
  bool empty() const { return views_.empty(); }
  const CgroupView& operator[](size_t i) const { return *views_[i]; }
  const CgroupView& front() const { return *views_.front(); }
  const CgroupView& back() const { return *views_.back(); }
  const_iterator begin() const { return const_iterator(views_.begin()); }
  const_iterator end() const { return const_iterator(views_.end()); }
  // The view itself, to share it with another table.
  const Shared& shared(size_t i) const { return views_[i]; }

  void reserve(size_t n) { views_.reserve(n); }
  // Created non-const, so that Mutable() may write it while unshared.
  void push_back(CgroupView v) { views_.push_back(std::make_shared<CgroupView>(std::move(v))); }
  void push_back(Shared v) { views_.push_back(std::move(v)); }
  // The views as values, moved out of those this table alone holds (every
  // view is made non-const by push_back), copied from the shared ones.
  std::vector<CgroupView> Release() && {
    std::vector<CgroupView> out;
    out.reserve(views_.size());
    for (Shared& v : views_) {
      if (v.use_count() == 1) {
        out.push_back(std::move(const_cast<CgroupView&>(*v)));
      } else {
        out.push_back(*v);
      }
    }
    views_.clear();
    return out;
  }
  // For building (tests, folding): view i, copied first when another table
  // shares it (or it was shared in const), so no other table sees the write.
  CgroupView& Mutable(size_t i) {
    auto own = std::make_shared<CgroupView>(*views_[i]);
    CgroupView& v = *own;
    views_[i] = std::move(own);
    return v;
  }

 private:
  std::vector<Shared> views_;
};

struct CollectorResult {
  std::string name;
  bool success = false;
  double duration_seconds = 0;
  std::string error;  // empty when success
  // When the collector last ran: this sample's time, or an earlier one for
  // a context collector whose last output was held (sampler/cadence.h).
  int64_t ran_unix_millis = 0;
};

struct Snapshot {
  uint64_t sequence = 0;
  int64_t unix_millis = 0;
  double interval_seconds = 0;

  CgroupMode cgroup_mode = CgroupMode::kUnknown;
  NodeReading node;
  bool swap_enabled = false;
  bool socket_accounting_enabled = true;  // false with cgroup.memory=nosocket
  std::optional<bool> tcp_memory_pressure;  // global tcp_mem pressure

  CgroupTable cgroups;  // parents before children
  // The same cgroups at the same indices as the previous snapshot: then
  // `changed` lists, ascending, the indices whose view is not the one the
  // previous snapshot held; every other view is the same object. Consumers
  // that follow each cgroup from sample to sample (episodes) visit only
  // those, and the cgroups they keep watching themselves.
  bool same_cgroups_as_previous = false;
  std::vector<uint32_t> changed;
  SignalTiers signal_tier = NoTiers();  // best tier live on this node

  std::vector<CollectorResult> collectors;
  std::vector<ProbeStatus> probes;
  std::vector<ProgramStats> program_stats;
  uint64_t events_lost = 0;
  size_t cgroups_untracked = 0;
  uint64_t cgroups_overflow_total = 0;
  std::map<std::string, uint64_t> cgroups_skipped_total;  // reason -> cgroups left out, all samples
  uint64_t samples_total = 0;
  double sample_cpu_seconds = 0;  // CPU time of the last sampling cycle
  double sample_duration_seconds = 0;  // wall time of the cycle before it (Sample::previous_cycle_seconds)
  uint64_t sample_overruns_total = 0;
  double next_sample_seconds = 0;  // Sample::next_sample_seconds
  // Tiers that fell short of a second source (tier_judge.h).
  std::vector<TierDisagreement> tier_disagreements;
};

}  // namespace sockpressure
