#include "exporter/outputs/alerts_api.h"

#include "exporter/common/cgroup_label.h"

#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/time_util.h>

#include <functional>
#include <memory>
#include <utility>

#include "absl/strings/numbers.h"
#include "exporter/common/label_escape.h"
#include "exporter/outputs/cgroup_list_stream.h"
#include "exporter/outputs/http/http_server.h"
#include "exporter/outputs/http/route.h"
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

api::v1::CgroupList CgroupListHead(const Snapshot& s) {
  api::v1::CgroupList out;
  *out.mutable_generated() = Ts(s.unix_millis);
  out.set_sample_sequence(s.sequence);
  *out.mutable_node() = ToProto(PreconditionsOf(s));
  return out;
}

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

// GET /api/v1/cgroups: every cgroup of the node (MBs of JSON at thousands),
// streamed, the pieces shared by the readers of a sample.
void ServeCgroupList(std::shared_ptr<const Snapshot> s, const EpisodeTracker& episodes,
                     CgroupListPieces* pieces, const RequestHead& head, HttpResponse* out) {
  const QueryParams query(head.query);
  const bool only = query.Has("pressure") && query.Get("pressure") != "0";
  *out = {200, {{"Content-Type", "application/json"}}, ""};
  out->stream = NewCgroupListStream(std::move(s), episodes, only, query.Has("pretty"), pieces);
}

// GET /api/v1/episodes, filtered by the cgroup's name as the API and the
// metrics show it.
void ServeEpisodeList(const Snapshot& s, const EpisodeTracker& episodes, const RequestHead& head,
                      HttpResponse* out) {
  const QueryParams query(head.query);
  size_t limit = 0;
  if (query.Has("limit") && !absl::SimpleAtoi(query.Get("limit"), &limit)) {
    *out = PlainText(400, "limit must be a non-negative integer");
    return;
  }
  const std::string cgroup = query.Has("cgroup") ? UnescapeLabelValue(query.Get("cgroup")) : "";
  *out = {200,
          {{"Content-Type", "application/json"}},
          ToJson(BuildEpisodeList(episodes, limit, cgroup, s.unix_millis), query.Has("pretty"))};
}

// GET /episodes: the cgroups under pressure and the last 100 episodes.
void ServePage(const Snapshot& s, const EpisodeTracker& episodes, const PageContext& context, HttpResponse* out) {
  *out = {200,
          {{"Content-Type", "text/html; charset=utf-8"}},
          RenderEpisodesPage(BuildCgroupList(s, episodes, true), BuildEpisodeList(episodes, 100, "", s.unix_millis),
                             context)};
}

// `serve` with the latest sample, or the one "not ready" answer before the first.
HttpHandler WithSample(const Sampler& sampler,
                       std::function<void(std::shared_ptr<const Snapshot>, const RequestHead&, HttpResponse*)> serve) {
  return [&sampler, serve = std::move(serve)](const RequestHead& head, HttpResponse* out) {
    std::shared_ptr<const Snapshot> s = sampler.Latest();
    if (!s) {
      *out = Unavailable(kNoSampleYet);
      return;
    }
    serve(std::move(s), head, out);
  };
}

}  // namespace

void AddAlertingRoutes(HttpServer& server, Sampler& sampler, const EpisodeTracker& episodes, PageContext context) {
  auto pieces = std::make_shared<CgroupListPieces>();
  sampler.AddBeforeCycle([pieces] { pieces->Clear(); });
  server.Get("/api/v1/cgroups", WithSample(sampler, [&episodes, pieces](std::shared_ptr<const Snapshot> s,
                                                                         const RequestHead& head, HttpResponse* out) {
               ServeCgroupList(std::move(s), episodes, pieces.get(), head, out);
             }));
  server.Get("/api/v1/episodes",
             WithSample(sampler, [&episodes](std::shared_ptr<const Snapshot> s, const RequestHead& head,
                                             HttpResponse* out) { ServeEpisodeList(*s, episodes, head, out); }));
  server.Get("/episodes",
             WithSample(sampler, [&episodes, context](std::shared_ptr<const Snapshot> s, const RequestHead&,
                                                      HttpResponse* out) { ServePage(*s, episodes, context, out); }),
             "Throttling episodes");
}

}  // namespace sockpressure
