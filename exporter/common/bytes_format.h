// Byte counts for people: doctor's report and the remedies' evidence say
// sizes the same way. Thread-safe: a pure function.
#pragma once

#include <cstdint>
#include <string>

namespace sockpressure {

// "1.5 GiB", "240.0 MiB", "512.0 B": binary units, one decimal.
std::string HumanBytes(uint64_t bytes);

}  // namespace sockpressure
