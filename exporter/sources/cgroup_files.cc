#include "exporter/sources/cgroup_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "exporter/common/file_reader.h"
#include "exporter/common/parse.h"

namespace sockpressure {
namespace {

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

}  // namespace

int ParseMemoryStat(absl::string_view text, bool v1, CgroupReading& out) {
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

void ReadSlowFiles(int dirfd, CgroupReading& c, std::string& buf, MalformedFiles& malformed) {
  CgroupLimits l;
  auto read_value = [&](const char* file, std::optional<uint64_t>& dst, bool v1_limit = false) {
    int e = 0;
    if (!ReadKernelFileAt(dirfd, file, buf, e)) return;  // absent on this kernel or level: fine
    std::optional<uint64_t> parsed = ParseLimit(buf);
    if (!parsed) return malformed.Note(absl::StrCat(c.path.str(), "/", file, ": not a number"));
    dst = v1_limit ? NormalizeV1Limit(*parsed) : *parsed;
  };
  if (c.v1) {
    read_value("memory.usage_in_bytes", l.memory_current);
    read_value("memory.limit_in_bytes", l.memory_max, true);
    read_value("memory.soft_limit_in_bytes", l.memory_high, true);
    read_value("memory.kmem.tcp.usage_in_bytes", l.kmem_tcp_usage);
    read_value("memory.kmem.tcp.limit_in_bytes", l.kmem_tcp_limit, true);
    read_value("memory.kmem.tcp.failcnt", l.kmem_tcp_failcnt);
    c.limits = std::make_shared<const CgroupLimits>(std::move(l));
    return;
  }
  read_value("memory.current", l.memory_current);
  read_value("memory.max", l.memory_max);
  read_value("memory.high", l.memory_high);
  read_value("memory.low", l.memory_low);
  read_value("memory.min", l.memory_min);
  read_value("memory.swap.current", l.swap_current);
  read_value("memory.swap.max", l.swap_max);
  int e = 0;
  if (ReadKernelFileAt(dirfd, "memory.events", buf, e)) {
    FlatKeyed ev = ParseFlatKeyed(buf);
    l.events_oom_kill = ev.Get("oom_kill");
    if (!ev.bad_lines.empty()) malformed.Note(absl::StrCat(c.path.str(), "/memory.events: malformed"));
  }
  if (ReadKernelFileAt(dirfd, "memory.pressure", buf, e)) {
    Psi psi = ParsePsi(buf);
    l.psi_some = psi.some;
    l.psi_full = psi.full;
    if (psi.malformed) malformed.Note(absl::StrCat(c.path.str(), "/memory.pressure: malformed"));
  }
  c.limits = std::make_shared<const CgroupLimits>(std::move(l));
}

void ChildLister::NoteLink(int dirfd, const char* name) {
  // A symlink to a directory, or a dangling one, stands where a cgroup
  // would; one to a file (or named like a control file) is a file's
  // problem, reported when that file is read.
  absl::string_view n(name);
  if (absl::StartsWith(n, "memory.") || absl::StartsWith(n, "cgroup.")) return;
  struct stat st;
  if (::fstatat(dirfd, name, &st, 0) == 0 && !S_ISDIR(st.st_mode)) return;
  links_.emplace_back(name);
}

void ChildLister::List(int dirfd) {
  names_.clear();
  links_.clear();
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
      } else if (de->d_type == DT_LNK) {
        NoteLink(dirfd, de->d_name);
      } else if (de->d_type == DT_UNKNOWN) {
        struct stat st;
        if (::fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
        if (S_ISDIR(st.st_mode)) names_.emplace_back(de->d_name, de->d_ino);
        else if (S_ISLNK(st.st_mode)) NoteLink(dirfd, de->d_name);
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

}  // namespace sockpressure
