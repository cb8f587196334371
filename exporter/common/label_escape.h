// Label values must be valid UTF-8 (Prometheus text and protobuf formats,
// JSON). Cgroup names are arbitrary bytes, so they are escaped reversibly:
//   - valid UTF-8 is kept as it is (systemd's "\x2d" in unit names too);
//   - every byte that is not part of a valid UTF-8 sequence becomes "\xHH"
//     (lower-case hex; always HH >= 80, since ASCII is valid);
//   - a literal backslash that would read as such an escape ("\x" followed by
//     5c or by a hex byte >= 80, either case) is written "\x5c".
// UnescapeLabelValue() inverts it: "\xHH" with HH == 5c or HH >= 80 is that
// byte, everything else is literal. Thread-safe: pure functions.
#pragma once

#include <string>

#include "absl/strings/string_view.h"

namespace sockpressure {

bool IsValidUtf8(absl::string_view s);
// True when `s` needs no escaping (cheap check for the common case).
bool LabelValueIsClean(absl::string_view s);
std::string EscapeLabelValue(absl::string_view s);
std::string UnescapeLabelValue(absl::string_view s);

}  // namespace sockpressure
