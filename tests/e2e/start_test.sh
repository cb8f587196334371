#!/usr/bin/env bash
# Issue 27: the agent serves at once. The first sample can take tens of
# seconds on a big node (29-44 s at 10,000 cgroups in the lab guest); a
# liveness probe must not restart the pod meanwhile. Here the first sample
# is held up by a kubelet that accepts and never answers (the agent waits
# up to 6 s for its first pod list, so that running pods have names from
# the first sample): /healthz answers within 1 s of start, /readyz, /metrics
# and the JSON API say 503 "no sample yet" until the first sample is
# complete, then the agent is ready. SIGTERM during that first sample ends
# the agent at once.
AGENT="$1"
source "$(dirname "$0")/lib.sh"
make_work

# A kubelet that takes connections and says nothing.
kport="$(free_port)"
python3 -c '
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(16)
held = []
while True:
    held.append(s.accept()[0])
' "$kport" &
PIDS+=("$!")
for _ in $(seq 50); do python3 -c 'import socket,sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1)' "$kport" 2>/dev/null && break; sleep 0.1; done

# code URL: the HTTP status, and the body into $WORK/body.
code() { curl -s -o "$WORK/body" -w '%{http_code}' --max-time 2 "$1" || true; }
now_ms() { date +%s%3N; }

launch() {
  port="$(free_port)"
  t0="$(now_ms)"
  "$AGENT" --web.listen-address="127.0.0.1:$port" --sample.interval=1s --kubelet.url="http://127.0.0.1:$kport/pods" \
    --path.procfs="$FIXTURES/v2/proc" --path.sysfs="$FIXTURES/v2/sys" --path.cgroupfs="$FIXTURES/v2/cgroup" \
    >"$WORK/agent-$port.log" 2>&1 &
  agent_pid=$!
  PIDS+=("$agent_pid")
}

launch
healthz=""
while [ $(( $(now_ms) - t0 )) -lt 10000 ]; do
  healthz="$(code "http://127.0.0.1:$port/healthz")"
  [ "$healthz" = 200 ] && break
  sleep 0.05
done
healthy_ms=$(( $(now_ms) - t0 ))
echo "/healthz $healthz after ${healthy_ms} ms"
[ "$healthz" = 200 ] || { cat "$WORK/agent-$port.log" >&2; fail "/healthz did not answer"; }
[ "$healthy_ms" -lt 1000 ] || fail "/healthz answered ${healthy_ms} ms after start, not within 1 s"

for path in /readyz /metrics /api/v1/cgroups; do
  c="$(code "http://127.0.0.1:$port$path")"
  echo "before the first sample: $path $c $(cat "$WORK/body")"
  [ "$c" = 503 ] || fail "$path answered $c before the first sample"
  grep -q "no sample yet" "$WORK/body" || fail "$path: no clear message before the first sample"
done
grep -q "first sample:" "$WORK/agent-$port.log" && fail "the first sample finished while the kubelet said nothing"

ready=""
while [ $(( $(now_ms) - t0 )) -lt 20000 ]; do
  ready="$(code "http://127.0.0.1:$port/readyz")"
  [ "$ready" = 200 ] && break
  sleep 0.1
done
echo "/readyz $ready after $(( $(now_ms) - t0 )) ms"
[ "$ready" = 200 ] || { cat "$WORK/agent-$port.log" >&2; fail "not ready after the first sample"; }
[ "$(code "http://127.0.0.1:$port/metrics")" = 200 ] || fail "/metrics not served once ready"
grep -q '^sockpressure_samples_total' "$WORK/body" || fail "/metrics once ready has no samples_total"
[ "$(code "http://127.0.0.1:$port/api/v1/cgroups")" = 200 ] || fail "JSON API not served once ready"
grep -q "first sample: .* memory cgroups .*signal sources: reclaim=" "$WORK/agent-$port.log" ||
  fail "no start-up line with the first sample's tiers"
[ "$(code "http://127.0.0.1:$port/healthz")" = 200 ] || fail "/healthz after the first sample"

# SIGTERM while the first sample waits: the agent leaves at once.
launch
wait_http "http://127.0.0.1:$port/healthz" 10 || fail "second agent did not serve"
[ "$(code "http://127.0.0.1:$port/readyz")" = 503 ] || fail "second agent ready before its first sample"
t1="$(now_ms)"
kill -TERM "$agent_pid"
rc=0; wait "$agent_pid" || rc=$?
stop_ms=$(( $(now_ms) - t1 ))
echo "SIGTERM during the first sample: exit $rc after ${stop_ms} ms"
[ "$rc" = 0 ] || fail "exit code $rc on SIGTERM"
[ "$stop_ms" -lt 1500 ] || fail "SIGTERM during the first sample took ${stop_ms} ms"

# On the live host, as root, the collectors load and verify their eBPF
# programs (seconds under emulation, at every start): the agent serves
# before that set-up, not after it.
if [ "$(id -u)" = 0 ]; then
  port="$(free_port)"
  "$AGENT" --web.listen-address="127.0.0.1:$port" >"$WORK/live-$port.log" 2>&1 &
  PIDS+=("$!")
  wait_http "http://127.0.0.1:$port/readyz" 20 || { cat "$WORK/live-$port.log" >&2; fail "live agent never ready"; }
  serving="$(grep -n "listening on" "$WORK/live-$port.log" | head -1 | cut -d: -f1)"
  loaded="$(grep -n "collectors: " "$WORK/live-$port.log" | head -1 | cut -d: -f1)"
  echo "live host: serving at log line $serving, collectors set up at line $loaded"
  [ -n "$serving" ] && [ -n "$loaded" ] || { cat "$WORK/live-$port.log" >&2; fail "live agent log lacks its start-up lines"; }
  [ "$serving" -lt "$loaded" ] || { cat "$WORK/live-$port.log" >&2; fail "the agent served only after its collectors' set-up"; }
else
  echo "live host: serving before the eBPF set-up not checked (needs root to load programs)"
fi
echo "PASS"
