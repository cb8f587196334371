#include "exporter/outputs/episodes_page.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "exporter/common/cgroup_label.h"
#include "exporter/outputs/episode_timeline.h"
#include "exporter/state/snapshot.h"

namespace sockpressure {
namespace {

std::string Escape(absl::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string When(const google::protobuf::Timestamp& t) {
  absl::Time at = absl::FromUnixSeconds(t.seconds()) + absl::Nanoseconds(t.nanos());
  return absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", at, absl::UTCTimeZone());
}

std::string Pod(const google::protobuf::Map<std::string, std::string>& identity) {
  auto get = [&identity](const char* key) {
    auto it = identity.find(key);
    return it == identity.end() ? std::string() : it->second;
  };
  std::string s = NamespacedPod(get("namespace"), get("pod"));
  if (s.empty()) return "";
  auto ctr = identity.find("container");
  if (ctr != identity.end()) absl::StrAppend(&s, " (", ctr->second, ")");
  return s;
}

std::string Ratio(bool has, double v) { return has ? absl::StrFormat("%.2f", v) : "–"; }

std::string OnOff(bool v, absl::string_view good_when) {
  bool good = (good_when == "on") == v;
  return absl::StrCat("<span class=\"", good ? "ok" : "bad", "\">", v ? "on" : "off", "</span>");
}

// The page in named parts, each appended to `*h` in order.
void AppendPageHead(std::string* h) {
  absl::StrAppend(h, R"(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="refresh" content="5">
<title>sockpressure: TCP throttling episodes</title>
<style>
body{font-family:system-ui,sans-serif;margin:1.5em;color:#1d1d1f;background:#fafafa}
h1{font-size:1.4em;margin:0 0 .3em} h2{font-size:1.1em;margin:1.4em 0 .4em}
table{border-collapse:collapse;width:100%;background:#fff;font-size:.9em}
th,td{border:1px solid #ddd;padding:.3em .5em;text-align:left;vertical-align:top}
th{background:#f0f0f3} td.num{text-align:right;font-variant-numeric:tabular-nums}
.ok{color:#146c2e;font-weight:600} .bad{color:#b3261e;font-weight:600}
tr.throttled td{background:#fdecea} tr.active td{background:#fff4e5}
.meta{color:#555;font-size:.9em} code{font-size:.95em}
.pill{display:inline-block;border:1px solid #ccc;border-radius:1em;padding:0 .6em;margin-right:.4em;background:#fff}
</style></head><body>
)");
}

// Sample, version and API links; the node's preconditions and signal tiers; alert delivery.
void AppendNodeSummary(std::string* h, const api::v1::CgroupList& cgroups, const PageContext& ctx) {
  const api::v1::Preconditions& node = cgroups.node();
  absl::StrAppend(h, "<h1>TCP receive-window throttling by memcg socket pressure</h1>\n<p class=\"meta\">sample ",
                  cgroups.sample_sequence(), " at ", When(cgroups.generated()), " &middot; sockpressure_exporter ",
                  Escape(ctx.version), " &middot; <a href=\"/api/v1/cgroups?pressure=1\">/api/v1/cgroups</a> ",
                  "&middot; <a href=\"/api/v1/episodes\">/api/v1/episodes</a></p>\n");
  absl::StrAppend(h, "<p id=\"node\"><span class=\"pill\">kernel <code>", Escape(node.kernel_release()),
                  "</code></span><span class=\"pill\">cgroup ", Escape(node.cgroup_mode()),
                  "</span><span class=\"pill\">swap ", OnOff(node.swap_enabled(), "off"),
                  "</span><span class=\"pill\">socket accounting ", OnOff(node.socket_accounting_enabled(), "off"),
                  "</span><span class=\"pill\">MGLRU ",
                  node.has_mglru_enabled() ? OnOff(node.mglru_enabled(), "on") : "absent", "</span>");
  for (const char* sig : {"socket_pressure", "window_clamps", "clamped_sockets"}) {
    auto it = node.signal_sources().find(sig);
    absl::StrAppend(h, "<span class=\"pill\">", sig, ": ",
                    Escape(it == node.signal_sources().end() ? "none" : it->second), "</span>");
  }
  absl::StrAppend(h, "</p>\n");
  if (ctx.alerting_status) absl::StrAppend(h, "<p class=\"meta\" id=\"alerting\">", Escape(ctx.alerting_status()), "</p>\n");
}

void AppendCgroupTable(std::string* h, const api::v1::CgroupList& cgroups) {
  absl::StrAppend(h, "<h2>Cgroups throttled now or in an open episode</h2>\n");
  if (cgroups.cgroups().empty()) {
    absl::StrAppend(h, "<p id=\"no-pressure\" class=\"ok\">No cgroup is under socket pressure.</p>\n");
  } else {
    absl::StrAppend(h, "<table id=\"cgroups\"><thead><tr><th>cgroup</th><th>pod</th><th>state</th><th>episode</th>"
                        "<th>scan w/o reclaim</th><th>sockets</th><th>clamped</th><th>pressure s total</th>"
                        "<th>clamps total</th></tr></thead><tbody>\n");
    for (const api::v1::CgroupState& c : cgroups.cgroups()) {
      // No socket in it or below it: the kernel's pressure has nothing to throttle.
      const bool idle = c.has_subtree_sockets() && c.subtree_sockets() == 0;
      std::string state = c.pressure_asserted() && idle ? "pressure, nothing to throttle"
                          : c.pressure_asserted()       ? "throttled (own pressure)"
                          : c.pressure_active()         ? "throttled (ancestor's pressure)"
                                                        : "quiet, episode open";
      std::string episode = c.has_active_episode_id()
                                ? absl::StrCat("<a href=\"#episode-", c.active_episode_id(), "\">#",
                                               c.active_episode_id(), "</a>")
                                : "";
      absl::StrAppend(h, "<tr class=\"", c.pressure_active() ? "throttled" : "active", "\" data-cgroup=\"",
                      Escape(c.cgroup()), "\"><td><code>", Escape(c.cgroup()), "</code></td><td>",
                      Escape(Pod(c.identity())), "</td><td>", state, "</td><td>", episode, "</td><td class=\"num\">",
                      Ratio(c.has_scan_without_reclaim_ratio(), c.scan_without_reclaim_ratio()),
                      "</td><td class=\"num\">", c.has_sockets() ? absl::StrCat(c.sockets()) : "–",
                      "</td><td class=\"num\">", c.has_clamped_sockets() ? absl::StrCat(c.clamped_sockets()) : "–",
                      "</td><td class=\"num\">", absl::StrFormat("%.1f", c.pressure_seconds_total()),
                      "</td><td class=\"num\">", c.window_clamps_total(), "</td></tr>\n");
    }
    absl::StrAppend(h, "</tbody></table>\n");
  }
}

void AppendEpisodeTable(std::string* h, const api::v1::EpisodeList& episodes) {
  absl::StrAppend(h, "<h2>Recent episodes</h2>\n<p class=\"meta\">", episodes.active(), " open, ",
                  episodes.started_total(), " started since the agent started; the last ",
                  episodes.history_limit(), " are kept.</p>\n");
  if (episodes.episodes().empty()) {
    absl::StrAppend(h, "<p id=\"no-episodes\">No episodes yet.</p>\n");
  } else {
    absl::StrAppend(h, "<table id=\"episodes\"><thead><tr><th>#</th><th>timeline</th><th>cgroup</th><th>pod</th><th>start</th>"
                        "<th>end</th><th>duration s</th><th>throttled s</th><th>peak ratio</th><th>clamps</th>"
                        "<th>peak clamped sockets</th><th>swap / sock acct / MGLRU</th><th>top reclaimers (pages)</th>"
                        "</tr></thead><tbody>\n");
    for (const api::v1::Episode& e : episodes.episodes()) {
      std::string reclaimers;
      for (const api::v1::Reclaimer& r : e.top_reclaimers()) {
        absl::StrAppend(&reclaimers, reclaimers.empty() ? "" : "<br>", "<code>", Escape(r.cgroup()), "</code> ",
                        r.reclaimed_pages());
      }
      absl::StrAppend(h, "<tr id=\"episode-", e.id(), "\" class=\"", e.active() ? "active" : "closed",
                      "\" data-cgroup=\"", Escape(e.cgroup()), "\"><td>", e.id(), "</td><td>",
                      // Second column: the picture is what people look at first.
                      EpisodeTimelineSvg(e), "</td><td><code>",
                      Escape(e.cgroup()), "</code></td><td>", Escape(Pod(e.identity())), "</td><td>",
                      When(e.start()), e.nothing_to_throttle() ? "<br><i>pressure, nothing to throttle</i>" : "",
                      "</td><td>", e.active() ? "<b>open</b>" : When(e.end()),
                      "</td><td class=\"num\">", absl::StrFormat("%.0f", e.duration_seconds()),
                      "</td><td class=\"num\">", absl::StrFormat("%.1f", e.throttled_seconds()),
                      "</td><td class=\"num\">",
                      Ratio(e.has_peak_scan_without_reclaim_ratio(), e.peak_scan_without_reclaim_ratio()),
                      "</td><td class=\"num\">", e.window_clamps(), "</td><td class=\"num\">",
                      e.peak_clamped_sockets(), "</td><td>", e.preconditions().swap_enabled() ? "on" : "off", " / ",
                      e.preconditions().socket_accounting_enabled() ? "on" : "off", " / ",
                      !e.preconditions().has_mglru_enabled() ? "absent"
                      : e.preconditions().mglru_enabled()    ? "on"
                                                             : "off",
                      "</td><td>", reclaimers,
                      "</td></tr>\n");
    }
    absl::StrAppend(h, "</tbody></table>\n");
  }
}

}  // namespace

std::string RenderEpisodesPage(const api::v1::CgroupList& cgroups, const api::v1::EpisodeList& episodes,
                               const PageContext& ctx) {
  std::string h;
  AppendPageHead(&h);
  AppendNodeSummary(&h, cgroups, ctx);
  AppendCgroupTable(&h, cgroups);
  AppendEpisodeTable(&h, episodes);
  absl::StrAppend(&h, "</body></html>\n");
  return h;
}

}  // namespace sockpressure
