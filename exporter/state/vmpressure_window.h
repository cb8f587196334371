// Replays the kernel's vmpressure() socket-pressure rule on reclaim deltas.
//
// Kernel rule (mm/vmpressure.c, v4.5..v6.x, tree == false path):
//   per memcg, accumulate scanned/reclaimed until scanned >= vmpressure_win
//   (SWAP_CLUSTER_MAX * 16 = 512 pages); then
//   pressure% = 100 * (1 - reclaimed/scanned) in integer arithmetic
//   (vmpressure_calc_level()), >= 95 critical, >= 60 medium, else low; reset.
//   medium or worse sets memcg->socket_pressure = jiffies + HZ (1 s).
// https://elixir.bootlin.com/linux/v6.1/source/mm/vmpressure.c
#pragma once

#include <cstdint>
#include <optional>
#include "absl/strings/string_view.h"

namespace sockpressure {

inline constexpr uint64_t kVmpressureWindowPages = 512;
inline constexpr unsigned kVmpressureLevelMedium = 60;
inline constexpr unsigned kVmpressureLevelCritical = 95;

enum class PressureLevel : int { kLow = 0, kMedium = 1, kCritical = 2 };
absl::string_view PressureLevelName(PressureLevel level);

// The kernel's integer pressure percentage (vmpressure_calc_level()).
// reclaimed >= scanned (slab can make it so) gives 0.
unsigned VmpressurePercent(uint64_t scanned, uint64_t reclaimed);
PressureLevel VmpressureLevel(uint64_t scanned, uint64_t reclaimed);

// Per-cgroup accumulator. Not thread-safe (owned by one CgroupState).
class VmpressureWindow {
 public:
  struct Verdict {
    PressureLevel level;
    double ratio;          // 1 - reclaimed/scanned over the verdict, in [0, 1]
    uint64_t windows;      // kernel windows this verdict stands for (scanned / 512, >= 1)
    uint64_t scanned, reclaimed;
  };

  // Adds one interval's local deltas. When the accumulated scan reaches 512
  // pages, returns the verdict and starts a new window, as the kernel does.
  // A sampling interval usually spans many kernel windows; they are judged
  // together, so `windows` says how many kernel windows the verdict covers.
  std::optional<Verdict> Add(uint64_t scanned, uint64_t reclaimed);

  uint64_t pending_scanned() const { return scanned_; }
  uint64_t pending_reclaimed() const { return reclaimed_; }

 private:
  uint64_t scanned_ = 0;
  uint64_t reclaimed_ = 0;
};

}  // namespace sockpressure
