// The agent's JSON API and its human page, both built from the same protobuf
// messages (api/v1/alerting.proto):
//   GET /api/v1/cgroups   current state per cgroup (?pressure=1: only cgroups
//                         under pressure or with an open episode)
//   GET /api/v1/episodes  recent episodes, newest first (?cgroup=, ?limit=)
//   GET /episodes         HTML page with both, for someone on the node
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

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

// The pieces of the latest sample's cgroup lists that readers asked for,
// rendered once for all of them. Protobuf prints JSON at about 50 us per
// cgroup (0.5 s for the pretty list of 10,000): without it, each of 150
// readers that take a few bytes a second made a worker render the 400 KB the
// kernel buffers for it, and a /metrics scrape waited seconds behind them.
// Holds at most the pieces of one sample, and only until the next cycle
// begins (Clear). Thread-safe.
class CgroupListPieces {
 public:
  struct Piece {
    std::string elements;          // a range's cgroups in the list's JSON, comma-separated; empty: none shown
    std::string space_before_end;  // what protobuf prints between the last element and the array's "]"
  };
  // Piece `index` of list `variant` of the sample numbered `sequence`:
  // rendered by `render` unless a reader of that sample had it rendered.
  std::shared_ptr<const Piece> Get(uint64_t sequence, int variant, size_t index,
                                   const std::function<Piece()>& render);
  void Clear();
  uint64_t rendered() const;  // pieces rendered so far (tests)

 private:
  mutable std::mutex mu_;
  uint64_t sequence_ = 0;  // the sample `pieces_` are of
  std::map<std::pair<int, size_t>, std::shared_ptr<const Piece>> pieces_;
  uint64_t rendered_ = 0;
};

// ToJson(BuildCgroupList(*snapshot, episodes, only_pressure), pretty), 128
// cgroups at a time (a reader holds one piece, never the list), the pieces
// taken from `shared` when given. Holds `snapshot`; `episodes` and `shared`
// must outlive the stream.
std::unique_ptr<BodyStream> NewCgroupListStream(std::shared_ptr<const Snapshot> snapshot,
                                                const EpisodeTracker& episodes, bool only_pressure, bool pretty,
                                                CgroupListPieces* shared = nullptr);

struct PageContext {
  std::string version;
  // One line on alert delivery (empty when --alertmanager.url is not set).
  std::function<std::string()> alerting_status;
};
std::string RenderEpisodesPage(const api::v1::CgroupList& cgroups, const api::v1::EpisodeList& episodes,
                               const PageContext& context);

// Adds the three routes to `server` (before Start), and a hook to `sampler`
// that lets go of the last sample's list pieces before each cycle. `sampler`
// and `episodes` must outlive the server.
void AddAlertingRoutes(HttpServer& server, Sampler& sampler, const EpisodeTracker& episodes, PageContext context);

}  // namespace sockpressure
