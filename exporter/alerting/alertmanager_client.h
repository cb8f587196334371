// One Alertmanager's POST /api/v2/alerts: the pusher's (alertmanager.h) only
// way onto the network. Each push is one request held to one deadline,
// --alertmanager.timeout, by common/deadline_cutter.h, as the kubelet's pod
// lists are (identity/kubelet_client.cc): cpp-httplib's own timeouts are per
// recv(), and a peer that trickles its answer would hold the pusher's thread
// for good. The answer is read up to a cap.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "exporter/common/deadline_cutter.h"

namespace sockpressure {

struct AlertmanagerOptions;

// Thread-safety: Push() from one thread at a time (the pusher's thread of
// this Alertmanager); Shutdown() from any thread.
class AlertmanagerClient {
 public:
  // What one push came to.
  struct Answer {
    bool delivered = false;  // a whole 2xx answer
    // Why not, for the logs and the page; empty when delivered.
    std::string error;
  };

  // A client of `url` ("http://host:9093" or "https://host/prefix").
  // `password` is the basic-auth password, read by the caller. Made on the
  // caller's thread: the cutter's thread must exist before the pusher's
  // seccomp filter forbids new ones.
  static absl::StatusOr<std::unique_ptr<AlertmanagerClient>> Create(const std::string& url,
                                                                   const AlertmanagerOptions& options,
                                                                   const std::string& password);

  // POSTs `body` (a JSON array of alerts) on a connection of its own, cut
  // at the deadline.
  Answer Push(std::string body);
  // The pusher is stopping: the push in flight ends now, and any later one
  // at once (DeadlineCutter::Shutdown).
  void Shutdown() { cutter_.Shutdown(); }

 private:
  AlertmanagerClient(std::string base, std::string path, const AlertmanagerOptions& options, std::string password);

  const std::string base_;  // scheme://host:port, what httplib's client takes
  const std::string path_;  // <prefix>/api/v2/alerts
  const bool https_;
  const double timeout_seconds_;
  const std::string ca_file_;
  const bool insecure_skip_verify_;
  const std::string username_, password_;
  DeadlineCutter cutter_;
};

}  // namespace sockpressure
