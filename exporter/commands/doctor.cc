#include "exporter/commands/doctor.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "exporter/common/bytes_format.h"
#include "exporter/commands/doctor_node.h"
#include "exporter/sampler/sampler.h"
#include "exporter/state/remedy.h"

namespace sockpressure {
namespace {

using doctor::IsV1;

std::string Who(const CgroupView& c) {
  std::string pod = NamespacedPod(LabelValue(c.identity, "namespace"), LabelValue(c.identity, "pod"));
  if (pod.empty()) return c.path;
  std::string ctr = LabelValue(c.identity, "container");
  return absl::StrCat(c.path.str(), " [", pod, ctr.empty() ? "" : "/", ctr, "]");
}

using ByPath = std::unordered_map<std::string, const CgroupView*>;

ByPath CgroupsByPath(const Snapshot& s) {
  ByPath by_path;
  for (const CgroupView& c : s.cgroups) by_path[c.path] = &c;
  return by_path;
}

struct Finding {
  const CgroupView* c;
  size_t index = 0;  // in the snapshot's cgroups
  uint64_t clamps_delta = 0, throttled_delta = 0;
  double pressure_seconds_delta = 0;
  bool own = false;
  size_t inherited_below = 0;
  // The kernel asserted pressure, but the census counted no TCP socket in
  // the cgroup or below it, and no socket showed a clamp: nothing throttled.
  bool nothing_to_throttle = false;
};

// The cgroups whose sockets the kernel pruned or dropped data of in the
// interval, appended to `r`; false when none (then nothing is written).
// Pruning without socket pressure is the socket's own buffer (SO_RCVBUF,
// tcp_rmem) overrun, not memcg throttling, so it does not change the verdict.
bool ReportPruning(const ByPath& prev, const Snapshot& s, std::string* r) {
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

void ReportHeader(const Snapshot& s, const DoctorOptions& opt, std::string* r) {
  absl::StrAppend(r, "sockpressure doctor (sockpressure_exporter ", opt.version, ")\n");
  absl::StrAppend(r, "Two samples ", absl::StrFormat("%.1f", s.interval_seconds), " s apart",
                  opt.paths_description.empty() ? "" : absl::StrCat(" from ", opt.paths_description), ".\n\n");
}


// The cgroups of `s` throttled in the interval by their own socket pressure,
// clamps, clamped sockets or sock_throttled; each counts the cgroups below it
// throttled only through it.
std::vector<Finding> FindThrottled(const ByPath& prev, const Snapshot& s) {
  std::vector<Finding> findings;
  std::vector<size_t> inherited(s.cgroups.size(), 0);
  for (size_t i = 0; i < s.cgroups.size(); ++i) {
    const CgroupView& c = s.cgroups[i];
    auto it = prev.find(c.path);
    const CgroupView* p = it != prev.end() && it->second->id == c.id ? it->second : nullptr;
    Finding f;
    f.c = &c;
    f.index = i;
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
      f.nothing_to_throttle = c.subtree_sockets == std::optional<uint64_t>(0) && f.clamps_delta == 0 &&
                              clamped == 0 && f.throttled_delta == 0;
      findings.push_back(f);
    } else if (c.pressure_active) {
      // Throttled only through an ancestor: count it under the nearest
      // ancestor that is listed instead of repeating the whole subtree.
      int a = c.parent;
      while (a >= 0 && !s.cgroups[static_cast<size_t>(a)].best.pressure_asserted) a = s.cgroups[static_cast<size_t>(a)].parent;
      if (a >= 0) ++inherited[static_cast<size_t>(a)];
    }
  }
  for (Finding& f : findings) f.inherited_below = inherited[f.index];
  return findings;
}

// One line of facts about a throttled cgroup, and the count inheriting it.
void ReportFinding(const Finding& f, std::string* r) {
  const CgroupView& c = *f.c;
  std::vector<std::string> facts;
  facts.push_back(f.own ? "own socket pressure asserted" : "sockets clamped");
  if (c.best.ratio) facts.push_back(absl::StrFormat("scan-without-reclaim %.2f", *c.best.ratio));
  if (f.pressure_seconds_delta > 0) facts.push_back(absl::StrFormat("pressure %.1f s", f.pressure_seconds_delta));
  if (c.best.census) {
    facts.push_back(absl::StrCat("sockets ", c.best.census->sockets, ", clamped ", c.best.census->clamped));
  }
  if (c.subtree_sockets && (!c.best.census || *c.subtree_sockets != c.best.census->sockets)) {
    facts.push_back(absl::StrCat("sockets in it and below ", *c.subtree_sockets));
  }
  if (f.clamps_delta > 0) facts.push_back(absl::StrCat("window clamps +", f.clamps_delta));
  if (f.throttled_delta > 0) facts.push_back(absl::StrCat("sock_throttled +", f.throttled_delta));
  const CgroupLimits& limits = LimitsOf(c.limits);
  if (limits.memory_current && limits.memory_limit()) {
    facts.push_back(absl::StrCat("memory ", HumanBytes(*limits.memory_current), " of max ", HumanBytes(*limits.memory_limit())));
  }
  if (c.swap_bytes && *c.swap_bytes > 0) facts.push_back(absl::StrCat("swap ", HumanBytes(*c.swap_bytes)));
  absl::StrAppend(r, "  - ", Who(c), ": ", absl::StrJoin(facts, "; "), "\n");
  if (f.inherited_below > 0) {
    absl::StrAppend(r, "      and ", f.inherited_below, " cgroup(s) below it inherit the pressure\n");
  }
}

// Who caused it: the (at most five) cgroups reclaim freed the most pages
// from in the interval.
void ReportReclaimers(const ByPath& prev, const Snapshot& s, std::string* r) {
  std::vector<std::pair<uint64_t, const CgroupView*>> reclaimers;
  for (const CgroupView& c : s.cgroups) {
    auto it = prev.find(c.path);
    if (it == prev.end()) continue;
    const CgroupView* p = it->second;
    uint64_t d = c.best.reclaimed_total - std::min(c.best.reclaimed_total, p->best.reclaimed_total);
    if (d > 0) reclaimers.emplace_back(d, &c);
  }
  std::sort(reclaimers.begin(), reclaimers.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  if (reclaimers.empty()) return;
  absl::StrAppend(r, "  Reclaim in the interval (pages reclaimed from each cgroup's own LRUs):\n");
  for (size_t i = 0; i < reclaimers.size() && i < 5; ++i) {
    absl::StrAppend(r, "    ", Who(*reclaimers[i].second), ": ", reclaimers[i].first, "\n");
  }
}

void ReportThrottling(const ByPath& prev, const Snapshot& s, const std::vector<Finding>& findings, std::string* r) {
  absl::StrAppend(r, "\nThrottling now\n");
  if (findings.empty()) {
    absl::StrAppend(r, "  none: no cgroup's TCP sockets were under memcg socket pressure in the last ",
                    absl::StrFormat("%.1f", s.interval_seconds), " s.\n");
    return;
  }
  const size_t idle = static_cast<size_t>(
      std::count_if(findings.begin(), findings.end(), [](const Finding& f) { return f.nothing_to_throttle; }));
  if (idle < findings.size()) {
    absl::StrAppend(r, "  FOUND in ", findings.size() - idle, " cgroup(s):\n");
    for (const Finding& f : findings) {
      if (!f.nothing_to_throttle) ReportFinding(f, r);
    }
  } else {
    absl::StrAppend(r, "  none: no TCP socket was under memcg socket pressure in the last ",
                    absl::StrFormat("%.1f", s.interval_seconds), " s.\n");
  }
  if (idle > 0) {
    // The kernel's truth, said as such; not throttling, so no verdict and no page.
    absl::StrAppend(r, "  Pressure, nothing to throttle, in ", idle,
                    " cgroup(s): the kernel asserted socket pressure, but no TCP socket is charged to them or "
                    "below them:\n");
    for (const Finding& f : findings) {
      if (f.nothing_to_throttle) ReportFinding(f, r);
    }
  }
  ReportReclaimers(prev, s, r);
}

// The exit code, and the verdict line saying it.
int ReportVerdict(const Snapshot& s, bool throttled, std::string* r) {
  int code = throttled ? kDoctorThrottling : kDoctorNoThrottling;
  std::string verdict = throttled ? "THROTTLING FOUND" : "no throttling found";
  const bool cgroupfs_failed = std::any_of(s.collectors.begin(), s.collectors.end(), [](const CollectorResult& c) {
    return c.name == "cgroupfs" && !c.success;
  });
  if (!throttled && (s.cgroups.empty() || cgroupfs_failed)) {
    code = kDoctorError;
    verdict = "cannot tell: no readable memory cgroup hierarchy (check --path.cgroupfs)";
  }
  absl::StrAppend(r, "\nVerdict: ", verdict, " (exit ", code, ")\n");
  return code;
}

// What to do about what the report found, most specific first.
std::vector<std::string> Remedies(const Snapshot& s, bool throttled) {
  const bool nosocket = !s.socket_accounting_enabled;
  std::vector<std::string> remedies;
  if (nosocket) {
    remedies.push_back(
        "Nothing to do for memcg socket pressure: cgroup.memory=nosocket already disables it (socket memory is only "
        "bounded by the global net.ipv4.tcp_mem).");
  } else if (IsV1(s)) {
    remedies.push_back(
        "cgroup v1: if this kernel predates 6.6 and lacks the ac8a52962164 backport, v1 sockets with tcp "
        "accounting active can still be throttled by vmpressure; otherwise only memory.kmem.tcp.limit_in_bytes "
        "matters (watch memory.kmem.tcp.failcnt). Moving to cgroup v2 keeps the vmpressure path; it does not "
        "remove it.");
  }
  if (throttled) {
    remedies.push_back(
        "Raise memory.high / memory.max (or shrink the workload) if the cgroup reclaims against its own limit.");
    remedies.push_back(
        "Reduce page-cache pressure from the top reclaimers above (drop-behind / posix_fadvise(DONTNEED) for bulk "
        "I/O, separate cgroups for batch jobs).");
    remedies.push_back("Raising net.ipv4.tcp_rmem does NOT stop the clamp (the window is pulled to 4*advmss).");
  } else if (!nosocket && !IsV1(s) && s.swap_enabled) {
    remedies.push_back(
        "No throttling now, but swap is on: the precondition exists. Keep the agent running and watch "
        "SockPressureReclaimScanWithoutReclaim / SockPressureTCPThrottled.");
  }
  return remedies;
}

// For each cgroup throttled by its own pressure, the remedies that fit what
// the agent sees of it (state/remedy.h), in order, with their evidence and
// the lab's measured effect.
void ReportFittingRemedies(const Snapshot& s, const std::vector<Finding>& findings, std::string* r) {
  for (const Finding& f : findings) {
    if (f.nothing_to_throttle || !f.own) continue;
    const std::vector<Remedy> fitting = FittingRemedies(s, *f.c);
    if (fitting.empty()) continue;
    absl::StrAppend(r, "\nRemedies that fit ", Who(*f.c), " (first fits best; the agent changes nothing)\n");
    for (size_t i = 0; i < fitting.size(); ++i) {
      const Remedy& m = fitting[i];
      absl::StrAppend(r, "  ", i + 1, ". ", m.action, "\n     seen: ", m.evidence, "\n     measured: ", m.effect, "\n");
    }
  }
}

// The runbooks (under `base`) for what the report found, in reading order.
std::vector<std::string> Runbooks(const Snapshot& s, bool throttled, bool pruned, const std::string& base) {
  std::vector<std::string> runbooks;
  if (throttled) {
    runbooks.push_back(absl::StrCat(base, "tcp-throttled.md"));
  } else if (s.socket_accounting_enabled && !IsV1(s) && s.swap_enabled) {
    runbooks.push_back(absl::StrCat(base, "reclaim-scan-without-reclaim.md"));
  }
  if (pruned) runbooks.push_back(absl::StrCat(base, "tcp-pruning.md"));
  if (s.tcp_memory_pressure.value_or(false)) runbooks.push_back(absl::StrCat(base, "global-tcp-memory-pressure.md"));
  const Tier pressure = s.signal_tier[static_cast<int>(Signal::kSocketPressure)];
  const bool collectors_ok = std::all_of(s.collectors.begin(), s.collectors.end(),
                                         [](const CollectorResult& c) { return c.success; });
  if (pressure == Tier::kNone || pressure == Tier::kMemoryStat || !collectors_ok) {
    runbooks.push_back(absl::StrCat(base, "agent-degraded.md"));
  }
  return runbooks;
}

// A titled list, or nothing when the list is empty.
void ReportList(const char* title, const std::vector<std::string>& items, std::string* r) {
  if (items.empty()) return;
  absl::StrAppend(r, "\n", title, "\n");
  for (const std::string& m : items) absl::StrAppend(r, "  - ", m, "\n");
}

}  // namespace

int RenderDoctorReport(const Snapshot& before, const Snapshot& s, const DoctorOptions& opt, std::string* out) {
  const ByPath prev = CgroupsByPath(before);
  ReportHeader(s, opt, out);
  doctor::ReportNode(s, out);
  doctor::ReportSignals(s, out);
  doctor::ReportBlindTiers(before, s, out);
  doctor::ReportCollectors(s, out);
  const std::vector<Finding> findings = FindThrottled(prev, s);
  ReportThrottling(prev, s, findings, out);
  const bool pruned = ReportPruning(prev, s, out);
  const bool throttled = std::any_of(findings.begin(), findings.end(),
                                     [](const Finding& f) { return !f.nothing_to_throttle; });
  const int code = ReportVerdict(s, throttled, out);
  ReportFittingRemedies(s, findings, out);
  ReportList(throttled ? "Also check" : "Remedies that apply", Remedies(s, throttled), out);
  ReportList("Runbooks", Runbooks(s, throttled, pruned, opt.runbook_base), out);
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
