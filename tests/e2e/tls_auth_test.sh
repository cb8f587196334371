#!/usr/bin/env bash
# TLS and basic auth from an exporter-toolkit style --web.config.file: a
# certificate made here with openssl, a bcrypt hash made here with python's
# crypt module; curl must verify the server and present the password.
AGENT="$1"
source "$(dirname "$0")/lib.sh"
command -v openssl >/dev/null || fail "openssl not found (apt-get install openssl)"
make_work
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost \
  -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
  -keyout "$WORK/tls.key" -out "$WORK/tls.crt" >/dev/null 2>&1 || fail "openssl could not make a certificate"
hash="$(python3 - <<'PY'
import ctypes, ctypes.util
# libcrypt's crypt_gensalt/crypt give a real bcrypt ($2b$) hash, as htpasswd -B would.
lib = ctypes.CDLL(ctypes.util.find_library("crypt"))
lib.crypt_gensalt.restype = ctypes.c_char_p
lib.crypt.restype = ctypes.c_char_p
salt = lib.crypt_gensalt(b"$2b$", 5, None, 0)
print(lib.crypt(b"s3cret", salt).decode())
PY
)"
case "$hash" in '$2b$'*) ;; *) fail "could not make a bcrypt hash: $hash" ;; esac
cat >"$WORK/web.yml" <<YML
tls_server_config:
  cert_file: $WORK/tls.crt
  key_file: $WORK/tls.key
basic_auth_users:
  prometheus: '$hash'
YML
port="$(free_port)"
"$AGENT" --web.listen-address="127.0.0.1:$port" --web.config.file="$WORK/web.yml" \
  --path.procfs="$FIXTURES/v2/proc" --path.cgroupfs="$FIXTURES/v2/cgroup" >"$WORK/agent.log" 2>&1 &
PIDS+=("$!")
deadline=$((SECONDS + 20))
until curl -s -o /dev/null --cacert "$WORK/tls.crt" "https://127.0.0.1:$port/readyz"; do
  [ "$SECONDS" -lt "$deadline" ] || { cat "$WORK/agent.log"; fail "TLS agent did not start"; }
  sleep 0.2
done
code() { curl -s -o /dev/null -w '%{http_code}' "$@"; }
plain="$(code "http://127.0.0.1:$port/metrics" || true)"
noauth="$(code --cacert "$WORK/tls.crt" "https://127.0.0.1:$port/metrics")"
wrong="$(code --cacert "$WORK/tls.crt" -u prometheus:nope "https://127.0.0.1:$port/metrics")"
good="$(code --cacert "$WORK/tls.crt" -u prometheus:s3cret "https://127.0.0.1:$port/metrics")"
echo "plain http=$plain no-auth=$noauth wrong-password=$wrong right-password=$good"
[ "$plain" != 200 ] || fail "plain HTTP must not be served when TLS is configured"
[ "$noauth" = 401 ] || fail "no credentials must get 401"
[ "$wrong" = 401 ] || fail "a wrong password must get 401"
[ "$good" = 200 ] || fail "the right password must get 200"
# Kubelet httpGet probes carry no credentials: /healthz is open (it says only ok/stalled).
probe="$(code --cacert "$WORK/tls.crt" "https://127.0.0.1:$port/healthz")"
echo "healthz without credentials=$probe"
[ "$probe" = 200 ] || fail "/healthz must answer probes without credentials"
# Into a file first: grep -q stops reading at the first match, and under
# pipefail curl's failed write would fail the test at random.
curl -fsS --cacert "$WORK/tls.crt" -u prometheus:s3cret "https://127.0.0.1:$port/metrics" >"$WORK/tls_metrics" ||
  fail "metrics over TLS failed"
grep -q '^sockpressure_node_info' "$WORK/tls_metrics" || fail "metrics missing over TLS"

# Certificate rotation (cert-manager replaces both files in place): new
# connections get the new certificate within 5 s, without a restart, as
# exporter-toolkit does. Until then, and after, the old one's clients are
# not cut off mid-scrape.
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost \
  -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
  -keyout "$WORK/tls2.key" -out "$WORK/tls2.crt" >/dev/null 2>&1 || fail "openssl could not make a second certificate"
cp "$WORK/tls2.key" "$WORK/tls.key.new" && cp "$WORK/tls2.crt" "$WORK/tls.crt.new"
mv "$WORK/tls.key.new" "$WORK/tls.key" && mv "$WORK/tls.crt.new" "$WORK/tls.crt"
rotated=""
for _ in $(seq 50); do
  if [ "$(code --cacert "$WORK/tls2.crt" "https://127.0.0.1:$port/healthz")" = 200 ]; then rotated=yes; break; fi
  sleep 0.1
done
[ -n "$rotated" ] || { cat "$WORK/agent.log" >&2; fail "the replaced certificate was not served within 5 s"; }
grep -q "TLS certificate reloaded" "$WORK/agent.log" || fail "the reload was not logged"
echo "replaced certificate served without a restart"

# A config the agent does not understand is refused at start with a clear message.
printf 'tls_server_config:\n  cert_file: a\n  key_file: b\n  minversion: TLS13\n' >"$WORK/bad.yml"
if "$AGENT" --web.config.file="$WORK/bad.yml" >"$WORK/bad.log" 2>&1; then fail "bad web config accepted"; fi
grep -q "unknown key 'tls_server_config.minversion'" "$WORK/bad.log" || { cat "$WORK/bad.log"; fail "unclear error"; }
echo "PASS"
