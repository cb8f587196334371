#include "exporter/common/cgroup_label.h"
#include "absl/strings/match.h"

namespace sockpressure {
namespace {

constexpr absl::string_view kSlice = ".slice";

// `child` is a slice systemd can only have put in the slice `parent`:
// parent is "x.slice" and child "x-<more>.slice".
bool ImpliedParent(absl::string_view parent, absl::string_view child) {
  if (!absl::EndsWith(parent, kSlice) || !absl::EndsWith(child, kSlice)) return false;
  absl::string_view stem = parent.substr(0, parent.size() - kSlice.size());
  return !stem.empty() && child.size() > stem.size() + 1 + kSlice.size() && absl::StartsWith(child, stem) &&
         child[stem.size()] == '-';
}

// The path component that starts at `pos` (just after a '/').
absl::string_view ComponentAt(absl::string_view path, size_t pos) {
  size_t end = path.find('/', pos);
  return path.substr(pos, end == absl::string_view::npos ? absl::string_view::npos : end - pos);
}

}  // namespace

absl::string_view CgroupLabel(absl::string_view path) {
  if (path.size() < 2 || path[0] != '/') return path;
  size_t start = 0;  // the '/' the label begins with
  absl::string_view here = ComponentAt(path, 1);
  while (start + 1 + here.size() < path.size()) {
    size_t next_pos = start + 1 + here.size() + 1;
    absl::string_view next = ComponentAt(path, next_pos);
    if (!ImpliedParent(here, next)) break;
    start = next_pos - 1;
    here = next;
  }
  return path.substr(start);
}

bool NamesCgroup(absl::string_view label_or_path, absl::string_view path) {
  return label_or_path == path || label_or_path == CgroupLabel(path);
}

}  // namespace sockpressure
