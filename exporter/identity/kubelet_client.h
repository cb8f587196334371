// Where pod lists come from (the kubelet's HTTPS /pods endpoint, or a file),
// the --kubelet.* flags, and the factory main() uses.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "exporter/cli/flag_set.h"
#include "exporter/identity/kube_identity.h"

namespace sockpressure {

struct KubeletOptions {
  // Empty: https://$NODE_IP:10250/pods when NODE_IP is set (the DaemonSet
  // passes status.hostIP), otherwise identity is off. "none": off.
  std::string url;
  std::string token_file = "/var/run/secrets/kubernetes.io/serviceaccount/token";
  std::string ca_file = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt";
  bool insecure_skip_verify = false;
  // Read the PodList from this file instead of the kubelet (tests, debugging
  // with `curl .../pods > FILE` or `kubectl get pods -o json`).
  std::string pods_file;
  // One request, whole (connect, TLS, head and body): past it, it is cut.
  absl::Duration timeout = absl::Seconds(5);
};

void RegisterKubeletFlags(FlagSet* flags, KubeletOptions* options);

// The URL to fetch, from the flag and the NODE_IP environment value (may be
// null); empty when identity is off. A URL without a path gets /pods.
std::string EffectiveKubeletUrl(const std::string& flag, const char* node_ip);

// Fetches `url` (already effective). The token and CA files are read on each
// call, so rotated service-account tokens are picked up. Thread-compatible.
// Starts a thread (sp-kubelet-dl) that cuts a request at options.timeout,
// which ends with the last copy of the fetcher.
PodListFetcher KubeletPodListFetcher(const KubeletOptions& options, const std::string& url);
PodListFetcher FilePodListFetcher(const std::string& path);

// Builds and starts the resolver from the flags, or returns nullptr after
// logging once why series will carry only the cgroup label. Errors are
// flag mistakes (e.g. a URL that is neither http:// nor https://).
absl::StatusOr<std::unique_ptr<KubeIdentityResolver>> StartKubeIdentity(const KubeletOptions& options,
                                                                          const char* node_ip,
                                                                          KubeIdentityOptions tuning = {});

}  // namespace sockpressure
