#!/usr/bin/env bash
# Idle-node comparison, side by side in one run: the agent (default flags:
# every collector and eBPF tier this kernel allows) and node_exporter with its
# default collectors (Debian package prometheus-node-exporter), both running
# on this machine for DURATION seconds and both scraped every 15 s with the
# headers a Prometheus server sends. Prints each exporter's CPU per second of
# wall time, RSS at the end and its high-water mark, and the agent's ratios to
# node_exporter. CPU is the sum of the run time of each thread
# (/proc/PID/task/*/schedstat, nanoseconds) over the window; utime+stime from
# /proc/PID/stat (clock ticks: 10 ms each, about 10 % of a 120 s window of an
# idle exporter) is printed beside it as a cross-check.
# Targets (issue 48): agent CPU <= 0.5x node_exporter's, RSS <= node_exporter's.
# The agent only reads the host's cgroupfs and procfs; nothing is changed.
#   bench/idle_node.sh BUILD_DIR [DURATION=120] [AGENT ARGS...]
# node_exporter: the installed binary, else the Debian package fetched with
# `apt-get download` and unpacked into a temporary directory (not installed,
# so no system service is started).
set -euo pipefail
BUILD="$(cd "${1:-build}" && pwd)"; DURATION="${2:-120}"; shift $(( $# >= 2 ? 2 : $# ))
AGENT="$BUILD/sockpressure_exporter"
INTERVAL=15
WORK="$(mktemp -d)"
APID=""; NPID=""
cleanup() {
  for p in $APID $NPID; do { kill "$p" && wait "$p"; } 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

NE="$(command -v prometheus-node-exporter || command -v node_exporter || true)"
if [ -z "$NE" ]; then
  (cd "$WORK" && apt-get download prometheus-node-exporter >/dev/null 2>&1) ||
    { echo "SKIP: node_exporter not installed and apt-get download prometheus-node-exporter failed"; exit 77; }
  dpkg -x "$WORK"/prometheus-node-exporter_*.deb "$WORK/ne"
  NE="$WORK/ne/usr/bin/prometheus-node-exporter"
fi
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
aport="$(free_port)"; nport="$(free_port)"

"$AGENT" --web.listen-address="127.0.0.1:$aport" "$@" >"$WORK/agent.log" 2>&1 &
APID=$!
"$NE" --web.listen-address="127.0.0.1:$nport" >"$WORK/ne.log" 2>&1 &
NPID=$!
for _ in $(seq 100); do
  curl -fsS -o /dev/null "http://127.0.0.1:$aport/readyz" 2>/dev/null &&
    curl -fsS -o /dev/null "http://127.0.0.1:$nport/metrics" 2>/dev/null && break
  sleep 0.2
done
kill -0 "$APID" || { cat "$WORK/agent.log"; echo "FAIL: agent did not start"; exit 1; }
kill -0 "$NPID" || { cat "$WORK/ne.log"; echo "FAIL: node_exporter did not start"; exit 1; }

# Prometheus 2.x's scrape headers (scrape/scrape.go): OpenMetrics first,
# gzip, its User-Agent and the scrape timeout.
scrape() {
  for p in "$aport" "$nport"; do
    curl -fsS -o /dev/null -A 'Prometheus/2.53.0' -H 'Accept-Encoding: gzip' \
      -H 'Accept: application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2' \
      -H 'X-Prometheus-Scrape-Timeout-Seconds: 10' "http://127.0.0.1:$p/metrics"
  done
}
# Warm-up: start-up work (eBPF loads, first walks, Go runtime) is not idle cost.
scrape; sleep 5; scrape
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
# "tid ns" per live thread; a thread that started in the window counts whole.
task_ns() { for t in /proc/"$1"/task/*; do echo "${t##*/} $(cut -d' ' -f1 "$t/schedstat" 2>/dev/null || echo 0)"; done; }
ns_delta() { awk 'NR == FNR { a[$1] = $2; next } { d += $2 - ($1 in a ? a[$1] : 0) } END { print d }' "$1" "$2"; }
kb() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status"; }
a0="$(cpu_ticks "$APID")"; n0="$(cpu_ticks "$NPID")"; t0="$(date +%s.%N)"
task_ns "$APID" >"$WORK/a0"; task_ns "$NPID" >"$WORK/n0"
end=$(( SECONDS + DURATION ))
while [ "$SECONDS" -lt "$end" ]; do
  scrape
  left=$(( end - SECONDS )); sleep $(( left < INTERVAL ? (left > 0 ? left : 0) : INTERVAL ))
done
a1="$(cpu_ticks "$APID")"; n1="$(cpu_ticks "$NPID")"; t1="$(date +%s.%N)"
task_ns "$APID" >"$WORK/a1"; task_ns "$NPID" >"$WORK/n1"
ans="$(ns_delta "$WORK/a0" "$WORK/a1")"; nns="$(ns_delta "$WORK/n0" "$WORK/n1")"
series_a="$(curl -fsS "http://127.0.0.1:$aport/metrics" | grep -vc '^#')"
series_n="$(curl -fsS "http://127.0.0.1:$nport/metrics" | grep -vc '^#')"
tracked="$(curl -fsS "http://127.0.0.1:$aport/metrics" | awk '$1 == "sockpressure_cgroups_tracked" { print $2 }')"
sources="$(curl -fsS "http://127.0.0.1:$aport/metrics" | awk -F'"' '/^sockpressure_signal_source\{/ && / 1$/ { printf "%s=%s ", $2, $4 }')"
python3 - "$(getconf CLK_TCK)" "$a0" "$a1" "$n0" "$n1" "$t0" "$t1" \
  "$(kb "$APID" VmRSS)" "$(kb "$APID" VmHWM)" "$(kb "$NPID" VmRSS)" "$(kb "$NPID" VmHWM)" \
  "$series_a" "$series_n" "$tracked" "$sources" "$INTERVAL" "$ans" "$nns" <<'PY'
import sys
tck, a0, a1, n0, n1, t0, t1, ar, ah, nr, nh = (float(x) for x in sys.argv[1:12])
series_a, series_n, tracked, sources, interval = sys.argv[12:17]
ans, nns = (float(x) for x in sys.argv[17:19])
wall = t1 - t0
acpu = ans / 1e6 / wall
ncpu = nns / 1e6 / wall
atick = (a1 - a0) / tck / wall * 1000
ntick = (n1 - n0) / tck / wall * 1000
print(f"window {wall:.0f} s, both scraped every {interval} s (gzip); agent tracks {tracked} memory cgroups, "
      f"signal sources: {sources.strip()}")
print(f"agent:         cpu_ms_per_s={acpu:.3f} (ticks {atick:.2f}) rss_mib={ar / 1024:.1f} peak_rss_mib={ah / 1024:.1f} series={series_a}")
print(f"node_exporter: cpu_ms_per_s={ncpu:.3f} (ticks {ntick:.2f}) rss_mib={nr / 1024:.1f} peak_rss_mib={nh / 1024:.1f} series={series_n}")
print(f"ratios agent/node_exporter: cpu={acpu / ncpu if ncpu else float('inf'):.2f} (target <= 0.5) "
      f"rss={ar / nr:.2f} (target <= 1) peak_rss={ah / nh:.2f}")
PY
