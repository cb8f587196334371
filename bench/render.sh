#!/usr/bin/env bash
# /metrics exposition benchmark (the core and context profiles, --metrics.profile) on
# generated trees of 1,000 and 10,000 cgroups (bench/make_tree.py, never the
# real cgroupfs):
#  1. render time per format in-process (render_bench), against peers in the
#     same run: a plain read of a file as large as the text body, and
#     Prometheus' own parser (promtool check metrics) reading the same body;
#  2. bytes of text per cgroup and series per cgroup;
#  3. the real agent serving it: peak RSS while text and protobuf are scraped
#     at once, against its RSS before any scrape (sampling only).
# Usage: bench/render.sh BUILD_DIR [N...]   (default N: 1000 10000)
set -euo pipefail
BUILD="$(cd "${1:-build}" && pwd)"; shift || true
SIZES=("$@"); [ ${#SIZES[@]} -gt 0 ] || SIZES=(1000 10000)
HERE="$(cd "$(dirname "$0")" && pwd)"; REPO="$(cd "$HERE/.." && pwd)"
AGENT="$BUILD/sockpressure_exporter"
base="${TMPDIR:-/tmp}"; [ -d /dev/shm ] && [ -w /dev/shm ] && base=/dev/shm
WORK="$(mktemp -d "$base/sockpressure-render.XXXXXX")"
PID=""
cleanup() { if [ -n "$PID" ]; then { kill "$PID" && wait "$PID"; } 2>/dev/null || true; fi; rm -rf "$WORK"; }
trap cleanup EXIT
PROTO_ACCEPT='application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.7,text/plain;version=0.0.4;q=0.3'
ms() { python3 -c "import time; print(time.monotonic()*1000)"; }

for n in "${SIZES[@]}"; do
  tree="$WORK/t$n"
  python3 "$HERE/make_tree.py" "$tree" "$n"
  echo "== $n cgroups"
  "$BUILD/bench/render_bench" "$tree" 7 | tee "$WORK/render_$n.txt"

  for profile in core context; do
    flags=(--metrics.profile="$profile")
    port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
    extra=()
    help_text="$("$AGENT" --help)"
    for c in bpf sock_diag; do grep -q -- "--\[no-\]collector.$c\b" <<<"$help_text" && extra+=("--no-collector.$c"); done
    "$AGENT" --web.listen-address="127.0.0.1:$port" --sample.interval=1s --cgroup.max=$((n + 100)) \
      --path.procfs="$REPO/tests/fixtures/v2/proc" --path.sysfs="$REPO/tests/fixtures/v2/sys" \
      --path.cgroupfs="$tree" "${flags[@]}" "${extra[@]}" ${AGENT_ARGS:-} >"$WORK/agent.log" 2>&1 &
    PID=$!
    for _ in $(seq 100); do curl -fsS -o /dev/null "http://127.0.0.1:$port/readyz" 2>/dev/null && break; sleep 0.2; done
    sleep 2.5
    rss0="$(awk '$1 == "VmHWM:" { print $2 }' "/proc/$PID/status")"
    # Five rounds, each on a new sample (1 s interval): text and protobuf
    # scraped at the same moment, as two Prometheus servers would (one of them
    # with gzip, as Prometheus asks for it).
    : >"$WORK/times"
    for r in 1 2 3 4 5; do
      curl -fsS -o "$WORK/text.prom" -w 'text %{time_total}\n' "http://127.0.0.1:$port/metrics" >>"$WORK/times" &
      c1=$!
      curl -fsS -o /dev/null -H "Accept: $PROTO_ACCEPT" -w 'proto %{time_total}\n' \
        "http://127.0.0.1:$port/metrics" >>"$WORK/times" &
      c2=$!
      curl -fsS -o /dev/null -H "Accept: $PROTO_ACCEPT" -H 'Accept-Encoding: gzip' -w 'proto_gzip %{time_total}\n' \
        "http://127.0.0.1:$port/metrics" >>"$WORK/times" &
      c3=$!
      wait "$c1" "$c2" "$c3"
      sleep 1.1
    done
    hwm="$(awk '$1 == "VmHWM:" { print $2 }' "/proc/$PID/status")"
    kill "$PID"; wait "$PID" 2>/dev/null || true; PID=""
    t0="$(ms)"; promtool check metrics <"$WORK/text.prom" >/dev/null 2>&1 || true; t1="$(ms)"
    python3 - "$profile" "$n" "$rss0" "$hwm" "$WORK/times" "$WORK/text.prom" "$t0" "$t1" <<'PY'
import sys, statistics
profile, n, rss0, hwm, times, body, t0, t1 = sys.argv[1:]
n = int(n); by = {}
for line in open(times):
    k, v = line.split(); by.setdefault(k, []).append(float(v) * 1000)
size = len(open(body, "rb").read())
promtool_ms = float(t1) - float(t0)
text_ms = statistics.median(by["text"])
print(f"agent profile={profile} cgroups={n} text_bytes={size} text_bytes_per_cgroup={size / n:.0f} "
      f"scrape_ms_text={text_ms:.1f} scrape_ms_proto={statistics.median(by['proto']):.1f} "
      f"scrape_ms_proto_gzip={statistics.median(by['proto_gzip']):.1f} "
      f"peer_promtool_parse_ms={promtool_ms:.1f} text_scrape_over_promtool={text_ms / promtool_ms:.2f} "
      f"peak_rss_sampling_only_mib={int(rss0) / 1024:.1f} peak_rss_with_scrapes_mib={int(hwm) / 1024:.1f}")
PY
  done
done
