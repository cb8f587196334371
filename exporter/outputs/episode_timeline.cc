#include "exporter/outputs/episode_timeline.h"

#include <google/protobuf/util/time_util.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace sockpressure {
namespace {

constexpr double kWidth = 240, kHeight = 40, kPad = 1;

int64_t Ms(const google::protobuf::Timestamp& t) { return google::protobuf::util::TimeUtil::TimestampToMilliseconds(t); }

}  // namespace

std::string EpisodeTimelineSvg(const api::v1::Episode& e) {
  const auto& tl = e.timeline();
  std::string out = absl::StrCat("<svg class=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\" width=\"", kWidth,
                                 "\" height=\"", kHeight, "\" viewBox=\"0 0 ", kWidth, " ", kHeight,
                                 "\" role=\"img\" data-points=\"", tl.size(), "\">");
  if (tl.empty()) return out + "<title>no samples yet</title></svg>";
  // The x axis spans the timeline (start of its first step to the end of its
  // last), so steps of different lengths after merging keep their widths.
  const int64_t t0 = Ms(tl[0].end()) - static_cast<int64_t>(tl[0].interval_seconds() * 1000);
  const int64_t t1 = std::max<int64_t>(Ms(tl[tl.size() - 1].end()), t0 + 1);
  auto x = [&](int64_t ms) { return kPad + (kWidth - 2 * kPad) * static_cast<double>(ms - t0) / (t1 - t0); };
  auto y = [&](double frac) { return kHeight - kPad - (kHeight - 2 * kPad) * std::clamp(frac, 0.0, 1.0); };
  double peak_rate = 0, pressure = 0;
  uint64_t clamps = 0;
  for (const auto& p : tl) {
    if (p.interval_seconds() > 0) peak_rate = std::max(peak_rate, p.window_clamps() / p.interval_seconds());
    pressure += p.pressure_seconds();
    clamps += p.window_clamps();
  }
  absl::StrAppend(&out, "<title>", absl::StrFormat("%.0f", pressure), " s under socket pressure, ", clamps,
                  " window clamps", peak_rate > 0 ? absl::StrFormat(" (peak %.1f/s)", peak_rate) : "",
                  " over ", absl::StrFormat("%.0f", (t1 - t0) / 1000.0), " s</title>");
  absl::StrAppend(&out, "<rect class=\"frame\" x=\"0\" y=\"0\" width=\"", kWidth, "\" height=\"", kHeight,
                  "\" fill=\"none\" stroke=\"#ccc\"/>");
  for (const auto& p : tl) {
    if (p.pressure_seconds() <= 0 || p.interval_seconds() <= 0) continue;
    const int64_t end = Ms(p.end());
    const double x0 = x(end - static_cast<int64_t>(p.interval_seconds() * 1000)), x1 = x(end);
    const double top = y(p.pressure_seconds() / p.interval_seconds());
    absl::StrAppend(&out, "<rect class=\"pressure\" x=\"", absl::StrFormat("%.1f", x0), "\" y=\"",
                    absl::StrFormat("%.1f", top), "\" width=\"", absl::StrFormat("%.1f", std::max(0.5, x1 - x0)),
                    "\" height=\"", absl::StrFormat("%.1f", kHeight - kPad - top), "\" fill=\"#e8590c\"/>");
  }
  if (peak_rate > 0) {
    std::string pts;
    for (const auto& p : tl) {
      if (p.interval_seconds() <= 0) continue;
      absl::StrAppend(&pts, pts.empty() ? "" : " ", absl::StrFormat("%.1f,%.1f", x(Ms(p.end())),
                                                                   y(p.window_clamps() / p.interval_seconds() / peak_rate)));
    }
    absl::StrAppend(&out, "<polyline class=\"clamps\" points=\"", pts,
                    "\" fill=\"none\" stroke=\"#1971c2\" stroke-width=\"1.5\"/>");
  }
  return out + "</svg>";
}

}  // namespace sockpressure
