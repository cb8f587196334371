// The sources' flags (--path.*, --sample.interval, --cgroup.max,
// --signal.all-tiers, --bpf.*, --[no-]collector.NAME), the SourceContext
// built from them and the enabled sources, so that main only wires.
// Not thread-safe: used once at start-up.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "exporter/cli/flag_set.h"
#include "exporter/sources/source.h"

namespace sockpressure {

struct SourceFlags {
  Paths paths;
  absl::Duration interval = absl::Seconds(1);
  int64_t cgroup_max = 5000;
  absl::Duration full_pass = absl::Seconds(10);  // --cgroup.full-pass-interval
  absl::Duration context = absl::Seconds(10);    // --sample.context-interval
  // --cgroup.include/exclude/level; turned into SourceContext::cgroup_exported
  // by identity/cgroup_filter.h (the level needs the Kubernetes path rules).
  std::string cgroup_include, cgroup_exclude, cgroup_level = "all";
  bool all_tiers = false;
  std::string bpf_vmpressure_attach = "fentry,kprobe";
  std::string bpf_clamps_attach = "fexit,kprobe,tp_btf,raw_tp";
  bool bpf_clamps_on_demand = true;  // --[no-]bpf.clamps-on-demand
  std::string bpf_drops_attach = "tp_btf,raw_tp";
  std::string bpf_prunes_attach = "fentry,kprobe";
  std::map<std::string, bool> collectors;  // --[no-]collector.NAME
};

// The path, sampling, signal and bpf flags.
void RegisterSourceFlags(FlagSet* flags, SourceFlags* f);
// --[no-]collector.NAME for every registered collector.
void RegisterCollectorFlags(FlagSet* flags, SourceFlags* f);

// InvalidArgument names the flag that is out of range or malformed;
// Internal when the registry lists a collector before one it runs after
// (CheckCollectorOrder), so that such a binary does not start.
absl::StatusOr<SourceContext> SourceContextFromFlags(const SourceFlags& f);

// Builds the enabled sources in collection order; `names` gets the name of
// each collector that built one.
std::vector<std::unique_ptr<Source>> NewEnabledSources(const SourceContext& ctx, std::vector<std::string>* names);

}  // namespace sockpressure
