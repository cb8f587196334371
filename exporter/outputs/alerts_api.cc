#include "exporter/common/cgroup_label.h"
#include "exporter/outputs/alerts_api.h"

#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/time_util.h>
#include <httplib.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "exporter/common/label_escape.h"
#include "exporter/outputs/episode_timeline.h"
#include "exporter/outputs/http/http_server.h"
#include "exporter/sampler/sampler.h"

namespace sockpressure {
namespace {

void ToProto(const Remedy& m, api::v1::Remedy* out) {
  out->set_key(m.key);
  out->set_action(m.action);
  out->set_evidence(m.evidence);
  out->set_effect(m.effect);
}

google::protobuf::Timestamp Ts(int64_t unix_ms) {
  return google::protobuf::util::TimeUtil::MillisecondsToTimestamp(unix_ms);
}

void CopyIdentity(const LabelPairs& identity, google::protobuf::Map<std::string, std::string>* out) {
  for (const auto& [k, v] : identity) (*out)[k] = v;
}

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

}  // namespace

api::v1::Preconditions ToProto(const EpisodePreconditions& p) {
  api::v1::Preconditions out;
  out.set_swap_enabled(p.swap_enabled);
  out.set_socket_accounting_enabled(p.socket_accounting_enabled);
  if (p.mglru_enabled) out.set_mglru_enabled(*p.mglru_enabled);
  out.set_cgroup_mode(std::string(CgroupModeName(p.cgroup_mode)));
  out.set_kernel_release(p.kernel_release);
  for (int s = 0; s < kSignalCount; ++s) {
    (*out.mutable_signal_sources())[std::string(SignalName(static_cast<Signal>(s)))] =
        std::string(TierName(p.signal_tier[s]));
  }
  return out;
}

api::v1::Episode ToProto(const Episode& e) {
  api::v1::Episode out;
  out.set_id(e.id);
  out.set_cgroup(EscapeLabelValue(CgroupLabel(e.cgroup)));  // as in the metrics' cgroup label
  out.set_cgroup_id(e.cgroup_id);
  CopyIdentity(e.identity, out.mutable_identity());
  out.set_active(e.active);
  *out.mutable_start() = Ts(e.start_ms);
  if (!e.active) *out.mutable_end() = Ts(e.end_ms);
  *out.mutable_last_throttled() = Ts(e.last_throttled_ms);
  out.set_duration_seconds(e.DurationSeconds());
  out.set_throttled_seconds(e.throttled_seconds);
  out.set_pressure_events(e.pressure_events);
  if (e.peak_ratio) out.set_peak_scan_without_reclaim_ratio(*e.peak_ratio);
  out.set_window_clamps(e.clamps);
  out.set_peak_clamped_sockets(e.peak_clamped_sockets);
  out.set_peak_sockets(e.peak_sockets);
  if (e.peak_subtree_sockets) out.set_peak_subtree_sockets(*e.peak_subtree_sockets);
  out.set_nothing_to_throttle(NothingToThrottle(e));
  if (e.remedy) ToProto(*e.remedy, out.mutable_remedy());
  out.set_sock_throttled(e.sock_throttled);
  out.set_prune_collapses(e.prunes.collapses);
  out.set_ofo_prunes(e.prunes.ofo_prunes);
  out.set_ofo_pruned_segments(e.prunes.ofo_pruned_segs);
  out.set_rcv_mem_drops(e.prunes.rcv_mem_drops);
  out.set_trigger(e.trigger);
  *out.mutable_preconditions() = ToProto(e.preconditions);
  for (const ReclaimerPages& r : e.top_reclaimers) {
    api::v1::Reclaimer* pr = out.add_top_reclaimers();
    pr->set_cgroup(EscapeLabelValue(CgroupLabel(r.cgroup)));
    pr->set_reclaimed_pages(r.reclaimed);
    pr->set_scanned_pages(r.scanned);
  }
  out.set_own_scanned_pages(e.own_scanned);
  out.set_own_reclaimed_pages(e.own_reclaimed);
  out.set_samples(e.samples);
  for (const EpisodePoint& p : e.timeline) {
    api::v1::TimelinePoint* tp = out.add_timeline();
    *tp->mutable_end() = Ts(p.end_ms);
    tp->set_interval_seconds(p.interval_seconds);
    tp->set_pressure_seconds(p.pressure_seconds);
    tp->set_window_clamps(p.clamps);
  }
  return out;
}

namespace {

// The list without its cgroups: when and which sample, and the node.
api::v1::CgroupList CgroupListHead(const Snapshot& s) {
  api::v1::CgroupList out;
  *out.mutable_generated() = Ts(s.unix_millis);
  out.set_sample_sequence(s.sequence);
  *out.mutable_node() = ToProto(PreconditionsOf(s));
  return out;
}

// Appends c's state to `out`, unless `only_pressure` leaves it out.
void AddCgroupState(const Snapshot& s, const CgroupView& c, const EpisodeTracker& episodes, bool only_pressure,
                    api::v1::CgroupList* out) {
  std::optional<EpisodeTracker::CgroupCounters> counters = episodes.Counters(c.path);
  bool open = counters && counters->active_episode_id;
  if (only_pressure && !c.pressure_active && !open) return;
  api::v1::CgroupState* st = out->add_cgroups();
  st->set_cgroup(EscapeLabelValue(CgroupLabel(c.path.str())));
  st->set_id(c.id);
  CopyIdentity(c.identity, st->mutable_identity());
  st->set_v1(c.v1);
  st->set_pressure_active(c.pressure_active);
  st->set_pressure_asserted(c.best.pressure_asserted);
  if (c.best.ratio) st->set_scan_without_reclaim_ratio(*c.best.ratio);
  st->set_scanned_pages_total(c.best.scanned_total);
  st->set_reclaimed_pages_total(c.best.reclaimed_total);
  st->set_pressure_events_total(c.best.pressure_events_total);
  st->set_pressure_seconds_total(c.best.pressure_seconds_total);
  st->set_window_clamps_total(c.best.clamps_total);
  if (c.best.census) {
    st->set_sockets(c.best.census->sockets);
    st->set_clamped_sockets(c.best.census->clamped);
  }
  if (c.subtree_sockets) st->set_subtree_sockets(*c.subtree_sockets);
  if (c.best.pressure_asserted) {
    for (const Remedy& m : FittingRemedies(s, c)) ToProto(m, st->add_remedies());
  }
  if (c.best.sock_throttled_total) st->set_sock_throttled_total(*c.best.sock_throttled_total);
  const CgroupLimits& limits = LimitsOf(c.limits);
  if (limits.memory_current) st->set_memory_current_bytes(*limits.memory_current);
  if (std::optional<uint64_t> max = limits.memory_limit()) st->set_memory_max_bytes(*max);
  if (counters) {
    if (counters->active_episode_id) st->set_active_episode_id(*counters->active_episode_id);
    st->set_episodes_total(counters->episodes_total);
    st->set_episode_seconds_total(counters->duration_seconds_total);
  }
}

}  // namespace

api::v1::CgroupList BuildCgroupList(const Snapshot& s, const EpisodeTracker& episodes, bool only_pressure) {
  api::v1::CgroupList out = CgroupListHead(s);
  for (const CgroupView& c : s.cgroups) AddCgroupState(s, c, episodes, only_pressure, &out);
  return out;
}

api::v1::EpisodeList BuildEpisodeList(const EpisodeTracker& episodes, size_t limit, const std::string& cgroup,
                                      int64_t now_ms) {
  api::v1::EpisodeList out;
  *out.mutable_generated() = Ts(now_ms);
  out.set_active(static_cast<uint32_t>(episodes.active_count()));
  out.set_started_total(episodes.started_total());
  out.set_history_limit(static_cast<uint32_t>(episodes.options().history));
  for (const Episode& e : episodes.Recent(limit, cgroup)) *out.add_episodes() = ToProto(e);
  return out;
}

std::string ToJson(const google::protobuf::Message& message, bool pretty) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = pretty;
  // Booleans and counters at zero are answers too ("pressureActive": false),
  // so print them rather than leave clients to know proto3 defaults.
  options.always_print_primitive_fields = true;
  std::string out;
  if (!google::protobuf::util::MessageToJsonString(message, &out, options).ok()) return "{}";
  return out;
}

