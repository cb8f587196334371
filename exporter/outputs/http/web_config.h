// --web.config.file: TLS and basic auth in the exporter-toolkit format that
// node_exporter users already have:
//
//   tls_server_config:
//     cert_file: /etc/sockpressure/tls.crt
//     key_file: /etc/sockpressure/tls.key
//     client_ca_file: /etc/sockpressure/ca.crt   # optional: require client certs
//   basic_auth_users:
//     prometheus: $2y$10$...                     # bcrypt hash
//
// Only this subset is supported; any other key is a clear error rather than
// a silently ignored security setting.
#pragma once

#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace sockpressure {

struct WebConfig {
  std::string cert_file, key_file, client_ca_file;
  std::map<std::string, std::string> basic_auth_users;  // user -> bcrypt hash

  bool tls() const { return !cert_file.empty(); }
};

absl::StatusOr<WebConfig> ParseWebConfig(absl::string_view yaml);
absl::StatusOr<WebConfig> LoadWebConfig(const std::string& path);

// Checks "Authorization: Basic ..." against bcrypt hashes. bcrypt is slow on
// purpose, so successful checks are cached (as exporter-toolkit does). Two
// things keep that slowness from being used against the agent:
//  - every uncached check costs the same, whatever the user: one bcrypt at
//    each distinct cost the configured hashes use (the user's own hash at
//    its cost, a decoy at the others), so response times do not tell which
//    user names exist, even when users have different costs;
//  - at most kMaxVerifying uncached checks run at once; another one is
//    answered kBusy at once (429), so a flood of wrong passwords costs one
//    core and never the request slots that cached, authenticated scrapes use.
// Thread-safe.
class BasicAuthChecker {
 public:
  enum class Verdict { kOk, kDenied, kBusy };
  static constexpr int kMaxVerifying = 1;

  explicit BasicAuthChecker(std::map<std::string, std::string> users);
  bool enabled() const { return !users_.empty(); }
  Verdict Verify(absl::string_view authorization_header);
  bool Check(absl::string_view authorization_header) { return Verify(authorization_header) == Verdict::kOk; }

 private:
  std::map<std::string, std::string> users_;
  std::map<int, std::string> decoys_;  // bcrypt cost -> one configured hash of that cost
  std::atomic<int> verifying_{0};
  std::mutex mu_;
  std::set<std::string> verified_;  // "user\0password" pairs that matched
};

}  // namespace sockpressure
