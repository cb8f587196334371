#!/usr/bin/env bash
# Issue 13: out-of-range flags are refused at start-up with the reason
# (exit 2, before any sampling), never accepted into a busy loop or a server
# that answers 503 to everything.
AGENT="$1"
source "$(dirname "$0")/lib.sh"
make_work
check() {  # check EXPECTED_TEXT ARGS...
  local want="$1"; shift
  local rc=0
  timeout 10 "$AGENT" --path.procfs="$FIXTURES/v2/proc" --path.cgroupfs="$FIXTURES/v2/cgroup" \
    --web.listen-address=127.0.0.1:0 "$@" >"$WORK/out" 2>&1 || rc=$?
  [ "$rc" = 2 ] || { cat "$WORK/out"; fail "$* exited $rc, want 2"; }
  grep -qF -- "$want" "$WORK/out" || { cat "$WORK/out"; fail "$*: no '$want' in the message"; }
  echo "refused $*: $(head -1 "$WORK/out")"
}
check "between" --sample.interval=inf
check "between" --sample.interval=100000000h
check "between" --web.max-requests=2147483648
check "between" --episodes.quiet-period=-1s
check "telemetry-path" --web.telemetry-path=
check "telemetry-path" --web.telemetry-path=metrics
check "core or context" --metrics.profile=everything
echo "PASS"
