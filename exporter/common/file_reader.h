// Reading small kernel pseudo-files (procfs, cgroupfs) with errors that keep
// "the kernel does not have this file" apart from "the file is broken".
#pragma once

#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace sockpressure {

// Reads a whole file. Returns NotFoundError when the file (or a parent
// directory) does not exist -- a missing feature, or a cgroup that vanished
// between listing and reading -- and UnavailableError/InternalError otherwise.
// Thread-safe: no shared state.
absl::StatusOr<std::string> ReadFileToString(const std::string& path);

// Joins path components with exactly one '/' between them.
std::string JoinPath(absl::string_view a, absl::string_view b);

// True for NotFound: the feature is absent or the object is gone.
bool IsAbsent(const absl::Status& status);

}  // namespace sockpressure
