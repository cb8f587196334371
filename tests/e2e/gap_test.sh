#!/usr/bin/env bash
# Issue 13: a cgroup that misses samples must not come back with its whole
# lifetime of reclaim counted as new. The v2 fixture has five memory cgroups;
# proxy.service has 586,833 pages scanned in its lifetime and nothing moves.
# With --cgroup.max=3, adding a shallower cgroup with socket memory pushes
# proxy.service out of the walk
# and removing it brings it back; then its memory.stat is unreadable for a
# while. No scanned pages, no socket-pressure events, no episode may follow.
AGENT="$1"
source "$(dirname "$0")/lib.sh"
make_work
cp -r "$FIXTURES/v2" "$WORK/v2"
CG="$WORK/v2/cgroup"
port="$(free_port)"
# The files here change below cgroups whose counters stand still, which the
# kernel's never do: every sample is a full pass (docs/sampling.md).
start_agent "$port" --sample.interval=100ms --cgroup.full-pass-interval=100ms --cgroup.max=3 \
  --path.procfs="$WORK/v2/proc" --path.cgroupfs="$CG"

scrape() { curl -fsS "http://127.0.0.1:$port/metrics"; }
sum_of() { scrape | awk -v n="$1" 'index($0, n "{") == 1 { s += $NF } END { printf "%d\n", s }'; }
seen() { scrape | grep -c "^sockpressure_memcg_reclaim_scanned_pages_total{cgroup=\"$1\"" || true; }

sleep 0.5
[ "$(seen /workload.slice/proxy.service)" = 1 ] || fail "proxy.service not tracked at start"
mkdir "$CG/aaa.slice"  # socket memory, and shallower: proxy.service is cut
printf 'anon 0\nfile 0\nsock 4096\npgscan 0\npgsteal 0\n' >"$CG/aaa.slice/memory.stat"
sleep 0.5
[ "$(seen /workload.slice/proxy.service)" = 0 ] || fail "the cap did not cut proxy.service"
rm -r "$CG/aaa.slice"
sleep 0.5
[ "$(seen /workload.slice/proxy.service)" = 1 ] || fail "proxy.service did not return"
# Unreadable for a moment: a FIFO renamed over memory.stat (rename(2), so
# the file is never missing: a missing memory.stat means no memory
# controller there, whose counters would really start over).
cp "$CG/workload.slice/proxy.service/memory.stat" "$WORK/proxy.stat"
mkfifo "$WORK/fifo"
mv -f "$WORK/fifo" "$CG/workload.slice/proxy.service/memory.stat"
sleep 0.5
[ "$(seen /workload.slice/proxy.service)" = 0 ] || fail "proxy.service still read with a FIFO for memory.stat"
mv -f "$WORK/proxy.stat" "$CG/workload.slice/proxy.service/memory.stat"
sleep 0.5
[ "$(seen /workload.slice/proxy.service)" = 1 ] || fail "proxy.service did not return after the FIFO"

scanned="$(sum_of sockpressure_memcg_reclaim_scanned_pages_total)"
events="$(sum_of sockpressure_memcg_socket_pressure_events_total)"
episodes="$(sum_of sockpressure_episodes_total)"
api="$(curl -fsS "http://127.0.0.1:$port/api/v1/episodes")"
echo "after the gaps: scanned=$scanned events=$events episodes=$episodes api=${api:0:200}"
[ "$scanned" = 0 ] || fail "gaps invented $scanned scanned pages"
[ "$events" = 0 ] || fail "gaps invented $events socket-pressure events"
[ "$episodes" = 0 ] || fail "gaps opened $episodes episode(s)"

echo "PASS"
