#include "exporter/outputs/http/listen_socket.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "exporter/common/logging.h"

namespace sockpressure {
namespace {

std::string OpenSslError() {
  unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "unknown TLS error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return buf;
}

// Names the file and the reason when a TLS file cannot be read, before
// OpenSSL's less specific error.
absl::Status Readable(const char* what, const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::InvalidArgumentError(absl::StrCat("TLS ", what, " ", path, ": ", std::strerror(errno)));
  ::close(fd);
  return absl::OkStatus();
}

// RequestClientCert and RequireAnyClientCert: a certificate is taken as it
// comes, unverified (the application may look at it; this one does not).
int AcceptAnyCertificate(int /*preverify_ok*/, X509_STORE_CTX* /*store*/) { return 1; }

absl::StatusOr<SSL_CTX*> LoadTls(const WebConfig& web) {
  for (auto [what, path] : {std::pair<const char*, const std::string*>{"cert_file", &web.cert_file},
                            {"key_file", &web.key_file},
                            {"client_ca_file", &web.client_ca_file}}) {
    if (path->empty()) continue;
    if (absl::Status s = Readable(what, *path); !s.ok()) return s;
  }
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == nullptr) return absl::InternalError(absl::StrCat("TLS: ", OpenSslError()));
  auto fail = [ctx](const char* what, const std::string& path) {
    std::string why = OpenSslError();
    SSL_CTX_free(ctx);
    return absl::InvalidArgumentError(absl::StrCat("TLS ", what, " ", path, ": ", why));
  };
  // tls_server_config's protocol and cipher settings (web_config.h).
  SSL_CTX_set_min_proto_version(ctx, web.min_version);
  SSL_CTX_set_max_proto_version(ctx, web.max_version);
  const std::string ciphers = web.cipher_suites.empty() ? kDefaultTls12Ciphers : absl::StrJoin(web.cipher_suites, ":");
  if (SSL_CTX_set_cipher_list(ctx, ciphers.c_str()) != 1) return fail("cipher_suites", ciphers);
  // TLS 1.3's suites are not configurable (as in Go); Go's order, AES-128 first.
  SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256");
  if (!web.curve_preferences.empty()) {
    const std::string groups = absl::StrJoin(web.curve_preferences, ":");
    if (SSL_CTX_set1_groups_list(ctx, groups.c_str()) != 1) return fail("curve_preferences", groups);
  }
  if (web.prefer_server_cipher_suites) SSL_CTX_set_options(ctx, SSL_OP_CIPHER_SERVER_PREFERENCE);
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
  // Non-blocking writes may be resumed with the buffer at another address.
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  if (SSL_CTX_use_certificate_chain_file(ctx, web.cert_file.c_str()) != 1) return fail("cert_file", web.cert_file);
  if (SSL_CTX_use_PrivateKey_file(ctx, web.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    return fail("key_file", web.key_file);
  }
  if (SSL_CTX_check_private_key(ctx) != 1) return fail("key_file does not match cert_file:", web.key_file);
  // client_auth_type as Go's tls.ClientAuthType: whether a certificate is
  // asked for, required, and verified against client_ca_file (or, as Go
  // does without one, the system's roots).
  const bool verify = web.client_auth == ClientAuth::kVerifyClientCertIfGiven ||
                      web.client_auth == ClientAuth::kRequireAndVerifyClientCert;
  if (!web.client_ca_file.empty()) {
    if (SSL_CTX_load_verify_locations(ctx, web.client_ca_file.c_str(), nullptr) != 1) {
      return fail("client_ca_file", web.client_ca_file);
    }
    SSL_CTX_set_client_CA_list(ctx, SSL_load_client_CA_file(web.client_ca_file.c_str()));
  } else if (verify) {
    // Read now, not looked up per handshake: a file, as client_ca_file is.
    if (SSL_CTX_load_verify_file(ctx, X509_get_default_cert_file()) != 1) {
      return fail("client_auth_type without client_ca_file: the system roots", X509_get_default_cert_file());
    }
  }
  switch (web.client_auth) {
    case ClientAuth::kNoClientCert:
      break;
    case ClientAuth::kRequestClientCert:
      SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, AcceptAnyCertificate);
      break;
    case ClientAuth::kRequireAnyClientCert:
      SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, AcceptAnyCertificate);
      break;
    case ClientAuth::kVerifyClientCertIfGiven:
      SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
      break;
    case ClientAuth::kRequireAndVerifyClientCert:
      SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
      break;
  }
  return ctx;
}

}  // namespace

