// --web.config.file: TLS, basic auth and response headers in the
// exporter-toolkit format that node_exporter users already have
// (https://github.com/prometheus/exporter-toolkit/blob/master/docs/web-configuration.md),
// parsed with yaml-cpp:
//
//   tls_server_config:
//     cert_file: /etc/sockpressure/tls.crt      # relative paths: to the config file's directory
//     key_file: /etc/sockpressure/tls.key
//     client_auth_type: RequireAndVerifyClientCert
//     client_ca_file: /etc/sockpressure/ca.crt
//     min_version: TLS12                        # TLS10..TLS13; default TLS12
//     max_version: TLS13                        # default TLS13
//     cipher_suites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]  # Go names; TLS <= 1.2 only
//     curve_preferences: [X25519, CurveP256]
//     prefer_server_cipher_suites: true         # default true
//   http_server_config:
//     http2: true                               # accepted; this server speaks HTTP/1.1 only
//     headers:
//       X-Content-Type-Options: nosniff
//   basic_auth_users:
//     prometheus: $2y$10$...                     # bcrypt hash
//
// As exporter-toolkit (strict unmarshalling), any other key is an error
// naming it, never a silently ignored security setting.
#pragma once

#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace sockpressure {

// Go's tls.ClientAuthType, by exporter-toolkit's names.
enum class ClientAuth {
  kNoClientCert,
  kRequestClientCert,           // asked for, neither required nor verified
  kRequireAnyClientCert,        // required, not verified
  kVerifyClientCertIfGiven,     // not required, verified when given
  kRequireAndVerifyClientCert,  // required and verified
};

struct WebConfig {
  std::string cert_file, key_file, client_ca_file;
  ClientAuth client_auth = ClientAuth::kNoClientCert;
  // Protocol versions as on the wire (OpenSSL's TLS1_2_VERSION is 0x0303).
  int min_version = 0x0303, max_version = 0x0304;
  // OpenSSL names of the TLS <= 1.2 suites; empty: kDefaultTls12Ciphers.
  std::vector<std::string> cipher_suites;
  // OpenSSL group names ("X25519", "P-256"); empty: OpenSSL's default.
  std::vector<std::string> curve_preferences;
  bool prefer_server_cipher_suites = true;
  bool http2 = true;  // accepted for compatibility; HTTP/1.1 is all this server speaks
  // Added to every response the server's routes give (exporter-toolkit's
  // allow-list of names and values).
  std::map<std::string, std::string> headers;
  std::map<std::string, std::string> basic_auth_users;  // user -> bcrypt hash

  bool tls() const { return !cert_file.empty(); }
};

// The TLS 1.2 suites offered when cipher_suites is not set: ECDHE key
// exchange with an AEAD only (no static-RSA key exchange, no CBC), as
// exporter-toolkit's Go default. TLS 1.3's suites are OpenSSL's default and,
// as in Go, not configurable.
inline constexpr char kDefaultTls12Ciphers[] =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"
    "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

// `dir` resolves relative file paths (exporter-toolkit: the config file's
// directory); empty leaves them as they are.
absl::StatusOr<WebConfig> ParseWebConfig(absl::string_view yaml, const std::string& dir = "");
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
