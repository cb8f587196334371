#include "absl/strings/string_view.h"
#include "exporter/sources/cgroupfs_source.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "exporter/common/file_reader.h"
#include "exporter/common/logging.h"

namespace sockpressure {
namespace {

// Reads `name` relative to an open directory. false + errno-ish code in `err`.
bool ReadAt(int dirfd, const char* name, std::string& buf, int& err) {
  int fd = ::openat(dirfd, name, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    err = errno;
    return false;
  }
  buf.clear();
  char chunk[8192];
  for (;;) {
    ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0) {
      if (errno == EINTR) continue;
      err = errno;
      ::close(fd);
      return false;
    }
    if (n == 0) break;
    buf.append(chunk, static_cast<size_t>(n));
  }
  ::close(fd);
  return true;
}

bool Gone(int err) { return err == ENOENT || err == ENODEV || err == ENOTDIR; }

bool FileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

bool ControllersHaveMemory(const std::string& dir) {
  absl::StatusOr<std::string> text = ReadFileToString(JoinPath(dir, "cgroup.controllers"));
  if (!text.ok()) return false;
  for (absl::string_view c : absl::StrSplit(*text, absl::ByAnyChar(" \n"), absl::SkipEmpty())) {
    if (c == "memory") return true;
  }
  return false;
}

std::optional<uint64_t> ParseLimit(absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  if (text == "max") return UINT64_MAX;
  uint64_t v = 0;
  if (absl::SimpleAtoi(text, &v)) return v;
  return std::nullopt;
}

// v1 reports "unlimited" as a huge page-rounded number (LONG_MAX rounded
// down to a page); show it as +Inf like v2's "max".
uint64_t NormalizeV1Limit(uint64_t v) { return v >= (uint64_t{1} << 62) ? UINT64_MAX : v; }

class CgroupfsSource final : public Source {
 public:
  CgroupfsSource(const Paths& paths, CgroupfsOptions options) : paths_(paths), options_(options) {}

  absl::string_view name() const override { return "cgroupfs"; }

  absl::Status Collect(Sample& sample) override;

 private:
  // Reads the files of one cgroup. Returns false when the cgroup vanished.
  bool ReadCgroup(int dirfd, CgroupReading& c);

  Paths paths_;
  CgroupfsOptions options_;
  std::string buf_;
  std::vector<std::string> names_;
  int malformed_files_ = 0;
  std::string first_error_;
  bool logged_missing_ = false;
};

int ParseMemoryStatImpl(absl::string_view text, bool v1, CgroupReading& out) {
  int bad = 0;
  size_t pos = 0;
  std::optional<uint64_t> v1_rss, v1_cache, v1_swap;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == absl::string_view::npos) eol = text.size();
    absl::string_view line = text.substr(pos, eol - pos);
    pos = eol + 1;
    if (line.empty()) continue;
    size_t sp = line.find(' ');
    uint64_t v = 0;
    if (sp == absl::string_view::npos || !absl::SimpleAtoi(line.substr(sp + 1), &v)) {
      ++bad;
      continue;
    }
    absl::string_view key = line.substr(0, sp);
    if (v1) {
      if (key == "total_rss") v1_rss = v;
      else if (key == "total_cache") v1_cache = v;
      else if (key == "total_swap") v1_swap = v;
      continue;
    }
    if (key == "anon") out.anon_bytes = v;
    else if (key == "file") out.file_bytes = v;
    else if (key == "sock") out.sock_bytes = v;
    else if (key == "pgscan") out.pgscan = v;
    else if (key == "pgsteal") out.pgsteal = v;
    else if (key == "pgscan_proactive") out.pgscan_proactive = v;
    else if (key == "pgsteal_proactive") out.pgsteal_proactive = v;
  }
  if (v1) {
    out.anon_bytes = v1_rss;
    out.file_bytes = v1_cache;
    out.swap_bytes = v1_swap;
  }
  return bad;
}

bool CgroupfsSource::ReadCgroup(int dirfd, CgroupReading& c) {
  int err = 0;
  if (!ReadAt(dirfd, "memory.stat", buf_, err)) {
    if (!Gone(err) && first_error_.empty()) {
      first_error_ = absl::StrCat(c.path, "/memory.stat: ", std::strerror(err));
    }
    return false;
  }
  int bad = ParseMemoryStatImpl(buf_, c.v1, c);
  if (bad > 0) {
    ++malformed_files_;
    if (first_error_.empty()) {
      first_error_ = absl::StrCat(c.path, "/memory.stat: ", bad, " malformed line(s)");
    }
  }
  auto read_value = [&](const char* file, std::optional<uint64_t>& dst, bool v1_limit = false) {
    int e = 0;
    if (!ReadAt(dirfd, file, buf_, e)) return;  // absent on this kernel/level: fine
    std::optional<uint64_t> v = ParseLimit(buf_);
    if (!v) {
      ++malformed_files_;
      if (first_error_.empty()) first_error_ = absl::StrCat(c.path, "/", file, ": not a number");
      return;
    }
    dst = v1_limit ? NormalizeV1Limit(*v) : *v;
  };
  if (c.v1) {
    read_value("memory.usage_in_bytes", c.memory_current);
    read_value("memory.limit_in_bytes", c.memory_max, true);
    read_value("memory.soft_limit_in_bytes", c.memory_high, true);
    read_value("memory.kmem.tcp.usage_in_bytes", c.kmem_tcp_usage);
    read_value("memory.kmem.tcp.limit_in_bytes", c.kmem_tcp_limit, true);
    read_value("memory.kmem.tcp.failcnt", c.kmem_tcp_failcnt);
    return true;
  }
  read_value("memory.current", c.memory_current);
  read_value("memory.max", c.memory_max);
  read_value("memory.high", c.memory_high);
  read_value("memory.low", c.memory_low);
  read_value("memory.min", c.memory_min);
  read_value("memory.swap.current", c.swap_current);
  read_value("memory.swap.max", c.swap_max);
  c.swap_bytes = c.swap_current;
  int e = 0;
  if (ReadAt(dirfd, "memory.events", buf_, e)) {
    FlatKeyed ev = ParseFlatKeyed(buf_);
    c.events_oom_kill = ev.Get("oom_kill");
    c.events_high = ev.Get("high");
    c.events_max = ev.Get("max");
    if (!ev.bad_lines.empty()) ++malformed_files_;
  }
  if (ReadAt(dirfd, "memory.events.local", buf_, e)) {
    FlatKeyed ev = ParseFlatKeyed(buf_);
    c.sock_throttled_local = ev.Get("sock_throttled");
  }
  if (ReadAt(dirfd, "memory.pressure", buf_, e)) {
    Psi psi = ParsePsi(buf_);
    c.psi_some = psi.some;
    c.psi_full = psi.full;
    if (psi.malformed) {
      ++malformed_files_;
      if (first_error_.empty()) first_error_ = absl::StrCat(c.path, "/memory.pressure: malformed");
    }
  }
  return true;
}

