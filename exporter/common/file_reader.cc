#include "absl/strings/string_view.h"
#include "exporter/common/file_reader.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
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

std::string JoinPath(absl::string_view a, absl::string_view b) {
  while (!a.empty() && a.back() == '/') a.remove_suffix(1);
  while (!b.empty() && b.front() == '/') b.remove_prefix(1);
  if (b.empty()) return std::string(a.empty() ? "/" : a);
  return absl::StrCat(a, "/", b);
}

bool IsAbsent(const absl::Status& status) { return absl::IsNotFound(status); }

}  // namespace sockpressure
