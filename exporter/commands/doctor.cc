#include "exporter/commands/doctor.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "exporter/sampler/sampler.h"

namespace sockpressure {
namespace {

std::string Size(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  return absl::StrFormat("%.1f %s", v, units[u]);
}

std::string Who(const CgroupView& c) {
  std::string pod = NamespacedPod(LabelValue(c.identity, "namespace"), LabelValue(c.identity, "pod"));
  if (pod.empty()) return c.path;
  std::string ctr = LabelValue(c.identity, "container");
  return absl::StrCat(c.path.str(), " [", pod, ctr.empty() ? "" : "/", ctr, "]");
}

// What a tier means for a signal, or why a signal has no source (tier
// none). The texts are data (doctor_tiers.json), the build writes the rows;
// the first row that matches is used.
struct TierText {
  const char* tier;    // TierName
  const char* signal;  // SignalName; empty: every signal
  const char* node;    // empty: any; "v1": a cgroup v1 hierarchy; "no_cgroups": no memory cgroup found
  const char* text;    // "{kernel}": the running kernel's release
};

constexpr TierText kTierTexts[] = {
#include "exporter/commands/doctor_tiers.inc"
};

std::string WhyTier(Signal s, Tier t, const Snapshot& snap) {
  const bool v1 = snap.cgroup_mode == CgroupMode::kLegacy ||
                  (!snap.cgroups.empty() && snap.cgroups.front().v1);
  for (const TierText& row : kTierTexts) {
    const absl::string_view signal = row.signal, node = row.node;
    if (TierName(t) != row.tier || (!signal.empty() && SignalName(s) != signal)) continue;
    if ((node == "v1" && !v1) || (node == "no_cgroups" && !snap.cgroups.empty())) continue;
    return absl::StrReplaceAll(row.text, {{"{kernel}", snap.node.kernel_release.value_or("?")}});
  }
  return "unavailable";
}

struct Finding {
  const CgroupView* c;
  uint64_t clamps_delta = 0, throttled_delta = 0;
  double pressure_seconds_delta = 0;
  bool own = false;
  size_t inherited_below = 0;
};

// The cgroups whose sockets the kernel pruned or dropped data of in the
// interval, appended to `r`; false when none (then nothing is written).
// Pruning without socket pressure is the socket's own buffer (SO_RCVBUF,
// tcp_rmem) overrun, not memcg throttling, so it does not change the verdict.
bool ReportPruning(const Snapshot& before, const Snapshot& s, std::string* r) {
  std::unordered_map<std::string, const CgroupView*> prev;
  for (const CgroupView& c : before.cgroups) prev[c.path] = &c;
  auto d = [](uint64_t now, uint64_t then) { return now - std::min(now, then); };
  std::vector<std::string> lines;
  for (const CgroupView& c : s.cgroups) {
    auto it = prev.find(c.path);
    if (it == prev.end() || it->second->id != c.id) continue;
    const PruneCounters& a = it->second->best.prunes_total;
    const PruneCounters& b = c.best.prunes_total;
    std::vector<std::string> facts;
    if (uint64_t n = d(b.collapses, a.collapses)) facts.push_back(absl::StrCat("receive queue collapsed +", n));
    if (uint64_t n = d(b.ofo_prunes, a.ofo_prunes)) facts.push_back(absl::StrCat("out-of-order queue pruned +", n));
    if (uint64_t n = d(b.ofo_pruned_segs, a.ofo_pruned_segs)) {
      facts.push_back(absl::StrCat("out-of-order segments thrown away +", n));
    }
    if (uint64_t n = d(b.rcv_mem_drops, a.rcv_mem_drops)) {
      facts.push_back(absl::StrCat("segments DROPPED for lack of receive memory +", n));
    }
    if (facts.empty()) continue;
    facts.push_back(c.pressure_active ? "under memcg socket pressure" : "no socket pressure: its own buffer overran");
    lines.push_back(absl::StrCat("  - ", Who(c), ": ", absl::StrJoin(facts, "; "), "\n"));
  }
  if (lines.empty()) return false;
  absl::StrAppend(r, "\nPruning and receive drops (the sender must retransmit what was dropped)\n");
  for (const std::string& l : lines) absl::StrAppend(r, l);
  return true;
}

}  // namespace

int RenderDoctorReport(const Snapshot& before, const Snapshot& s, const DoctorOptions& opt, std::string* out) {
  std::string& r = *out;
  const std::string& rb = opt.runbook_base;
  absl::StrAppend(&r, "sockpressure doctor (sockpressure_exporter ", opt.version, ")\n");
  absl::StrAppend(&r, "Two samples ", absl::StrFormat("%.1f", s.interval_seconds), " s apart",
                  opt.paths_description.empty() ? "" : absl::StrCat(" from ", opt.paths_description), ".\n\n");

  // ---- Node -------------------------------------------------------------
  const bool nosocket = !s.socket_accounting_enabled;
  const bool v1 = s.cgroup_mode == CgroupMode::kLegacy || (!s.cgroups.empty() && s.cgroups.front().v1);
  absl::StrAppend(&r, "Node\n");
  absl::StrAppend(&r, "  kernel             ", s.node.kernel_release.value_or("unknown (no sys/kernel/osrelease)"), "\n");
  std::string mode;
  if (s.cgroups.empty()) {
    mode = absl::StrCat(CgroupModeName(s.cgroup_mode), ": no memory cgroup hierarchy found");
  } else if (v1) {
    mode = absl::StrCat(CgroupModeName(s.cgroup_mode),
                        " (memory controller on cgroup v1): since ac8a52962164 (6.6, backported to 5.15.y/6.1.y) "
                        "vmpressure no longer throttles v1 sockets; only memory.kmem.tcp.limit_in_bytes does");
  } else {
    mode = absl::StrCat(CgroupModeName(s.cgroup_mode),
                        " (memory controller on cgroup v2): the vmpressure -> socket pressure path applies");
  }
  absl::StrAppend(&r, "  cgroup mode        ", mode, "\n");
  if (s.node.swaps && s.swap_enabled) {
    const Swaps& sw = *s.node.swaps;
    absl::StrAppend(&r, "  swap               on: ", sw.devices, " area(s), ", Size(sw.size_bytes), ", ",
                    Size(sw.used_bytes),
                    " used. Reclaim scans anon pages it cannot free quickly: the usual precondition for false "
                    "socket pressure\n");
  } else if (s.node.swaps) {
    absl::StrAppend(&r, "  swap               off: anon LRUs are not scanned, so scan-without-reclaim is rare\n");
  } else {
    absl::StrAppend(&r, "  swap               unknown (no /proc/swaps)\n");
  }
  const bool mglru_on = s.node.mglru_caps && (*s.node.mglru_caps & 1);
  if (s.node.mglru_caps) {
    absl::StrAppend(&r, "  reclaim            ", mglru_on ? "MGLRU on" : "MGLRU off (classic active/inactive LRUs)",
                    absl::StrFormat(" (lru_gen/enabled 0x%04x): ", *s.node.mglru_caps),
                    mglru_on ? "reclaim picks pages by generation; in the lab it left the hot cgroup unscanned "
                               "(no throttling) on 6.1, but still scanned and throttled it on 6.12\n"
                             : "hot anon is scanned along with cold pages: the path to false socket pressure\n");
  } else {
    absl::StrAppend(&r, "  reclaim            classic LRUs (no /sys/kernel/mm/lru_gen: kernel without MGLRU)\n");
  }
  absl::StrAppend(&r, "  socket accounting  ",
                  nosocket ? "off (cgroup.memory=nosocket): sockets are not charged to memcgs and cannot be "
                             "throttled by memcg socket pressure"
                           : "on: TCP sockets are charged to their memcg and throttled while it is under pressure",
                  "\n");
  if (s.tcp_memory_pressure) {
    absl::StrAppend(&r, "  global tcp_mem     ",
                    *s.tcp_memory_pressure ? "ABOVE tcp_mem[1]: global TCP memory pressure (a different cause, see "
                                             "runbook global-tcp-memory-pressure)"
                                           : "below the pressure threshold",
                    "\n");
  }

  // ---- Signals ----------------------------------------------------------
  absl::StrAppend(&r, "\nSignals (best source per signal, and why)\n");
  for (int i = 0; i < kSignalCount; ++i) {
    Signal sig = static_cast<Signal>(i);
    Tier t = s.signal_tier[i];
    absl::StrAppend(&r, absl::StrFormat("  %-16s %-14s ", SignalName(sig), TierName(t)), WhyTier(sig, t, s), "\n");
  }
  bool collectors_ok = true;
  bool cgroupfs_failed = false;
  absl::StrAppend(&r, "\nCollectors\n");
  for (const CollectorResult& c : s.collectors) {
    collectors_ok = collectors_ok && c.success;
    if (c.name == "cgroupfs" && !c.success) cgroupfs_failed = true;
    absl::StrAppend(&r, absl::StrFormat("  %-10s %s (%.1f ms)", c.name, c.success ? "ok" : "FAILED",
                                        c.duration_seconds * 1000),
                    c.success ? "" : absl::StrCat(": ", c.error), "\n");
  }
  for (const ProbeStatus& p : s.probes) {
    absl::StrAppend(&r, "  probe ", p.probe, " (", p.attach, "): ", p.attached ? "attached" : "not attached", "\n");
  }

  // ---- Throttling now -----------------------------------------------------
  std::unordered_map<std::string, const CgroupView*> prev;
  for (const CgroupView& c : before.cgroups) prev[c.path] = &c;
  std::vector<Finding> findings;
  std::vector<size_t> inherited(s.cgroups.size(), 0);
  for (size_t i = 0; i < s.cgroups.size(); ++i) {
    const CgroupView& c = s.cgroups[i];
    const CgroupView* p = prev.count(c.path) && prev[c.path]->id == c.id ? prev[c.path] : nullptr;
    Finding f;
    f.c = &c;
    f.own = c.best.pressure_asserted;
    if (p) {
      f.clamps_delta = c.best.clamps_total - std::min(c.best.clamps_total, p->best.clamps_total);
      f.pressure_seconds_delta = std::max(0.0, c.best.pressure_seconds_total - p->best.pressure_seconds_total);
      f.throttled_delta = c.best.sock_throttled_total.value_or(0) -
                          std::min(c.best.sock_throttled_total.value_or(0), p->best.sock_throttled_total.value_or(0));
    }
    const uint64_t clamped = c.best.census ? c.best.census->clamped : 0;
    bool direct = f.own || f.clamps_delta > 0 || clamped > 0 || f.throttled_delta > 0 || f.pressure_seconds_delta > 0;
    if (direct) {
      findings.push_back(f);
    } else if (c.pressure_active) {
      // Throttled only through an ancestor: count it under the nearest
      // ancestor that is listed instead of repeating the whole subtree.
      int a = c.parent;
      while (a >= 0 && !s.cgroups[static_cast<size_t>(a)].best.pressure_asserted) a = s.cgroups[static_cast<size_t>(a)].parent;
      if (a >= 0) ++inherited[static_cast<size_t>(a)];
    }
  }
  for (Finding& f : findings) f.inherited_below = inherited[static_cast<size_t>(f.c - s.cgroups.data())];

  absl::StrAppend(&r, "\nThrottling now\n");
  if (findings.empty()) {
    absl::StrAppend(&r, "  none: no cgroup's TCP sockets were under memcg socket pressure in the last ",
                    absl::StrFormat("%.1f", s.interval_seconds), " s.\n");
  } else {
    absl::StrAppend(&r, "  FOUND in ", findings.size(), " cgroup(s):\n");
    for (const Finding& f : findings) {
      const CgroupView& c = *f.c;
      std::vector<std::string> facts;
      facts.push_back(f.own ? "own socket pressure asserted" : "sockets clamped");
      if (c.best.ratio) facts.push_back(absl::StrFormat("scan-without-reclaim %.2f", *c.best.ratio));
      if (f.pressure_seconds_delta > 0) facts.push_back(absl::StrFormat("pressure %.1f s", f.pressure_seconds_delta));
      if (c.best.census) {
        facts.push_back(absl::StrCat("sockets ", c.best.census->sockets, ", clamped ", c.best.census->clamped));
      }
      if (f.clamps_delta > 0) facts.push_back(absl::StrCat("window clamps +", f.clamps_delta));
      if (f.throttled_delta > 0) facts.push_back(absl::StrCat("sock_throttled +", f.throttled_delta));
      const CgroupLimits& limits = LimitsOf(c.limits);
      if (limits.memory_current && limits.memory_limit()) {
        facts.push_back(absl::StrCat("memory ", Size(*limits.memory_current), " of max ", Size(*limits.memory_limit())));
      }
      if (c.swap_bytes && *c.swap_bytes > 0) facts.push_back(absl::StrCat("swap ", Size(*c.swap_bytes)));
      absl::StrAppend(&r, "  - ", Who(c), ": ", absl::StrJoin(facts, "; "), "\n");
      if (f.inherited_below > 0) {
        absl::StrAppend(&r, "      and ", f.inherited_below, " cgroup(s) below it inherit the pressure\n");
      }
    }
    // Who caused it: the cgroups reclaim freed pages from in the interval.
    std::vector<std::pair<uint64_t, const CgroupView*>> reclaimers;
    for (const CgroupView& c : s.cgroups) {
      const CgroupView* p = prev.count(c.path) ? prev[c.path] : nullptr;
      if (!p) continue;
      uint64_t d = c.best.reclaimed_total - std::min(c.best.reclaimed_total, p->best.reclaimed_total);
      if (d > 0) reclaimers.emplace_back(d, &c);
    }
    std::sort(reclaimers.begin(), reclaimers.end(),
              [](const auto& a, const auto& b) { return a.first > b.first; });
    if (!reclaimers.empty()) {
      absl::StrAppend(&r, "  Reclaim in the interval (pages reclaimed from each cgroup's own LRUs):\n");
      for (size_t i = 0; i < reclaimers.size() && i < 5; ++i) {
        absl::StrAppend(&r, "    ", Who(*reclaimers[i].second), ": ", reclaimers[i].first, "\n");
      }
    }
  }

  // ---- Pruning and drops ----------------------------------------------------
  const bool pruned = ReportPruning(before, s, &r);

  // ---- Verdict and remedies -------------------------------------------------
  int code = findings.empty() ? kDoctorNoThrottling : kDoctorThrottling;
  std::string verdict = findings.empty() ? "no throttling found" : "THROTTLING FOUND";
  if (findings.empty() && (s.cgroups.empty() || cgroupfs_failed)) {
    code = kDoctorError;
    verdict = "cannot tell: no readable memory cgroup hierarchy (check --path.cgroupfs)";
  }
  absl::StrAppend(&r, "\nVerdict: ", verdict, " (exit ", code, ")\n");

  std::vector<std::string> remedies;
  std::vector<std::string> runbooks;
  if (nosocket) {
    remedies.push_back(
        "Nothing to do for memcg socket pressure: cgroup.memory=nosocket already disables it (socket memory is only "
        "bounded by the global net.ipv4.tcp_mem).");
  } else if (v1) {
    remedies.push_back(
        "cgroup v1: if this kernel predates 6.6 and lacks the ac8a52962164 backport, v1 sockets with tcp "
        "accounting active can still be throttled by vmpressure; otherwise only memory.kmem.tcp.limit_in_bytes "
        "matters (watch memory.kmem.tcp.failcnt). Moving to cgroup v2 keeps the vmpressure path; it does not "
        "remove it.");
  }
  if (!findings.empty()) {
    runbooks.push_back(absl::StrCat(rb, "tcp-throttled.md"));
    if (s.swap_enabled) {
      remedies.push_back(
          "Set memory.swap.max=0 on the throttled cgroup(s) (or turn swap off): without swap, anon pages are not "
          "scanned and reclaim stops reporting scan-without-reclaim. Trade-off: no swap buffer before OOM.");
    }
    if (s.node.mglru_caps && !mglru_on) {
      remedies.push_back(
          "Switch reclaim to MGLRU (echo y > /sys/kernel/mm/lru_gen/enabled): on 6.1 the lab's throttled cgroup "
          "was then not scanned at all and not throttled; on 6.12 it still was. Trade-off: a different reclaim "
          "algorithm for the whole node; test it under your workload first.");
    }
    remedies.push_back(
        "Raise memory.low / memory.min of the throttled cgroup(s) to shield them from global reclaim. "
        "Trade-off: the protection is taken from other cgroups.");
    remedies.push_back(
        "Raise memory.high / memory.max (or shrink the workload) if the cgroup reclaims against its own limit.");
    remedies.push_back(
        "Reduce page-cache pressure from the top reclaimers above (drop-behind / posix_fadvise(DONTNEED) for bulk "
        "I/O, separate cgroups for batch jobs).");
    remedies.push_back(
        "Last resort: boot with cgroup.memory=nosocket (removes memcg socket accounting and this throttling; "
        "socket memory is then unbounded per cgroup). Raising net.ipv4.tcp_rmem does NOT stop the clamp.");
  } else if (!nosocket && !v1 && s.swap_enabled) {
    remedies.push_back(
        "No throttling now, but swap is on: the precondition exists. Keep the agent running and watch "
        "SockPressureReclaimScanWithoutReclaim / SockPressureTCPThrottled.");
    runbooks.push_back(absl::StrCat(rb, "reclaim-scan-without-reclaim.md"));
  }
  if (pruned) runbooks.push_back(absl::StrCat(rb, "tcp-pruning.md"));
  if (s.tcp_memory_pressure.value_or(false)) runbooks.push_back(absl::StrCat(rb, "global-tcp-memory-pressure.md"));
  if (s.signal_tier[static_cast<int>(Signal::kSocketPressure)] == Tier::kNone ||
      s.signal_tier[static_cast<int>(Signal::kSocketPressure)] == Tier::kMemoryStat || !collectors_ok) {
    runbooks.push_back(absl::StrCat(rb, "agent-degraded.md"));
  }
  if (!remedies.empty()) {
    absl::StrAppend(&r, "\nRemedies that apply\n");
    for (const std::string& m : remedies) absl::StrAppend(&r, "  - ", m, "\n");
  }
  if (!runbooks.empty()) {
    absl::StrAppend(&r, "\nRunbooks\n");
    for (const std::string& m : runbooks) absl::StrAppend(&r, "  - ", m, "\n");
  }
  return code;
}

int RunDoctor(Sampler& sampler, const DoctorOptions& options) {
  std::shared_ptr<const Snapshot> first = sampler.SampleOnce();
  std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int64_t>(options.interval_seconds * 1000)));
  std::shared_ptr<const Snapshot> second = sampler.SampleOnce();
  std::string report;
  int code = RenderDoctorReport(*first, *second, options, &report);
  std::fputs(report.c_str(), stdout);
  std::fflush(stdout);
  return code;
}

}  // namespace sockpressure
