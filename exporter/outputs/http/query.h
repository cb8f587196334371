// Percent-decoding and query parsing for request targets, as the routes read
// them. Pure functions and an immutable class, safe from any thread.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace sockpressure {

// Decodes %XX (either case) and %uXXXX (as UTF-8; a surrogate gives
// nothing). A '%' that starts no valid escape stays as sent; '+' stays '+'
// (a path's meaning). %00 gives a NUL byte.
std::string PercentDecode(absl::string_view text);

// The query after '?' as key/value pairs, in the order sent. Pairs are split
// at '&', and each at every '=': pieces are trimmed of spaces and tabs and
// empty ones dropped, the first piece is the key and the last one after it
// the value ("a" and "a=" give ""; "a=1=2" gives "2"; "=v" gives the key
// "v"). '+' is a space in keys and values, then PercentDecode applies.
std::vector<std::pair<std::string, std::string>> ParseQuery(absl::string_view query);

// A request's query parameters (ParseQuery) as routes read them: a key
// given twice answers with its first value. Immutable: safe from any thread.
class QueryParams {
 public:
  explicit QueryParams(absl::string_view query) : pairs_(ParseQuery(query)) {}
  bool Has(absl::string_view key) const;
  // The first value of `key`; "" when it has none or is absent.
  std::string Get(absl::string_view key) const;

 private:
  std::vector<std::pair<std::string, std::string>> pairs_;
};

}  // namespace sockpressure
