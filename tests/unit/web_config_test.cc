// --web.config.file: the exporter-toolkit format, every key, bad values,
// unknown keys and the header allow-list.
#include "exporter/outputs/http/web_config.h"

#include <crypt.h>
#include <gtest/gtest.h>

#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace sockpressure {
namespace {

constexpr char kTls[] = "tls_server_config:\n  cert_file: /etc/tls.crt\n  key_file: /etc/tls.key\n";

// The error for `yaml`, or "ok".
std::string Error(const std::string& yaml) {
  auto cfg = ParseWebConfig(yaml);
  return cfg.ok() ? "ok" : std::string(cfg.status().message());
}

TEST(WebConfigTest, ParsesCertKeyAndUsers) {
  auto cfg = ParseWebConfig(
      "# comment\ntls_server_config:\n  cert_file: /etc/tls.crt\n  key_file: \"/etc/tls.key\"\n"
      "basic_auth_users:\n  prometheus: $2y$10$abcdefghijklmnopqrstuuJ1234567890123456789012345678 # hash\n");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->cert_file, "/etc/tls.crt");
  EXPECT_EQ(cfg->key_file, "/etc/tls.key");
  EXPECT_TRUE(cfg->tls());
  EXPECT_EQ(cfg->basic_auth_users.count("prometheus"), 1u);
}

TEST(WebConfigTest, DefaultsAreExporterToolkits) {
  auto cfg = ParseWebConfig(kTls);
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->min_version, 0x0303) << "TLS12";
  EXPECT_EQ(cfg->max_version, 0x0304) << "TLS13";
  EXPECT_EQ(cfg->client_auth, ClientAuth::kNoClientCert);
  EXPECT_TRUE(cfg->cipher_suites.empty());
  EXPECT_TRUE(cfg->curve_preferences.empty());
  EXPECT_TRUE(cfg->prefer_server_cipher_suites);
  EXPECT_TRUE(cfg->http2);
  EXPECT_TRUE(cfg->headers.empty());
  // The default TLS 1.2 list: ECDHE and AEAD only.
  for (absl::string_view c : absl::StrSplit(kDefaultTls12Ciphers, ':')) {
    EXPECT_TRUE(absl::StartsWith(c, "ECDHE-")) << c;
    EXPECT_TRUE(absl::EndsWith(c, "-GCM-SHA256") || absl::EndsWith(c, "-GCM-SHA384") ||
                absl::EndsWith(c, "-CHACHA20-POLY1305"))
        << c;
  }
}

TEST(WebConfigTest, EmptyFileAndEmptySections) {
  EXPECT_EQ(Error(""), "ok");
  EXPECT_EQ(Error("# nothing\n"), "ok");
  EXPECT_EQ(Error("tls_server_config:\nhttp_server_config:\nbasic_auth_users:\n"), "ok");
  EXPECT_FALSE(ParseWebConfig("")->tls());
}

TEST(WebConfigTest, EveryTlsKey) {
  auto cfg = ParseWebConfig(
      "tls_server_config:\n"
      "  cert_file: /c\n  key_file: /k\n"
      "  client_auth_type: RequireAndVerifyClientCert\n"
      "  client_ca_file: /ca\n"
      "  min_version: TLS10\n  max_version: TLS12\n"
      "  cipher_suites:\n    - TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256\n    - TLS_RSA_WITH_AES_128_CBC_SHA\n"
      "    - TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256\n    - TLS_AES_128_GCM_SHA256\n"
      "  curve_preferences: [X25519, CurveP256, CurveP384, CurveP521]\n"
      "  prefer_server_cipher_suites: false\n");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->client_ca_file, "/ca");
  EXPECT_EQ(cfg->client_auth, ClientAuth::kRequireAndVerifyClientCert);
  EXPECT_EQ(cfg->min_version, 0x0301);
  EXPECT_EQ(cfg->max_version, 0x0303);
  // Go names to OpenSSL's; a TLS 1.3 suite is accepted and, as in Go, has no effect.
  EXPECT_EQ(cfg->cipher_suites,
            (std::vector<std::string>{"ECDHE-RSA-AES128-GCM-SHA256", "AES128-SHA", "ECDHE-ECDSA-CHACHA20-POLY1305"}));
  EXPECT_EQ(cfg->curve_preferences, (std::vector<std::string>{"X25519", "P-256", "P-384", "P-521"}));
  EXPECT_FALSE(cfg->prefer_server_cipher_suites);
}

