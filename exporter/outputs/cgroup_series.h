// Helpers shared by the per-cgroup writers: the core profile
// (snapshot_metrics.cc) and the context profile (context_metrics.cc).
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "exporter/common/cgroup_label.h"
#include "exporter/common/metric_writer.h"
#include "exporter/state/snapshot.h"

namespace sockpressure {

// Byte values where UINT64_MAX means "no limit" (memory.max "max").
inline double LimitBytes(uint64_t v) {
  return v == UINT64_MAX ? std::numeric_limits<double>::infinity() : static_cast<double>(v);
}

template <typename T>
std::optional<double> OptValue(const std::optional<T>& v) {
  if (!v) return std::nullopt;
  return static_cast<double>(*v);
}

// Sets `labels` to the shared label set of c's series: cgroup label (a
// suffix of its path, common/cgroup_label.h), then its
// identity (namespace/pod/container), as views into `c`. Reuses the vector's
// room, so a family written over every cgroup allocates nothing per series.
inline void SetCgroupLabels(const CgroupView& c, std::vector<LabelRef>* labels) {
  labels->clear();
  labels->push_back({"cgroup", CgroupLabel(c.path.str())});
  for (const auto& [k, v] : c.identity) labels->push_back({k, v});
}

inline std::vector<LabelRef> CgroupLabels(const CgroupView& c) {
  std::vector<LabelRef> labels;
  labels.reserve(1 + c.identity.size());
  SetCgroupLabels(c, &labels);
  return labels;
}

// One per-cgroup family with one value per cgroup (or none). Most families
// export one cgroup file value as read, absent when the file was: those name
// the field, the rest compute their value.
struct CgroupFamily {
  using Value = std::function<std::optional<double>(const CgroupView&)>;
  using Field = std::optional<uint64_t> CgroupView::*;
  using LimitField = std::optional<uint64_t> CgroupLimits::*;  // read on the full pass (sample.h)

  CgroupFamily(const char* name, MetricKind kind, const char* help, Value value)
      : name(name), kind(kind), help(help), value(std::move(value)) {}
  CgroupFamily(const char* name, MetricKind kind, const char* help, Field field)
      : CgroupFamily(name, kind, help, [field](const CgroupView& c) { return OptValue(c.*field); }) {}
  CgroupFamily(const char* name, MetricKind kind, const char* help, LimitField field)
      : CgroupFamily(name, kind, help, [field](const CgroupView& c) { return OptValue(LimitsOf(c.limits).*field); }) {}

  const char* name;
  MetricKind kind;
  const char* help;
  Value value;
};

// How many cgroups ahead a family's loop asks for a path.
constexpr size_t kPrefetchAhead = 8;

// The paths live with the walk's nodes, scattered over the heap
// (shared_path.h), and every family reads all of them again: ask for the
// path of a cgroup a few ahead, in two hops (its string object, then its
// characters), so that it is in cache when its turn comes.
inline void PrefetchPathAhead(const Snapshot& s, size_t i) {
  if (i + 2 * kPrefetchAhead < s.cgroups.size()) __builtin_prefetch(&s.cgroups[i + 2 * kPrefetchAhead].path.str());
  if (i + kPrefetchAhead < s.cgroups.size()) {
    const std::string& ahead = s.cgroups[i + kPrefetchAhead].path.str();
    for (size_t at = 0; at < ahead.size(); at += 64) __builtin_prefetch(ahead.data() + at);
  }
}

// Writes family `f` over every cgroup of `s`.
inline void WriteCgroupFamily(const CgroupFamily& f, const Snapshot& s, MetricWriter& out) {
  out.Family(f.name, f.help, f.kind);
  std::vector<LabelRef> labels;
  for (size_t i = 0; i < s.cgroups.size(); ++i) {
    PrefetchPathAhead(s, i);
    if (std::optional<double> v = f.value(s.cgroups[i])) {
      SetCgroupLabels(s.cgroups[i], &labels);
      out.Value(labels, {}, *v);
    }
  }
}

inline bool HasSignal(const CgroupView& c, Signal s) { return c.tier[static_cast<int>(s)] != Tier::kNone; }

}  // namespace sockpressure