absl::StatusOr<ListenAddress> ParseListenAddress(absl::string_view text) {
  ListenAddress out;
  size_t colon = text.rfind(':');
  if (colon == absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat("listen address '", text, "' must be HOST:PORT or :PORT"));
  }
  absl::string_view host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  out.host = host.empty() ? "0.0.0.0" : std::string(host);
  if (!absl::SimpleAtoi(text.substr(colon + 1), &out.port) || out.port < 0 || out.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("listen address '", text, "': bad port"));
  }
  return out;
}

absl::StatusOr<std::unique_ptr<ListenSocket>> ListenSocket::Open(const std::string& listen_address, const WebConfig& web) {
  absl::StatusOr<ListenAddress> addr = ParseListenAddress(listen_address);
  if (!addr.ok()) return addr.status();
  std::unique_ptr<ListenSocket> l(new ListenSocket());
  if (web.tls()) {
    absl::StatusOr<SSL_CTX*> ctx = LoadTls(web);
    if (!ctx.ok()) return ctx.status();
    l->tls_ = *ctx;
    l->web_ = web;
    l->stamp_ = l->TlsStamp();
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  std::string port = std::to_string(addr->port);
  if (int rc = ::getaddrinfo(addr->host.c_str(), port.c_str(), &hints, &res); rc != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot listen on ", listen_address, ": host '", addr->host, "': ", gai_strerror(rc)));
  }
  int fd = ::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    ::freeaddrinfo(res);
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", listen_address, ": socket: ", std::strerror(errno)));
  }
  l->fd_ = fd;
  // SO_REUSEADDR only rebinds over TIME_WAIT; without SO_REUSEPORT a second
  // listener on the port gets EADDRINUSE.
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  int rc = ::bind(fd, res->ai_addr, res->ai_addrlen);
  int err = errno;
  ::freeaddrinfo(res);
  if (rc != 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", listen_address, ": ", std::strerror(err),
        err == EADDRINUSE ? " (another process, perhaps a second agent, holds the port)" : ""));
  }
  if (::listen(fd, kListenBacklog) != 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", listen_address, ": ", std::strerror(errno)));
  }
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  l->port_ = ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                                            : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  return l;
}

std::string ListenSocket::TlsStamp() const {
  std::string out;
  for (const std::string& path : {web_.cert_file, web_.key_file, web_.client_ca_file}) {
    if (path.empty()) continue;
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
      absl::StrAppend(&out, "missing;");
      continue;
    }
    absl::StrAppend(&out, st.st_ino, ",", st.st_size, ",", st.st_mtim.tv_sec, ".", st.st_mtim.tv_nsec, ";");
  }
  return out;
}

SSL_CTX* ListenSocket::CurrentTls() {
  if (tls_ == nullptr) return nullptr;
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  const double t = static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
  if (t < next_look_) return tls_;
  next_look_ = t + 1;
  std::string stamp = TlsStamp();
  if (stamp == stamp_ || stamp == failed_stamp_) return tls_;
  absl::StatusOr<SSL_CTX*> ctx = LoadTls(web_);
  if (!ctx.ok()) {
    failed_stamp_ = stamp;
    SP_LOG_WARN("TLS certificate or key changed but does not load (", ctx.status().message(),
                "); still serving the previous one");
    return tls_;
  }
  SSL_CTX_free(tls_);
  tls_ = *ctx;
  stamp_ = std::move(stamp);
  failed_stamp_.clear();
  SP_LOG_INFO("TLS certificate reloaded from ", web_.cert_file);
  return tls_;
}

ListenSocket::~ListenSocket() {
  if (fd_ >= 0) ::close(fd_);
  if (tls_ != nullptr) SSL_CTX_free(tls_);
}

}  // namespace sockpressure
