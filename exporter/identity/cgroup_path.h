// What a memory cgroup path alone says about Kubernetes: the pod UID, the
// QoS class and, below the pod, the container ID. Names (namespace, pod,
// container) need the kubelet's pod list; see kube_identity.h.
//
// The kubelet names pod cgroups after the pod UID with either cgroup driver:
//   systemd:  .../kubepods.slice/kubepods-burstable.slice/
//                 kubepods-burstable-pod<uid with '_' for '-'>.slice/<runtime>-<id>.scope
//   cgroupfs: .../kubepods/burstable/pod<uid>/<id>
// Guaranteed pods sit directly under kubepods. Container cgroups are named by
// the runtime: containerd "cri-containerd-<id>.scope", CRI-O "crio-<id>.scope"
// (its monitor "crio-conmon-<id>.scope"), Docker/cri-dockerd
// "docker-<id>.scope"; with cgroupfs the bare id (CRI-O: "crio-<id>").
// Paths may be nested below another root (kind: /kubelet.slice/kubelet-kubepods.slice,
// docker-in-docker: /docker/<id>/kubepods/...), so the pod component is
// searched anywhere in the path, not only at the top.
#pragma once

#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace sockpressure {

enum class ContainerRole {
  kNone,       // pod-level cgroup (or an unrecognised child of it)
  kContainer,  // a runtime container: workload, init, ephemeral or sandbox (pause)
  kMonitor,    // CRI-O's conmon: runtime overhead, folded into the pod
};

struct CgroupPodRef {
  std::string pod_uid;  // lowercase, with dashes, as in metadata.uid
  std::string qos;      // "guaranteed", "burstable" or "besteffort"
  ContainerRole role = ContainerRole::kNone;
  std::string container_id;  // lowercase hex, without the runtime prefix
  std::string runtime;       // "containerd", "crio", "docker", or "" (bare id)
};

// nullopt when the path is not inside a pod cgroup (including the kubepods
// and QoS parents themselves). Descendants of a container cgroup (crun's
// "container" child, systemd inside a container) resolve to that container.
std::optional<CgroupPodRef> ParseCgroupPath(absl::string_view path);

}  // namespace sockpressure
