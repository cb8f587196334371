// The node's families: one row each, in exposition order (docs/metrics.md,
// "Node"). A row adds no series where the node lacks what it reports (no
// swap, no CONFIG_LRU_GEN, a collector switched off), and is then absent.
#include <cstdint>

#include "absl/strings/string_view.h"
#include "exporter/outputs/snapshot_families.h"

namespace sockpressure {
namespace {

using Out = SeriesOut;

// A TcpExt counter from /proc/net/netstat as read, where the netstat
// collector read it (sources/netstat_source.cc lists the counters).
void AddTcpExt(const Snapshot& s, absl::string_view name, Out& out) {
  auto it = s.node.tcp_ext.find(name);
  if (it != s.node.tcp_ext.end()) out.Add(static_cast<double>(it->second));
}

constexpr SnapshotFamily kNodeFamilies[] = {
    {"sockpressure_node_info", MetricKind::kGauge, "Kernel release and cgroup mode of this node; always 1.",
     [](const Snapshot& s, const BuildInfo&, Out& out) {
       out.Add({{"kernel_release", s.node.kernel_release.value_or("unknown")},
                {"cgroup_mode", CgroupModeName(s.cgroup_mode)}},
               1);
     }},
    {"sockpressure_node_swap_enabled", MetricKind::kGauge,
     "1 when a swap area is active. With swap, hot anonymous memory is scanned but not reclaimed, which is what "
     "makes vmpressure report false pressure.",
     [](const Snapshot& s, const BuildInfo&, Out& out) {
       if (s.node.swaps) out.Add(s.swap_enabled ? 1 : 0);
     }},
    {"sockpressure_node_swap_size_bytes", MetricKind::kGauge, "Total size of active swap areas.",
     [](const Snapshot& s, const BuildInfo&, Out& out) {
       if (s.node.swaps) out.Add(static_cast<double>(s.node.swaps->size_bytes));
     }},
    {"sockpressure_node_swap_used_bytes", MetricKind::kGauge, "Used space of active swap areas.",
     [](const Snapshot& s, const BuildInfo&, Out& out) {
       if (s.node.swaps) out.Add(static_cast<double>(s.node.swaps->used_bytes));
     }},
    {"sockpressure_node_mglru_enabled", MetricKind::kGauge,
     "1 when the multi-generational LRU does reclaim (/sys/kernel/mm/lru_gen/enabled bit 0); absent without "
     "CONFIG_LRU_GEN. It changes which pages reclaim scans, and so how often hot anonymous memory is scanned without "
     "being reclaimed, which arms socket pressure (measured per kernel: README).",
     [](const Snapshot& s, const BuildInfo&, Out& out) {
       if (s.node.mglru_caps) out.Add(s.node.MglruOn() ? 1 : 0);
     }},
    {"sockpressure_node_socket_accounting_enabled", MetricKind::kGauge,
     "0 when the kernel was booted with cgroup.memory=nosocket: sockets are not charged to memory cgroups and memcg "
     "pressure cannot throttle them.",
     [](const Snapshot& s, const BuildInfo&, Out& out) {
       if (s.node.nosocket) out.Add(s.socket_accounting_enabled ? 1 : 0);
     }},
    {"sockpressure_node_tcp_memory_pressure", MetricKind::kGauge,
     "1 when TCP memory (sockstat TCP mem) exceeds net.ipv4.tcp_mem[1]: global TCP memory pressure, which clamps "
     "every socket on the node (a different cause from memcg socket pressure).",
     [](const Snapshot& s, const BuildInfo&, Out& out) {
       if (s.tcp_memory_pressure) out.Add(*s.tcp_memory_pressure ? 1 : 0);
     }},
    {"sockpressure_node_tcp_memory_pages", MetricKind::kGauge, "Pages allocated to TCP socket buffers (sockstat TCP mem).",
     [](const Snapshot& s, const BuildInfo&, Out& out) {
       if (s.node.tcp_mem_pages) out.Add(static_cast<double>(*s.node.tcp_mem_pages));
     }},
    {"sockpressure_node_tcp_mem_limit_pages", MetricKind::kGauge, "net.ipv4.tcp_mem thresholds in pages.",
     [](const Snapshot& s, const BuildInfo&, Out& out) {
       if (!s.node.tcp_mem_limits || s.node.tcp_mem_limits->size() != 3) return;
       const char* names[] = {"min", "pressure", "max"};
       for (int i = 0; i < 3; ++i) out.Add({{"threshold", names[i]}}, static_cast<double>((*s.node.tcp_mem_limits)[i]));
     }},
    // The TcpExt counters, in the netstat collector's order; a name is the
    // counter's as TcpExtMetricPart() spells it (a unit test holds them to it).
    {"sockpressure_node_tcp_prune_called_total", MetricKind::kCounter,
     "TcpExt PruneCalled from /proc/net/netstat (node-wide; does not count memcg socket pressure).",
     [](const Snapshot& s, const BuildInfo&, Out& out) { AddTcpExt(s, "PruneCalled", out); }},
    {"sockpressure_node_tcp_rcv_pruned_total", MetricKind::kCounter,
     "TcpExt RcvPruned from /proc/net/netstat (node-wide; does not count memcg socket pressure).",
     [](const Snapshot& s, const BuildInfo&, Out& out) { AddTcpExt(s, "RcvPruned", out); }},
    {"sockpressure_node_tcp_ofo_pruned_total", MetricKind::kCounter,
     "TcpExt OfoPruned from /proc/net/netstat (node-wide; does not count memcg socket pressure).",
     [](const Snapshot& s, const BuildInfo&, Out& out) { AddTcpExt(s, "OfoPruned", out); }},
    {"sockpressure_node_tcp_rcv_collapsed_total", MetricKind::kCounter,
     "TcpExt TCPRcvCollapsed from /proc/net/netstat (node-wide; does not count memcg socket pressure).",
     [](const Snapshot& s, const BuildInfo&, Out& out) { AddTcpExt(s, "TCPRcvCollapsed", out); }},
    {"sockpressure_node_tcp_memory_pressures_total", MetricKind::kCounter,
     "TcpExt TCPMemoryPressures from /proc/net/netstat (node-wide; does not count memcg socket pressure).",
     [](const Snapshot& s, const BuildInfo&, Out& out) { AddTcpExt(s, "TCPMemoryPressures", out); }},
    // The one TcpExt counter that is a time (milliseconds), exported in seconds.
    {"sockpressure_node_tcp_memory_pressure_seconds_total", MetricKind::kCounter,
     "Time the node spent under global TCP memory pressure (TcpExt TCPMemoryPressuresChrono).",
     [](const Snapshot& s, const BuildInfo&, Out& out) {
       auto it = s.node.tcp_ext.find("TCPMemoryPressuresChrono");
       if (it != s.node.tcp_ext.end()) out.Add(static_cast<double>(it->second) / 1000.0);
     }},
    {"sockpressure_node_tcp_rcv_q_drop_total", MetricKind::kCounter,
     "TcpExt TCPRcvQDrop from /proc/net/netstat (node-wide; does not count memcg socket pressure).",
     [](const Snapshot& s, const BuildInfo&, Out& out) { AddTcpExt(s, "TCPRcvQDrop", out); }},
    {"sockpressure_node_tcp_ofo_drop_total", MetricKind::kCounter,
     "TcpExt TCPOFODrop from /proc/net/netstat (node-wide; does not count memcg socket pressure).",
     [](const Snapshot& s, const BuildInfo&, Out& out) { AddTcpExt(s, "TCPOFODrop", out); }},
    {"sockpressure_node_tcp_want_zero_window_adv_total", MetricKind::kCounter,
     "TcpExt TCPWantZeroWindowAdv from /proc/net/netstat (node-wide; does not count memcg socket pressure).",
     [](const Snapshot& s, const BuildInfo&, Out& out) { AddTcpExt(s, "TCPWantZeroWindowAdv", out); }},
    {"sockpressure_node_tcp_to_zero_window_adv_total", MetricKind::kCounter,
     "TcpExt TCPToZeroWindowAdv from /proc/net/netstat (node-wide; does not count memcg socket pressure).",
     [](const Snapshot& s, const BuildInfo&, Out& out) { AddTcpExt(s, "TCPToZeroWindowAdv", out); }},
    {"sockpressure_node_tcp_from_zero_window_adv_total", MetricKind::kCounter,
     "TcpExt TCPFromZeroWindowAdv from /proc/net/netstat (node-wide; does not count memcg socket pressure).",
     [](const Snapshot& s, const BuildInfo&, Out& out) { AddTcpExt(s, "TCPFromZeroWindowAdv", out); }},
    {"sockpressure_node_vmscan_scanned_pages_total", MetricKind::kCounter,
     "Pages scanned by reclaim on the whole node (/proc/vmstat pgscan_*, without proactive).",
     [](const Snapshot& s, const BuildInfo&, Out& out) {
       if (s.node.vm_pgscan) out.Add(static_cast<double>(*s.node.vm_pgscan));
     }},
    {"sockpressure_node_vmscan_reclaimed_pages_total", MetricKind::kCounter,
     "Pages reclaimed on the whole node (/proc/vmstat pgsteal_*, without proactive).",
     [](const Snapshot& s, const BuildInfo&, Out& out) {
       if (s.node.vm_pgscan) out.Add(static_cast<double>(s.node.vm_pgsteal.value_or(0)));
     }},
    {"sockpressure_node_psi_memory_stall_seconds_total", MetricKind::kCounter,
     "Time tasks on the node stalled on memory (/proc/pressure/memory total).",
     [](const Snapshot& s, const BuildInfo&, Out& out) {
       if (s.node.psi_some) out.Add({{"kind", "some"}}, static_cast<double>(s.node.psi_some->total_us) / 1e6);
       if (s.node.psi_full) out.Add({{"kind", "full"}}, static_cast<double>(s.node.psi_full->total_us) / 1e6);
     }},
};

}  // namespace

std::span<const SnapshotFamily> NodeFamilies() { return kNodeFamilies; }

}  // namespace sockpressure
