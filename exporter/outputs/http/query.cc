#include "exporter/outputs/http/query.h"

#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"

namespace sockpressure {
namespace {

bool HexValue(absl::string_view digits, int* value) {
  *value = 0;
  for (char c : digits) {
    int v;
    if (c >= '0' && c <= '9') {
      v = c - '0';
    } else if (c >= 'A' && c <= 'F') {
      v = c - 'A' + 10;
    } else if (c >= 'a' && c <= 'f') {
      v = c - 'a' + 10;
    } else {
      return false;
    }
    *value = *value * 16 + v;
  }
  return true;
}

void AppendUtf8(int code, std::string* out) {
  if (code < 0x80) {
    out->push_back(static_cast<char>(code));
  } else if (code < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (code >> 6)));
    out->push_back(static_cast<char>(0x80 | (code & 0x3F)));
  } else if (code < 0xD800 || code >= 0xE000) {  // four hex digits: at most 0xFFFF
    out->push_back(static_cast<char>(0xE0 | (code >> 12)));
    out->push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (code & 0x3F)));
  }  // a UTF-16 surrogate alone encodes nothing
}

// Pieces of `text` between `sep`s, trimmed of spaces and tabs, empty ones dropped.
std::vector<absl::string_view> Pieces(absl::string_view text, char sep) {
  std::vector<absl::string_view> out;
  for (absl::string_view p : absl::StrSplit(text, sep)) {
    while (!p.empty() && (p.front() == ' ' || p.front() == '\t')) p.remove_prefix(1);
    while (!p.empty() && (p.back() == ' ' || p.back() == '\t')) p.remove_suffix(1);
    if (!p.empty()) out.push_back(p);
  }
  return out;
}

std::string DecodeQueryPart(absl::string_view part) {
  return PercentDecode(absl::StrReplaceAll(part, {{"+", " "}}));
}

}  // namespace

std::string PercentDecode(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    int value = 0;
    if (text[i] != '%') {
      out.push_back(text[i]);
    } else if (text.substr(i + 1, 1) == "u" && text.size() >= i + 6 && HexValue(text.substr(i + 2, 4), &value)) {
      AppendUtf8(value, &out);
      i += 5;
    } else if (text.substr(i + 1, 1) != "u" && text.size() >= i + 3 && HexValue(text.substr(i + 1, 2), &value)) {
      out.push_back(static_cast<char>(value));
      i += 2;
    } else {
      out.push_back('%');
    }
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> ParseQuery(absl::string_view query) {
  std::vector<std::pair<std::string, std::string>> out;
  for (absl::string_view pair : Pieces(query, '&')) {
    std::vector<absl::string_view> parts = Pieces(pair, '=');
    if (parts.empty()) continue;
    out.emplace_back(DecodeQueryPart(parts.front()), parts.size() > 1 ? DecodeQueryPart(parts.back()) : "");
  }
  return out;
}

bool QueryParams::Has(absl::string_view key) const {
  for (const auto& [k, v] : pairs_) {
    if (k == key) return true;
  }
  return false;
}

std::string QueryParams::Get(absl::string_view key) const {
  for (const auto& [k, v] : pairs_) {
    if (k == key) return v;
  }
  return "";
}

}  // namespace sockpressure
