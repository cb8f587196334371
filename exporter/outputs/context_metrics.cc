#include "exporter/outputs/context_metrics.h"

#include "exporter/outputs/cgroup_series.h"

namespace sockpressure {
namespace {

// The two families whose value is not one cgroup file's value as read.
std::optional<double> TcpSockets(const CgroupView& c) {
  return c.best.census ? OptValue<uint64_t>(c.best.census->sockets) : std::nullopt;
}

std::optional<double> KmemTcpLimit(const CgroupView& c) {
  const std::optional<uint64_t>& limit = LimitsOf(c.limits).kmem_tcp_limit;
  return limit ? std::optional<double>(LimitBytes(*limit)) : std::nullopt;
}

const std::vector<CgroupFamily>& ContextFamilies() {
  // One row a family, {name, kind, help, &field or &function}: the names and
  // texts are data (context_families.json), the build writes the rows.
  static const std::vector<CgroupFamily> families = {
#include "exporter/outputs/context_families.inc"
  };
  return families;
}

void WriteWindowsByLevel(const Snapshot& s, MetricWriter& out) {
  std::vector<LabelRef> labels;
  for (const CgroupView& c : s.cgroups) {
    if (!HasSignal(c, Signal::kReclaim)) continue;
    SetCgroupLabels(c, &labels);
    for (int l = 0; l < 3; ++l) {
      out.Value(labels, {{"level", PressureLevelName(static_cast<PressureLevel>(l))}},
                static_cast<double>(c.best.windows_total[l]));
    }
  }
}

void WriteLimits(const Snapshot& s, MetricWriter& out) {
  std::vector<LabelRef> labels;
  for (const CgroupView& view : s.cgroups) {
    const CgroupLimits& c = LimitsOf(view.limits);
    SetCgroupLabels(view, &labels);
    const std::pair<const char*, const std::optional<uint64_t>*> limits[] = {
        {"max", &c.memory_max}, {"high", &c.memory_high}, {"low", &c.memory_low},
        {"min", &c.memory_min}, {"swap_max", &c.swap_max}};
    for (const auto& [name, v] : limits) {
      if (*v) out.Value(labels, {{"limit", name}}, LimitBytes(**v));
    }
  }
}

void WritePsiStalls(const Snapshot& s, MetricWriter& out) {
  std::vector<LabelRef> labels;
  for (const CgroupView& view : s.cgroups) {
    const CgroupLimits& c = LimitsOf(view.limits);
    if (!c.psi_some && !c.psi_full) continue;
    SetCgroupLabels(view, &labels);
    if (c.psi_some) out.Value(labels, {{"kind", "some"}}, static_cast<double>(c.psi_some->total_us) / 1e6);
    if (c.psi_full) out.Value(labels, {{"kind", "full"}}, static_cast<double>(c.psi_full->total_us) / 1e6);
  }
}

// A family with a label of its own: its series come from `write`.
struct LabelFamily {
  const char* name;
  MetricKind kind;
  const char* help;
  void (*write)(const Snapshot& s, MetricWriter& out);
};

// One row a family, {name, kind, help, &writer}: the names and texts are data
// (context_label_families.json), the build writes the rows.
constexpr LabelFamily kLabelFamilies[] = {
#include "exporter/outputs/context_label_families.inc"
};

}  // namespace

void AppendContextParts(const Snapshot& s, std::vector<MetricsPart>* parts) {
  for (const CgroupFamily& f : ContextFamilies()) {
    parts->push_back([&s, &f](MetricWriter& out) { WriteCgroupFamily(f, s, out); });
  }
  for (const LabelFamily& f : kLabelFamilies) {
    parts->push_back([&s, &f](MetricWriter& out) {
      out.Family(f.name, f.help, f.kind);
      f.write(s, out);
    });
  }
}

}  // namespace sockpressure
