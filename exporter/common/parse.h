// Parsers for the text formats the kernel uses in procfs and cgroupfs.
// All are pure functions over a string: they never touch the filesystem, so
// fixtures and fuzzing need no files. Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

namespace sockpressure {

// "key value" per line (memory.stat, memory.events, /proc/vmstat).
struct FlatKeyed {
  std::map<std::string, uint64_t, std::less<>> values;
  // Lines that were not "word unsigned-integer"; kept so the caller can say
  // what was wrong, while the good lines are still used.
  std::vector<std::string> bad_lines;

  std::optional<uint64_t> Get(absl::string_view key) const;
};
FlatKeyed ParseFlatKeyed(absl::string_view text);

// Pressure stall information (/proc/pressure/memory, memory.pressure).
struct PsiLine {
  double avg10 = 0, avg60 = 0, avg300 = 0;
  uint64_t total_us = 0;
};
struct Psi {
  std::optional<PsiLine> some;
  std::optional<PsiLine> full;
  bool malformed = false;
};
Psi ParsePsi(absl::string_view text);

// /proc/net/netstat and /proc/net/snmp: header line + value line per prefix.
// Returns prefix -> (name -> value), e.g. ["TcpExt"]["PruneCalled"].
struct ProtoCounters {
  std::map<std::string, std::map<std::string, uint64_t, std::less<>>, std::less<>> tables;
  bool malformed = false;
};
ProtoCounters ParseNetstat(absl::string_view text);

// /proc/net/sockstat: "TCP: inuse 5 orphan 0 tw 0 alloc 7 mem 1".
// Returns "TCP" -> ("mem" -> 1).
std::map<std::string, std::map<std::string, uint64_t, std::less<>>, std::less<>> ParseSockstat(
    absl::string_view text);

// Whitespace separated unsigned integers (/proc/sys/net/ipv4/tcp_mem).
std::optional<std::vector<uint64_t>> ParseUintList(absl::string_view text);

// /proc/swaps: number of active swap areas and their total/used bytes.
struct Swaps {
  int devices = 0;
  uint64_t size_bytes = 0;
  uint64_t used_bytes = 0;
  bool malformed = false;
};
Swaps ParseSwaps(absl::string_view text);

// True when the kernel command line has cgroup.memory=nosocket (possibly in a
// comma list such as cgroup.memory=nokmem,nosocket).
bool CmdlineHasNosocket(absl::string_view cmdline);

}  // namespace sockpressure