namespace {

// Cgroups per piece of the streamed list: about 50 KB of pretty JSON with
// Kubernetes-length paths.
constexpr size_t kCgroupsPerPiece = 128;

// Renders the cgroups [begin, end) of `s` that the list shows, as the
// elements of the list's "cgroups" array. Each is printed inside a list
// that holds nothing else (but its zero sample sequence), so that it has
// the indentation it has in the whole list. Episode counters are read now:
// the pieces of one answer may show them a sample apart.
CgroupListPieces::Piece RenderPiece(const Snapshot& s, size_t begin, size_t end, const EpisodeTracker& episodes,
                                    bool only_pressure, bool pretty) {
  api::v1::CgroupList list;
  for (size_t i = begin; i < end; ++i) AddCgroupState(s, s.cgroups[i], episodes, only_pressure, &list);
  CgroupListPieces::Piece piece;
  if (list.cgroups_size() == 0) return piece;
  const std::string json = ToJson(list, pretty);
  const size_t open = json.find('[', json.find("\"cgroups\":")) + 1;
  const absl::string_view inside = absl::string_view(json).substr(open, json.rfind(']') - open);
  const absl::string_view elements = absl::StripTrailingAsciiWhitespace(inside);
  piece.elements = std::string(elements);
  piece.space_before_end = std::string(inside.substr(elements.size()));
  return piece;
}

// The JSON of BuildCgroupList(), kCgroupsPerPiece cgroups at a time.
//
// Why a stream, not the list's JSON printed once per sample and shared whole
// by its readers: a shared body is whole (4.4 MB pretty at 10,000 cgroups)
// for as long as its slowest reader holds it, and readers that began on
// different samples (one a second) hold one each. A stream holds one piece
// and the snapshot its reader began on, which shares every unchanged
// cgroup's view with the other samples' snapshots (state/snapshot.h). What
// is shared is the rendering (CgroupListPieces): its pieces are copied
// into each answer and let go before the next cycle, whoever still reads.
//
// The JSON is protobuf's own. The head is the list without cgroups, printed
// whole and cut inside its empty "cgroups" array; the pieces (RenderPiece)
// go between, comma-separated.
class CgroupListStream final : public BodyStream {
 public:
  CgroupListStream(std::shared_ptr<const Snapshot> snapshot, const EpisodeTracker& episodes, bool only_pressure,
                   bool pretty, CgroupListPieces* shared)
      : snapshot_(std::move(snapshot)),
        episodes_(episodes),
        only_pressure_(only_pressure),
        pretty_(pretty),
        shared_(shared) {}

