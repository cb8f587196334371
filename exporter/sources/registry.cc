// The collectors linked into the binary, one row each: name, default, help,
// cadence, the collectors it runs after, factory and, for bpf, its
// sub-switches. The rows are the collection order; a row comes after those
// it names (CheckCollectorOrder says so at start-up).
#include <algorithm>

#include "absl/strings/str_cat.h"

#include "exporter/sources/bpf/bpf_source.h"
#include "exporter/sources/bpf/tcp_census_source.h"
#include "exporter/sources/cgroupfs_source.h"
#include "exporter/sources/procfs_sources.h"
#include "exporter/sources/sock_diag/sock_diag_source.h"
#include "exporter/sources/source.h"

namespace sockpressure {
namespace {

// Signal collectors run every cycle: the verdicts come from them. Context
// collectors are the node-wide files (exported, never in a verdict) and the
// socket census (gauges: how many sockets are clamped now).
constexpr CollectorCadence kEveryCycle = CollectorCadence::kEveryCycle;
constexpr CollectorCadence kContext = CollectorCadence::kContext;

}  // namespace

const std::vector<SourceRegistration>& RegisteredSources() {
  static const std::vector<SourceRegistration> collectors = {
      // eBPF tiers (bpf/README.md): one collector, its probes switched one
      // by one with --collector.bpf_NAME.
      {"bpf",
       true,
       "all eBPF tiers (falls back per signal; off without root or BTF)",
       kEveryCycle,
       {},
       [](const SourceContext& ctx) { return NewBpfSourceFromFlags(ctx); },
       {
           {{"bpf_vmpressure", true, "eBPF vmpressure() verdicts (fentry/fexit, else kprobe/kretprobe)"},
            &BpfProbes::vmpressure},
           {{"bpf_pressure", true, "eBPF cgroup iterator sampling memcg->socket_pressure"}, &BpfProbes::pressure},
           {{"bpf_clamps", true,
             "eBPF receive-window clamps (fexit/kprobe __tcp_select_window, else tcp_rcv_space_adjust)"},
            &BpfProbes::clamps},
           {{"bpf_prunes", true,
             "eBPF receive pruning and memory drops (skb:kfree_skb reasons; fentry/kprobe tcp_collapse, "
             "tcp_prune_ofo_queue)"},
            &BpfProbes::prunes},
       }},
      // The walk reads first the cgroups in which bpf's vmpressure tier saw reclaim.
      {"cgroupfs", true, "memory cgroup hierarchy: memory.stat, memory.events, memory.pressure, limits", kEveryCycle,
       {"bpf"},
       [](const SourceContext& ctx) {
         // The full pass (new directories, slow files): --cgroup.full-pass-interval.
         uint64_t slow_every = static_cast<uint64_t>(std::max(1.0, ctx.full_pass_seconds / ctx.interval_seconds));
         CgroupfsOptions o(ctx.max_cgroups, slow_every);
         o.read_context = ctx.cgroup_context;
         o.exported = ctx.cgroup_exported;
         return NewCgroupfsSource(ctx.paths, std::move(o));
       }},
      {"kernel", true, "kernel release and cgroup.memory=nosocket from the command line", kContext, {},
       [](const SourceContext& ctx) { return NewKernelSource(ctx.paths); }},
      {"swaps", true, "active swap areas (/proc/swaps)", kContext, {},
       [](const SourceContext& ctx) { return NewSwapsSource(ctx.paths); }},
      {"netstat", true, "TcpExt pruning, collapse, memory-pressure and zero-window counters", kContext, {},
       [](const SourceContext& ctx) { return NewNetstatSource(ctx.paths); }},
      {"sockstat", true, "global TCP memory against net.ipv4.tcp_mem", kContext, {},
       [](const SourceContext& ctx) { return NewSockstatSource(ctx.paths); }},
      {"vmstat", true, "node-wide reclaim (/proc/vmstat) and memory PSI", kContext, {},
       [](const SourceContext& ctx) { return NewVmstatSource(ctx.paths); }},
      // The censuses map socket cgroup ids to the cgroups that cgroupfs found;
      // sock_diag stands down while bpf_census' iterator tier counted.
      {"bpf_census", true, "eBPF TCP iterator census of clamped sockets per cgroup, in every network namespace",
       kContext, {"cgroupfs"}, [](const SourceContext& ctx) { return NewBpfCensusSource(ctx); }},
      {"sock_diag", true, "TCP socket census per cgroup via inet_diag, in every network namespace", kContext,
       {"cgroupfs", "bpf_census"},
       [](const SourceContext& ctx) { return NewSockDiagSource(ctx.paths, ctx.all_tiers); }},
  };
  return collectors;
}

absl::Status CheckCollectorOrder(const std::vector<SourceRegistration>& collectors) {
  std::set<std::string, std::less<>> registered, earlier;
  for (const SourceRegistration& r : collectors) registered.insert(r.name);
  for (const SourceRegistration& r : collectors) {
    for (const std::string& needed : r.after) {
      if (!registered.count(needed)) {
        return absl::InternalError(
            absl::StrCat("collector ", r.name, " runs after collector ", needed, ", which is not registered"));
      }
      if (!earlier.count(needed)) {
        return absl::InternalError(absl::StrCat("collector ", r.name, " is listed before collector ", needed,
                                                ", whose results in the same sample it reads: its row in "
                                                "registry.cc must come after ",
                                                needed, "'s"));
      }
    }
    earlier.insert(r.name);
  }
  return absl::OkStatus();
}

std::set<std::string, std::less<>> DefaultCollectors() {
  std::set<std::string, std::less<>> names;
  for (const SourceRegistration& r : RegisteredSources()) {
    if (r.enabled_by_default) names.insert(r.name);
  }
  return names;
}

BpfProbes DefaultBpfProbes() {
  BpfProbes probes;
  for (const SourceRegistration& r : RegisteredSources()) {
    for (const BpfProbeSwitch& s : r.bpf_probes) probes.*s.probe = s.flag.enabled_by_default;
  }
  return probes;
}

std::vector<CollectorSwitch> CollectorSwitches() {
  std::vector<CollectorSwitch> switches;
  for (const SourceRegistration& r : RegisteredSources()) {
    switches.push_back({r.name, r.enabled_by_default, r.help});
    for (const BpfProbeSwitch& s : r.bpf_probes) switches.push_back(s.flag);
  }
  return switches;
}

void ApplyCollectorSwitches(const std::map<std::string, bool>& on, SourceContext* ctx) {
  auto is_on = [&on](const std::string& name) {
    auto it = on.find(name);
    return it != on.end() && it->second;
  };
  ctx->collectors.clear();
  for (const SourceRegistration& r : RegisteredSources()) {
    if (is_on(r.name)) ctx->collectors.insert(r.name);
    for (const BpfProbeSwitch& s : r.bpf_probes) ctx->bpf_probes.*s.probe = is_on(s.flag.name);
  }
}

}  // namespace sockpressure
