#!/bin/busybox sh
# Guest init of the kernel-side cost benchmark (bench/lab_netcost.py boots it with
# rdinit=/lab/netcost-init; the lab's own /init is left as it is). One boot, in order: a healthy node
# (nothing ever under pressure), then the same node with the receiver's cgroup A really under socket
# pressure (hot anon + zram swap + page-cache readers in its sibling B, one memory.max over both, classic
# LRU: the lab's `swap` condition). In each, for each load (a bulk stream; small-message
# request/response) and each agent mode (none; the agent with the clamp program attached all the time,
# --no-bpf.clamps-on-demand; the agent as released), one measured window of W seconds:
#   LAB window pressure=P load=L mode=M bytes=B seconds=S cpu_ticks=T hz=H runs=R run_ns=N
#              clamp_runs=R clamp_ns=N clamp_missed=X clamp_attached_s=A
# cpu_ticks: the guest's busy time over the window, all CPUs, in /proc/stat's USER_HZ ticks (100 a
# second); runs/run_ns: every eBPF program of the agent (kernel.bpf_stats_enabled=1); clamp_*: the
# window-clamp program alone; both read from the agent's /metrics right before and after the window.
#   netcost.window=S  netcost.settle=S  netcost.loads=bulk,rr  netcost.modes=none,always,ondemand
#   netcost.pressures=healthy,pressured  netcost.rr_size=BYTES  netcost.limit=SIZE  netcost.ballast=MIB

/bin/busybox mkdir -p /proc /sys /dev /run /tmp /data
/bin/busybox --install -s /bin
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs run /run
mount -t tmpfs tmp /tmp
mount -t cgroup2 cgroup2 /sys/fs/cgroup
mount -t bpf bpf /sys/fs/bpf 2>/dev/null
exec </dev/console >/dev/console 2>&1

log() { echo "LAB $*"; }
die() { echo "LAB fatal $*"; poweroff -f; }
arg() { v=$(tr ' ' '\n' </proc/cmdline | sed -n "s/^netcost\.$1=//p" | tail -1); echo "${v:-$2}"; }

WINDOW=$(arg window 20)
SETTLE=$(arg settle 4)
LOADS=$(arg loads bulk,rr | tr ',' ' ')
MODES=$(arg modes none,always,ondemand | tr ',' ' ')
PRESSURES=$(arg pressures healthy,pressured | tr ',' ' ')
RR_SIZE=$(arg rr_size 64)
LIMIT=$(arg limit 640M)
BALLAST=$(arg ballast 400)
IP=/usr/sbin/ip
CG=/sys/fs/cgroup
AGENT=/usr/bin/sockpressure_exporter
URL=http://127.0.0.1:19100  # the agent's default port

while read -r m; do insmod "/lib/modules/$(uname -r)/$m" 2>/dev/null; done </lab/modules.order
echo 1 >/proc/sys/kernel/bpf_stats_enabled || die "kernel.bpf_stats_enabled"
[ -w /sys/kernel/mm/lru_gen/enabled ] && echo n >/sys/kernel/mm/lru_gen/enabled
$IP link set lo up
$IP link set eth0 up && $IP addr add 10.0.2.15/24 dev eth0 || die "network"
# The load's path: a veth pair into netns "peer", no netem: the traffic runs as fast as the guest can
# carry it, so CPU per byte is the traffic's own.
$IP netns add peer && $IP link add v0 type veth peer name v1 netns peer || die "veth"
$IP link set v0 up && $IP addr add 10.9.0.1/24 dev v0
$IP -n peer link set lo up && $IP -n peer link set v1 up && $IP -n peer addr add 10.9.0.2/24 dev v1
echo 1G >/sys/block/zram0/disksize && mkswap /dev/zram0 >/dev/null && swapon /dev/zram0 || die "zram swap"
mount -t ext4 -o ro,noatime /dev/vda /data || die "data disk"
echo +memory >$CG/cgroup.subtree_control && mkdir -p $CG/lab && echo "$LIMIT" >$CG/lab/memory.max &&
  echo +memory >$CG/lab/cgroup.subtree_control && mkdir -p $CG/lab/A $CG/lab/B || die "cgroups"
in_cgroup() { cg=$1; shift; sh -c 'echo $$ >/sys/fs/cgroup/'"$cg"'/cgroup.procs && exec "$@"' sh "$@"; }
log boot kernel=$(uname -r) \
  mglru=$(cat /sys/kernel/mm/lru_gen/enabled 2>/dev/null || echo absent)

