#!/usr/bin/env bash
# Issue 29: SIGHUP is logged and harmless (it used to end the agent without a
# word: a `systemctl reload` or a stray `kill -HUP` took monitoring down), and
# SIGTERM still ends the agent within 2 s.
AGENT="$1"
source "$(dirname "$0")/lib.sh"
make_work

port="$(free_port)"
"$AGENT" --web.listen-address="127.0.0.1:$port" \
  --path.procfs="$FIXTURES/v2/proc" --path.sysfs="$FIXTURES/v2/sys" --path.cgroupfs="$FIXTURES/v2/cgroup" \
  >"$WORK/agent.log" 2>&1 &
pid=$!
PIDS+=("$pid")
wait_http "http://127.0.0.1:$port/readyz" 20 || { cat "$WORK/agent.log" >&2; fail "agent never ready"; }

kill -HUP "$pid"
sleep 1
kill -0 "$pid" 2>/dev/null || { cat "$WORK/agent.log" >&2; fail "SIGHUP ended the agent"; }
curl -fsS -o /dev/null "http://127.0.0.1:$port/metrics" || fail "/metrics not served after SIGHUP"
grep -q "SIGHUP" "$WORK/agent.log" || { cat "$WORK/agent.log" >&2; fail "SIGHUP was not logged"; }
echo "SIGHUP: agent still serving; logged: $(grep SIGHUP "$WORK/agent.log" | head -1)"

t0="$(date +%s%3N)"
kill -TERM "$pid"
rc=0; wait "$pid" || rc=$?
ms=$(( $(date +%s%3N) - t0 ))
echo "SIGTERM: exit $rc after $ms ms"
[ "$rc" = 0 ] || fail "exit code $rc on SIGTERM"
[ "$ms" -le 2000 ] || fail "SIGTERM took $ms ms"
echo PASS
