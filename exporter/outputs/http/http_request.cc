#include "exporter/outputs/http/http_request.h"

#include <algorithm>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace sockpressure {
namespace {

// RFC 9110 token characters, for method and header names.
bool IsToken(absl::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (absl::ascii_isalnum(static_cast<unsigned char>(c))) continue;
    if (!absl::StrContains("!#$%&'*+-.^_`|~", c)) return false;
  }
  return true;
}

bool HasControlChars(absl::string_view s) {
  for (unsigned char c : s) {
    if ((c < 0x20 && c != '\t') || c == 0x7f) return true;
  }
  return false;
}

}  // namespace

std::string RequestHead::Header(absl::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (k == name) return v;
  }
  return "";
}

HeadVerdict ParseRequestHead(absl::string_view head, RequestHead* out) {
  std::vector<absl::string_view> lines = absl::StrSplit(head, "\r\n");
  if (lines.empty()) return {400, "empty request"};
  std::vector<absl::string_view> parts = absl::StrSplit(lines[0], ' ');
  if (parts.size() != 3 || !IsToken(parts[0]) || parts[1].empty() || HasControlChars(parts[1])) {
    return {400, "malformed request line"};
  }
  if (parts[2] == "HTTP/1.1") {
    out->http11 = true;
  } else if (parts[2] == "HTTP/1.0") {
    out->http11 = false;
  } else if (absl::StartsWith(parts[2], "HTTP/")) {
    return {505, "only HTTP/1.0 and HTTP/1.1 are served"};
  } else {
    return {400, "malformed request line"};
  }
  out->method = std::string(parts[0]);
  out->target = std::string(parts[1]);
  size_t q = out->target.find('?');
  out->path = out->target.substr(0, q);
  out->query = q == std::string::npos ? "" : out->target.substr(q + 1);
  if (out->path.empty() || out->path[0] != '/') return {400, "request target must be a path"};
  if (lines.size() - 1 > kMaxRequestHeaders) return {431, "too many header fields"};
  for (size_t i = 1; i < lines.size(); ++i) {
    absl::string_view line = lines[i];
    size_t colon = line.find(':');
    if (colon == absl::string_view::npos || !IsToken(line.substr(0, colon))) return {400, "malformed header field"};
    absl::string_view value = absl::StripAsciiWhitespace(line.substr(colon + 1));
    if (HasControlChars(value)) return {400, "malformed header field"};
    out->headers.emplace_back(absl::AsciiStrToLower(line.substr(0, colon)), std::string(value));
  }
  std::string connection = absl::AsciiStrToLower(out->Header("connection"));
  out->keep_alive = out->http11 ? !absl::StrContains(connection, "close") : absl::StrContains(connection, "keep-alive");
  // Bodies are refused before routing: no route takes one, and reading (or
  // waiting for) a body an attacker announces is what held sockets for seconds.
  if (!out->Header("transfer-encoding").empty()) return {501, "request bodies are not accepted"};
  for (const auto& [k, v] : out->headers) {
    if (k != "content-length") continue;
    uint64_t n = 0;
    if (!absl::SimpleAtoi(v, &n)) return {400, "bad Content-Length"};
    if (n != 0) return {413, "request bodies are not accepted"};
  }
  if (out->method != "GET" && out->method != "HEAD") return {405, "only GET and HEAD are served"};
  // RFC 9112 3.2: a server must answer 400 to an HTTP/1.1 request without
  // exactly one Host field (two can route one request two ways behind a proxy).
  if (out->http11) {
    const auto hosts = std::count_if(out->headers.begin(), out->headers.end(),
                                     [](const auto& kv) { return kv.first == "host"; });
    if (hosts != 1) return {400, "HTTP/1.1 needs exactly one Host header"};
  }
  return {};
}

bool AcceptsGzip(absl::string_view accept_encoding) {
  // The q value of "gzip" where it is named, else that of "*" (RFC 9110
  // 12.5.3: "gzip;q=0, *" refuses gzip whatever the wildcard says).
  std::optional<double> gzip, wildcard;
  for (absl::string_view element : absl::StrSplit(accept_encoding, ',')) {
    std::vector<absl::string_view> params = absl::StrSplit(element, ';');
    absl::string_view coding = absl::StripAsciiWhitespace(params[0]);
    const bool is_gzip = absl::EqualsIgnoreCase(coding, "gzip");
    if (!is_gzip && coding != "*") continue;
    double qvalue = 1;
    for (size_t i = 1; i < params.size(); ++i) {
      absl::string_view p = absl::StripAsciiWhitespace(params[i]);
      if (absl::ConsumePrefix(&p, "q=") || absl::ConsumePrefix(&p, "Q=")) {
        if (!absl::SimpleAtod(p, &qvalue)) qvalue = 0;  // unparsable: do not guess
      }
    }
    (is_gzip ? gzip : wildcard) = qvalue;
  }
  if (gzip) return *gzip > 0;
  return wildcard && *wildcard > 0;
}

const char* StatusText(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
  }
}

}  // namespace sockpressure
