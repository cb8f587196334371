// Extra labels for a cgroup path (namespace, pod, container on Kubernetes
// nodes). The state layer asks once per cgroup per sample; implementations
// cache. Called only from the sampler thread.
#pragma once

#include <string>

#include "exporter/state/snapshot.h"

namespace sockpressure {

class IdentityResolver {
 public:
  virtual ~IdentityResolver() = default;
  // Labels to add to every series of the cgroup at `path` (relative to the
  // memory hierarchy root). Empty when the cgroup belongs to no pod.
  virtual LabelPairs Resolve(const std::string& path) = 0;
  // Changes whenever an answer of Resolve() may have changed (a new pod
  // list). The state layer re-resolves the cgroups whose views it reuses
  // only then (and every kIdentityRefreshSamples), so a resolver that still
  // waits for some pod must keep asking for lists by itself.
  virtual uint64_t Version() { return 0; }
};

}  // namespace sockpressure
