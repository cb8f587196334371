// Which memory hierarchy a cgroupfs mount holds (v2, hybrid, v1), and
// whether its root is a cgroupfs at all.
#include "exporter/sources/memory_hierarchy.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <optional>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "exporter/common/file_reader.h"

namespace sockpressure {
namespace {

bool FileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

bool ControllersHaveMemory(const std::string& dir) {
  absl::StatusOr<std::string> text = ReadKernelFile(JoinPath(dir, "cgroup.controllers"));
  if (!text.ok()) return false;
  for (absl::string_view c : absl::StrSplit(*text, absl::ByAnyChar(" \n"), absl::SkipEmpty())) {
    if (c == "memory") return true;
  }
  return false;
}

// Controller names are lower-case words ("cpuset cpu io memory pids");
// anything else in a root cgroup.controllers means the tree is not cgroupfs.
}  // namespace

std::optional<std::string> MalformedControllers(const std::string& dir) {
  absl::StatusOr<std::string> text = ReadKernelFile(JoinPath(dir, "cgroup.controllers"));
  if (!text.ok()) return IsAbsent(text.status()) ? std::nullopt : std::optional<std::string>(text.status().ToString());
  for (char ch : *text) {
    if (!absl::ascii_islower(ch) && !absl::ascii_isdigit(ch) && ch != '_' && ch != ' ' && ch != '\n') {
      return absl::StrCat(JoinPath(dir, "cgroup.controllers"), ": not a list of controller names");
    }
  }
  return std::nullopt;
}

MemoryHierarchy DetectMemoryHierarchy(const std::string& root) {
  MemoryHierarchy h;
  if (ControllersHaveMemory(root)) {
    h.mode = CgroupMode::kUnified;
    h.root = root;
    return h;
  }
  std::string unified = JoinPath(root, "unified");
  bool has_unified = FileExists(JoinPath(unified, "cgroup.controllers"));
  if (has_unified && ControllersHaveMemory(unified)) {
    h.mode = CgroupMode::kHybrid;
    h.root = unified;
    return h;
  }
  std::string v1 = JoinPath(root, "memory");
  if (FileExists(JoinPath(v1, "memory.stat"))) {
    h.mode = has_unified ? CgroupMode::kHybrid : CgroupMode::kLegacy;
    h.root = v1;
    h.v1 = true;
    return h;
  }
  if (FileExists(JoinPath(root, "cgroup.controllers"))) h.mode = CgroupMode::kUnified;
  return h;
}

bool HierarchyRoot::Find(const std::string& cgroupfs_root) {
  const MemoryHierarchy last = h_;
  const dev_t last_dev = dev_;
  const ino_t last_ino = ino_;
  Close();
  h_ = DetectMemoryHierarchy(cgroupfs_root);
  if (h_.root.empty()) return true;
  int fd = ::open(h_.root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || ::fstat(fd, &st) != 0) {  // unmounted under us: nothing to read this time
    if (fd >= 0) ::close(fd);
    return false;
  }
  fd_ = fd;
  dev_ = st.st_dev;
  ino_ = st.st_ino;
  struct statfs fs;
  cgroupfs_ = ::fstatfs(fd, &fs) == 0 && (fs.f_type == CGROUP2_SUPER_MAGIC || fs.f_type == CGROUP_SUPER_MAGIC);
  return last.root != h_.root || last.v1 != h_.v1 || last_dev != dev_ || last_ino != ino_;
}

void HierarchyRoot::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

}  // namespace sockpressure
