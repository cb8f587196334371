// Repeated warnings (a collector failing every sample) logged as: the first
// one at once, then at most one summary per period with how many were held
// back and the latest text, and one line when the condition clears.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "absl/strings/string_view.h"

namespace sockpressure {

// Not thread-safe: one owner (e.g. the sampler thread). `emit` receives
// each line to log; tests capture it, the agent passes it to SP_LOG_WARN.
class WarnLimiter {
 public:
  using Emit = std::function<void(const std::string&)>;
  WarnLimiter(double period_seconds, Emit emit) : period_(period_seconds), emit_(std::move(emit)) {}

  // `key` names the condition (e.g. "collector cgroupfs"); `now` is
  // monotonic seconds.
  void Warn(const std::string& key, absl::string_view text, double now);
  // The condition is gone: logs once how often it occurred since the last
  // line, if it ever warned.
  void Clear(const std::string& key, double now);

 private:
  struct State {
    double last_logged = 0;
    uint64_t held = 0;  // warnings not logged since last_logged
    std::string latest;
  };
  double period_;
  Emit emit_;
  std::map<std::string, State> states_;
};

}  // namespace sockpressure
