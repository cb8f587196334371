// Helpers shared by the per-cgroup writers: the core profile
// (snapshot_metrics.cc) and the context profile (context_metrics.cc).
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

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

// The shared label set of a cgroup's series: cgroup path, then its identity
// (namespace/pod/container). The views point into `c`.
inline std::vector<LabelRef> CgroupLabels(const CgroupView& c) {
  std::vector<LabelRef> labels;
  labels.reserve(1 + c.identity.size());
  labels.push_back({"cgroup", c.path.str()});
  for (const auto& [k, v] : c.identity) labels.push_back({k, v});
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

// How many cgroups ahead WriteCgroupFamilyList asks for a path.
constexpr size_t kPrefetchAhead = 8;

// Writes family `f` over every cgroup of `s`; `labels[i]` belongs to s.cgroups[i].
inline void WriteCgroupFamily(const CgroupFamily& f, const Snapshot& s,
                              const std::vector<std::vector<LabelRef>>& labels, MetricWriter& out) {
  out.Family(f.name, f.help, f.kind);
  for (size_t i = 0; i < s.cgroups.size(); ++i) {
    // The paths live with the walk's nodes, scattered over the heap
    // (shared_path.h), and every family reads all of them again: ask for
    // a path a few cgroups ahead so it is in cache when its turn comes.
    if (i + kPrefetchAhead < labels.size() && !labels[i + kPrefetchAhead].empty()) {
      absl::string_view ahead = labels[i + kPrefetchAhead][0].value;
      for (size_t at = 0; at < ahead.size(); at += 64) __builtin_prefetch(ahead.data() + at);
    }
    if (std::optional<double> v = f.value(s.cgroups[i])) out.Value(labels[i], {}, *v);
  }
}

// Writes `families` over every cgroup of `s`, one after the other.
inline void WriteCgroupFamilyList(const std::vector<CgroupFamily>& families, const Snapshot& s,
                                  const std::vector<std::vector<LabelRef>>& labels, MetricWriter& out) {
  for (const CgroupFamily& f : families) WriteCgroupFamily(f, s, labels, out);
}

inline bool HasSignal(const CgroupView& c, Signal s) { return c.tier[static_cast<int>(s)] != Tier::kNone; }

}  // namespace sockpressure
