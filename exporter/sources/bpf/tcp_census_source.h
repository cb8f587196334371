// Collector "bpf_census": the clamped-socket census counted in the kernel by
// an iter/tcp program (bpf/tcp_census.bpf.c), one walk per network namespace.
//
// Same signal and clamp signature as the sock_diag collector, one tier
// better (Tier::kIter): no tcp_info or netlink message per socket crosses to
// userspace, only one map entry per cgroup, and sockets charged to a memcg
// are attributed through sk->sk_memcg, the memcg the kernel throttles.
// While it is live the sock_diag collector skips its dump (unless
// --signal.all-tiers asks for every tier).
//
// Needs a kernel with the TCP iterator (5.9+), BTF and CAP_BPF; otherwise it
// says why once and the census comes from sock_diag.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "exporter/sources/sample.h"
#include "exporter/sources/shared/census.h"
#include "exporter/sources/shared/netns.h"
#include "exporter/sources/source.h"

namespace sockpressure {

// One census over some network namespaces.
// The loaded and attached iter/tcp program. Not thread-safe.
class TcpCensusIter {
 public:
  virtual ~TcpCensusIter() = default;
  // nullptr with *why set when this build or kernel cannot run it.
  static std::unique_ptr<TcpCensusIter> Open(std::string* why);
  // Walks every namespace (NetnsRef::own = the caller's, without setns).
  virtual TcpCensusResult Run(const std::vector<NetnsRef>& namespaces) = 0;
  // Map updates lost (more cgroups than SP_MAX_CGROUPS), cumulative.
  virtual uint64_t Lost() const = 0;
  // The program's run statistics into the sample (timed: kernel.bpf_stats_enabled).
  virtual void AddProgramStats(Sample& sample, bool timed) const = 0;
};

// nullptr (collector off) with --no-collector.bpf.
std::unique_ptr<Source> NewBpfCensusSource(const SourceContext& ctx);

}  // namespace sockpressure
