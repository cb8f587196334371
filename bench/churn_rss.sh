#!/usr/bin/env bash
# Issue 13: RSS under cgroup churn. On a fixture tree (tmpfs or /tmp, never
# the real cgroupfs) ROUNDS times: create COUNT cgroups with a memory.stat,
# let the agent sample them, delete them. Prints RSS before, the high-water
# mark, and RSS after the cgroups are gone; fails if "after" is over 1.5x
# "before".
#   bench/churn_rss.sh build/sockpressure_exporter [COUNT=20000] [ROUNDS=4]
set -euo pipefail
AGENT="$1"; COUNT="${2:-20000}"; ROUNDS="${3:-4}"
REPO="$(cd "$(dirname "$0")/.." && pwd)"
base="${TMPDIR:-/tmp}"; [ -d /dev/shm ] && [ -w /dev/shm ] && base=/dev/shm
WORK="$(mktemp -d "$base/sockpressure-churn.XXXXXX")"
PID=""
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT
cp -r "$REPO/tests/fixtures/v2" "$WORK/v2"
CG="$WORK/v2/cgroup"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
"$AGENT" --web.listen-address="127.0.0.1:$port" --sample.interval=500ms --cgroup.max=25000 \
  --path.procfs="$WORK/v2/proc" --path.cgroupfs="$CG" ${AGENT_ARGS:-} >"$WORK/agent.log" 2>&1 &
PID=$!
status() { awk -v k="$1:" '$1 == k { print $2 }' "/proc/$PID/status"; }
tracked() { curl -fsS "http://127.0.0.1:$port/metrics" | awk '$1 == "sockpressure_cgroups_tracked" { print $2 }'; }
sleep 3
curl -fsS -o /dev/null "http://127.0.0.1:$port/metrics"
rss0="$(status VmRSS)"
for r in $(seq "$ROUNDS"); do
  python3 - "$CG/churn.slice" "$COUNT" <<'PY'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
os.makedirs(root, exist_ok=True)
stat = "anon 1048576\nfile 0\nsock 0\npgscan 1000\npgsteal 1000\n"
open(os.path.join(root, "memory.stat"), "w").write(stat)
for i in range(n):
    d = os.path.join(root, "pod%05d-%s.scope" % (i, "x" * 60))
    os.mkdir(d)
    with open(os.path.join(d, "memory.stat"), "w") as f:
        f.write(stat)
PY
  sleep 1.5
  peak_tracked="$(tracked)"
  curl -fsS -o /dev/null "http://127.0.0.1:$port/metrics"
  rm -rf "$CG/churn.slice"
  sleep 1.5
  echo "round $r: tracked with churn $peak_tracked, RSS $(status VmRSS) kB"
done
sleep 3
curl -fsS -o /dev/null "http://127.0.0.1:$port/metrics"
rss1="$(status VmRSS)"; hwm="$(status VmHWM)"
echo "churn ${COUNT} cgroups x ${ROUNDS}: RSS before ${rss0} kB, high-water ${hwm} kB, after ${rss1} kB (tracked now $(tracked)); ratio $(python3 -c "print(round($rss1/$rss0, 2))")"
ok=0; python3 -c "import sys; sys.exit(0 if $rss1 <= 1.5 * $rss0 else 1)" || ok=1
[ -n "${HOLD:-}" ] && { gdb -batch -p "$PID" -ex "call (int)malloc_trim(0)" >/dev/null 2>&1; echo "after a manual malloc_trim: RSS $(status VmRSS) kB"; }
[ "$ok" = 0 ] || { echo "FAIL: RSS after churn over 1.5x before"; exit 1; }
echo "PASS"
