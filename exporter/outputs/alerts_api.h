// The agent's JSON API and its human page, both built from the same protobuf
// messages (api/v1/alerting.proto):
//   GET /api/v1/cgroups   current state per cgroup (?pressure=1: only cgroups
//                         under pressure or with an open episode)
//   GET /api/v1/episodes  recent episodes, newest first (?cgroup=, ?limit=)
//   GET /episodes         HTML page with both, for someone on the node
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "exporter/alerting/alerting.pb.h"
#include "exporter/alerting/episodes.h"
#include "exporter/outputs/http/body_stream.h"
#include "exporter/state/snapshot.h"

namespace sockpressure {

class HttpServer;
class Sampler;

api::v1::Preconditions ToProto(const EpisodePreconditions& p);
api::v1::Episode ToProto(const Episode& e);
api::v1::CgroupList BuildCgroupList(const Snapshot& snapshot, const EpisodeTracker& episodes, bool only_pressure);
api::v1::EpisodeList BuildEpisodeList(const EpisodeTracker& episodes, size_t limit, const std::string& cgroup,
                                      int64_t now_ms);

// Canonical proto3 JSON; `pretty` adds whitespace.
std::string ToJson(const google::protobuf::Message& message, bool pretty);

// ToJson(BuildCgroupList(*snapshot, episodes, only_pressure), pretty), a few
// hundred cgroups at a time (a reader holds one piece, never the list).
// Holds `snapshot`; `episodes` must outlive the stream.
std::unique_ptr<BodyStream> NewCgroupListStream(std::shared_ptr<const Snapshot> snapshot,
                                                const EpisodeTracker& episodes, bool only_pressure, bool pretty);

struct PageContext {
  std::string version;
  // One line on alert delivery (empty when --alertmanager.url is not set).
  std::function<std::string()> alerting_status;
};
std::string RenderEpisodesPage(const api::v1::CgroupList& cgroups, const api::v1::EpisodeList& episodes,
                               const PageContext& context);

// Adds the three routes to `server` (before Start). `sampler` and `episodes`
// must outlive the server.
void AddAlertingRoutes(HttpServer& server, const Sampler& sampler, const EpisodeTracker& episodes,
                       PageContext context);

}  // namespace sockpressure
