#include "exporter/identity/kubelet_client.h"

#include <httplib.h>

#include <chrono>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "exporter/common/deadline_cutter.h"
#include "exporter/common/file_reader.h"
#include "exporter/common/logging.h"

namespace sockpressure {
namespace {

// A kubelet with the 110-pod default limit answers in about 1 MB, and even
// the largest --max-pods clouds allow (several hundred) stays within a few
// MB. Anything far larger is not a pod list: parsing JSON costs about 12
// times its size (a 60 MB answer took the agent to 765 MB), so it is refused
// unread past this.
constexpr size_t kMaxBody = 16 << 20;

struct ParsedUrl {
  std::string scheme_host_port;  // what httplib::Client takes
  std::string path;
  bool https = false;
};

absl::StatusOr<ParsedUrl> ParseUrl(const std::string& url) {
  ParsedUrl out;
  absl::string_view rest = url;
  if (absl::ConsumePrefix(&rest, "https://")) {
    out.https = true;
  } else if (!absl::ConsumePrefix(&rest, "http://")) {
    return absl::InvalidArgumentError(absl::StrCat("--kubelet.url must start with https:// or http://: ", url));
  }
  size_t slash = rest.find('/');
  absl::string_view host = rest.substr(0, slash);
  if (host.empty()) return absl::InvalidArgumentError(absl::StrCat("--kubelet.url has no host: ", url));
  out.scheme_host_port = absl::StrCat(out.https ? "https://" : "http://", host);
  out.path = slash == absl::string_view::npos ? "/" : std::string(rest.substr(slash));
  if (out.path == "/") out.path = "/pods";
  return out;
}

absl::StatusOr<std::string> FetchOnce(const KubeletOptions& options, const ParsedUrl& url, DeadlineCutter* cutter) {
  // A new client per list: lists are rare (seconds apart at most), and a
  // fresh client re-reads a rotated CA bundle and never reuses a connection
  // the kubelet already closed.
  httplib::Client cli(url.scheme_host_port);
  if (!cli.is_valid()) return absl::InvalidArgumentError(absl::StrCat("bad kubelet address ", url.scheme_host_port));
  const auto timeout = absl::ToChronoMicroseconds(options.timeout);
  cli.set_connection_timeout(std::min<std::chrono::microseconds>(timeout, std::chrono::seconds(2)));
  cli.set_read_timeout(timeout);
  cli.set_write_timeout(timeout);
  // Those are per recv() and send(): the cutter holds the whole request to
  // the timeout (a kubelet that trickles held the identity thread for good).
  cli.set_socket_options([cutter](socket_t fd) { cutter->Watch(fd); });
  if (url.https) {
    cli.enable_server_certificate_verification(!options.insecure_skip_verify);
    if (!options.insecure_skip_verify && !options.ca_file.empty()) {
      // httplib would silently fall back to no trusted roots; say which file.
      absl::StatusOr<std::string> ca = ReadFileToString(options.ca_file);
      if (!ca.ok()) return absl::FailedPreconditionError(absl::StrCat("reading --kubelet.ca-file: ", ca.status().message()));
      cli.set_ca_cert_path(options.ca_file);
    }
    // Re-read on every list: projected service-account tokens rotate (about
    // hourly) and the kubelet rejects an expired one.
    if (!options.token_file.empty()) {
      absl::StatusOr<std::string> token = ReadFileToString(options.token_file);
      if (!token.ok()) {
        return absl::FailedPreconditionError(
            absl::StrCat("reading --kubelet.token-file: ", token.status().message()));
      }
      std::string t(absl::StripAsciiWhitespace(*token));
      if (!t.empty()) cli.set_bearer_token_auth(t);
    }
  }
  // Plain http (the deprecated read-only port 10255) gets no token: it
  // needs none, and a token must not cross the network in clear text.
  std::string body;
  bool too_big = false;
  httplib::Headers headers = {{"Accept", "application/json"}};
  cutter->Arm(std::chrono::steady_clock::now() + timeout);
  httplib::Result res = cli.Get(url.path, headers, [&](const char* data, size_t n) {
    if (body.size() + n > kMaxBody) {
      too_big = true;
      return false;
    }
    body.append(data, n);
    return true;
  });
  if (cutter->Disarm()) {
    return absl::DeadlineExceededError(absl::StrCat("GET ", url.scheme_host_port, url.path,
                                                    ": no whole answer within --kubelet.timeout (",
                                                    absl::FormatDuration(options.timeout), "), cut short"));
  }
  if (too_big) return absl::ResourceExhaustedError(absl::StrCat("pod list larger than ", kMaxBody >> 20, " MiB: not read further (no node has that many pods)"));
  if (!res) {
    std::string why = httplib::to_string(res.error());
    if (res.error() == httplib::Error::SSLServerVerification) {
      absl::StrAppend(&why, " (", X509_verify_cert_error_string(cli.get_openssl_verify_result()),
                      "; the kubelet's serving certificate is often self-signed unless serverTLSBootstrap is on: "
                      "point --kubelet.ca-file at its CA or use --kubelet.insecure-skip-verify)");
    }
    return absl::UnavailableError(absl::StrCat("GET ", url.scheme_host_port, url.path, ": ", why));
  }
  if (res->status != 200) {
    std::string hint;
    if (res->status == 401) hint = " (token rejected: check --kubelet.token-file)";
    if (res->status == 403) hint = " (forbidden: the service account needs get on nodes/pods, or nodes/proxy on kubelets without fine-grained authorization; see deploy/README.md)";
    return absl::UnavailableError(
        absl::StrCat("GET ", url.scheme_host_port, url.path, ": HTTP ", res->status, hint));
  }
  return body;
}

}  // namespace

void RegisterKubeletFlags(FlagSet* flags, KubeletOptions* options) {
  // In --help order; the defaults are KubeletOptions' initializers.
  flags->String("kubelet.url", &options->url,
                "Kubelet pod list for namespace/pod/container labels. Empty: https://$NODE_IP:10250/pods when "
                "NODE_IP is set, else off; 'none': off. A URL without a path gets /pods.");
  flags->String("kubelet.token-file", &options->token_file,
                "Bearer token for the kubelet, re-read before every request (token rotation).");
  flags->String("kubelet.ca-file", &options->ca_file, "CA bundle that signed the kubelet's serving certificate.");
  flags->Bool("kubelet.insecure-skip-verify", &options->insecure_skip_verify,
              "Do not verify the kubelet's TLS certificate (self-signed kubelet certificates).");
  flags->Duration("kubelet.timeout", &options->timeout,
                  "One request to the kubelet, whole: connect, TLS handshake, the answer's head and body.");
  flags->String("kubelet.pods-file", &options->pods_file,
                "Read the PodList JSON from this file instead of the kubelet (testing, debugging).");
}

std::string EffectiveKubeletUrl(const std::string& flag, const char* node_ip) {
  if (flag == "none") return "";
  if (!flag.empty()) return flag;
  if (node_ip == nullptr || *node_ip == '\0') return "";
  absl::string_view ip = absl::StripAsciiWhitespace(node_ip);
  // IPv6 literals need brackets in a URL authority.
  if (absl::StrContains(ip, ':') && !absl::StartsWith(ip, "[")) return absl::StrCat("https://[", ip, "]:10250/pods");
  return absl::StrCat("https://", ip, ":10250/pods");
}

PodListFetcher KubeletPodListFetcher(const KubeletOptions& options, const std::string& url) {
  absl::StatusOr<ParsedUrl> parsed = ParseUrl(url);
  // Made here, on the caller's thread: the fetching thread may not create
  // threads once its filter is on. Shared by the fetcher's copies, which
  // fetch one at a time (PodListFetcher runs on one thread).
  auto cutter = std::make_shared<DeadlineCutter>("sp-kubelet-dl");
  return [options, parsed, cutter]() -> absl::StatusOr<std::string> {
    if (!parsed.ok()) return parsed.status();
    return FetchOnce(options, *parsed, cutter.get());
  };
}

PodListFetcher FilePodListFetcher(const std::string& path) {
  return [path]() { return ReadFileToString(path); };
}

absl::StatusOr<std::unique_ptr<KubeIdentityResolver>> StartKubeIdentity(const KubeletOptions& options,
                                                                          const char* node_ip,
                                                                          KubeIdentityOptions tuning) {
  PodListFetcher fetch;
  std::string source;
  if (!options.pods_file.empty()) {
    fetch = FilePodListFetcher(options.pods_file);
    source = options.pods_file;
  } else {
    std::string url = EffectiveKubeletUrl(options.url, node_ip);
    if (url.empty()) {
      SP_LOG_INFO("kubernetes identity: off (",
                  options.url == "none" ? "--kubelet.url=none" : "no --kubelet.url and NODE_IP is not set",
                  "); per-cgroup series carry only the cgroup label");
      return nullptr;
    }
    absl::StatusOr<ParsedUrl> parsed = ParseUrl(url);
    if (!parsed.ok()) return parsed.status();
    if (options.timeout <= absl::ZeroDuration()) {
      return absl::InvalidArgumentError("--kubelet.timeout must be positive: every request would be cut at once");
    }
    if (options.insecure_skip_verify && parsed->https) {
      SP_LOG_WARN("kubernetes identity: --kubelet.insecure-skip-verify: the kubelet's certificate is not checked");
    }
    fetch = KubeletPodListFetcher(options, url);
    source = url;
  }
  auto resolver = std::make_unique<KubeIdentityResolver>(std::move(fetch), std::move(source), tuning);
  resolver->Start();
  return resolver;
}

}  // namespace sockpressure
