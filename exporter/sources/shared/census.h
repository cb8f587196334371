// The result of one TCP socket census over the node's network namespaces,
// from either tier (the eBPF TCP iterator or sock_diag), and the one rule
// both apply when some namespaces could not be read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "exporter/sources/sample.h"

namespace sockpressure {

struct TcpCensusResult {
  // Charged sockets by memcg cgroup id (the eBPF walk reads sk_memcg;
  // sock_diag cannot, so it leaves this empty).
  std::unordered_map<uint64_t, SocketCensus> by_memcg;
  // Not charged, or seen by sock_diag: cgroup v2 id (0 = unknown).
  std::unordered_map<uint64_t, SocketCensus> by_cgroup2;
  size_t namespaces = 0, namespaces_failed = 0, sockets = 0;
  std::string first_error;

  // Unavailable when no namespace could be read. Otherwise OK, and the
  // first partial failure is logged once per `*logged` ("<collector>: N of M
  // network namespaces not <verb> (first: ...)").
  absl::Status Check(absl::string_view collector, absl::string_view verb, bool* logged) const;
};

}  // namespace sockpressure
