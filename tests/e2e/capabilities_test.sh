#!/usr/bin/env bash
# Only one thread of the running agent, the privileged worker sp-priv, holds
# the capabilities the agent says it kept (CapEff/CapPrm in
# /proc/PID/task/*/status); every other thread holds none; every thread has
# NoNewPrivs 1 and is named; in several collector configurations, and the kept
# set is within what docs/threat-model.md documents for the configuration.
# Needs root: that is where the drop matters.
AGENT="$1"
source "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root (capabilities are only dropped from a privileged process)"
make_work

# Capability bits by number (linux/capability.h).
CAP_SYS_PTRACE=19; CAP_SYS_ADMIN=21; CAP_PERFMON=38; CAP_BPF=39
bit() { printf '%d' $((1 << $1)); }
hex() { printf '%016x' "$1"; }

# The most each configuration may keep, as documented in docs/threat-model.md
# ("Capabilities"): bpf collectors nothing on >= 6.5, else CAP_BPF
# (CAP_SYS_ADMIN on kernels without CAP_BPF), plus CAP_BPF+CAP_PERFMON to attach
# the window-clamp program again when socket pressure appears (issue 48: it is
# detached while no memcg is under pressure); bpf_census and sock_diag
# CAP_SYS_ADMIN+CAP_SYS_PTRACE to enter other network namespaces; nothing else.
# On Linux >= 6.5 bpf(2) on fds the agent holds needs no capability.
read -r major minor < <(uname -r | awk -F. '{print $1, $2}')
CLAMP_ATTACH=$(( $(bit $CAP_BPF) | $(bit $CAP_PERFMON) ))
if [ "$major" -gt 6 ] || { [ "$major" -eq 6 ] && [ "$minor" -ge 5 ]; }; then ALL_BPF=$CLAMP_ATTACH
else ALL_BPF=$(( $(bit $CAP_BPF) | $(bit $CAP_SYS_ADMIN) | CLAMP_ATTACH )); fi
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
  # Only the privileged worker (sp-priv) holds what the agent kept; every
  # other thread holds nothing, and every thread has no_new_privs and a
  # bounding set within what was kept. Every thread but main is named.
  local n=0 privileged=0 task tid comm eff bnd prm nnp seccomp names=""
  for task in /proc/"$pid"/task/*; do
    tid="$(basename "$task")"
    comm="$(cat "$task/comm")"
    eff="$(awk '/^CapEff/{print $2}' "$task/status")"
    prm="$(awk '/^CapPrm/{print $2}' "$task/status")"
    bnd="$(awk '/^CapBnd/{print $2}' "$task/status")"
    nnp="$(awk '/^NoNewPrivs/{print $2}' "$task/status")"
    seccomp="$(awk '/^Seccomp:/{print $2}' "$task/status")"
    names="$names $comm"
    if [ "$comm" = sp-priv ]; then
      privileged=$((privileged + 1))
      [ "$eff" = "$(hex $((0x$kept)))" ] || fail "$name: thread $tid ($comm) CapEff $eff, kept 0x$kept"
      [ "$prm" = "$(hex $((0x$kept)))" ] || fail "$name: thread $tid ($comm) CapPrm $prm, kept 0x$kept"
    else
      [ "$eff" = "$(hex 0)" ] || fail "$name: thread $tid ($comm) CapEff $eff: only sp-priv may hold a capability"
      [ "$prm" = "$(hex 0)" ] || fail "$name: thread $tid ($comm) CapPrm $prm: only sp-priv may hold a capability"
    fi
    (( (0x$bnd & ~0x$kept) == 0 )) || fail "$name: thread $tid ($comm) CapBnd $bnd, more than kept 0x$kept"
    [ "$nnp" = 1 ] || fail "$name: thread $tid ($comm) NoNewPrivs $nnp"
    # The threads that parse what clients and peers send run under a
    # system-call allow-list (seccomp mode 2, filter).
    case "$comm" in
      sp-http|sp-http-work|sp-kubelet|sp-kubelet-dl|sp-alertmgr|sp-alertmgr-dl)
        [ "$seccomp" = 2 ] || fail "$name: thread $tid ($comm) Seccomp $seccomp, want 2 (filter)";;
    esac
    if [ "$tid" != "$pid" ]; then
      case "$comm" in sp-*) ;; *) fail "$name: thread $tid is not named (comm '$comm')";; esac
    fi
    n=$((n + 1))
  done
  [ "$n" -ge 5 ] || fail "$name: expected the main, HTTP, sampler, identity and pusher threads, found $n"
  for want in sp-http sp-http-work sp-sample sp-kubelet sp-alertmgr; do
    [[ " $names " == *" $want "* ]] || fail "$name: no thread named $want among:$names"
  done
  if (( 0x$kept != 0 )); then
    [ "$privileged" = 1 ] || fail "$name: kept 0x$kept but $privileged sp-priv threads"
  fi
  echo "$name: $n threads ($names ), sp-priv CapEff=$(hex $((0x$kept))) (documented at most $(hex "$max")), the others none, NoNewPrivs 1, the parsing threads under seccomp"
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

# As a plain `docker run` of the image runs it: uid 65534 with no capability
# at all. The privileged collectors degrade (sock_diag sees this network
# namespace only) and none of them fails: a worker that never left its
# namespace has nothing to return from.
unprivileged_defaults() {
  local port pid log
  port="$(free_port)"
  cat >"$WORK/nobody-agent" <<SH
#!/bin/sh
exec setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all --bounding-set=-all "$AGENT" "\$@"
SH
  chmod 755 "$WORK/nobody-agent"
  local real_agent="$AGENT"
  AGENT="$WORK/nobody-agent"
  start_agent "$port"
  AGENT="$real_agent"
  pid="${PIDS[-1]}" log="$WORK/agent-$port.log"
  local metrics
  metrics="$(curl -fsS "http://127.0.0.1:$port/metrics")" || fail "uid 65534: scrape failed"
  grep -q 'cannot return to its network namespace' "$log" && { cat "$log" >&2; fail "uid 65534: the worker says it cannot go home"; }
  grep -q '^sockpressure_collector_success{collector="sock_diag"} 1' <<<"$metrics" ||
    { grep '^sockpressure_collector_success' <<<"$metrics" >&2; fail "uid 65534: collector sock_diag failed"; }
  echo "uid 65534 without capabilities: sock_diag succeeds, no worker error"
  kill "$pid"; wait "$pid" 2>/dev/null || true
}
if command -v setpriv >/dev/null && su -s /bin/sh nobody -c "test -x '$AGENT'" 2>/dev/null; then
  unprivileged_defaults
else
  echo "uid 65534 without capabilities: not run (no setpriv, or the binary is not executable by nobody)"
fi
echo PASS
