#include "exporter/identity/cgroup_path.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"

namespace sockpressure {
namespace {

bool IsHex(absl::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!absl::ascii_isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// Pod UIDs are RFC 4122 UUIDs for API pods, and 32 hex digits (an md5 of the
// manifest) for static pods; the systemd driver writes '_' for '-' because
// '-' is its slice hierarchy separator.
std::optional<std::string> NormalizeUid(absl::string_view raw) {
  std::string uid(raw);
  for (char& c : uid) {
    if (c == '_') c = '-';
    c = absl::ascii_tolower(static_cast<unsigned char>(c));
  }
  if (uid.size() == 32 && IsHex(uid)) return uid;
  if (uid.size() != 36) return std::nullopt;
  for (size_t i = 0; i < uid.size(); ++i) {
    bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? uid[i] != '-' : !absl::ascii_isxdigit(static_cast<unsigned char>(uid[i]))) return std::nullopt;
  }
  return uid;
}

// Container ids are 64 hex digits for containerd, CRI-O and Docker; 12 is
// the shortest form any tool prints, below that a hex name is a coincidence.
std::optional<std::string> NormalizeContainerId(absl::string_view raw) {
  if (raw.size() < 12 || raw.size() > 128 || !IsHex(raw)) return std::nullopt;
  return absl::AsciiStrToLower(raw);
}

// "kubepods-burstable-pod<uid>.slice" (optionally with a prefix such as
// kind's "kubelet-"): QoS and UID.
bool ParseSystemdPod(absl::string_view comp, CgroupPodRef* out) {
  if (!absl::ConsumeSuffix(&comp, ".slice")) return false;
  size_t pos = comp.rfind("-pod");
  if (pos == absl::string_view::npos) return false;
  absl::string_view head = comp.substr(0, pos);
  std::optional<std::string> uid = NormalizeUid(comp.substr(pos + 4));
  if (!uid) return false;
  if (absl::EndsWith(head, "kubepods-burstable")) {
    out->qos = "burstable";
  } else if (absl::EndsWith(head, "kubepods-besteffort")) {
    out->qos = "besteffort";
  } else if (absl::EndsWith(head, "kubepods")) {
    out->qos = "guaranteed";
  } else {
    return false;
  }
  out->pod_uid = *uid;
  return true;
}

// ".../kubepods/[burstable|besteffort/]pod<uid>": the kubepods ancestry is
// required so that an unrelated "pod..." directory is not taken for a pod.
bool ParseCgroupfsPod(const std::vector<absl::string_view>& comps, size_t i, CgroupPodRef* out) {
  absl::string_view comp = comps[i];
  if (!absl::ConsumePrefix(&comp, "pod") || i == 0) return false;
  std::optional<std::string> uid = NormalizeUid(comp);
  if (!uid) return false;
  absl::string_view parent = comps[i - 1];
  if (parent == "kubepods") {
    out->qos = "guaranteed";
  } else if ((parent == "burstable" || parent == "besteffort") && i >= 2 && comps[i - 2] == "kubepods") {
    out->qos = std::string(parent);
  } else {
    return false;
  }
  out->pod_uid = *uid;
  return true;
}

void ParseContainer(absl::string_view comp, CgroupPodRef* out) {
  absl::ConsumeSuffix(&comp, ".scope");
  struct Prefix {
    absl::string_view text, runtime;
    ContainerRole role;
  };
  // crio-conmon- before crio-: the longer prefix must win.
  static constexpr Prefix kPrefixes[] = {
      {"cri-containerd-", "containerd", ContainerRole::kContainer},
      {"crio-conmon-", "crio", ContainerRole::kMonitor},
      {"crio-", "crio", ContainerRole::kContainer},
      {"docker-", "docker", ContainerRole::kContainer},
  };
  for (const Prefix& p : kPrefixes) {
    absl::string_view rest = comp;
    if (!absl::ConsumePrefix(&rest, p.text)) continue;
    if (std::optional<std::string> id = NormalizeContainerId(rest)) {
      out->role = p.role;
      out->runtime = std::string(p.runtime);
      out->container_id = *id;
    }
    return;
  }
  if (std::optional<std::string> id = NormalizeContainerId(comp)) {
    out->role = ContainerRole::kContainer;
    out->container_id = *id;
  }
}

}  // namespace

std::optional<CgroupPodRef> ParseCgroupPath(absl::string_view path) {
  std::vector<absl::string_view> comps = absl::StrSplit(path, '/', absl::SkipEmpty());
  for (size_t i = 0; i < comps.size(); ++i) {
    CgroupPodRef ref;
    if (!ParseSystemdPod(comps[i], &ref) && !ParseCgroupfsPod(comps, i, &ref)) continue;
    if (i + 1 < comps.size()) ParseContainer(comps[i + 1], &ref);
    return ref;
  }
  return std::nullopt;
}

}  // namespace sockpressure
