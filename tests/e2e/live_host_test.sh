#!/usr/bin/env bash
# The agent on this machine's real /proc and cgroupfs (read only): it starts,
# samples repeatedly and serves valid metrics with every collector healthy.
AGENT="$1"
source "$(dirname "$0")/lib.sh"
make_work
port="$(free_port)"
# Where no signal can move unseen between samples (a cgroup v1 host whose
# memcgs charge no sockets, like the project's CI machine) the sampler waits
# a context interval between cycles (docs/sampling.md, "Where nothing can
# move"): a short one keeps several cycles in this test's window either way.
start_agent "$port" --sample.interval=200ms --sample.context-interval=400ms
sleep 1.5
curl -fsS "http://127.0.0.1:$port/metrics" >"$WORK/m.txt"
if command -v promtool >/dev/null; then promtool check metrics <"$WORK/m.txt" || fail "promtool rejected live output"; fi
samples="$(awk '/^sockpressure_samples_total /{print $2}' "$WORK/m.txt")"
tracked="$(awk '/^sockpressure_cgroups_tracked /{print $2}' "$WORK/m.txt")"
failed="$(grep '^sockpressure_collector_success' "$WORK/m.txt" | grep ' 0$' || true)"
mode="$(grep -o 'cgroup_mode="[a-z]*"' "$WORK/m.txt" | head -1)"
echo "live: samples=$samples cgroups_tracked=$tracked $mode"
[ "${samples:-0}" -ge 3 ] || fail "sampler is not sampling (samples=$samples)"
[ -z "$failed" ] || fail "collectors failing on this host: $failed"
if [ -d /sys/fs/cgroup ] && { [ -f /sys/fs/cgroup/cgroup.controllers ] || [ -d /sys/fs/cgroup/memory ]; }; then
  [ "${tracked:-0}" -ge 1 ] || fail "no memory cgroups found on a host that has them"
fi
grep -q '^sockpressure_node_info{' "$WORK/m.txt" || fail "node info missing"
! grep -q 'level=error' "$WORK/agent-$port.log" || { cat "$WORK/agent-$port.log"; fail "errors logged"; }
echo "PASS"
