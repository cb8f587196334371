// The HTTP front's listening socket and TLS context (see http_front.h).
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "exporter/outputs/http/web_config.h"

typedef struct ssl_ctx_st SSL_CTX;

namespace sockpressure {

// Listen backlog: sized for scrape bursts (the kernel caps it at
// net.core.somaxconn); cpp-httplib 0.11.4 used 5.
inline constexpr int kListenBacklog = 4096;

struct ListenAddress {
  std::string host;  // "0.0.0.0" for ":port"
  int port = 0;
};
// Parses ":19100", "127.0.0.1:19100", "[::1]:19100".
absl::StatusOr<ListenAddress> ParseListenAddress(absl::string_view text);

// A bound, listening socket plus the loaded TLS context, created before any
// sampling or thread starts so that every start-up error (bad address, port
// in use, unreadable or invalid certificate/key) is reported first. Bound
// without SO_REUSEPORT: a second agent on the same port fails instead of
// stealing scrapes. Not thread-safe; owned by one HttpFront once started.
class ListenSocket {
 public:
  static absl::StatusOr<std::unique_ptr<ListenSocket>> Open(const std::string& listen_address, const WebConfig& web);
  ~ListenSocket();
  int fd() const { return fd_; }
  int port() const { return port_; }
  SSL_CTX* tls() const { return tls_; }
  // The TLS context for a new connection, first reloaded (with the whole
  // tls_server_config) from cert_file, key_file and client_ca_file when one
  // changed on disk (looked at most once a second):
  // cert-manager and the like replace them in place, and exporter-toolkit
  // serves the new pair without a restart. A pair that does not load (one
  // file replaced, not yet the other) keeps the old context and is tried
  // again. Connections already open keep theirs (OpenSSL counts the
  // references). Called by the front's I/O thread only.
  SSL_CTX* CurrentTls();

 private:
  ListenSocket() = default;
  // What identifies the files' contents cheaply: inode, size, mtime.
  std::string TlsStamp() const;
  int fd_ = -1;
  int port_ = 0;
  SSL_CTX* tls_ = nullptr;
  WebConfig web_;
  std::string stamp_;         // of the files tls_ was loaded from
  std::string failed_stamp_;  // of the files that last failed to load (logged once)
  double next_look_ = 0;      // CLOCK_MONOTONIC seconds
};

}  // namespace sockpressure
