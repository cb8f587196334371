#include "exporter/commands/doctor_node.h"

#include <algorithm>
#include <cstddef>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "exporter/common/bytes_format.h"

namespace sockpressure::doctor {
namespace {

// A text for each value of an enum, in enum order, so that the enum indexes
// the table; InEnumOrder proves the order at compile time.
template <typename Enum>
struct EnumText {
  Enum key;
  const char* text;
};

template <typename Enum, size_t N>
constexpr bool InEnumOrder(const EnumText<Enum> (&rows)[N]) {
  for (size_t i = 0; i < N; ++i) {
    if (static_cast<size_t>(rows[i].key) != i) return false;
  }
  return true;
}

// What a tier's readings are, for every tier but none. Two tiers read one
// signal differently (WhyTier).
constexpr EnumText<Tier> kTierMeaning[] = {
    {Tier::kFentry, "eBPF probe: exact, per event"},
    {Tier::kKprobe, "eBPF probe: exact, per event"},
    {Tier::kIter, "eBPF cgroup iterator: reads memcg->socket_pressure directly (exact current state)"},
    {Tier::kTpBtf, "eBPF probe: exact, per event"},
    {Tier::kRawTp, "eBPF probe: exact, per event"},
    {Tier::kSockDiag, "sock_diag census of TCP sockets grouped by cgroup (rcv_ssthresh at 4*advmss = clamped)"},
    {Tier::kMemoryEvents, "memory.events.local sock_throttled: the kernel's own counter (6.19+)"},
    {Tier::kMemoryStat, "memory.stat pgscan/pgsteal deltas, own LRUs (children subtracted)"},
};
static_assert(std::size(kTierMeaning) == static_cast<size_t>(Tier::kNone) && InEnumOrder(kTierMeaning));

// Why a signal has no source (tier none); "{kernel}" is the running kernel's
// release. Reclaim and socket pressure say more on v1 and without cgroups.
constexpr EnumText<Signal> kWhyNone[] = {
    {Signal::kReclaim, "unavailable: memory.stat lacks pgscan/pgsteal and no eBPF probe attached"},
    {Signal::kSocketPressure, "unavailable: memory.stat lacks pgscan/pgsteal and no eBPF probe attached"},
    {Signal::kWindowClamps,
     "unavailable: needs the eBPF probes (fexit/kprobe __tcp_select_window or tcp:tcp_rcv_space_adjust)"},
    {Signal::kClampedSockets, "unavailable: needs the bpf_census (eBPF TCP iterator) or sock_diag collector"},
    {Signal::kSockThrottled,
     "unavailable: memory.events.local sock_throttled exists from kernel 6.19 (this is {kernel})"},
    {Signal::kRcvMemDrops,
     "unavailable: needs the eBPF skb:kfree_skb probe with the PROTO_MEM and TCP_OFO_QUEUE_PRUNE drop reasons (6.1 "
     "has them); node-wide TcpExt TCPRcvQDrop/TCPOFODrop still count them"},
    {Signal::kTcpPrunes,
     "unavailable: needs fentry or kprobes on tcp_collapse/tcp_prune_ofo_queue; node-wide TcpExt "
     "PruneCalled/TCPRcvCollapsed/OfoPruned still count them"},
};
static_assert(std::size(kWhyNone) == kSignalCount && InEnumOrder(kWhyNone));

// What tier `t` means for signal `s`, or why `s` has no source.
std::string WhyTier(Signal s, Tier t, const Snapshot& snap) {
  if (t == Tier::kIter && s == Signal::kClampedSockets) {
    return "eBPF TCP iterator: sockets counted in the kernel per memcg (rcv_ssthresh at 4*advmss = clamped)";
  }
  if (t == Tier::kMemoryStat && s == Signal::kSocketPressure) {
    return "estimated from memory.stat: a >=512-page reclaim window with >=60% of scanned pages not reclaimed arms "
           "1 s of socket pressure (the eBPF iter tier sees the real deadline)";
  }
  if (t != Tier::kNone) return kTierMeaning[static_cast<int>(t)].text;
  if (s == Signal::kReclaim || s == Signal::kSocketPressure) {
    if (IsV1(snap)) return "unavailable: cgroup v1 memory.stat has no pgscan/pgsteal; needs the eBPF probes";
    if (snap.cgroups.empty()) return "unavailable: no memory cgroup hierarchy found";
  }
  return absl::StrReplaceAll(kWhyNone[static_cast<int>(s)].text,
                             {{"{kernel}", snap.node.kernel_release.value_or("?")}});
}

std::string CgroupModeLine(const Snapshot& s) {
  if (s.cgroups.empty()) return absl::StrCat(CgroupModeName(s.cgroup_mode), ": no memory cgroup hierarchy found");
  if (IsV1(s)) {
    return absl::StrCat(CgroupModeName(s.cgroup_mode),
                        " (memory controller on cgroup v1): since ac8a52962164 (6.6, backported to 5.15.y/6.1.y) "
                        "vmpressure no longer throttles v1 sockets; only memory.kmem.tcp.limit_in_bytes does");
  }
  return absl::StrCat(CgroupModeName(s.cgroup_mode),
                      " (memory controller on cgroup v2): the vmpressure -> socket pressure path applies");
}

}  // namespace

bool IsV1(const Snapshot& s) {
  return s.cgroup_mode == CgroupMode::kLegacy || (!s.cgroups.empty() && s.cgroups.front().v1);
}

// Kernel, cgroup mode, swap, reclaim, socket accounting and global tcp_mem:
// the conditions false socket pressure needs.
void ReportNode(const Snapshot& s, std::string* r) {
  absl::StrAppend(r, "Node\n");
  absl::StrAppend(r, "  kernel             ", s.node.kernel_release.value_or("unknown (no sys/kernel/osrelease)"), "\n");
  absl::StrAppend(r, "  cgroup mode        ", CgroupModeLine(s), "\n");
  if (s.node.swaps && s.swap_enabled) {
    const Swaps& sw = *s.node.swaps;
    absl::StrAppend(r, "  swap               on: ", sw.devices, " area(s), ", HumanBytes(sw.size_bytes), ", ",
                    HumanBytes(sw.used_bytes),
                    " used. Reclaim scans anon pages it cannot free quickly: the usual precondition for false "
                    "socket pressure\n");
  } else if (s.node.swaps) {
    absl::StrAppend(r, "  swap               off: anon LRUs are not scanned, so scan-without-reclaim is rare\n");
  } else {
    absl::StrAppend(r, "  swap               unknown (no /proc/swaps)\n");
  }
  const bool mglru_on = s.node.MglruOn();
  if (s.node.mglru_caps) {
    absl::StrAppend(r, "  reclaim            ", mglru_on ? "MGLRU on" : "MGLRU off (classic active/inactive LRUs)",
                    absl::StrFormat(" (lru_gen/enabled 0x%04x): ", *s.node.mglru_caps),
                    mglru_on ? "reclaim picks pages by generation; in the lab it left the hot cgroup unscanned "
                               "(no throttling) on 6.1, but still scanned and throttled it on 6.12\n"
                             : "hot anon is scanned along with cold pages: the path to false socket pressure\n");
  } else {
    absl::StrAppend(r, "  reclaim            classic LRUs (no /sys/kernel/mm/lru_gen: kernel without MGLRU)\n");
  }
  absl::StrAppend(r, "  socket accounting  ",
                  !s.socket_accounting_enabled
                      ? "off (cgroup.memory=nosocket): sockets are not charged to memcgs and cannot be "
                        "throttled by memcg socket pressure"
                      : "on: TCP sockets are charged to their memcg and throttled while it is under pressure",
                  "\n");
  if (s.tcp_memory_pressure) {
    absl::StrAppend(r, "  global tcp_mem     ",
                    *s.tcp_memory_pressure ? "ABOVE tcp_mem[1]: global TCP memory pressure (a different cause, see "
                                             "runbook global-tcp-memory-pressure)"
                                           : "below the pressure threshold",
                    "\n");
  }
}

void ReportSignals(const Snapshot& s, std::string* r) {
  absl::StrAppend(r, "\nSignals (best source per signal, and why)\n");
  for (int i = 0; i < kSignalCount; ++i) {
    Signal sig = static_cast<Signal>(i);
    Tier t = s.signal_tier[i];
    absl::StrAppend(r, absl::StrFormat("  %-16s %-14s ", SignalName(sig), TierName(t)), WhyTier(sig, t, s), "\n");
  }
}

void ReportBlindTiers(const Snapshot& before, const Snapshot& s, std::string* r) {
  std::vector<std::string> lines;
  for (const TierDisagreement& d : s.tier_disagreements) {
    if (!d.blind) continue;
    lines.push_back(absl::StrCat(TierName(d.tier), " is blind to ", SignalName(d.signal), " here (", d.total,
                                 " spans short of the kernel's own count): not used"));
  }
  // Doctor's own two samples keep every tier's values (main.cc): the best
  // reclaim tier against the memory.stat replay, cgroup by cgroup.
  std::unordered_map<std::string, const CgroupView*> prev;
  for (const CgroupView& c : before.cgroups) prev[c.path] = &c;
  for (const CgroupView& c : s.cgroups) {
    const Tier t = c.tier[static_cast<int>(Signal::kReclaim)];
    auto p = prev.find(c.path);
    if (t >= Tier::kMemoryEvents || p == prev.end()) continue;
    auto moved = [&](Tier tier) -> uint64_t {
      auto now = c.tiers.find(tier), then = p->second->tiers.find(tier);
      if (now == c.tiers.end() || then == p->second->tiers.end()) return 0;
      return now->second.scanned_total - std::min(now->second.scanned_total, then->second.scanned_total);
    };
    const uint64_t ref = moved(Tier::kMemoryStat), saw = moved(t);
    if (!TierJudge::ReclaimShort(ref, saw)) continue;
    lines.push_back(absl::StrCat(TierName(t), " counted ", saw, " pages scanned in ", std::string(c.path),
                                 " where memory.stat counted ", ref, ": the eBPF tier attached but does not see "
                                 "(docs/kernel.md §9)"));
  }
  if (lines.empty()) return;
  absl::StrAppend(r, "\nTiers that do not see\n");
  for (const std::string& l : lines) absl::StrAppend(r, "  ! ", l, "\n");
}

void ReportCollectors(const Snapshot& s, std::string* r) {
  absl::StrAppend(r, "\nCollectors\n");
  for (const CollectorResult& c : s.collectors) {
    absl::StrAppend(r, absl::StrFormat("  %-10s %s (%.1f ms)", c.name, c.success ? "ok" : "FAILED",
                                       c.duration_seconds * 1000),
                    c.success ? "" : absl::StrCat(": ", c.error), "\n");
  }
  for (const ProbeStatus& p : s.probes) {
    // A loaded probe may be detached on purpose: the window-clamp program
    // while no memcg is under socket pressure (sources/bpf/clamp_arming.h).
    const char* state = p.attached ? "attached" : p.loaded ? "loaded, detached until socket pressure" : "not attached";
    absl::StrAppend(r, "  probe ", p.probe, " (", p.attach, "): ", state, "\n");
  }
}

}  // namespace sockpressure::doctor
