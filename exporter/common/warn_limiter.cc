#include "exporter/common/warn_limiter.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace sockpressure {

void WarnLimiter::Warn(const std::string& key, absl::string_view text, double now) {
  auto [it, first] = states_.try_emplace(key);
  State& s = it->second;
  if (first) {
    s.last_logged = now;
    emit_(absl::StrCat(key, ": ", text));
    return;
  }
  ++s.held;
  s.latest = std::string(text);
  if (now - s.last_logged < period_) return;
  emit_(absl::StrFormat("%s: %s (%u times in the last %.0fs)", key, s.latest, s.held, now - s.last_logged));
  s.last_logged = now;
  s.held = 0;
}

void WarnLimiter::Clear(const std::string& key, double now) {
  auto it = states_.find(key);
  if (it == states_.end()) return;
  const State& s = it->second;
  emit_(absl::StrFormat("%s: recovered%s", key,
                        s.held > 0 ? absl::StrFormat(" (%u more times in the %.0fs before)", s.held, now - s.last_logged)
                                   : std::string()));
  states_.erase(it);
}

}  // namespace sockpressure