  bool Next(std::string* out) override {
    if (!started_ && !Begin(out)) return false;
    // Pieces until one shows a cgroup (?pressure=1 leaves most out) or the list ends.
    const size_t n = snapshot_->cgroups.size();
    bool appended = false;
    while (next_ < n && !appended) {
      std::shared_ptr<const CgroupListPieces::Piece> piece = Take(next_);
      next_ = std::min(n, next_ + kCgroupsPerPiece);
      if (piece->elements.empty()) continue;
      if (any_) out->push_back(',');
      any_ = appended = true;
      out->append(piece->elements);
      space_before_end_ = piece->space_before_end;
    }
    if (next_ < n) return true;
    out->append(space_before_end_);
    out->append(head_end_);
    return false;
  }

 private:
  // Appends the head up to the array's "[" and keeps the rest for the end.
  // Returns false when it appended the whole body instead: a protobuf that
  // prints the empty list otherwise than `"cgroups": []` with only the
  // sample's time after it (tests/alerting/episodes_test.cc would say so).
  bool Begin(std::string* out) {
    started_ = true;
    std::string head = ToJson(CgroupListHead(*snapshot_), pretty_);
    const size_t key = head.rfind("\"cgroups\":");
    const size_t open = key == std::string::npos ? key : head.find('[', key);
    if (open == std::string::npos || head.compare(open, 2, "[]") != 0) {
      out->append(ToJson(BuildCgroupList(*snapshot_, episodes_, only_pressure_), pretty_));
      return false;
    }
    out->append(head, 0, open + 1);
    head_end_ = head.substr(open + 1);
    return true;
  }

  // The piece that starts at cgroup `begin`, rendered once for every
  // reader of this sample when a cache is shared.
  std::shared_ptr<const CgroupListPieces::Piece> Take(size_t begin) {
    const size_t end = std::min(snapshot_->cgroups.size(), begin + kCgroupsPerPiece);
    auto render = [&] { return RenderPiece(*snapshot_, begin, end, episodes_, only_pressure_, pretty_); };
    if (shared_ == nullptr) return std::make_shared<const CgroupListPieces::Piece>(render());
    const int variant = (only_pressure_ ? 2 : 0) + (pretty_ ? 1 : 0);
    return shared_->Get(snapshot_->sequence, variant, begin / kCgroupsPerPiece, render);
  }

