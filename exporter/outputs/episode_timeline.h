// An episode drawn as a small inline SVG for the /episodes page: people read
// the shape of an episode (one burst, steady throttling, flapping) faster
// from a picture than from its totals.
#pragma once

#include <string>

#include "exporter/alerting/alerting.pb.h"

namespace sockpressure {

// Bars: the share of each timeline step under the cgroup's own socket
// pressure (0..1, full height = the whole step); line: window clamps per
// second, scaled to the episode's peak. Self-contained markup (no script, no
// external resources), safe to embed: every text in it is escaped.
std::string EpisodeTimelineSvg(const api::v1::Episode& e);

}  // namespace sockpressure
