#include "exporter/alerting/alertmanager_client.h"

#include <httplib.h>
#include <openssl/x509.h>

#include <chrono>
#include <cmath>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "exporter/alerting/alertmanager.h"
#include "exporter/common/logging.h"

namespace sockpressure {
namespace {

// Alertmanager answers a push with a few bytes (nothing, or an error line).
constexpr size_t kMaxAnswerBytes = 64 << 10;

// What Alertmanager answered to one push, read by us: httplib would hold an
// answer of any size in memory, and a peer that answers with gigabytes (a
// broken proxy, a hostile endpoint) would choose the agent's memory.
struct Reply {
  bool answered = false;  // a complete answer was read
  httplib::Error error = httplib::Error::Success;
  int status = 0;
  std::string body;  // at most kMaxAnswerBytes
  bool too_big = false;
};

Reply Post(httplib::Client& client, const std::string& path, std::string body) {
  Reply reply;
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.headers = {{"Content-Type", "application/json"}};
  req.body = std::move(body);
  req.response_handler = [&reply](const httplib::Response& r) {
    reply.status = r.status;
    return true;
  };
  req.content_receiver = [&reply](const char* data, size_t n, uint64_t, uint64_t) {
    if (reply.body.size() + n > kMaxAnswerBytes) {
      reply.too_big = true;
      return false;
    }
    reply.body.append(data, n);
    return true;
  };
  httplib::Response res;
  reply.answered = client.send(req, res, reply.error);
  return reply;
}

// Why a reply is no delivery, with a hint where the cause is usually ours.
std::string Failure(const Reply& reply, httplib::Client& client) {
  if (reply.too_big) {
    return absl::StrCat("HTTP ", reply.status, " with an answer larger than ", kMaxAnswerBytes,
                        " bytes, not read further");
  }
  if (reply.answered) {
    return absl::StrCat("HTTP ", reply.status, ": ", reply.body.substr(0, 200),
                        reply.status == 401 ? " (check --alertmanager.basic-auth.username/password-file)" : "");
  }
  std::string error = absl::StrCat("request failed: ", httplib::to_string(reply.error));
  if (reply.error == httplib::Error::SSLServerVerification) {
    absl::StrAppend(&error, " (", X509_verify_cert_error_string(client.get_openssl_verify_result()),
                    "; point --alertmanager.ca-file at the CA that signed Alertmanager's certificate)");
  }
  return error;
}

}  // namespace

absl::StatusOr<std::unique_ptr<AlertmanagerClient>> AlertmanagerClient::Create(const std::string& url,
                                                                               const AlertmanagerOptions& options,
                                                                               const std::string& password) {
  // "http://host:9093" or "https://host/prefix": httplib wants scheme+host+port
  // and the path separately.
  const size_t scheme_end = url.find("://");
  if (scheme_end == std::string::npos || !(absl::StartsWith(url, "http://") || absl::StartsWith(url, "https://"))) {
    return absl::InvalidArgumentError(absl::StrCat("--alertmanager.url must start with http:// or https://: ", url));
  }
  const size_t path_start = url.find('/', scheme_end + 3);
  std::string base = path_start == std::string::npos ? url : url.substr(0, path_start);
  std::string prefix = path_start == std::string::npos ? "" : url.substr(path_start);
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  if (!httplib::Client(base).is_valid()) {
    return absl::InvalidArgumentError(absl::StrCat("invalid --alertmanager.url ", url));
  }
  if (!options.basic_auth_username.empty() && absl::StartsWith(url, "http://")) {
    SP_LOG_WARN("alertmanager ", url, ": basic auth over plain http sends the password in clear text");
  }
  return std::unique_ptr<AlertmanagerClient>(
      new AlertmanagerClient(std::move(base), prefix + "/api/v2/alerts", options, password));
}

AlertmanagerClient::AlertmanagerClient(std::string base, std::string path, const AlertmanagerOptions& options,
                                       std::string password)
    : base_(std::move(base)),
      path_(std::move(path)),
      https_(absl::StartsWith(base_, "https://")),
      timeout_seconds_(options.timeout_seconds),
      ca_file_(options.ca_file),
      insecure_skip_verify_(options.insecure_skip_verify),
      username_(options.basic_auth_username),
      password_(std::move(password)),
      cutter_("sp-alertmgr-dl") {}

AlertmanagerClient::Answer AlertmanagerClient::Push(std::string body) {
  // A new client, so a connection, per push: pushes are seconds apart at
  // least, a fresh client re-reads a rotated CA bundle, and the cutter
  // watches every socket the request opens (a kept-alive one would be
  // opened by an earlier request, out of its reach).
  httplib::Client client(base_);
  const auto timeout = std::chrono::microseconds(std::llround(timeout_seconds_ * 1e6));
  client.set_connection_timeout(timeout);
  client.set_read_timeout(timeout);
  client.set_write_timeout(timeout);
  client.set_socket_options([this](socket_t fd) { cutter_.Watch(fd); });
  if (https_) {
    client.enable_server_certificate_verification(!insecure_skip_verify_);
    if (!ca_file_.empty()) client.set_ca_cert_path(ca_file_.c_str());
  }
  if (!username_.empty()) client.set_basic_auth(username_, password_);
  cutter_.Arm(std::chrono::steady_clock::now() + timeout);
  const Reply reply = Post(client, path_, std::move(body));
  if (cutter_.Disarm()) return {false, absl::StrCat("no answer within the timeout (", timeout_seconds_, " s)")};
  if (reply.answered && !reply.too_big && reply.status >= 200 && reply.status < 300) return {true, ""};
  return {false, Failure(reply, client)};
}

}  // namespace sockpressure
