#include "absl/strings/string_view.h"
#include "exporter/outputs/http/web_config.h"

#include <crypt.h>

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdlib>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "exporter/common/file_reader.h"

namespace sockpressure {
namespace {

// Constant-time comparison so a wrong hash does not leak its prefix.
bool SafeEqual(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

// Go's crypto/tls names (tls.CipherSuites(), the ones exporter-toolkit
// accepts) and OpenSSL's; an empty OpenSSL name is a TLS 1.3 suite, which
// Go accepts and does not let be configured.
constexpr std::pair<const char*, const char*> kCiphers[] = {
    {"TLS_RSA_WITH_AES_128_CBC_SHA", "AES128-SHA"},
    {"TLS_RSA_WITH_AES_256_CBC_SHA", "AES256-SHA"},
    {"TLS_RSA_WITH_AES_128_GCM_SHA256", "AES128-GCM-SHA256"},
    {"TLS_RSA_WITH_AES_256_GCM_SHA384", "AES256-GCM-SHA384"},
    {"TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", "ECDHE-ECDSA-AES128-SHA"},
    {"TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", "ECDHE-ECDSA-AES256-SHA"},
    {"TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", "ECDHE-RSA-AES128-SHA"},
    {"TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA", "ECDHE-RSA-AES256-SHA"},
    {"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "ECDHE-ECDSA-AES128-GCM-SHA256"},
    {"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "ECDHE-ECDSA-AES256-GCM-SHA384"},
    {"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "ECDHE-RSA-AES128-GCM-SHA256"},
    {"TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", "ECDHE-RSA-AES256-GCM-SHA384"},
    {"TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", "ECDHE-RSA-CHACHA20-POLY1305"},
    {"TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", "ECDHE-ECDSA-CHACHA20-POLY1305"},
    {"TLS_AES_128_GCM_SHA256", ""},
    {"TLS_AES_256_GCM_SHA384", ""},
    {"TLS_CHACHA20_POLY1305_SHA256", ""},
};
constexpr std::pair<const char*, const char*> kCurves[] = {
    {"X25519", "X25519"}, {"CurveP256", "P-256"}, {"CurveP384", "P-384"}, {"CurveP521", "P-521"}};
constexpr std::pair<const char*, int> kVersions[] = {
    {"TLS10", 0x0301}, {"TLS11", 0x0302}, {"TLS12", 0x0303}, {"TLS13", 0x0304}};
constexpr std::pair<const char*, ClientAuth> kClientAuth[] = {
    {"NoClientCert", ClientAuth::kNoClientCert},
    {"RequestClientCert", ClientAuth::kRequestClientCert},
    {"RequireAnyClientCert", ClientAuth::kRequireAnyClientCert},
    {"RequireClientCert", ClientAuth::kRequireAnyClientCert},  // exporter-toolkit keeps the old name
    {"VerifyClientCertIfGiven", ClientAuth::kVerifyClientCertIfGiven},
    {"RequireAndVerifyClientCert", ClientAuth::kRequireAndVerifyClientCert},
};
// exporter-toolkit's allow-list (web/handler.go extraHTTPHeaders): these
// names only, exactly so spelled; a non-empty value list is an enumeration.
const std::map<std::string, std::vector<std::string>>& AllowedHeaders() {
  static const auto* m = new std::map<std::string, std::vector<std::string>>{
      {"Strict-Transport-Security", {}},
      {"X-Content-Type-Options", {"nosniff"}},
      {"X-Frame-Options", {"deny", "sameorigin"}},
      {"X-XSS-Protection", {}},
      {"Content-Security-Policy", {}},
  };
  return *m;
}

int Line(const YAML::Node& n) { return n.Mark().line + 1; }

absl::Status Bad(const YAML::Node& at, absl::string_view key, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("line ", Line(at), ": '", key, "' ", what));
}

absl::StatusOr<std::string> Str(const YAML::Node& n, absl::string_view key) {
  if (n.IsNull()) return std::string();
  if (!n.IsScalar()) return Bad(n, key, "must be a string");
  return n.Scalar();
}

absl::StatusOr<bool> Bool(const YAML::Node& n, absl::string_view key) {
  bool b = false;
  if (!n.IsScalar() || !YAML::convert<bool>::decode(n, b)) return Bad(n, key, "must be true or false");
  return b;
}

absl::StatusOr<std::vector<std::string>> StrList(const YAML::Node& n, absl::string_view key) {
  std::vector<std::string> out;
  if (n.IsNull()) return out;
  if (!n.IsSequence()) return Bad(n, key, "must be a list");
  for (const YAML::Node& item : n) {
    if (!item.IsScalar()) return Bad(item, key, "must be a list of strings");
    out.push_back(item.Scalar());
  }
  return out;
}

template <typename T, size_t N>
absl::StatusOr<T> OneOf(const YAML::Node& n, absl::string_view key, absl::string_view value,
                        const std::pair<const char*, T> (&table)[N]) {
  std::vector<std::string> names;
  for (const auto& [name, v] : table) {
    if (value == name) return v;
    names.push_back(name);
  }
  return Bad(n, key, absl::StrCat("has an unknown value '", value, "' (one of: ", absl::StrJoin(names, ", "), ")"));
}

// Calls `each(key, key node, value node)` for every entry of the map `n`
// (null: none); duplicate keys are an error, as in yaml.v2's strict mode.
template <typename F>
absl::Status EachEntry(const YAML::Node& n, absl::string_view where, F each) {
  if (n.IsNull()) return absl::OkStatus();
  if (!n.IsMap()) return Bad(n, where, "must be a map");
  std::set<std::string> seen;
  for (auto it = n.begin(); it != n.end(); ++it) {
    if (!it->first.IsScalar()) return Bad(it->first, where, "has a key that is not a string");
    const std::string& key = it->first.Scalar();
    if (!seen.insert(key).second) {
      return Bad(it->first, where.empty() ? key : absl::StrCat(where, ".", key), "is given twice");
    }
    if (absl::Status s = each(key, it->first, it->second); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status Unknown(const YAML::Node& at, absl::string_view section, absl::string_view key,
                     absl::string_view supported) {
  return absl::InvalidArgumentError(absl::StrCat("line ", Line(at), ": unknown key '",
                                                 section.empty() ? "" : absl::StrCat(section, "."), key,
                                                 "' (supported: ", supported, ")"));
}

#define SP_ASSIGN(lhs, expr)             \
  do {                                   \
    auto _v = (expr);                    \
    if (!_v.ok()) return _v.status();    \
    (lhs) = *std::move(_v);              \
  } while (0)

absl::Status ParseTls(const YAML::Node& n, WebConfig* cfg, bool* auth_set) {
  constexpr char kSection[] = "tls_server_config";
  return EachEntry(n, kSection, [&](const std::string& key, const YAML::Node& k, const YAML::Node& v) -> absl::Status {
    const std::string path = absl::StrCat(kSection, ".", key);
    if (key == "cert_file") {
      SP_ASSIGN(cfg->cert_file, Str(v, path));
    } else if (key == "key_file") {
      SP_ASSIGN(cfg->key_file, Str(v, path));
    } else if (key == "client_ca_file") {
      SP_ASSIGN(cfg->client_ca_file, Str(v, path));
    } else if (key == "client_auth_type") {
      std::string s;
      SP_ASSIGN(s, Str(v, path));
      *auth_set = !s.empty();
      if (!s.empty()) SP_ASSIGN(cfg->client_auth, OneOf(v, path, s, kClientAuth));
    } else if (key == "min_version" || key == "max_version") {
      std::string s;
      SP_ASSIGN(s, Str(v, path));
      int* version = key == "min_version" ? &cfg->min_version : &cfg->max_version;
      SP_ASSIGN(*version, OneOf(v, path, s, kVersions));
    } else if (key == "cipher_suites") {
      std::vector<std::string> names;
      SP_ASSIGN(names, StrList(v, path));
      cfg->cipher_suites.clear();
      for (const std::string& name : names) {
        const char* openssl = nullptr;
        SP_ASSIGN(openssl, OneOf(v, path, name, kCiphers));
        if (*openssl != '\0') cfg->cipher_suites.push_back(openssl);
      }
    } else if (key == "curve_preferences") {
      std::vector<std::string> names;
      SP_ASSIGN(names, StrList(v, path));
      cfg->curve_preferences.clear();
      for (const std::string& name : names) {
        const char* openssl = nullptr;
        SP_ASSIGN(openssl, OneOf(v, path, name, kCurves));
        cfg->curve_preferences.push_back(openssl);
      }
    } else if (key == "prefer_server_cipher_suites") {
      SP_ASSIGN(cfg->prefer_server_cipher_suites, Bool(v, path));
    } else {
      return Unknown(k, kSection, key,
                     "cert_file, key_file, client_auth_type, client_ca_file, min_version, max_version, "
                     "cipher_suites, curve_preferences, prefer_server_cipher_suites");
    }
    return absl::OkStatus();
  });
}

absl::Status ParseHttp(const YAML::Node& n, WebConfig* cfg) {
  constexpr char kSection[] = "http_server_config";
  return EachEntry(n, kSection, [&](const std::string& key, const YAML::Node& k, const YAML::Node& v) -> absl::Status {
    const std::string path = absl::StrCat(kSection, ".", key);
    if (key == "http2") {
      SP_ASSIGN(cfg->http2, Bool(v, path));
      return absl::OkStatus();
    }
    if (key != "headers") return Unknown(k, kSection, key, "headers, http2");
    return EachEntry(v, path, [&](const std::string& name, const YAML::Node& hk, const YAML::Node& hv) -> absl::Status {
      auto allowed = AllowedHeaders().find(name);
      if (allowed == AllowedHeaders().end()) {
        std::vector<std::string> names;
        for (const auto& [h, values] : AllowedHeaders()) names.push_back(h);
        return absl::InvalidArgumentError(absl::StrCat("line ", Line(hk), ": HTTP header '", name,
                                                       "' can not be configured (only ", absl::StrJoin(names, ", "),
                                                       ", as exporter-toolkit)"));
      }
      std::string value;
      SP_ASSIGN(value, Str(hv, absl::StrCat(path, ".", name)));
      for (unsigned char c : value) {
        if ((c < 0x20 && c != '\t') || c == 0x7f) return Bad(hv, absl::StrCat(path, ".", name), "has a control character");
      }
      const std::vector<std::string>& values = allowed->second;
      if (!values.empty() && std::find(values.begin(), values.end(), value) == values.end()) {
        return Bad(hv, absl::StrCat(path, ".", name),
                   absl::StrCat("must be one of: ", absl::StrJoin(values, ", "), " (got '", value, "')"));
      }
      cfg->headers[name] = value;
      return absl::OkStatus();
    });
  });
}

absl::Status ParseUsers(const YAML::Node& n, WebConfig* cfg) {
  return EachEntry(n, "basic_auth_users",
                   [&](const std::string& user, const YAML::Node&, const YAML::Node& v) -> absl::Status {
                     const std::string path = absl::StrCat("basic_auth_users.", user);
                     std::string hash;
                     SP_ASSIGN(hash, Str(v, path));
                     if (hash.empty()) return Bad(v, path, "has no password hash");
                     if (!absl::StartsWith(hash, "$2")) return Bad(v, path, "must be a bcrypt hash ($2y$...)");
                     cfg->basic_auth_users[user] = hash;
                     return absl::OkStatus();
                   });
}

#undef SP_ASSIGN

void JoinDir(const std::string& dir, std::string* path) {
  if (!dir.empty() && !path->empty() && (*path)[0] != '/') *path = absl::StrCat(dir, "/", *path);
}

}  // namespace

absl::StatusOr<WebConfig> ParseWebConfig(absl::string_view yaml, const std::string& dir) {
  WebConfig cfg;
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("line ", e.mark.line + 1, ": not YAML: ", e.msg));
  }
  bool auth_set = false;
  try {
    absl::Status s = EachEntry(root, "", [&](const std::string& key, const YAML::Node& k,
                                             const YAML::Node& v) -> absl::Status {
      if (key == "tls_server_config") return ParseTls(v, &cfg, &auth_set);
      if (key == "http_server_config") return ParseHttp(v, &cfg);
      if (key == "basic_auth_users") return ParseUsers(v, &cfg);
      return Unknown(k, "", key, "tls_server_config, http_server_config, basic_auth_users");
    });
    if (!s.ok()) return s;
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("line ", e.mark.line + 1, ": ", e.msg));
  }
  if (!root.IsNull() && !root.IsMap()) return absl::InvalidArgumentError("the web config must be a map");
  const bool tls_keys = !cfg.cert_file.empty() || !cfg.key_file.empty() || !cfg.client_ca_file.empty() || auth_set;
  if (tls_keys && cfg.cert_file.empty()) return absl::InvalidArgumentError("tls_server_config needs cert_file");
  if (tls_keys && cfg.key_file.empty()) return absl::InvalidArgumentError("tls_server_config needs key_file");
  if (!cfg.client_ca_file.empty()) {
    if (!auth_set) {
      // Before client_auth_type was understood, client_ca_file alone required
      // verified client certificates here; that meaning is kept (where
      // exporter-toolkit refuses the config).
      cfg.client_auth = ClientAuth::kRequireAndVerifyClientCert;
    } else if (cfg.client_auth == ClientAuth::kNoClientCert) {
      return absl::InvalidArgumentError(
          "tls_server_config: client_ca_file is set but client_auth_type is NoClientCert (client certificates "
          "would never be asked for)");
    }
  }
  if (cfg.min_version > cfg.max_version) {
    return absl::InvalidArgumentError("tls_server_config: min_version is above max_version");
  }
  JoinDir(dir, &cfg.cert_file);
  JoinDir(dir, &cfg.key_file);
  JoinDir(dir, &cfg.client_ca_file);
  return cfg;
}

absl::StatusOr<WebConfig> LoadWebConfig(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) return text.status();
  size_t slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "" : slash == 0 ? "/" : path.substr(0, slash);
  absl::StatusOr<WebConfig> cfg = ParseWebConfig(*text, dir);
  if (!cfg.ok()) return absl::InvalidArgumentError(absl::StrCat("web config ", path, ": ", cfg.status().message()));
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
