// The agent's JSON API, built from the protobuf messages of its schema
// (api/v1/alerting.proto), and the routes that serve it with its page:
//   GET /api/v1/cgroups   current state per cgroup (?pressure=1: only cgroups
//                         under pressure or with an open episode), streamed
//                         (cgroup_list_stream.h)
//   GET /api/v1/episodes  recent episodes, newest first (?cgroup=, ?limit=)
//   GET /episodes         HTML page with both, for someone on the node
//                         (episodes_page.h)
// Pure functions of their arguments, safe from any thread.
#pragma once

#include <cstdint>
#include <string>

#include "exporter/alerting/alerting.pb.h"
#include "exporter/alerting/episodes.h"
#include "exporter/outputs/episodes_page.h"
#include "exporter/state/snapshot.h"

namespace sockpressure {

class HttpServer;
class Sampler;

api::v1::Preconditions ToProto(const EpisodePreconditions& p);
api::v1::Episode ToProto(const Episode& e);
api::v1::CgroupList BuildCgroupList(const Snapshot& snapshot, const EpisodeTracker& episodes, bool only_pressure);
api::v1::EpisodeList BuildEpisodeList(const EpisodeTracker& episodes, size_t limit, const std::string& cgroup,
                                      int64_t now_ms);

// BuildCgroupList() in its two steps, for the stream: the list without its
// cgroups (when and which sample, and the node), and one cgroup's state
// appended to `out` unless `only_pressure` leaves it out.
api::v1::CgroupList CgroupListHead(const Snapshot& snapshot);
void AddCgroupState(const Snapshot& snapshot, const CgroupView& cgroup, const EpisodeTracker& episodes,
                    bool only_pressure, api::v1::CgroupList* out);

// Canonical proto3 JSON; `pretty` adds whitespace.
std::string ToJson(const google::protobuf::Message& message, bool pretty);

// Adds the three routes to `server` (before Start), and a hook to `sampler`
// that lets go of the last sample's list pieces before each cycle. `sampler`
// and `episodes` must outlive the server.
void AddAlertingRoutes(HttpServer& server, Sampler& sampler, const EpisodeTracker& episodes, PageContext context);

}  // namespace sockpressure
