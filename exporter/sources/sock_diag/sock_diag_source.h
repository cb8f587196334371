// Collector "sock_diag": a census of TCP sockets per memory cgroup, and of
// those whose receive window looks clamped by memcg socket pressure, without
// eBPF: inet_diag netlink dumps (tcp_info, skmem, INET_DIAG_CGROUP_ID) in
// every network namespace of the node.
//
// Clamp signature (docs/kernel.md §4): tcp_adjust_rcv_ssthresh() leaves
// rcv_ssthresh == 4*advmss while data flows. tcp_clamp_window() (application
// not reading, tiny SO_RCVBUF) leaves 2*advmss or less, and a receive buffer
// whose full space is <= 4*advmss cannot advertise more anyway; neither is a
// memcg clamp.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>

#include "absl/status/status.h"
#include "exporter/sources/shared/census.h"
#include "exporter/sources/shared/netns.h"
#include "exporter/sources/source.h"

namespace sockpressure {

// What the census reads of one socket.
struct TcpSocketInfo {
  uint64_t cgroup2_id = 0;  // INET_DIAG_CGROUP_ID: unified-hierarchy id, 0 if absent
  uint64_t inode = 0;
  uint8_t state = 0;
  uint32_t rcv_ssthresh = 0, advmss = 0, rcv_space = 0;
  uint32_t rcv_wnd = 0;  // tcpi_rcv_wnd (6.2+), 0 when the kernel lacks it
  uint64_t bytes_received = 0;
  uint32_t rmem_alloc = 0, rcvbuf = 0;  // INET_DIAG_SKMEMINFO, 0 if absent
  bool has_skmem = false;
};

bool IsMemcgClamp(const TcpSocketInfo& s);

// Dumps every non-listening TCP socket (IPv4 and IPv6) visible to the
// NETLINK_SOCK_DIAG socket `nl_fd` (its namespace). -1 opens one in the
// calling thread's namespace.
absl::Status DumpTcpSockets(int nl_fd, const std::function<void(const TcpSocketInfo&)>& fn);

// Census over all network namespaces (or only the caller's).
// `scanner` (optional) keeps the namespace list between calls.
TcpCensusResult CensusAllNamespaces(const Paths& paths, bool all_namespaces, NetnsScanner* scanner = nullptr);

// Skips the dump while the eBPF census (a better tier) is live in the same
// sample, unless all_tiers.
std::unique_ptr<Source> NewSockDiagSource(const Paths& paths, bool all_tiers = false);

}  // namespace sockpressure
