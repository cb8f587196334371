#include "absl/strings/string_view.h"
#include "exporter/outputs/http/web_config.h"

#include <crypt.h>

#include <cstdlib>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "exporter/common/file_reader.h"

namespace sockpressure {
namespace {

std::string Unquote(absl::string_view v) {
  v = absl::StripAsciiWhitespace(v);
  if (v.size() >= 2 && ((v.front() == '"' && v.back() == '"') || (v.front() == '\'' && v.back() == '\''))) {
    v = v.substr(1, v.size() - 2);
  }
  return std::string(v);
}

// Constant-time comparison so a wrong hash does not leak its prefix.
bool SafeEqual(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

absl::StatusOr<WebConfig> ParseWebConfig(absl::string_view yaml) {
  WebConfig cfg;
  std::string section;
  int line_no = 0;
  for (absl::string_view raw : absl::StrSplit(yaml, '\n')) {
    ++line_no;
    absl::string_view line = raw;
    if (size_t hash = line.find(" #"); hash != absl::string_view::npos) line = line.substr(0, hash);
    if (absl::StartsWith(absl::StripLeadingAsciiWhitespace(line), "#")) continue;
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    bool indented = line[0] == ' ' || line[0] == '\t';
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(line, absl::MaxSplits(':', 1));
    std::string key(absl::StripAsciiWhitespace(kv.first));
    std::string value = Unquote(kv.second);
    if (!absl::StrContains(line, ':')) {
      return absl::InvalidArgumentError(absl::StrCat("web config line ", line_no, ": expected 'key: value'"));
    }
    if (!indented) {
      if (key != "tls_server_config" && key != "basic_auth_users") {
        return absl::InvalidArgumentError(
            absl::StrCat("web config line ", line_no, ": unsupported key '", key,
                         "' (supported: tls_server_config, basic_auth_users)"));
      }
      if (!value.empty()) {
        return absl::InvalidArgumentError(absl::StrCat("web config line ", line_no, ": '", key, "' must be a map"));
      }
      section = key;
      continue;
    }
    if (section.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("web config line ", line_no, ": indented line outside a section"));
    }
    if (section == "basic_auth_users") {
      if (value.empty()) {
        return absl::InvalidArgumentError(absl::StrCat("web config line ", line_no, ": user '", key, "' has no hash"));
      }
      if (!absl::StartsWith(value, "$2")) {
        return absl::InvalidArgumentError(
            absl::StrCat("web config line ", line_no, ": user '", key, "' password must be a bcrypt hash ($2y$...)"));
      }
      cfg.basic_auth_users[key] = value;
    } else if (key == "cert_file") {
      cfg.cert_file = value;
    } else if (key == "key_file") {
      cfg.key_file = value;
    } else if (key == "client_ca_file") {
      cfg.client_ca_file = value;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("web config line ", line_no, ": unsupported tls_server_config key '",
                                                     key, "' (supported: cert_file, key_file, client_ca_file)"));
    }
  }
  if (cfg.cert_file.empty() != cfg.key_file.empty()) {
    return absl::InvalidArgumentError("web config: tls_server_config needs both cert_file and key_file");
  }
  if (!cfg.client_ca_file.empty() && cfg.cert_file.empty()) {
    return absl::InvalidArgumentError("web config: client_ca_file needs cert_file and key_file");
  }
  return cfg;
}

absl::StatusOr<WebConfig> LoadWebConfig(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) return text.status();
  absl::StatusOr<WebConfig> cfg = ParseWebConfig(*text);
  if (!cfg.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", cfg.status().message()));
  return cfg;
}

namespace {

// "$2y$10$...": the cost is the two digits after the second '$'.
int BcryptCost(const std::string& hash) { return hash.size() > 6 ? std::atoi(hash.substr(4, 2).c_str()) : 0; }

}  // namespace

BasicAuthChecker::BasicAuthChecker(std::map<std::string, std::string> users) : users_(std::move(users)) {
  for (const auto& [user, hash] : users_) decoys_.emplace(BcryptCost(hash), hash);
}

BasicAuthChecker::Verdict BasicAuthChecker::Verify(absl::string_view header) {
  if (!absl::ConsumePrefix(&header, "Basic ")) return Verdict::kDenied;
  std::string decoded;
  if (!absl::Base64Unescape(absl::StripAsciiWhitespace(header), &decoded)) return Verdict::kDenied;
  size_t colon = decoded.find(':');
  if (colon == std::string::npos) return Verdict::kDenied;
  std::string user = decoded.substr(0, colon);
  std::string password = decoded.substr(colon + 1);
  auto it = users_.find(user);
  std::string cache_key = absl::StrCat(user, absl::string_view("\0", 1), password);
  if (it != users_.end()) {
    std::lock_guard<std::mutex> lock(mu_);
    if (verified_.count(cache_key)) return Verdict::kOk;
  }
  // The bcrypt work below is what a flood would buy: one at a time.
  if (verifying_.fetch_add(1) >= kMaxVerifying) {
    verifying_.fetch_sub(1);
    return Verdict::kBusy;
  }
  bool matched = false;
  const int own_cost = it == users_.end() ? -1 : BcryptCost(it->second);
  for (const auto& [cost, decoy] : decoys_) {
    // The same work for every name: the user's own hash at its cost, a
    // decoy (result ignored) at every other cost.
    const bool own = cost == own_cost;
    const std::string& hash = own ? it->second : decoy;
    struct crypt_data data {};
    const char* hashed = crypt_r(password.c_str(), hash.c_str(), &data);
    if (own) matched = hashed != nullptr && hashed[0] != '*' && SafeEqual(hashed, it->second);
  }
  verifying_.fetch_sub(1);
  if (!matched) return Verdict::kDenied;
  std::lock_guard<std::mutex> lock(mu_);
  if (verified_.size() > 1024) verified_.clear();  // bound memory under credential churn
  verified_.insert(cache_key);
  return Verdict::kOk;
}

}  // namespace sockpressure
