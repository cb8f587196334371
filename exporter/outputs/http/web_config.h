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
// purpose, so successful checks are cached (as exporter-toolkit does); an
// unknown user costs a bcrypt verification like a wrong password does.
// Thread-safe.
class BasicAuthChecker {
 public:
  explicit BasicAuthChecker(std::map<std::string, std::string> users);
  bool enabled() const { return !users_.empty(); }
  bool Check(absl::string_view authorization_header);

 private:
  std::map<std::string, std::string> users_;
  std::string decoy_hash_;  // verified against for unknown users (constant cost)
  std::mutex mu_;
  std::set<std::string> verified_;  // "user\0password" pairs that matched
};

}  // namespace sockpressure
