// GET /api/v1/cgroups as a stream: the JSON of the list the API builds
// (alerts_api.h), a piece of cgroups at a time, so that a reader holds one
// piece, never the list (MBs at thousands of cgroups).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "exporter/alerting/episodes.h"
#include "exporter/outputs/http/body_stream.h"
#include "exporter/state/snapshot.h"

namespace sockpressure {

// The pieces of the latest sample's cgroup lists that readers asked for,
// rendered once for all of them. Protobuf prints JSON at about 50 us per
// cgroup (0.5 s for the pretty list of 10,000): without it, each of 150
// readers that take a few bytes a second made a worker render the 400 KB the
// kernel buffers for it, and a /metrics scrape waited seconds behind them.
// Holds at most the pieces of one sample, and only until the next cycle
// begins (Clear). Thread-safe.
class CgroupListPieces {
 public:
  // A range's cgroups as elements of the list's JSON array, comma-separated
  // and indented as in the whole list; empty: none of them is shown.
  using Piece = std::string;
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

}  // namespace sockpressure