TEST(WebConfigTest, ClientAuthTypes) {
  const std::pair<const char*, ClientAuth> kTypes[] = {
      {"NoClientCert", ClientAuth::kNoClientCert},
      {"RequestClientCert", ClientAuth::kRequestClientCert},
      {"RequireAnyClientCert", ClientAuth::kRequireAnyClientCert},
      {"RequireClientCert", ClientAuth::kRequireAnyClientCert},  // exporter-toolkit's old name
      {"VerifyClientCertIfGiven", ClientAuth::kVerifyClientCertIfGiven},
      {"RequireAndVerifyClientCert", ClientAuth::kRequireAndVerifyClientCert},
  };
  for (const auto& [name, want] : kTypes) {
    auto cfg = ParseWebConfig(absl::StrCat(kTls, "  client_auth_type: ", name, "\n"));
    ASSERT_TRUE(cfg.ok()) << name << ": " << cfg.status();
    EXPECT_EQ(cfg->client_auth, want) << name;
  }
  EXPECT_TRUE(absl::StrContains(Error(absl::StrCat(kTls, "  client_auth_type: Always\n")), "client_auth_type"));
  // A client CA means client certificates must be asked for.
  EXPECT_TRUE(absl::StrContains(
      Error(absl::StrCat(kTls, "  client_auth_type: NoClientCert\n  client_ca_file: /ca\n")), "client_ca_file"));
  // This agent's earlier meaning of client_ca_file alone is kept: require and verify.
  auto legacy = ParseWebConfig(absl::StrCat(kTls, "  client_ca_file: /ca\n"));
  ASSERT_TRUE(legacy.ok()) << legacy.status();
  EXPECT_EQ(legacy->client_auth, ClientAuth::kRequireAndVerifyClientCert);
}

TEST(WebConfigTest, BadTlsValues) {
  EXPECT_TRUE(absl::StrContains(Error(absl::StrCat(kTls, "  min_version: TLS14\n")), "min_version"));
  EXPECT_TRUE(absl::StrContains(Error(absl::StrCat(kTls, "  max_version: 1.3\n")), "max_version"));
  EXPECT_TRUE(absl::StrContains(Error(absl::StrCat(kTls, "  min_version: TLS13\n  max_version: TLS12\n")),
                                "min_version"));
  // Go's insecure suites are unknown to exporter-toolkit too.
  EXPECT_TRUE(absl::StrContains(Error(absl::StrCat(kTls, "  cipher_suites: [TLS_RSA_WITH_RC4_128_SHA]\n")),
                                "TLS_RSA_WITH_RC4_128_SHA"));
  EXPECT_TRUE(absl::StrContains(Error(absl::StrCat(kTls, "  cipher_suites: [ECDHE-RSA-AES128-GCM-SHA256]\n")),
                                "cipher"))
      << "OpenSSL names are not Go names";
  EXPECT_TRUE(absl::StrContains(Error(absl::StrCat(kTls, "  cipher_suites: TLS_AES_128_GCM_SHA256\n")),
                                "cipher_suites"))
      << "a list, not a string";
  EXPECT_TRUE(absl::StrContains(Error(absl::StrCat(kTls, "  curve_preferences: [P-256]\n")), "P-256"));
  EXPECT_TRUE(absl::StrContains(Error(absl::StrCat(kTls, "  prefer_server_cipher_suites: maybe\n")),
                                "prefer_server_cipher_suites"));
  EXPECT_TRUE(absl::StrContains(Error(absl::StrCat(kTls, "  cert_file: [a, b]\n")), "cert_file"));
}

TEST(WebConfigTest, CertAndKeyGoTogether) {
  EXPECT_TRUE(absl::StrContains(Error("tls_server_config:\n  cert_file: a\n"), "key_file"));
  EXPECT_TRUE(absl::StrContains(Error("tls_server_config:\n  key_file: a\n"), "cert_file"));
  EXPECT_TRUE(absl::StrContains(Error("tls_server_config:\n  client_ca_file: a\n"), "cert_file"));
  EXPECT_TRUE(absl::StrContains(Error("tls_server_config:\n  client_auth_type: RequireAnyClientCert\n"),
                                "cert_file"));
}

TEST(WebConfigTest, RelativePathsAreToTheConfigsDirectory) {
  auto cfg = ParseWebConfig("tls_server_config:\n  cert_file: tls.crt\n  key_file: /abs/tls.key\n"
                            "  client_ca_file: sub/ca.crt\n  client_auth_type: RequireAndVerifyClientCert\n",
                            "/etc/sp");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(cfg->cert_file, "/etc/sp/tls.crt");
  EXPECT_EQ(cfg->key_file, "/abs/tls.key");
  EXPECT_EQ(cfg->client_ca_file, "/etc/sp/sub/ca.crt");
}

TEST(WebConfigTest, HttpServerConfig) {
  auto cfg = ParseWebConfig(
      "http_server_config:\n  http2: false\n  headers:\n"
      "    Strict-Transport-Security: max-age=31536000\n    X-Content-Type-Options: nosniff\n"
      "    X-Frame-Options: deny\n    X-XSS-Protection: 1; mode=block\n"
      "    Content-Security-Policy: default-src 'self'\n");
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_FALSE(cfg->http2);
  EXPECT_EQ(cfg->headers.size(), 5u);
  EXPECT_EQ(cfg->headers["X-XSS-Protection"], "1; mode=block");
  EXPECT_EQ(cfg->headers["Content-Security-Policy"], "default-src 'self'");
  EXPECT_EQ(Error("http_server_config:\n  headers:\n    X-Frame-Options: sameorigin\n"), "ok");
  EXPECT_TRUE(absl::StrContains(Error("http_server_config:\n  http2: sometimes\n"), "http2"));
}

