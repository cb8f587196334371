// The list of collectors linked into the binary. Order matters: cgroupfs
// runs first because the other sources resolve cgroup ids through the
// cgroups it found in the same sample.
#include <algorithm>

#include "exporter/sources/bpf/bpf_source.h"
#include "exporter/sources/bpf/tcp_census_source.h"
#include "exporter/sources/cgroupfs_source.h"
#include "exporter/sources/procfs_sources.h"
#include "exporter/sources/sock_diag/sock_diag_source.h"
#include "exporter/sources/source.h"

namespace sockpressure {

const std::vector<SourceRegistration>& RegisteredSources() {
  static const std::vector<SourceRegistration> sources = {
      {"cgroupfs", true, "memory cgroup hierarchy: memory.stat, memory.events, memory.pressure, limits",
       [](const SourceContext& ctx) {
         // The full pass (new directories, slow files): --cgroup.full-pass-interval.
         uint64_t slow_every = static_cast<uint64_t>(std::max(1.0, ctx.full_pass_seconds / ctx.interval_seconds));
         CgroupfsOptions o(ctx.max_cgroups, slow_every);
         o.read_context = ctx.cgroup_context;
         o.exported = ctx.cgroup_exported;
         return NewCgroupfsSource(ctx.paths, std::move(o));
       }},
      {"kernel", true, "kernel release and cgroup.memory=nosocket from the command line",
       [](const SourceContext& ctx) { return NewKernelSource(ctx.paths); }},
      {"swaps", true, "active swap areas (/proc/swaps)", [](const SourceContext& ctx) { return NewSwapsSource(ctx.paths); }},
      {"netstat", true, "TcpExt pruning, collapse, memory-pressure and zero-window counters",
       [](const SourceContext& ctx) { return NewNetstatSource(ctx.paths); }},
      {"sockstat", true, "global TCP memory against net.ipv4.tcp_mem",
       [](const SourceContext& ctx) { return NewSockstatSource(ctx.paths); }},
      {"vmstat", true, "node-wide reclaim (/proc/vmstat) and memory PSI",
       [](const SourceContext& ctx) { return NewVmstatSource(ctx.paths); }},
      // eBPF tiers (bpf/README.md). The per-probe entries build nothing:
      // "bpf" builds one collector with those of them ctx.collectors holds.
      {"bpf_vmpressure", true, "eBPF vmpressure() verdicts (fentry/fexit, else kprobe/kretprobe)",
       [](const SourceContext&) { return std::unique_ptr<Source>(); }},
      {"bpf_pressure", true, "eBPF cgroup iterator sampling memcg->socket_pressure",
       [](const SourceContext&) { return std::unique_ptr<Source>(); }},
      {"bpf_clamps", true, "eBPF receive-window clamps (fexit/kprobe __tcp_select_window, else tcp_rcv_space_adjust)",
       [](const SourceContext&) { return std::unique_ptr<Source>(); }},
      {"bpf_prunes", true,
       "eBPF receive pruning and memory drops (skb:kfree_skb reasons; fentry/kprobe tcp_collapse, "
       "tcp_prune_ofo_queue)",
       [](const SourceContext&) { return std::unique_ptr<Source>(); }},
      {"bpf", true, "all eBPF tiers (falls back per signal; off without root or BTF)",
       [](const SourceContext& ctx) { return NewBpfSourceFromFlags(ctx); }},
      {"bpf_census", true, "eBPF TCP iterator census of clamped sockets per cgroup, in every network namespace",
       [](const SourceContext& ctx) { return NewBpfCensusSource(ctx); }},
      {"sock_diag", true, "TCP socket census per cgroup via inet_diag, in every network namespace",
       [](const SourceContext& ctx) { return NewSockDiagSource(ctx.paths, ctx.all_tiers); }},
  };
  return sources;
}

std::set<std::string, std::less<>> DefaultCollectors() {
  std::set<std::string, std::less<>> names;
  for (const SourceRegistration& r : RegisteredSources()) {
    if (r.enabled_by_default) names.insert(r.name);
  }
  return names;
}

}  // namespace sockpressure
