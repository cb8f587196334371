#!/usr/bin/env bash
# Every thread of the running agent holds exactly the capabilities the agent
# says it kept (CapEff and CapBnd in /proc/PID/task/*/status), in several
# collector configurations, and that set is within what docs/threat-model.md documents
# for the configuration. Needs root: that is where the drop matters.
AGENT="$1"
source "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root (capabilities are only dropped from a privileged process)"
make_work

# Capability bits by number (linux/capability.h).
CAP_SYS_PTRACE=19; CAP_SYS_ADMIN=21; CAP_BPF=39
bit() { printf '%d' $((1 << $1)); }
hex() { printf '%016x' "$1"; }

# The most each configuration may keep, as documented in docs/threat-model.md
# ("Capabilities"): bpf collectors nothing on >= 6.5, else CAP_BPF
# (CAP_SYS_ADMIN on kernels without CAP_BPF); bpf_census and sock_diag CAP_SYS_ADMIN+CAP_SYS_PTRACE to enter
# other network namespaces; nothing else.
# On Linux >= 6.5 bpf(2) on fds the agent holds needs no capability.
read -r major minor < <(uname -r | awk -F. '{print $1, $2}')
if [ "$major" -gt 6 ] || { [ "$major" -eq 6 ] && [ "$minor" -ge 5 ]; }; then ALL_BPF=0
else ALL_BPF=$(( $(bit $CAP_BPF) | $(bit $CAP_SYS_ADMIN) )); fi
NETNS=$(( $(bit $CAP_SYS_ADMIN) | $(bit $CAP_SYS_PTRACE) ))

fixture=(--path.procfs="$FIXTURES/v2/proc" --path.sysfs="$FIXTURES/v2/sys" --path.cgroupfs="$FIXTURES/v2/cgroup")
run_config() {
  local name="$1" max="$2"; shift 2
  local port; port="$(free_port)"
  # A kubelet pods file starts the identity thread and an Alertmanager URL the
  # pusher thread (nothing listens there; nothing is pushed without alerts).
  start_agent "$port" "$@" --kubelet.pods-file="$REPO_ROOT/tests/identity/fixtures/pods-containerd.json" \
    --alertmanager.url="http://127.0.0.1:$(free_port)"
  local pid="${PIDS[-1]}"
  curl -fsS -o /dev/null "http://127.0.0.1:$port/metrics" || fail "$name: scrape failed"
  local kept
  kept="$(sed -n 's/.*kept capabilities mask 0x\([0-9a-f]*\).*/\1/p' "$WORK/agent-$port.log" | head -1)"
  [ -n "$kept" ] || { cat "$WORK/agent-$port.log" >&2; fail "$name: the agent did not log its kept capabilities"; }
  (( (0x$kept & ~max) == 0 )) || fail "$name: kept 0x$kept, more than documented $(hex "$max")"
  local n=0 task eff bnd prm
  for task in /proc/"$pid"/task/*; do
    eff="$(awk '/^CapEff/{print $2}' "$task/status")"
    prm="$(awk '/^CapPrm/{print $2}' "$task/status")"
    bnd="$(awk '/^CapBnd/{print $2}' "$task/status")"
    [ "$eff" = "$(hex $((0x$kept)))" ] || fail "$name: thread $(basename "$task") ($(cat "$task/comm")) CapEff $eff, kept 0x$kept"
    [ "$prm" = "$(hex $((0x$kept)))" ] || fail "$name: thread $(basename "$task") CapPrm $prm, kept 0x$kept"
    [ "$bnd" = "$(hex $((0x$kept)))" ] || fail "$name: thread $(basename "$task") CapBnd $bnd, kept 0x$kept"
    n=$((n + 1))
  done
  [ "$n" -ge 5 ] || fail "$name: expected the main, HTTP, sampler, identity and pusher threads, found $n"
  echo "$name: $n threads, CapEff=CapPrm=CapBnd=$(hex $((0x$kept))) (documented at most $(hex "$max"))"
  kill "$pid"; wait "$pid" 2>/dev/null || true
}

run_config "no privileged collectors" 0 "${fixture[@]}" --no-collector.bpf --no-collector.bpf_census --no-collector.sock_diag
# The privileged collectors need the live host (on fixture trees they turn
# themselves off and declare nothing); they only read it.
run_config "sock_diag only" $NETNS --no-collector.bpf --no-collector.bpf_census
run_config "bpf only" $ALL_BPF --no-collector.bpf_census --no-collector.sock_diag
run_config "defaults" $((ALL_BPF | NETNS))
# As the systemd unit runs it: an unprivileged user with ambient capabilities
# (plus CAP_SETPCAP, which lets the agent drop the bounding set and is
# dropped with the rest).
granted=+bpf,+perfmon,+sys_admin,+sys_ptrace,+setpcap
cat >"$WORK/unprivileged-agent" <<SH
#!/bin/sh
exec setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all,$granted --ambient-caps=-all,$granted \
  --bounding-set=-all,$granted "$AGENT" "\$@"
SH
chmod 755 "$WORK/unprivileged-agent" "$WORK"
if command -v setpriv >/dev/null && su -s /bin/sh nobody -c "test -r '$AGENT' -a -r '$REPO_ROOT/tests/identity/fixtures/pods-containerd.json'" 2>/dev/null; then
  real_agent="$AGENT"
  AGENT="$WORK/unprivileged-agent"
  run_config "uid 65534 with ambient capabilities" $((ALL_BPF | NETNS)) --no-collector.bpf_census
  AGENT="$real_agent"
else
  echo "uid 65534 with ambient capabilities: not run (no setpriv, or the binary is not readable by nobody)"
fi
echo PASS
