#!/usr/bin/env bash
# A real Prometheus (Debian package) scrapes the agent on loopback, once in
# the text format and once in the protobuf format (Prometheus 2.42 asks for
# protobuf when native histograms are enabled), and the key series of a
# simulated throttled cgroup are queryable in both.
AGENT="$1"
source "$(dirname "$0")/lib.sh"
command -v prometheus >/dev/null || fail "prometheus not found (apt-get install prometheus)"
make_work
A=/workload.slice/proxy.service
cp -r "$FIXTURES/v2" "$WORK/tree"
agent_port="$(free_port)"
start_agent "$agent_port" --sample.interval=500ms --path.procfs="$WORK/tree/proc" --path.cgroupfs="$WORK/tree/cgroup"

# Keep cgroup A throttled for the whole test.
( for _ in $(seq 1 240); do
    python3 "$E2E_DIR/bump.py" "$WORK/tree/cgroup" "$A" 4000 2 || true
    sleep 0.5
  done ) &
PIDS+=("$!")

start_prometheus() {  # start_prometheus NAME PORT EXTRA_FLAGS...
  local name="$1" port="$2"; shift 2
  mkdir -p "$WORK/$name"
  cat >"$WORK/$name/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: sockpressure
    static_configs:
      - targets: ['127.0.0.1:$agent_port']
YML
  prometheus --config.file="$WORK/$name/prometheus.yml" --storage.tsdb.path="$WORK/$name/data" \
    --web.listen-address="127.0.0.1:$port" "$@" >"$WORK/$name/log" 2>&1 &
  PIDS+=("$!")
  wait_http "http://127.0.0.1:$port/-/ready" 30 || { tail -20 "$WORK/$name/log"; fail "prometheus $name did not start"; }
}

query() {  # query PORT PROMQL -> first value or empty
  curl -fsS -G "http://127.0.0.1:$1/api/v1/query" --data-urlencode "query=$2" |
    python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "")'
}

text_port="$(free_port)"; proto_port="$(free_port)"
start_prometheus text "$text_port"
start_prometheus proto "$proto_port" --enable-feature=native-histograms

# Wait until both have a few samples of the throttled cgroup.
deadline=$((SECONDS + 60))
while [ "$SECONDS" -lt "$deadline" ]; do
  t="$(query "$text_port" "increase(sockpressure_memcg_socket_pressure_events_total{cgroup=\"$A\"}[30s])")"
  p="$(query "$proto_port" "increase(sockpressure_memcg_socket_pressure_events_total{cgroup=\"$A\"}[30s])")"
  if [ -n "$t" ] && [ -n "$p" ] && python3 -c "import sys; sys.exit(0 if float(sys.argv[1])>0 and float(sys.argv[2])>0 else 1)" "$t" "$p"; then
    break
  fi
  sleep 1
done
for port in "$text_port" "$proto_port"; do
  up="$(query "$port" 'up{job="sockpressure"}')"
  ratio="$(query "$port" "sockpressure_memcg_scan_without_reclaim_ratio{cgroup=\"$A\"}")"
  events="$(query "$port" "increase(sockpressure_memcg_socket_pressure_events_total{cgroup=\"$A\"}[30s])")"
  swap="$(query "$port" 'sockpressure_node_swap_enabled')"
  src="$(query "$port" 'sockpressure_signal_source{signal="reclaim"}')"
  series="$(query "$port" 'count({__name__=~"sockpressure_.+"})')"
  echo "prometheus :$port up=$up ratio=$ratio events(30s)=$events swap=$swap signal_source=$src series=$series"
  [ "$up" = 1 ] || fail "target down on :$port"
  python3 -c "import sys; assert float(sys.argv[1]) >= 0.95 and float(sys.argv[2]) > 0" "$ratio" "$events" ||
    fail "throttled cgroup not visible on :$port"
  [ "$swap" = 1 ] || fail "swap not visible on :$port"
done
# The agent counts which format each scrape got.
scrapes="$(curl -fsS "http://127.0.0.1:$agent_port/metrics" | grep '^sockpressure_scrapes_total')"
echo "$scrapes"
echo "$scrapes" | grep -q 'format="protobuf"' || fail "no protobuf scrape seen"
echo "$scrapes" | grep -q 'format="text"' || fail "no text scrape seen"
echo "PASS"
