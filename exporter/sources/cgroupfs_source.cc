#include "absl/strings/string_view.h"
#include "exporter/sources/cgroupfs_source.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <dirent.h>
#include <climits>
#include <sys/syscall.h>
#include <unordered_map>
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

// Reads `name` relative to an open directory. false + errno in `err`.
// cgroupfs files are small and a short read means end of file, so most
// files cost three syscalls (open, read, close): at 10,000 cgroups per
// second, syscalls are most of the agent's CPU.
bool ReadAt(int dirfd, const char* name, std::string& buf, int& err) {
  int fd = ::openat(dirfd, name, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    err = errno;
    return false;
  }
  size_t used = 0;
  buf.resize(16384);
  for (;;) {
    ssize_t n = ::read(fd, buf.data() + used, buf.size() - used);
    if (n < 0) {
      if (errno == EINTR) continue;
      err = errno;
      ::close(fd);
      return false;
    }
    used += static_cast<size_t>(n);
    if (used < buf.size()) break;  // short read: EOF
    buf.resize(buf.size() * 2);
  }
  buf.resize(used);
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

// The files that change slowly or matter less than the reclaim counters
// (limits, sizes, events, PSI) are read every `slow_every` samples and
// reused in between; memory.stat (and sock_throttled on 6.19+) every sample.
struct SlowValues {
  uint64_t id = 0;
  std::optional<uint64_t> memory_current, memory_max, memory_high, memory_low, memory_min;
  std::optional<uint64_t> swap_current, swap_max, events_oom_kill;
  std::optional<PsiLine> psi_some, psi_full;
  std::optional<uint64_t> kmem_tcp_usage, kmem_tcp_limit, kmem_tcp_failcnt;
  std::optional<uint64_t> sock_throttled_local;
};

class CgroupfsSource final : public Source {
 public:
  CgroupfsSource(const Paths& paths, CgroupfsOptions options) : paths_(paths), options_(options) {}

  absl::string_view name() const override { return "cgroupfs"; }

  absl::Status Collect(Sample& sample) override;

 private:
  // Reads the files of one cgroup. Returns false when the cgroup vanished.
  bool ReadCgroup(int dirfd, bool slow_pass, CgroupReading& c);
  void ReadSlowFiles(int dirfd, const CgroupReading& c, SlowValues& v);
  // Lists the subdirectories of `dirfd` into names_ (with their inodes).
  void ListChildren(int dirfd);
  void NoteMalformed(const std::string& what);

  Paths paths_;
  CgroupfsOptions options_;
  std::string buf_;
  std::vector<std::pair<std::string, uint64_t>> names_;  // child name, inode
  std::vector<char> dents_;
  std::unordered_map<std::string, SlowValues> slow_;
  uint64_t cycle_ = 0;
  bool sock_throttled_seen_ = false;
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

void CgroupfsSource::NoteMalformed(const std::string& what) {
  ++malformed_files_;
  if (first_error_.empty()) first_error_ = what;
}

void CgroupfsSource::ReadSlowFiles(int dirfd, const CgroupReading& c, SlowValues& v) {
  v = SlowValues{};
  v.id = c.id;
  auto read_value = [&](const char* file, std::optional<uint64_t>& dst, bool v1_limit = false) {
    int e = 0;
    if (!ReadAt(dirfd, file, buf_, e)) return;  // absent on this kernel or level: fine
    std::optional<uint64_t> parsed = ParseLimit(buf_);
    if (!parsed) return NoteMalformed(absl::StrCat(c.path, "/", file, ": not a number"));
    dst = v1_limit ? NormalizeV1Limit(*parsed) : *parsed;
  };
  if (c.v1) {
    read_value("memory.usage_in_bytes", v.memory_current);
    read_value("memory.limit_in_bytes", v.memory_max, true);
    read_value("memory.soft_limit_in_bytes", v.memory_high, true);
    read_value("memory.kmem.tcp.usage_in_bytes", v.kmem_tcp_usage);
    read_value("memory.kmem.tcp.limit_in_bytes", v.kmem_tcp_limit, true);
    read_value("memory.kmem.tcp.failcnt", v.kmem_tcp_failcnt);
    return;
  }
  read_value("memory.current", v.memory_current);
  read_value("memory.max", v.memory_max);
  read_value("memory.high", v.memory_high);
  read_value("memory.low", v.memory_low);
  read_value("memory.min", v.memory_min);
  read_value("memory.swap.current", v.swap_current);
  read_value("memory.swap.max", v.swap_max);
  int e = 0;
  if (ReadAt(dirfd, "memory.events", buf_, e)) {
    FlatKeyed ev = ParseFlatKeyed(buf_);
    v.events_oom_kill = ev.Get("oom_kill");
    if (!ev.bad_lines.empty()) NoteMalformed(absl::StrCat(c.path, "/memory.events: malformed"));
  }
  if (ReadAt(dirfd, "memory.events.local", buf_, e)) {
    v.sock_throttled_local = ParseFlatKeyed(buf_).Get("sock_throttled");
    if (v.sock_throttled_local) sock_throttled_seen_ = true;
  }
  if (ReadAt(dirfd, "memory.pressure", buf_, e)) {
    Psi psi = ParsePsi(buf_);
    v.psi_some = psi.some;
    v.psi_full = psi.full;
    if (psi.malformed) NoteMalformed(absl::StrCat(c.path, "/memory.pressure: malformed"));
  }
}

bool CgroupfsSource::ReadCgroup(int dirfd, bool slow_pass, CgroupReading& c) {
  int err = 0;
  if (!ReadAt(dirfd, "memory.stat", buf_, err)) {
    if (!Gone(err)) NoteMalformed(absl::StrCat(c.path, "/memory.stat: ", std::strerror(err)));
    return false;
  }
  int bad = ParseMemoryStatImpl(buf_, c.v1, c);
  if (bad > 0) NoteMalformed(absl::StrCat(c.path, "/memory.stat: ", bad, " malformed line(s)"));

  SlowValues& v = slow_[c.path];
  if (slow_pass || v.id != c.id) {
    ReadSlowFiles(dirfd, c, v);
  } else if (sock_throttled_seen_) {
    // The kernel's own throttle counter is worth a read every sample.
    int e = 0;
    if (ReadAt(dirfd, "memory.events.local", buf_, e)) {
      v.sock_throttled_local = ParseFlatKeyed(buf_).Get("sock_throttled");
    }
  }
  c.memory_current = v.memory_current;
  c.memory_max = v.memory_max;
  c.memory_high = v.memory_high;
  c.memory_low = v.memory_low;
  c.memory_min = v.memory_min;
  c.swap_current = v.swap_current;
  c.swap_max = v.swap_max;
  if (!c.v1) c.swap_bytes = v.swap_current;
  c.events_oom_kill = v.events_oom_kill;
  c.sock_throttled_local = v.sock_throttled_local;
  c.psi_some = v.psi_some;
  c.psi_full = v.psi_full;
  c.kmem_tcp_usage = v.kmem_tcp_usage;
  c.kmem_tcp_limit = v.kmem_tcp_limit;
  c.kmem_tcp_failcnt = v.kmem_tcp_failcnt;
  return true;
}

void CgroupfsSource::ListChildren(int dirfd) {
  names_.clear();
  dents_.resize(32768);
  for (;;) {
    long n = ::syscall(SYS_getdents64, dirfd, dents_.data(), dents_.size());
    if (n <= 0) break;  // 0: end; <0: the directory went away mid-listing
    for (long off = 0; off < n;) {
      const struct dirent64* de = reinterpret_cast<const struct dirent64*>(dents_.data() + off);
      off += de->d_reclen;
      if (de->d_name[0] == '.') continue;
      if (de->d_type == DT_DIR) {
        names_.emplace_back(de->d_name, de->d_ino);
      } else if (de->d_type == DT_UNKNOWN) {
        struct stat st;
        if (::fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) {
          names_.emplace_back(de->d_name, de->d_ino);
        }
      }
    }
    // Filesystems fill the buffer until the next entry does not fit; with
    // room for another maximal entry left over, the listing is complete and
    // the call that would return 0 can be saved (one syscall per cgroup).
    if (static_cast<size_t>(n) + sizeof(struct dirent64) + NAME_MAX < dents_.size()) break;
  }
  // getdents order depends on the filesystem; sorted siblings make the
  // output and the --cgroup.max cut the same on every run.
  std::sort(names_.begin(), names_.end());
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
    uint64_t id;  // d_ino from the parent's listing == cgroup id
  };
  struct stat root_st;
  if (::fstat(rootfd, &root_st) != 0) {
    ::close(rootfd);
    return absl::OkStatus();
  }
  const uint64_t slow_every = std::max<uint64_t>(1, options_.slow_every);
  const bool slow_pass = cycle_++ % slow_every == 0;
  std::deque<Pending> queue;
  queue.push_back({"/", -1, root_st.st_ino});
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
    CgroupReading c;
    c.path = p.path;
    c.id = p.id;
    c.parent = p.parent;
    c.v1 = h.v1;
    if (!ReadCgroup(dirfd, slow_pass, c)) {
      // No memory.stat: memory is not enabled for this subtree on v2 (its
      // children cannot have it either), or the cgroup is being removed.
      ::close(dirfd);
      continue;
    }
    int index = static_cast<int>(sample.cgroups.size());
    sample.id_index[c.id] = index;
    sample.cgroups.push_back(std::move(c));
    ListChildren(dirfd);
    ::close(dirfd);
    for (const auto& [name, ino] : names_) {
      queue.push_back({p.path == "/" ? absl::StrCat("/", name) : absl::StrCat(p.path, "/", name), index, ino});
    }
  }
  // Forget cached slow values of cgroups that are gone.
  if (slow_pass) {
    for (auto it = slow_.begin(); it != slow_.end();) {
      it = sample.IndexOfId(it->second.id) < 0 ? slow_.erase(it) : std::next(it);
    }
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
