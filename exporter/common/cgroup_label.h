// The `cgroup` label: a cgroup's path as the metrics, alerts, the JSON API
// and the pages name it.
//
// Under systemd (the kubelet's systemd cgroup driver, every systemd host) a
// slice's name spells out its ancestry: `kubepods-burstable-pod<uid>.slice`
// always lives in `kubepods-burstable.slice`, which lives in
// `kubepods.slice`. Repeating those ancestors in every series of a
// container cost about 40 bytes of the ~300 each series takes, the
// difference between 1,144 and about 1,000 bytes per cgroup at 10,000 kubelet
// cgroups. So the label leaves out a leading run of slices that the next
// component's name implies:
//
//   /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podU.slice/cri-containerd-C.scope
//   -> /kubepods-burstable-podU.slice/cri-containerd-C.scope
//   /user.slice/user-1000.slice/session-3.scope -> /user-1000.slice/session-3.scope
//   /system.slice/containerd.service, /kubepods/burstable/podU/C, /lab/a -> unchanged
//
// The label is a suffix of the path (no copy), and the path can be rebuilt
// from it (docs/metrics.md#the-cgroup-label): `a-b-c.slice` is
// `/a.slice/a-b.slice/a-b-c.slice`. Only a manager other than systemd that
// made `/a-b.slice` directly under the root beside systemd's
// `/a.slice/a-b.slice` would make two cgroups share a label.
#pragma once

#include "absl/strings/string_view.h"

namespace sockpressure {

// Thread-safe (pure).
absl::string_view CgroupLabel(absl::string_view path);

// Whether `label_or_path` names the cgroup at `path`: its full path or its
// label (an API filter may be given either).
bool NamesCgroup(absl::string_view label_or_path, absl::string_view path);

}  // namespace sockpressure
