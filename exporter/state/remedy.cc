#include "exporter/state/remedy.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "exporter/common/bytes_format.h"

namespace sockpressure {
namespace {

// What the project's lab measured (tests/lab/README.md): Debian's kernels
// under QEMU, a hot anonymous ballast and a TCP receiver in one cgroup, a
// page-cache reader in another, zram swap; and the reporter's own workload
// ("proxy": nginx as a reverse proxy beside the ballast, fio's mmap randread
// job in a sibling cgroup), with each remedy applied in its own boot.
// Download or receiver throughput per condition.
constexpr const char* kLabSwapOff =
    "lab, 6.1, the reporter's workload (nginx proxy beside hot memory, fio in another cgroup): with swap off "
    "the proxy ran unthrottled at 3,412 kB/s against 702 kB/s with swap on (fio 7,137 KiB/s, no OOM kill); "
    "the lab's own receiver: 20,026 kB/s against 255 kB/s";
constexpr const char* kLabSwapMax =
    "lab, 6.1, the reporter's workload (nginx proxy beside hot memory, fio in another cgroup): with "
    "memory.swap.max=0 the proxy's cgroup was no longer scanned (376 pages) nor throttled, 2,473 kB/s against "
    "702 kB/s without it; fio 7,013 KiB/s (5,873 without), no OOM kill";
constexpr const char* kLabMglru61 =
    "lab, 6.1: with MGLRU on the lab's receiver cgroup was not scanned at all and not throttled (525 kB/s against "
    "218 kB/s off), but in the reporter's workload the proxy's cgroup was still scanned (404,179 pages, 170,394 "
    "freed), clamped part of the time and its hot memory swapped out (199,796 pages): 180 kB/s";
constexpr const char* kLabMglruOther =
    "lab: on 6.1 MGLRU on ended the throttling of the lab's receiver (525 kB/s against 218 kB/s off) but not of the "
    "reporter's proxy workload (180 kB/s, hot memory swapped out); on 6.12 the cgroup was still scanned without "
    "reclaim and throttled (641 kB/s; the reporter's proxy: 6 of 18 samples clamped, 1,793 kB/s)";
constexpr const char* kLabLow =
    "lab, 6.1, the reporter's workload: memory.low at the proxy cgroup's healthy memory.current left it unscanned "
    "(7 pages) and never clamped (702 kB/s throttled without it); memory.min the same (1 page, 1,961 kB/s); no "
    "OOM kill; on 6.12 memory.low protected only mostly (2 of 14 samples clamped), memory.min fully (0 of 10)";
constexpr const char* kLabNosocket =
    "lab, 6.1: reclaim still scanned without reclaiming (5,883,614 pages, 73 freed) but nothing was throttled: "
    "20,761 kB/s; the reporter's proxy: 3,888 kB/s, unthrottled";

bool Unset(const std::optional<uint64_t>& v) { return !v || *v == 0; }

// Swap is on and may take this cgroup's anon pages.
void SwapRemedies(const Snapshot& s, const CgroupView& c, const CgroupLimits& limits, std::vector<Remedy>* out) {
  if (!s.swap_enabled) return;
  std::string swap = "swap on";
  if (s.node.swaps) {
    absl::StrAppend(&swap, " (", s.node.swaps->devices, " area(s), ", HumanBytes(s.node.swaps->used_bytes), " used)");
  }
  if (!c.v1 && !(limits.swap_max && *limits.swap_max == 0)) {
    const std::string max = !limits.swap_max                   ? "not read"
                            : *limits.swap_max == UINT64_MAX ? "max (unset)"
                                                             : HumanBytes(*limits.swap_max);
    out->push_back({"swap_max", absl::StrCat("set memory.swap.max=0 on ", c.path.str()),
                    absl::StrCat(swap, "; its memory.swap.max is ", max,
                                 "; cost: its anon can no longer be swapped, so it reaches memory.max (OOM) sooner"),
                    kLabSwapMax});
  }
  out->push_back({"swap_off", "turn swap off on the node (swapoff -a)",
                  absl::StrCat(swap, "; cost: no cgroup on the node can swap"), kLabSwapOff});
}

void MglruRemedy(const Snapshot& s, std::vector<Remedy>* out) {
  if (!s.node.mglru_caps || s.node.MglruOn()) return;
  const std::string release = s.node.kernel_release.value_or("");
  out->push_back({"mglru", "turn MGLRU on (echo y > /sys/kernel/mm/lru_gen/enabled)",
                  absl::StrFormat("lru_gen present but off (0x%04x); cost: another reclaim algorithm for the whole "
                                  "node, test it first",
                                  *s.node.mglru_caps),
                  absl::StartsWith(release, "6.1.") ? kLabMglru61 : kLabMglruOther});
}

// No protection on a cgroup whose pages reclaim finds referenced: the
// scan-without-reclaim ratio is the hotness the kernel itself measured.
void LowRemedy(const CgroupView& c, const CgroupLimits& limits, std::vector<Remedy>* out) {
  // Unread limits (the core profile before the cgroup moved) are no evidence.
  if (c.v1 || !limits.memory_low || !Unset(limits.memory_low) || !Unset(limits.memory_min) || !c.best.ratio ||
      *c.best.ratio < 0.6) {
    return;
  }
  std::string evidence = absl::StrFormat("memory.low and memory.min unset; reclaim left %.0f%% of its scanned pages",
                                         *c.best.ratio * 100);
  if (c.anon_bytes && limits.memory_current) {
    absl::StrAppend(&evidence, "; anon ", HumanBytes(*c.anon_bytes), " of memory.current ", HumanBytes(*limits.memory_current));
  }
  absl::StrAppend(&evidence, "; cost: the protection is taken from the other cgroups");
  out->push_back({"memory_low", absl::StrCat("set memory.low (or memory.min) of ", c.path.str(),
                                             " to its working set (memory.current when healthy)"),
                  evidence, kLabLow});
}

}  // namespace

std::vector<Remedy> FittingRemedies(const Snapshot& s, const CgroupView& c) {
  std::vector<Remedy> out;
  if (!c.best.pressure_asserted && c.best.pressure_events_total == 0) return out;
  if (c.subtree_sockets == std::optional<uint64_t>(0)) return out;  // nothing to throttle
  if (!s.socket_accounting_enabled) return out;  // nosocket: no socket pressure reaches a socket
  const CgroupLimits& limits = LimitsOf(c.limits);
  SwapRemedies(s, c, limits, &out);
  MglruRemedy(s, &out);
  LowRemedy(c, limits, &out);
  out.push_back({"nosocket", "last resort: boot with cgroup.memory=nosocket",
                 "socket accounting on; cost: socket memory is no longer charged to, or bounded by, any cgroup",
                 kLabNosocket});
  return out;
}

}  // namespace sockpressure
