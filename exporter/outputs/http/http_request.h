// Parsing one HTTP/1.x request head for the agent's own HTTP front
// (http_front.h). Pure functions: no I/O, no state, safe from any thread.
//
// The agent serves only GET/HEAD of small, fixed routes, so everything else
// is refused at once (the caller answers and closes): request bodies, chunked
// transfer encoding, oversized heads, malformed lines.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace sockpressure {

inline constexpr size_t kMaxRequestHeadBytes = 16 * 1024;
inline constexpr size_t kMaxRequestHeaders = 100;

struct RequestHead {
  std::string method;
  std::string target;  // as sent: path plus optional ?query
  std::string path;    // before '?', not decoded
  std::string query;   // after '?', not decoded
  bool http11 = true;
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
  bool keep_alive = true;

  // First value of header `name` (lower-case), or "".
  std::string Header(absl::string_view name) const;
};

// Outcome of ParseRequestHead(): 0 when the head is acceptable, else the
// status to answer before closing the connection.
struct HeadVerdict {
  int status = 0;
  std::string reason;  // for the error body
};

// Parses `head` (request line and header lines up to, not including, the
// empty line). Refuses: a malformed request line or header (400), a version
// other than HTTP/1.0 or 1.1 (505), a method other than GET or HEAD (405), any
// request body: Content-Length other than 0 (413; 400 when not a number) or
// Transfer-Encoding (501), more than kMaxRequestHeaders headers (431).
HeadVerdict ParseRequestHead(absl::string_view head, RequestHead* out);

// Whether `accept_encoding` admits gzip: a "gzip" (or "*") element whose q
// value is not 0 (RFC 9110 section 12.5.3; "gzip;q=0" means "not gzip").
bool AcceptsGzip(absl::string_view accept_encoding);

// Reason phrase for the status line.
const char* StatusText(int status);

}  // namespace sockpressure
