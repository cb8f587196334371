#include "absl/strings/string_view.h"
#include "exporter/state/vmpressure_window.h"

#include <algorithm>

namespace sockpressure {

absl::string_view PressureLevelName(PressureLevel level) {
  switch (level) {
    case PressureLevel::kLow: return "low";
    case PressureLevel::kMedium: return "medium";
    case PressureLevel::kCritical: return "critical";
  }
  return "low";
}

unsigned VmpressurePercent(uint64_t scanned, uint64_t reclaimed) {
  if (scanned == 0 || reclaimed >= scanned) return 0;
  // Same steps as the kernel: scale = scanned + reclaimed;
  // pressure = scale - reclaimed * scale / scanned; pressure * 100 / scale.
  // unsigned __int128 avoids the overflow the kernel can ignore (its inputs
  // are bounded by one window) but a replay of large deltas cannot.
  unsigned __int128 scale = static_cast<unsigned __int128>(scanned) + reclaimed;
  unsigned __int128 pressure = scale - (static_cast<unsigned __int128>(reclaimed) * scale / scanned);
  return static_cast<unsigned>(pressure * 100 / scale);
}

PressureLevel VmpressureLevel(uint64_t scanned, uint64_t reclaimed) {
  unsigned p = VmpressurePercent(scanned, reclaimed);
  if (p >= kVmpressureLevelCritical) return PressureLevel::kCritical;
  if (p >= kVmpressureLevelMedium) return PressureLevel::kMedium;
  return PressureLevel::kLow;
}

std::optional<VmpressureWindow::Verdict> VmpressureWindow::Add(uint64_t scanned, uint64_t reclaimed) {
  scanned_ += scanned;
  reclaimed_ += reclaimed;
  if (scanned_ < kVmpressureWindowPages) return std::nullopt;
  Verdict v;
  v.scanned = scanned_;
  v.reclaimed = reclaimed_;
  v.level = VmpressureLevel(scanned_, reclaimed_);
  v.ratio = reclaimed_ >= scanned_ ? 0.0 : 1.0 - static_cast<double>(reclaimed_) / static_cast<double>(scanned_);
  v.windows = std::max<uint64_t>(1, scanned_ / kVmpressureWindowPages);
  // The kernel would have closed `windows` windows and started a new one
  // with what is left; carry that part (reclaim in proportion) so that a
  // steady 4,000 pages per interval counts 7.8 windows per interval on
  // average, not 7.
  uint64_t left = scanned_ - std::min(scanned_, v.windows * kVmpressureWindowPages);
  reclaimed_ = left == 0 ? 0 : static_cast<uint64_t>(static_cast<double>(reclaimed_) * left / scanned_);
  scanned_ = left;
  return v;
}

}  // namespace sockpressure
