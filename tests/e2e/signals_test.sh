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

# A kubelet that answers one byte every 200 ms, forever (each recv() is
# quick, so no per-read timeout ends it): SIGTERM still ends the agent
# within 2 s (it used to wait for the kubelet's answer).
kport="$(free_port)"
python3 -c '
import socket, sys, threading, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(16)
def trickle(c):
    c.recv(65536)
    try:
        for b in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"x" * 100000:
            c.send(bytes([b])); time.sleep(0.2)
    except OSError:
        pass
while True:
    c = s.accept()[0]
    open(sys.argv[2], "w").close()
    threading.Thread(target=trickle, args=(c,), daemon=True).start()
' "$kport" "$WORK/kubelet-asked" &
PIDS+=("$!")
for _ in $(seq 50); do python3 -c 'import socket,sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1)' "$kport" 2>/dev/null && break; sleep 0.1; done
rm -f "$WORK/kubelet-asked"
port="$(free_port)"
"$AGENT" --web.listen-address="127.0.0.1:$port" --kubelet.url="http://127.0.0.1:$kport/pods" \
  --path.procfs="$FIXTURES/v2/proc" --path.sysfs="$FIXTURES/v2/sys" --path.cgroupfs="$FIXTURES/v2/cgroup" \
  >"$WORK/agent-kubelet.log" 2>&1 &
pid=$!
PIDS+=("$pid")
# The first sample waits up to 6 s for the kubelet's first answer.
wait_http "http://127.0.0.1:$port/readyz" 20 || { cat "$WORK/agent-kubelet.log" >&2; fail "agent never ready"; }
[ -e "$WORK/kubelet-asked" ] || { cat "$WORK/agent-kubelet.log" >&2; fail "the agent never asked the kubelet"; }
t0="$(date +%s%3N)"
kill -TERM "$pid"
rc=0
for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
if kill -0 "$pid" 2>/dev/null; then
  kill -KILL "$pid"; wait "$pid" 2>/dev/null || true
  fail "SIGTERM with a trickling kubelet: still running after 5 s"
fi
wait "$pid" || rc=$?
ms=$(( $(date +%s%3N) - t0 ))
echo "SIGTERM with a trickling kubelet: exit $rc after $ms ms"
[ "$rc" = 0 ] || fail "exit code $rc on SIGTERM with a trickling kubelet"
[ "$ms" -le 2000 ] || fail "SIGTERM with a trickling kubelet took $ms ms"
echo PASS
