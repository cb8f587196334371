// Pods of one kubelet pod list, by UID, with container IDs mapped to names.
#pragma once

#include <string>
#include <unordered_map>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace sockpressure {

struct PodInfo {
  std::string uid, namespace_name, name;
  std::string qos;  // lowercase: "guaranteed", "burstable", "besteffort" (may be empty)
  // Container ID (lowercase hex, runtime scheme stripped) -> container name,
  // over regular, init and ephemeral containers. Sandbox (pause) containers
  // are never listed: the kubelet API does not expose them.
  std::unordered_map<std::string, std::string> containers;
};

using PodIndex = std::unordered_map<std::string, PodInfo>;  // by lowercase UID

// Parses a PodList JSON document (kubelet /pods, or `kubectl get pods -o json`
// filtered to one node). Pods without a UID are skipped; fields outside the
// subset in pod_list.proto are ignored.
absl::StatusOr<PodIndex> ParsePodList(absl::string_view json);

// "containerd://<id>", "cri-o://<id>", "docker://<id>" -> "<id>" (lowercase).
std::string StripContainerIdScheme(absl::string_view id);

}  // namespace sockpressure
