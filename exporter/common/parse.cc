#include "absl/strings/string_view.h"
#include "exporter/common/parse.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace sockpressure {
namespace {

std::vector<absl::string_view> Fields(absl::string_view line) {
  return absl::StrSplit(line, absl::ByAnyChar(" \t\n"), absl::SkipEmpty());
}

}  // namespace

std::optional<uint64_t> FlatKeyed::Get(absl::string_view key) const {
  auto it = values.find(key);
  if (it == values.end()) return std::nullopt;
  return it->second;
}

FlatKeyed ParseFlatKeyed(absl::string_view text) {
  FlatKeyed out;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipWhitespace())) {
    std::vector<absl::string_view> f = Fields(line);
    uint64_t v = 0;
    if (f.size() != 2 || !absl::SimpleAtoi(f[1], &v)) {
      out.bad_lines.emplace_back(line.substr(0, 80));
      continue;
    }
    out.values.emplace(std::string(f[0]), v);
  }
  return out;
}

Psi ParsePsi(absl::string_view text) {
  Psi out;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipWhitespace())) {
    std::vector<absl::string_view> f = Fields(line);
    if (f.empty() || (f[0] != "some" && f[0] != "full")) {
      out.malformed = true;
      continue;
    }
    PsiLine p;
    int seen = 0;
    for (size_t i = 1; i < f.size(); ++i) {
      std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(f[i], absl::MaxSplits('=', 1));
      bool ok = false;
      if (kv.first == "avg10") ok = absl::SimpleAtod(kv.second, &p.avg10);
      else if (kv.first == "avg60") ok = absl::SimpleAtod(kv.second, &p.avg60);
      else if (kv.first == "avg300") ok = absl::SimpleAtod(kv.second, &p.avg300);
      else if (kv.first == "total") ok = absl::SimpleAtoi(kv.second, &p.total_us);
      else continue;  // fields added by later kernels are fine
      if (ok) ++seen;
    }
    if (seen != 4) {
      out.malformed = true;
      continue;
    }
    (f[0] == "some" ? out.some : out.full) = p;
  }
  return out;
}

ProtoCounters ParseNetstat(absl::string_view text) {
  ProtoCounters out;
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n', absl::SkipWhitespace());
  for (size_t i = 0; i + 1 < lines.size(); i += 2) {
    std::vector<absl::string_view> names = Fields(lines[i]);
    std::vector<absl::string_view> values = Fields(lines[i + 1]);
    if (names.empty() || values.empty() || names[0] != values[0] || names.size() != values.size() ||
        names[0].back() != ':') {
      out.malformed = true;
      continue;
    }
    auto& table = out.tables[std::string(names[0].substr(0, names[0].size() - 1))];
    for (size_t j = 1; j < names.size(); ++j) {
      uint64_t v = 0;
      int64_t signed_value = 0;
      if (absl::SimpleAtoi(values[j], &v)) {
        table.emplace(std::string(names[j]), v);
      } else if (!absl::SimpleAtoi(values[j], &signed_value)) {
        out.malformed = true;  // not a number at all: garbled, and left out
      }
      // A signed field (MaxConn in Tcp:) is no counter: skipped.
    }
  }
  if (lines.size() % 2 != 0) out.malformed = true;
  return out;
}

std::map<std::string, std::map<std::string, uint64_t, std::less<>>, std::less<>> ParseSockstat(
    absl::string_view text) {
  std::map<std::string, std::map<std::string, uint64_t, std::less<>>, std::less<>> out;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipWhitespace())) {
    std::vector<absl::string_view> f = Fields(line);
    if (f.empty() || f[0].back() != ':') continue;
    auto& row = out[std::string(f[0].substr(0, f[0].size() - 1))];
    for (size_t i = 1; i + 1 < f.size(); i += 2) {
      uint64_t v = 0;
      if (absl::SimpleAtoi(f[i + 1], &v)) row.emplace(std::string(f[i]), v);
    }
  }
  return out;
}

std::optional<std::vector<uint64_t>> ParseUintList(absl::string_view text) {
  std::vector<uint64_t> out;
  for (absl::string_view f : Fields(absl::StripAsciiWhitespace(text))) {
    uint64_t v = 0;
    if (!absl::SimpleAtoi(f, &v)) return std::nullopt;
    out.push_back(v);
  }
  return out;
}

Swaps ParseSwaps(absl::string_view text) {
  Swaps out;
  bool header = true;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipWhitespace())) {
    if (header) {
      header = false;
      if (absl::StartsWith(line, "Filename")) continue;
      out.malformed = true;
    }
    std::vector<absl::string_view> f = Fields(line);
    uint64_t size_kib = 0, used_kib = 0;
    if (f.size() < 4 || !absl::SimpleAtoi(f[2], &size_kib) || !absl::SimpleAtoi(f[3], &used_kib)) {
      out.malformed = true;
      continue;
    }
    ++out.devices;
    out.size_bytes += size_kib * 1024;
    out.used_bytes += used_kib * 1024;
  }
  return out;
}

bool CmdlineHasNosocket(absl::string_view cmdline) {
  for (absl::string_view word : Fields(cmdline)) {
    if (word == "--") break;  // what follows belongs to init, not the kernel
    if (!absl::ConsumePrefix(&word, "cgroup.memory=")) continue;
    for (absl::string_view opt : absl::StrSplit(word, ',')) {
      if (opt == "nosocket") return true;
    }
  }
  return false;
}

}  // namespace sockpressure
