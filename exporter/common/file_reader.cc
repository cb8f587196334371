#include "absl/strings/string_view.h"
#include "exporter/common/file_reader.h"

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace sockpressure {

absl::StatusOr<std::string> ReadFileToString(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    // ENODEV/ENOENT: cgroup removed under us (kernfs returns ENODEV for a
    // dying cgroup's files); both mean "not there any more", not "broken".
    if (err == ENOENT || err == ENOTDIR || err == ENODEV) {
      return absl::NotFoundError(absl::StrCat(path, ": ", std::strerror(err)));
    }
    return absl::UnavailableError(absl::StrCat("open ", path, ": ", std::strerror(err)));
  }
  std::string out;
  char buf[16384];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      if (err == ENODEV || err == ENOENT) {
        return absl::NotFoundError(absl::StrCat(path, ": ", std::strerror(err)));
      }
      return absl::UnavailableError(absl::StrCat("read ", path, ": ", std::strerror(err)));
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

int OpenKernelFileAt(int dirfd, const char* name, int& err) {
  int fd = ::openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    err = errno;
    return -1;
  }
  // cgroupfs and procfs files are regular files; a FIFO would block the
  // sampler, a device never end.
  struct stat st;
  if (::fstat(fd, &st) != 0) st.st_mode = 0;
  if (!S_ISREG(st.st_mode)) {
    err = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
    ::close(fd);
    return -1;
  }
  return fd;
}

bool PreadKernelFile(int fd, std::string& buf, int& err) {
  // Most cgroupfs files fit the stack buffer: one pread() and one copy of
  // what was read (resizing `buf` up front would zero 16 KiB every time).
  char chunk[16384];
  ssize_t n;
  do {
    n = ::pread(fd, chunk, sizeof chunk, 0);
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    err = errno;
    return false;
  }
  buf.assign(chunk, static_cast<size_t>(n));
  // A short read means end of file; else read on at the offset reached.
  while (n == static_cast<ssize_t>(sizeof chunk)) {
    n = ::pread(fd, chunk, sizeof chunk, static_cast<off_t>(buf.size()));
    if (n < 0) {
      if (errno == EINTR) {
        n = sizeof chunk;
        continue;
      }
      err = errno;
      return false;
    }
    if (buf.size() + static_cast<size_t>(n) > kMaxKernelFileBytes) {
      err = EFBIG;
      // Do not keep a cap-sized buffer for the next (small) file.
      std::string().swap(buf);
      return false;
    }
    buf.append(chunk, static_cast<size_t>(n));
  }
  return true;
}

bool ReadKernelFileAt(int dirfd, const char* name, std::string& buf, int& err) {
  int fd = OpenKernelFileAt(dirfd, name, err);
  if (fd < 0) return false;
  // Most files cost four syscalls (open, fstat, read, close).
  bool ok = PreadKernelFile(fd, buf, err);
  ::close(fd);
  return ok;
}

absl::StatusOr<std::string> ReadKernelFile(const std::string& path) {
  std::string buf;
  int err = 0;
  if (ReadKernelFileAt(AT_FDCWD, path.c_str(), buf, err)) return buf;
  if (err == ENOENT || err == ENOTDIR || err == ENODEV) {
    return absl::NotFoundError(absl::StrCat(path, ": ", std::strerror(err)));
  }
  return absl::UnavailableError(absl::StrCat("read ", path, ": ", ReadErrorText(err)));
}

std::string ReadErrorText(int err) {
  switch (err) {
    case ELOOP: return "a symlink (not followed)";
    case EINVAL: return "not a regular file";
    case EFBIG: return absl::StrCat("larger than ", kMaxKernelFileBytes >> 10, " KiB");
    default: return std::strerror(err);
  }
}

std::string JoinPath(absl::string_view a, absl::string_view b) {
  while (!a.empty() && a.back() == '/') a.remove_suffix(1);
  while (!b.empty() && b.front() == '/') b.remove_prefix(1);
  if (b.empty()) return std::string(a.empty() ? "/" : a);
  return absl::StrCat(a, "/", b);
}

bool IsAbsent(const absl::Status& status) { return absl::IsNotFound(status); }

}  // namespace sockpressure
