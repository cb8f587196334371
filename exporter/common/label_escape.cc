#include "exporter/common/label_escape.h"

#include <cstdint>

namespace sockpressure {
namespace {

// Length of the valid UTF-8 sequence (RFC 3629: no overlongs, surrogates or
// code points above U+10FFFF) starting at s[i], or 0.
size_t Utf8SequenceAt(absl::string_view s, size_t i) {
  auto at = [&](size_t k) -> uint8_t { return i + k < s.size() ? static_cast<uint8_t>(s[i + k]) : 0; };
  auto cont = [&](size_t k, uint8_t lo = 0x80, uint8_t hi = 0xbf) { return at(k) >= lo && at(k) <= hi; };
  uint8_t b = at(0);
  if (i >= s.size()) return 0;
  if (b < 0x80) return 1;
  if (b >= 0xc2 && b <= 0xdf) return cont(1) ? 2 : 0;
  if (b == 0xe0) return cont(1, 0xa0) && cont(2) ? 3 : 0;
  if (b == 0xed) return cont(1, 0x80, 0x9f) && cont(2) ? 3 : 0;
  if (b >= 0xe1 && b <= 0xef) return cont(1) && cont(2) ? 3 : 0;
  if (b == 0xf0) return cont(1, 0x90) && cont(2) && cont(3) ? 4 : 0;
  if (b >= 0xf1 && b <= 0xf3) return cont(1) && cont(2) && cont(3) ? 4 : 0;
  if (b == 0xf4) return cont(1, 0x80, 0x8f) && cont(2) && cont(3) ? 4 : 0;
  return 0;
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The byte of an escape "\xHH" at s[i], or -1 when s[i] does not start one.
// Only 5c and bytes >= 80 are escapes; "\x2d" and the like are literal.
int EscapedByteAt(absl::string_view s, size_t i) {
  if (i + 3 >= s.size() || s[i] != '\\' || (s[i + 1] != 'x' && s[i + 1] != 'X')) return -1;
  int hi = HexDigit(s[i + 2]), lo = HexDigit(s[i + 3]);
  if (hi < 0 || lo < 0) return -1;
  int b = hi * 16 + lo;
  return b == 0x5c || b >= 0x80 ? b : -1;
}

void AppendHex(std::string& out, uint8_t b) {
  static const char kHex[] = "0123456789abcdef";
  out += "\\x";
  out += kHex[b >> 4];
  out += kHex[b & 15];
}

}  // namespace

bool IsValidUtf8(absl::string_view s) {
  for (size_t i = 0; i < s.size();) {
    size_t n = Utf8SequenceAt(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

bool LabelValueIsClean(absl::string_view s) {
  for (size_t i = 0; i < s.size();) {
    size_t n = Utf8SequenceAt(s, i);
    if (n == 0 || EscapedByteAt(s, i) >= 0) return false;
    i += n;
  }
  return true;
}

std::string EscapeLabelValue(absl::string_view s) {
  if (LabelValueIsClean(s)) return std::string(s);
  std::string out;
  out.reserve(s.size() + 16);
  for (size_t i = 0; i < s.size();) {
    size_t n = Utf8SequenceAt(s, i);
    if (n == 0) {
      AppendHex(out, static_cast<uint8_t>(s[i]));
      ++i;
    } else if (EscapedByteAt(s, i) >= 0) {
      AppendHex(out, '\\');
      ++i;
    } else {
      out.append(s.data() + i, n);
      i += n;
    }
  }
  return out;
}

std::string UnescapeLabelValue(absl::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    int b = EscapedByteAt(s, i);
    if (b >= 0) {
      out += static_cast<char>(b);
      i += 4;
    } else {
      out += s[i++];
    }
  }
  return out;
}

}  // namespace sockpressure