TEST(WebConfigTest, OnlyExporterToolkitsHeaders) {
  // exporter-toolkit's allow-list: other names, even harmless ones, and
  // other values of the enumerated ones are refused.
  for (const char* bad : {"Server: x", "Set-Cookie: a=b", "Content-Type: text/html", "Content-Length: 0",
                          "Connection: close", "Transfer-Encoding: chunked", "WWW-Authenticate: Basic",
                          "x-content-type-options: nosniff", "X-Custom: 1"}) {
    std::string err = Error(absl::StrCat("http_server_config:\n  headers:\n    ", bad, "\n"));
    EXPECT_TRUE(absl::StrContains(err, "can not be configured")) << bad << ": " << err;
  }
  EXPECT_TRUE(absl::StrContains(Error("http_server_config:\n  headers:\n    X-Content-Type-Options: sniff\n"),
                                "nosniff"));
  EXPECT_TRUE(absl::StrContains(Error("http_server_config:\n  headers:\n    X-Frame-Options: allow\n"),
                                "sameorigin"));
  // No header injection through a YAML escape.
  EXPECT_TRUE(absl::StrContains(
      Error("http_server_config:\n  headers:\n    Content-Security-Policy: \"a\\r\\nSet-Cookie: x\"\n"),
      "Content-Security-Policy"));
  EXPECT_TRUE(absl::StrContains(Error("http_server_config:\n  headers: [a]\n"), "headers"));
}

TEST(WebConfigTest, UnknownKeysAreNamed) {
  EXPECT_TRUE(absl::StrContains(Error("tls_config:\n"), "'tls_config'"));
  EXPECT_TRUE(absl::StrContains(Error("rate_limit:\n  burst: 1\n"), "'rate_limit'"));
  EXPECT_TRUE(absl::StrContains(Error(absl::StrCat(kTls, "  client_allowed_sans: [a]\n")),
                                "'tls_server_config.client_allowed_sans'"));
  EXPECT_TRUE(absl::StrContains(Error(absl::StrCat(kTls, "  minversion: TLS13\n")), "'tls_server_config.minversion'"));
  EXPECT_TRUE(absl::StrContains(Error("http_server_config:\n  http3: true\n"), "'http_server_config.http3'"));
  // Where it is: the line.
  EXPECT_TRUE(absl::StrContains(Error(absl::StrCat(kTls, "  bogus: 1\n")), "line 4"));
  // Duplicate keys are an error too (yaml.v2's strict mode), not "the last wins".
  EXPECT_TRUE(absl::StrContains(Error(absl::StrCat(kTls, "  cert_file: /other\n")), "cert_file"));
}

TEST(WebConfigTest, NotYaml) {
  EXPECT_NE(Error("tls_server_config: [\n"), "ok");
  EXPECT_NE(Error("- a\n- b\n"), "ok");
  EXPECT_NE(Error("just a string"), "ok");
  EXPECT_TRUE(absl::StrContains(Error("tls_server_config: x\n"), "tls_server_config"));
  EXPECT_TRUE(absl::StrContains(Error("basic_auth_users: [a]\n"), "basic_auth_users"));
}

TEST(WebConfigTest, BasicAuthUsers) {
  EXPECT_TRUE(absl::StrContains(Error("basic_auth_users:\n  alice: plaintext\n"), "bcrypt"));
  EXPECT_TRUE(absl::StrContains(Error("basic_auth_users:\n  alice:\n"), "alice"));
  EXPECT_TRUE(absl::StrContains(Error("basic_auth_users:\n  alice: [a]\n"), "alice"));
}

TEST(WebConfigTest, BasicAuthWithRealBcrypt) {
  struct crypt_data data {};
  char salt[64];
  ASSERT_NE(crypt_gensalt_rn("$2b$", 4, nullptr, 0, salt, sizeof salt), nullptr);
  std::string hash = crypt_r("s3cret", salt, &data);
  ASSERT_TRUE(absl::StartsWith(hash, "$2b$04$"));
  BasicAuthChecker auth({{"prometheus", hash}});
  EXPECT_TRUE(auth.Check("Basic " + absl::Base64Escape("prometheus:s3cret")));
  EXPECT_TRUE(auth.Check("Basic " + absl::Base64Escape("prometheus:s3cret"))) << "cached";
  EXPECT_FALSE(auth.Check("Basic " + absl::Base64Escape("prometheus:wrong")));
  EXPECT_FALSE(auth.Check("Basic " + absl::Base64Escape("mallory:s3cret")));
  EXPECT_FALSE(auth.Check("Bearer xyz"));
  EXPECT_FALSE(auth.Check(""));
}

}  // namespace
}  // namespace sockpressure
