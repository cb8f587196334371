#include "exporter/sources/shared/cgroup_mapper.h"

#include <dirent.h>
#include <sys/stat.h>

#include <deque>

#include "absl/strings/str_cat.h"
#include "exporter/common/file_reader.h"
#include "exporter/sources/memory_hierarchy.h"

namespace sockpressure {
namespace {

bool IsDir(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

void CgroupMapper::Begin() {
  // Built at the first id that is not a memory cgroup's own (v1, or a child
  // without the memory controller): on v2 most censuses never need it, and
  // a copy of every path per census would cost what the walk saved.
  by_path_.clear();
  by_path_built_ = false;
  MemoryHierarchy h = DetectMemoryHierarchy(cgroupfs_);
  unified_root_ = !h.v1 ? h.root : JoinPath(cgroupfs_, "unified");
  if (h.v1 && !IsDir(unified_root_)) unified_root_.clear();
  if (h.root.empty()) unified_root_.clear();
  rescanned_ = false;
  v1_ = h.v1;
}

uint64_t CgroupMapper::Map(uint64_t id2, const Sample& sample) {
  if (sample.cgroups.empty()) return 0;
  if (!v1_ && sample.IndexOfId(id2) >= 0) return id2;
  auto it = paths_.find(id2);
  if (it == paths_.end() && !rescanned_) {
    Rescan();
    it = paths_.find(id2);
  }
  if (it == paths_.end()) return sample.cgroups[0].id;  // unknown (e.g. net_cls id 1): root
  if (!by_path_built_) {
    for (const CgroupReading& c : sample.cgroups) by_path_[c.path] = c.id;
    by_path_built_ = true;
  }
  std::string p = it->second;
  for (;;) {
    auto m = by_path_.find(p);
    if (m != by_path_.end()) return m->second;
    if (p == "/") return sample.cgroups[0].id;
    size_t slash = p.rfind('/');
    p = slash == 0 ? "/" : p.substr(0, slash);
  }
}

void CgroupMapper::AddCensus(const std::unordered_map<uint64_t, SocketCensus>& by_cgroup2, const Sample& sample,
                             std::unordered_map<uint64_t, SocketCensus>& out) {
  for (const auto& [id2, c] : by_cgroup2) {
    uint64_t id = Map(id2, sample);
    if (id != 0) out[id] += c;
  }
}

void CgroupMapper::Rescan() {
  rescanned_ = true;
  if (unified_root_.empty()) return;
  paths_.clear();
  std::deque<std::string> queue{"/"};
  while (!queue.empty() && paths_.size() < 200000) {
    std::string rel = std::move(queue.front());
    queue.pop_front();
    std::string abs = rel == "/" ? unified_root_ : unified_root_ + rel;
    struct stat st;
    if (::stat(abs.c_str(), &st) != 0) continue;
    paths_[st.st_ino] = rel;
    DIR* d = ::opendir(abs.c_str());
    if (!d) continue;
    while (struct dirent* de = ::readdir(d)) {
      if (de->d_name[0] == '.' || (de->d_type != DT_DIR && de->d_type != DT_UNKNOWN)) continue;
      queue.push_back(rel == "/" ? absl::StrCat("/", de->d_name) : absl::StrCat(rel, "/", de->d_name));
    }
    ::closedir(d);
  }
}

}  // namespace sockpressure