busy_ticks() { awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8 }' /proc/stat; }
# sum of a family's samples whose labels match $2 (a regex), from the saved /metrics
fam_sum() { awk -v f="$1" -v m="$2" 'index($0, f "{") == 1 && $0 ~ m { s += $NF } END { printf "%.0f", s + 0 }' /tmp/m; }
fam_sum_ns() { awk -v f="$1" -v m="$2" 'index($0, f "{") == 1 && $0 ~ m { s += $NF } END { printf "%.0f", (s + 0) * 1e9 }' /tmp/m; }
agent_stats() { # prints runs run_ns clamp_runs clamp_ns clamp_missed clamp_attached_s, or zeros without an agent
  if [ -z "$AGENT_PID" ] || ! wget -q -O /tmp/m $URL/metrics; then echo 0 0 0 0 0 0; return; fi
  echo $(fam_sum sockpressure_bpf_program_runs_total .) $(fam_sum_ns sockpressure_bpf_program_run_seconds_total .) \
    $(fam_sum sockpressure_bpf_program_runs_total 'program="clamp_') \
    $(fam_sum_ns sockpressure_bpf_program_run_seconds_total 'program="clamp_') \
    $(fam_sum sockpressure_bpf_program_missed_runs_total 'program="clamp_') \
    $(awk 'index($0, "sockpressure_bpf_program_attached_seconds_total{") == 1 && /program="clamp_/ { s += $NF } END { printf "%.1f", s + 0 }' /tmp/m)
}

start_agent() { # start_agent MODE
  AGENT_PID=
  case $1 in none) return 0 ;; always) a=--no-bpf.clamps-on-demand ;; *) a= ;; esac
  $AGENT $a >/tmp/agent.$1.log 2>&1 &
  AGENT_PID=$!
  i=0
  until wget -q -O /dev/null $URL/readyz 2>/dev/null; do
    i=$((i + 1)); [ $i -gt 120 ] && die "agent ($1) not ready in 60 s: $(tail -3 /tmp/agent.$1.log)"; sleep 0.5
  done
  # The start-up: its first samples (and, on demand, the first decision to detach the clamp program).
  sleep "$SETTLE"
}

stop_agent() {
  [ -n "$AGENT_PID" ] || return 0
  grep -m3 "window clamps" /tmp/agent.*.log 2>/dev/null | sed 's/^/agent-log: /' | tail -3
  kill $AGENT_PID; wait $AGENT_PID 2>/dev/null; AGENT_PID=
}

run_load() { # run_load LOAD PORT: the load for $WINDOW s, receiver/server in A; prints "bytes seconds"
  if [ "$1" = bulk ]; then
    in_cgroup lab/A /lab/tcprecv "$2" $((WINDOW + 10)) 30 >/tmp/load.out &
    rx=$!
    sleep 0.5
    $IP netns exec peer /lab/tcpsend 10.9.0.1 "$2" "$WINDOW" >/dev/null
    wait $rx
    sed -n 's/.*recv_result bytes=\([0-9]*\) seconds=\([0-9.]*\).*/\1 \2/p' /tmp/load.out
  else
    in_cgroup lab/A /lab/tcprr server "$2" $((WINDOW + 10)) >/dev/null &
    rx=$!
    sleep 0.5
    $IP netns exec peer /lab/tcprr client 10.9.0.1 "$2" "$WINDOW" "$RR_SIZE" >/tmp/load.out
    wait $rx
    sed -n 's/.*rr_result transactions=[0-9]* bytes=\([0-9]*\) seconds=\([0-9.]*\).*/\1 \2/p' /tmp/load.out
  fi
}

press() { # A under real socket pressure: the lab's `swap` condition
  in_cgroup lab/A /lab/ballast "$BALLAST" >/tmp/ballast.log 2>&1 &
  i=0
  until grep -q resident /tmp/ballast.log 2>/dev/null; do
    i=$((i + 1)); [ $i -gt 240 ] && die "ballast not ready"; sleep 0.5
  done
  for r in 1 2; do in_cgroup lab/B /lab/randread /data/random.bin 64 >/dev/null 2>&1 & done
  # Until A's reclaim scans without reclaiming (bounded).
  i=0
  while [ $i -lt 90 ]; do
    s=$(awk '$1 == "pgscan" { print $2 }' $CG/lab/A/memory.stat)
    [ "${s:-0}" -gt 100000 ] && break
    sleep 1; i=$((i + 1))
  done
  log pressed seconds=$i A_pgscan=$s A_pgsteal=$(awk '$1 == "pgsteal" { print $2 }' $CG/lab/A/memory.stat)
}

port=6000
for P in $PRESSURES; do
  [ "$P" = pressured ] && press
  for L in $LOADS; do
    for M in $MODES; do
      start_agent "$M"
      set -- $(agent_stats); r0=$1 n0=$2 cr0=$3 cn0=$4 cm0=$5 ca0=$6
      t0=$(busy_ticks)
      port=$((port + 1))
      set -- $(run_load "$L" $port); bytes=${1:-0} secs=${2:-0}
      t1=$(busy_ticks)
      set -- $(agent_stats)
      log window pressure=$P load=$L mode=$M bytes=$bytes seconds=$secs cpu_ticks=$((t1 - t0)) \
        hz=100 runs=$(($1 - r0)) run_ns=$(($2 - n0)) \
        clamp_runs=$(($3 - cr0)) clamp_ns=$(($4 - cn0)) clamp_missed=$(($5 - cm0)) \
        clamp_attached_s=$(awk -v a="$6" -v b="$ca0" 'BEGIN { printf "%.1f", a - b }') \
        A_pgscan=$(awk '$1 == "pgscan" { print $2 }' $CG/lab/A/memory.stat)
      stop_agent
    done
  done
done
log done
sleep 1
poweroff -f