  std::shared_ptr<const Snapshot> snapshot_;
  const EpisodeTracker& episodes_;
  const bool only_pressure_;
  const bool pretty_;
  CgroupListPieces* shared_;
  bool started_ = false;
  bool any_ = false;  // an element was appended
  size_t next_ = 0;   // the first cgroup of the next piece
  std::string head_end_;          // the head from the array's "]" on
  std::string space_before_end_;  // what protobuf puts between the last element and "]"
};

}  // namespace

std::shared_ptr<const CgroupListPieces::Piece> CgroupListPieces::Get(uint64_t sequence, int variant, size_t index,
                                                                     const std::function<Piece()>& render) {
  const std::pair<int, size_t> key{variant, index};
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (sequence > sequence_) {  // a new sample: the pieces of the last one are no one's now
      pieces_.clear();
      sequence_ = sequence;
    }
    if (sequence == sequence_) {
      auto it = pieces_.find(key);
      if (it != pieces_.end()) return it->second;
    }
  }
  // Rendered without the lock: two readers may render the same piece at
  // once, and one of the two is kept.
  auto piece = std::make_shared<const Piece>(render());
  std::lock_guard<std::mutex> lock(mu_);
  ++rendered_;
  if (sequence == sequence_) pieces_.emplace(key, piece);
  return piece;
}

void CgroupListPieces::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  pieces_.clear();
}

uint64_t CgroupListPieces::rendered() const {
  std::lock_guard<std::mutex> lock(mu_);
  return rendered_;
}

std::unique_ptr<BodyStream> NewCgroupListStream(std::shared_ptr<const Snapshot> snapshot,
                                                const EpisodeTracker& episodes, bool only_pressure, bool pretty,
                                                CgroupListPieces* shared) {
  return std::make_unique<CgroupListStream>(std::move(snapshot), episodes, only_pressure, pretty, shared);
}

namespace {

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

void AddAlertingRoutes(HttpServer& server, Sampler& sampler, const EpisodeTracker& episodes, PageContext context) {
  auto no_sample = [](httplib::Response& res) {
    res.status = 503;
    res.set_content(absl::StrCat(kNoSampleYet, "\n"), "text/plain");
  };
  // Every cgroup of the node (MBs of JSON at thousands): streamed, the
  // pieces shared by the readers of a sample (CgroupListPieces).
  auto pieces = std::make_shared<CgroupListPieces>();
  sampler.AddBeforeCycle([pieces] { pieces->Clear(); });
  server.GetStreamed("/api/v1/cgroups", [&sampler, &episodes, pieces](const httplib::Request& req,
                                                                      HttpResponse* out) {
    std::shared_ptr<const Snapshot> s = sampler.Latest();
    if (!s) {
      *out = {503, {{"Content-Type", "text/plain"}}, absl::StrCat(kNoSampleYet, "\n")};
      return;
    }
    bool only = req.has_param("pressure") && req.get_param_value("pressure") != "0";
    *out = {200, {{"Content-Type", "application/json"}}, ""};
    out->stream = NewCgroupListStream(std::move(s), episodes, only, req.has_param("pretty"), pieces.get());
  });
  server.Get("/api/v1/episodes", [&sampler, &episodes, no_sample](const httplib::Request& req, httplib::Response& res) {
    std::shared_ptr<const Snapshot> s = sampler.Latest();
    if (!s) return no_sample(res);
    size_t limit = 0;
    if (req.has_param("limit") && !absl::SimpleAtoi(req.get_param_value("limit"), &limit)) {
      res.status = 400;
      res.set_content("limit must be a non-negative integer\n", "text/plain");
      return;
    }
    // Filtered by the name as the API and the metrics show it.
    std::string cgroup = req.has_param("cgroup") ? UnescapeLabelValue(req.get_param_value("cgroup")) : "";
    res.set_content(ToJson(BuildEpisodeList(episodes, limit, cgroup, s->unix_millis), req.has_param("pretty")),
                    "application/json");
  });
  server.Get(
      "/episodes",
      [&sampler, &episodes, no_sample, context](const httplib::Request&, httplib::Response& res) {
        std::shared_ptr<const Snapshot> s = sampler.Latest();
        if (!s) return no_sample(res);
        res.set_content(RenderEpisodesPage(BuildCgroupList(*s, episodes, true),
                                           BuildEpisodeList(episodes, 100, "", s->unix_millis), context),
                        "text/html; charset=utf-8");
      },
      "Throttling episodes");
}

}  // namespace sockpressure
