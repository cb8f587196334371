// A collector is a Source: the code's type is Source, and "collector" is what
// a registered Source is called where users see it (--collector.NAME, the
// `collector` label, node_exporter's word). A Source reads one kind of kernel
// data into a Sample; one per file under exporter/sources/. Every fact about
// a collector (name, default, help, cadence, sub-switches) is its row in
// registry.cc.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "exporter/sources/sample.h"

namespace sockpressure {

// Injectable filesystem roots (--path.*), so tests run on fixture trees.
struct Paths {
  std::string procfs = "/proc";
  std::string sysfs = "/sys";
  std::string cgroupfs = "/sys/fs/cgroup";
};

// Not thread-safe: the sampler thread is the only caller of Collect().
class Source {
 public:
  virtual ~Source() = default;
  // Collector name, used in --collector.NAME and the `collector` label.
  virtual absl::string_view name() const = 0;
  // Reads into `sample`. Return OK also when the feature is absent on this
  // kernel (absence is not a failure); return an error when something the
  // kernel has could not be read or parsed. Data read before an error is
  // kept in the sample.
  virtual absl::Status Collect(Sample& sample) = 0;
  // Whether Collect() hands itself to the privileged worker (a collector
  // that needs a capability, source_flags.cc): the sampler gives
  // consecutive ones one hand-off (Sampler::SetWorkerRunner).
  virtual bool collects_on_worker() const { return false; }
};

// How often the sampler runs a collector (sampler/cadence.h decides the
// cycles): signal collectors every cycle, context collectors on the context
// cadence.
enum class CollectorCadence { kEveryCycle, kContext };

// The probes of the bpf collector, each switched by its own
// --collector.bpf_NAME (the bpf row's sub-switches in registry.cc).
struct BpfProbes {
  bool vmpressure = true;  // vmpressure verdicts
  bool pressure = true;    // iter/cgroup socket-pressure state
  bool clamps = true;      // window clamps
  bool prunes = true;      // pruning and memory drops
};

// The collectors enabled by default (registry.cc).
std::set<std::string, std::less<>> DefaultCollectors();
// The bpf collector's probes on by default (registry.cc).
BpfProbes DefaultBpfProbes();

// What a source factory gets from the command line.
struct SourceContext {
  Paths paths;
  size_t max_cgroups = 5000;
  // Read every cgroup's slow files (limits, sizes, events, PSI) on the full
  // pass: the context series need them, the core signal does not (then only
  // cgroups whose reclaim moved have them read).
  bool cgroup_context = true;
  // --cgroup.include/exclude/level: whether a cgroup path is exported (see
  // CgroupReading::exported); empty exports all.
  std::function<bool(absl::string_view path)> cgroup_exported;
  double interval_seconds = 1.0;
  // --cgroup.full-pass-interval (docs/sampling.md).
  double full_pass_seconds = 10.0;
  // --sample.context-interval: the context collectors' cadence on an idle
  // node (sampler/cadence.h).
  double context_seconds = 10.0;
  // --bpf.vmpressure-attach / --bpf.clamps-attach: attach types to try, best
  // first (empty = the built-in order). Lets the lab verify every tier.
  std::vector<std::string> bpf_vmpressure_attach, bpf_clamps_attach;
  // --bpf.drops-attach / --bpf.prunes-attach: the same for bpf/prunes.bpf.c.
  std::vector<std::string> bpf_drops_attach, bpf_prunes_attach;
  // --signal.all-tiers: every tier collects even when a better one is live.
  bool all_tiers = false;
  // --[no-]bpf.clamps-on-demand: the window-clamp program attached only
  // under socket pressure (sources/bpf/clamp_arming.h), or all the time.
  bool bpf_clamps_on_demand = true;
  // The collectors enabled by --[no-]collector.NAME. Factories read it
  // where one collector depends on another: without "bpf" bpf_census is off
  // too (no eBPF at all).
  std::set<std::string, std::less<>> collectors = DefaultCollectors();
  // The bpf collector's probes enabled by --[no-]collector.bpf_NAME.
  BpfProbes bpf_probes = DefaultBpfProbes();
};

using SourceFactory = std::function<std::unique_ptr<Source>(const SourceContext&)>;

// One --[no-]collector.NAME flag: a collector's own, or a sub-switch that
// turns a part of one collector on or off.
struct CollectorSwitch {
  std::string name;
  bool enabled_by_default;
  std::string help;  // shown in --help for --collector.NAME
};

// A sub-switch of the bpf collector: the flag, and the probe it binds.
struct BpfProbeSwitch {
  CollectorSwitch flag;
  bool BpfProbes::*probe;
};

// A collector's row in registry.cc. (--metrics.profile, whose deprecated
// spelling is --collector.context, is no collector: it picks the output
// profile and is an outputs flag, outputs/http_flags.h.)
struct SourceRegistration {
  std::string name;  // --collector.NAME, Source::name() and the `collector` label
  bool enabled_by_default;
  std::string help;  // shown in --help for --collector.NAME
  CollectorCadence cadence;
  // The collectors whose results in the same Sample this one reads: it runs
  // after each of them that is enabled (CheckCollectorOrder).
  std::vector<std::string> after;
  SourceFactory factory;
  std::vector<BpfProbeSwitch> bpf_probes = {};  // the bpf collector's sub-switches
};

// All sources linked into the binary, in collection order.
const std::vector<SourceRegistration>& RegisteredSources();
// Internal when a collector is listed before one it runs after, or names
// one that is not registered; checked at start-up (SourceContextFromFlags).
absl::Status CheckCollectorOrder(const std::vector<SourceRegistration>& collectors);

// Every --[no-]collector.NAME flag: each collector's, then its sub-switches.
std::vector<CollectorSwitch> CollectorSwitches();
// Sets ctx->collectors and ctx->bpf_probes from the flags' values by name;
// a switch missing from `on` is off.
void ApplyCollectorSwitches(const std::map<std::string, bool>& on, SourceContext* ctx);

}  // namespace sockpressure

namespace sockpressure {

// A Source made of a name and a function, for the small procfs collectors.
std::unique_ptr<Source> MakeFunctionSource(std::string name, std::function<absl::Status(Sample&)> collect);

// Reads <root>/<relative>: NotFound means the kernel lacks the file, which a
// collector treats as "feature absent" (OK) rather than a failure.
absl::StatusOr<std::string> ReadProcFile(const std::string& root, absl::string_view relative);

// Reads <root>/<relative> and hands its text to `use`, whose status it
// returns. A file the kernel does not have (IsAbsent) is no error: the
// collector has nothing from it, and `use` is not called.
absl::Status WithProcFile(const std::string& root, absl::string_view relative,
                          const std::function<absl::Status(const std::string&)>& use);

}  // namespace sockpressure
