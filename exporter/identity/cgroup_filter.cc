#include "exporter/identity/cgroup_filter.h"

#include <memory>
#include <optional>
#include <regex>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "exporter/identity/cgroup_path.h"

namespace sockpressure {
namespace {

absl::StatusOr<std::optional<std::regex>> Compile(const char* flag, const std::string& pattern) {
  if (pattern.empty()) return std::optional<std::regex>();
  try {
    return std::optional<std::regex>(std::regex(pattern, std::regex::ECMAScript | std::regex::optimize));
  } catch (const std::regex_error& e) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, ": not a regular expression: ", e.what()));
  }
}

}  // namespace

absl::StatusOr<std::function<bool(absl::string_view)>> NewCgroupFilter(const std::string& include,
                                                                       const std::string& exclude,
                                                                       const std::string& level) {
  if (level != "all" && level != "pod" && level != "container") {
    return absl::InvalidArgumentError(
        absl::StrCat("--cgroup.level: '", level, "' is none of all, pod, container"));
  }
  absl::StatusOr<std::optional<std::regex>> inc = Compile("cgroup.include", include);
  if (!inc.ok()) return inc.status();
  absl::StatusOr<std::optional<std::regex>> exc = Compile("cgroup.exclude", exclude);
  if (!exc.ok()) return exc.status();
  if (!*inc && !*exc && level == "all") return std::function<bool(absl::string_view)>();
  auto in = std::make_shared<const std::optional<std::regex>>(std::move(*inc));
  auto ex = std::make_shared<const std::optional<std::regex>>(std::move(*exc));
  const bool pods = level == "pod", containers = level == "container";
  return std::function<bool(absl::string_view)>([in, ex, pods, containers](absl::string_view path) {
    if (pods || containers) {
      if (std::optional<CgroupPodRef> ref = ParseCgroupPath(path)) {
        // Below a pod, kNone is the pod cgroup itself (or a child the
        // runtime does not name), the rest are containers and their children.
        bool pod_level = ref->role == ContainerRole::kNone;
        if (pods && !pod_level) return false;
        if (containers && pod_level) return false;
      }
    }
    if (*in && !std::regex_match(path.begin(), path.end(), **in)) return false;
    if (*ex && std::regex_match(path.begin(), path.end(), **ex)) return false;
    return true;
  });
}

}  // namespace sockpressure
