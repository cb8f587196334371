# Shared helpers for the end-to-end tests (sourced, not run).
# Every server a test starts is killed by the EXIT trap; every wait is bounded.

set -euo pipefail

E2E_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$E2E_DIR/../.." && pwd)"
FIXTURES="$REPO_ROOT/tests/fixtures"
SKIP_CODE=77  # ctest SKIP_RETURN_CODE

PIDS=()
TMP_DIRS=()
cleanup() {
  local pid
  for pid in "${PIDS[@]:-}"; do [ -n "$pid" ] && kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]:-}"; do [ -n "$pid" ] && wait "$pid" 2>/dev/null || true; done
  local d
  for d in "${TMP_DIRS[@]:-}"; do if [ -n "$d" ]; then rm -rf "$d"; fi; done
  return 0
}
trap cleanup EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "SKIP: $*" >&2; exit "$SKIP_CODE"; }

# make_work: sets WORK to a fresh directory that the EXIT trap removes
# (not "$(…)": a subshell could not register it for cleanup).
make_work() {
  WORK="$(mktemp -d "${TMPDIR:-/tmp}/sockpressure-e2e.XXXXXX")"
  TMP_DIRS+=("$WORK")
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# wait_http URL SECONDS: until the URL answers 200.
wait_http() {
  local url="$1" deadline=$((SECONDS + $2))
  while [ "$SECONDS" -lt "$deadline" ]; do
    if curl -fsS -o /dev/null "$url" 2>/dev/null; then return 0; fi
    sleep 0.2
  done
  return 1
}

# start_agent PORT ARGS...: runs the agent in the background.
start_agent() {
  local port="$1"; shift
  "$AGENT" --web.listen-address="127.0.0.1:$port" "$@" >"$WORK/agent-$port.log" 2>&1 &
  PIDS+=("$!")
  wait_http "http://127.0.0.1:$port/readyz" 20 || { cat "$WORK/agent-$port.log" >&2; fail "agent did not start"; }
}
