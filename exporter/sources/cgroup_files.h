// What the cgroupfs collector reads from one cgroup directory, apart from the
// walk that decides which directories to read: memory.stat parsing, the slow
// files (limits, sizes, events, PSI) and the listing of subdirectories.
//
// Not thread-safe: each instance is owned by the cgroupfs collector (the
// sampler thread); the free functions keep no state.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "exporter/sources/sample.h"

namespace sockpressure {

// Counts malformed cgroup files in one sample and keeps the first message,
// which the collector's error status carries.
struct MalformedFiles {
  int count = 0;
  std::string first;
  void Note(const std::string& what) {
    ++count;
    if (first.empty()) first = what;
  }
  void Clear() {
    count = 0;
    first.clear();
  }
};

// Parses one cgroup's memory.stat into `out`. v1 uses the hierarchical
// total_* keys. Returns the number of malformed lines. The collector's own
// parser, public for the fuzz target (tests/fuzz/fuzz_cgroupfs.cc).
int ParseMemoryStat(absl::string_view text, bool v1, CgroupReading& out);

// Reads the slow files of the cgroup open at `dirfd` into a new c.limits
// (v1 or v2 names by c.v1); `buf` is scratch space. A file that is absent
// (this kernel or level has none) leaves its value unset.
void ReadSlowFiles(int dirfd, CgroupReading& c, std::string& buf, MalformedFiles& malformed);

// Lists the subdirectories of a cgroup directory with one getdents64 buffer
// kept between calls.
class ChildLister {
 public:
  // Lists `dirfd` from its current offset: names() (sorted, with inodes)
  // and links() (symlinks standing where a cgroup would).
  void List(int dirfd);
  const std::vector<std::pair<std::string, uint64_t>>& names() const { return names_; }
  const std::vector<std::string>& links() const { return links_; }

 private:
  void NoteLink(int dirfd, const char* name);

  std::vector<std::pair<std::string, uint64_t>> names_;  // child name, inode
  std::vector<std::string> links_;
  std::vector<char> dents_;
};

}  // namespace sockpressure
