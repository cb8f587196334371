#include "exporter/sources/shared/kernel_probe.h"

#include <fcntl.h>
#include <sys/statfs.h>
#include <unistd.h>
#include <sys/utsname.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "exporter/common/file_reader.h"
#include "exporter/sources/memory_hierarchy.h"

namespace sockpressure {
namespace {

std::optional<int> FindHz(absl::string_view config) {
  for (absl::string_view line : absl::StrSplit(config, '\n')) {
    if (!absl::ConsumePrefix(&line, "CONFIG_HZ=")) continue;
    int hz = 0;
    if (absl::SimpleAtoi(line, &hz) && hz > 0) return hz;
  }
  return std::nullopt;
}

}  // namespace

std::optional<int> KernelConfigHz(const std::string& procfs_root) {
  std::string gz = JoinPath(procfs_root, "config.gz");
  if (gzFile f = gzopen(gz.c_str(), "rb")) {
    std::string text;
    char buf[16384];
    int n;
    while ((n = gzread(f, buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
    gzclose(f);
    if (auto hz = FindHz(text)) return hz;
  }
  struct utsname u;
  if (::uname(&u) == 0) {
    absl::StatusOr<std::string> text = ReadFileToString(absl::StrCat("/boot/config-", u.release));
    if (text.ok()) return FindHz(*text);
  }
  return std::nullopt;
}

std::optional<int> RoundToKernelHz(double rate) {
  for (int hz : {100, 250, 300, 1000}) {
    if (std::fabs(rate - hz) <= hz * 0.06) return hz;
  }
  return std::nullopt;
}

BpfStatsFlag::BpfStatsFlag(const std::string& procfs_root, double reread_seconds)
    : path_(JoinPath(procfs_root, "sys/kernel/bpf_stats_enabled")),
      reread_ns_(static_cast<uint64_t>(std::max(0.0, reread_seconds) * 1e9)) {}

BpfStatsFlag::~BpfStatsFlag() {
  if (fd_ >= 0) ::close(fd_);
}

bool BpfStatsFlag::Enabled() {
  const uint64_t now = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
  if (read_ns_ == 0 || now - read_ns_ >= reread_ns_) {
    read_ns_ = now;
    enabled_ = Read();
  }
  return enabled_;
}

bool BpfStatsFlag::Read() {
  int err = 0;
  if (fd_ < 0) fd_ = OpenKernelFileAt(AT_FDCWD, path_.c_str(), err);
  if (fd_ < 0) return false;  // no such sysctl (before 5.8): no run statistics
  if (!PreadKernelFile(fd_, buf_, err)) {
    ::close(fd_);  // opened again next time
    fd_ = -1;
    return false;
  }
  return absl::StripAsciiWhitespace(buf_) == "1";
}

std::string KernelTiersUnusableReason(const std::string& cgroupfs_root) {
  MemoryHierarchy h = DetectMemoryHierarchy(cgroupfs_root);
  if (h.root.empty()) return absl::StrCat("no memory cgroup hierarchy under ", cgroupfs_root);
  struct statfs fs;
  constexpr long kCgroupMagic = 0x27e0eb, kCgroup2Magic = 0x63677270;  // linux/magic.h
  if (::statfs(h.root.c_str(), &fs) != 0 ||
      (static_cast<long>(fs.f_type) != kCgroupMagic && static_cast<long>(fs.f_type) != kCgroup2Magic)) {
    return absl::StrCat(h.root, " is not a live cgroup filesystem (a fixture tree?): kernel cgroup ids cannot be matched");
  }
  return "";
}

}  // namespace sockpressure
