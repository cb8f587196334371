#!/usr/bin/env bash
# The real binary on a fixture tree whose counters move like the lab's
# throttled run: cgroup A scans ~20,000 pages/s and reclaims almost nothing,
# B reclaims what it scans. The agent must replay the kernel's vmpressure
# rule: A critical with socket pressure, B low without; with
# cgroup.memory=nosocket the ratio is high but nothing is throttled.
AGENT="$1"
source "$(dirname "$0")/lib.sh"
make_work
A=/workload.slice/proxy.service
B=/workload.slice/cache.service

metric() {  # metric NAME CGROUP -> value or empty
  curl -fsS "http://127.0.0.1:$port/metrics" | awk -v n="$1" -v c="$2" \
    'index($0, n "{cgroup=\"" c "\"") == 1 { print $NF }'
}

run_case() {
  local tree="$1"
  rm -rf "$WORK/$tree"; cp -r "$FIXTURES/$tree" "$WORK/$tree"
  port="$(free_port)"
  start_agent "$port" --sample.interval=200ms --path.procfs="$WORK/$tree/proc" --path.cgroupfs="$WORK/$tree/cgroup"
  for _ in 1 2 3 4 5; do
    python3 "$E2E_DIR/bump.py" "$WORK/$tree/cgroup" "$A" 4000 2
    python3 "$E2E_DIR/bump.py" "$WORK/$tree/cgroup" "$B" 6000 5990
    sleep 0.25
  done
  sleep 0.5
}

run_case v2
ratio_a="$(metric sockpressure_memcg_scan_without_reclaim_ratio "$A")"
ratio_b="$(metric sockpressure_memcg_scan_without_reclaim_ratio "$B")"
events_a="$(metric sockpressure_memcg_socket_pressure_events_total "$A")"
seconds_a="$(metric sockpressure_memcg_socket_pressure_seconds_total "$A")"
events_b="$(metric sockpressure_memcg_socket_pressure_events_total "$B")"
scanned_a="$(metric sockpressure_memcg_reclaim_scanned_pages_total "$A")"
echo "v2: A ratio=$ratio_a events=$events_a seconds=$seconds_a scanned=$scanned_a; B ratio=$ratio_b events=$events_b"
python3 - "$ratio_a" "$ratio_b" "$events_a" "$seconds_a" "$events_b" "$scanned_a" <<'PY' || fail "v2 verdicts wrong"
import sys
ra, rb, ea, sa, eb, sc = (float(x) for x in sys.argv[1:])
assert ra >= 0.95, ra
assert rb < 0.6, rb
assert ea >= 30, ea          # 20,000 pages at critical = 39 kernel windows
assert 0 < sa <= 3, sa       # pressure seconds bounded by wall time
assert eb == 0, eb
assert sc == 20000, sc       # local: A's own scans, not the parent's sum
PY
parent_scanned="$(metric sockpressure_memcg_reclaim_scanned_pages_total /workload.slice)"
[ "$parent_scanned" = 0 ] || fail "parent's local scan should be 0, got $parent_scanned"

run_case nosocket
ratio_a="$(metric sockpressure_memcg_scan_without_reclaim_ratio "$A")"
events_a="$(metric sockpressure_memcg_socket_pressure_events_total "$A")"
accounting="$(curl -fsS "http://127.0.0.1:$port/metrics" | awk '/^sockpressure_node_socket_accounting_enabled /{print $2}')"
echo "nosocket: A ratio=$ratio_a events=$events_a socket_accounting_enabled=$accounting"
python3 -c "import sys; assert float(sys.argv[1]) >= 0.95 and float(sys.argv[2]) == 0" "$ratio_a" "$events_a" \
  || fail "nosocket verdicts wrong"
[ "$accounting" = 0 ] || fail "socket accounting should be reported off"
echo "PASS"