absl::Status CgroupfsSource::Collect(Sample& sample) {
  MemoryHierarchy h = DetectMemoryHierarchy(paths_.cgroupfs);
  sample.cgroup_mode = h.mode;
  if (h.root.empty()) {
    if (!logged_missing_) {
      SP_LOG_WARN("no memory cgroup hierarchy under ", paths_.cgroupfs,
                  " (neither cgroup v2 with the memory controller nor a v1 memory mount); "
                  "per-cgroup metrics are unavailable");
      logged_missing_ = true;
    }
    return absl::OkStatus();
  }
  malformed_files_ = 0;
  first_error_.clear();

  // Every cgroup is opened relative to one descriptor of the hierarchy
  // root, so a walk never mixes two different trees mounted or swapped at
  // the same path while it runs.
  int rootfd = ::open(h.root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (rootfd < 0) return absl::OkStatus();  // unmounted under us: nothing to read this time

  struct Pending {
    std::string path;
    int parent;
  };
  std::deque<Pending> queue;
  queue.push_back({"/", -1});
  size_t skipped = 0;
  while (!queue.empty()) {
    Pending p = std::move(queue.front());
    queue.pop_front();
    if (sample.cgroups.size() >= options_.max_cgroups) {
      ++skipped;
      continue;
    }
    const char* rel = p.path == "/" ? "." : p.path.c_str() + 1;
    int dirfd = ::openat(rootfd, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (dirfd < 0) continue;  // vanished between listing and reading
    struct stat st;
    if (::fstat(dirfd, &st) != 0) {
      ::close(dirfd);
      continue;
    }
    CgroupReading c;
    c.path = p.path;
    c.id = st.st_ino;
    c.parent = p.parent;
    c.v1 = h.v1;
    if (!ReadCgroup(dirfd, c)) {
      // No memory.stat: memory is not enabled for this subtree on v2 (its
      // children cannot have it either), or the cgroup is being removed.
      ::close(dirfd);
      continue;
    }
    int index = static_cast<int>(sample.cgroups.size());
    sample.id_index[c.id] = index;
    sample.cgroups.push_back(std::move(c));

    int dup = ::dup(dirfd);
    DIR* dir = dup >= 0 ? ::fdopendir(dup) : nullptr;
    if (dir == nullptr) {
      if (dup >= 0) ::close(dup);
      ::close(dirfd);
      continue;
    }
    names_.clear();
    while (struct dirent* de = ::readdir(dir)) {
      if (de->d_type != DT_DIR && de->d_type != DT_UNKNOWN) continue;
      if (de->d_name[0] == '.') continue;
      if (de->d_type == DT_UNKNOWN) {
        struct stat cst;
        if (::fstatat(dirfd, de->d_name, &cst, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(cst.st_mode)) {
          continue;
        }
      }
      names_.emplace_back(de->d_name);
    }
    ::closedir(dir);
    // readdir order depends on the filesystem; sorted siblings make the
    // output and the --cgroup.max cut the same on every run.
    std::sort(names_.begin(), names_.end());
    for (const std::string& n : names_) {
      queue.push_back({p.path == "/" ? absl::StrCat("/", n) : absl::StrCat(p.path, "/", n), index});
    }
    ::close(dirfd);
  }
  ::close(rootfd);
  sample.cgroups_skipped = skipped;
  for (const CgroupReading& c : sample.cgroups) {
    // memory.stat pgscan/pgsteal exist on v2 only; v1 has no per-memcg scan counters.
    if (c.pgscan && c.pgsteal) {
      sample.MarkLive(Signal::kReclaim, Tier::kMemoryStat);
      sample.MarkLive(Signal::kSocketPressure, Tier::kMemoryStat);
    }
    if (c.sock_throttled_local) sample.MarkLive(Signal::kSockThrottled, Tier::kMemoryEvents);
  }
  if (malformed_files_ > 0 || !first_error_.empty()) {
    return absl::DataLossError(absl::StrCat(malformed_files_, " malformed cgroup file(s); first: ", first_error_));
  }
  return absl::OkStatus();
}

}  // namespace

int ParseMemoryStat(absl::string_view text, bool v1, CgroupReading& out) {
  return ParseMemoryStatImpl(text, v1, out);
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

std::unique_ptr<Source> NewCgroupfsSource(const Paths& paths, CgroupfsOptions options) {
  return std::make_unique<CgroupfsSource>(paths, options);
}

}  // namespace sockpressure
