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

// Kernel pseudo-files (cgroupfs, procfs) are regular files of a few KiB; a
// tree that is not what it claims (a FIFO, a device, a symlink or a huge file
// in place of memory.stat) must neither block nor exhaust memory. Such files
// are refused: opened with O_NOFOLLOW|O_NONBLOCK, read only if fstat() says
// regular, and at most this many bytes (more is an error).
inline constexpr size_t kMaxKernelFileBytes = size_t{1} << 20;

// Reads `name` relative to `dirfd` into `buf` (reused: its capacity stays
// at most about kMaxKernelFileBytes). false + errno in `err`: ELOOP for a
// symlink, EINVAL for a non-regular file, EFBIG for a file over the cap.
// Thread-safe: no shared state.
bool ReadKernelFileAt(int dirfd, const char* name, std::string& buf, int& err);

// The same checks as ReadKernelFileAt() for a descriptor kept open and
// re-read with PreadKernelFile(): -1 and errno in `err` when refused.
int OpenKernelFileAt(int dirfd, const char* name, int& err);

// Reads a kernel file from offset 0 through a kept descriptor (cgroupfs
// regenerates a seq_file at offset 0, so no reopen is needed). Same bounds
// and errors as ReadKernelFileAt(); ENODEV/ENOENT when the cgroup was removed.
bool PreadKernelFile(int fd, std::string& buf, int& err);

// ReadKernelFileAt() for a path; errors as ReadFileToString().
absl::StatusOr<std::string> ReadKernelFile(const std::string& path);

// strerror(), with the refusals above explained.
std::string ReadErrorText(int err);

// Joins path components with exactly one '/' between them.
std::string JoinPath(absl::string_view a, absl::string_view b);

// True for NotFound: the feature is absent or the object is gone.
bool IsAbsent(const absl::Status& status);

}  // namespace sockpressure
