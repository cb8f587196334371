// The /episodes page: the JSON API's two lists (alerts_api.h) as HTML, for
// someone on the node. Pure functions of the messages, safe from any thread.
#pragma once

#include <functional>
#include <string>

#include "exporter/alerting/alerting.pb.h"

namespace sockpressure {

struct PageContext {
  std::string version;
  // One line on alert delivery (empty when --alertmanager.url is not set).
  std::function<std::string()> alerting_status;
};

// The page of `cgroups` (those under pressure or in an open episode) and the
// recent `episodes`; every text from them is escaped.
std::string RenderEpisodesPage(const api::v1::CgroupList& cgroups, const api::v1::EpisodeList& episodes,
                               const PageContext& context);

}  // namespace sockpressure
