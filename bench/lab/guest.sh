#!/bin/busybox sh
# Guest init of the lab benchmark (bench/lab_scale.sh boots it with rdinit=/lab/bench-init, so the
# lab's own /init is left as it is). One boot: a kubelet-shaped tree of bench.n memory cgroups, then
# for each percentage in bench.phases that many containers really reclaiming, the peer pass and one
# measured window of the agent. Results are "LAB kind key=value" console lines for the host.
#   bench.n=N  bench.phases=0,1  bench.window=S  bench.settle=S  bench.pass_ms=MS  bench.ballast=MIB|KIBk
#   bench.high=SIZE (each reclaimer's memory.high)  bench.zram=SIZE (the swap device)  bench.pods_cpu="QUOTA PERIOD" (kubepods.slice's cpu.max)
#   bench.agent_args=a,b (commas become spaces)  bench.perf=1 (perf record -g of the last window)

/bin/busybox mkdir -p /proc /sys /dev /run /tmp
/bin/busybox --install -s /bin
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs run /run
mount -t tmpfs tmp /tmp
mount -t cgroup2 cgroup2 /sys/fs/cgroup
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
mount -t bpf bpf /sys/fs/bpf 2>/dev/null
exec </dev/console >/dev/console 2>&1

log() { echo "LAB $*"; }
die() { echo "LAB fatal $*"; poweroff -f; }
arg() { v=$(tr ' ' '\n' </proc/cmdline | sed -n "s/^bench\.$1=//p" | tail -1); echo "${v:-$2}"; }
now() { cut -d' ' -f1 /proc/uptime; }
N=$(arg n 1000)
PHASES=$(arg phases 0 | tr ',' ' ')
WINDOW=$(arg window 20)
SETTLE=$(arg settle 5)
PASS_MS=$(arg pass_ms 0)
BALLAST=$(arg ballast 12)
HIGH=$(arg high 8M)
ZRAM=$(arg zram 1G)
PODS_CPU=$(arg pods_cpu 100000_100000 | tr '_' ' ')
AGENT_ARGS=$(arg agent_args "" | tr ',' ' ')
PERF=$(arg perf 0)
CG=/sys/fs/cgroup
URL=http://127.0.0.1:19100  # the agent's default port

while read -r m; do insmod "/lib/modules/$(uname -r)/$m" 2>/dev/null; done </lab/modules.order
/usr/sbin/ip link set lo up
/usr/sbin/ip link set eth0 up && /usr/sbin/ip addr add 10.0.2.15/24 dev eth0 || die "network"
# Classic LRU, as the lab's throttling conditions: MGLRU leaves hot anon unscanned on 6.1.
[ -w /sys/kernel/mm/lru_gen/enabled ] && echo n >/sys/kernel/mm/lru_gen/enabled
echo $ZRAM >/sys/block/zram0/disksize && mkswap /dev/zram0 >/dev/null && swapon /dev/zram0 || die "zram swap"
echo +memory >$CG/cgroup.subtree_control || die "memory controller"
# As on a kubelet node under systemd, the cpu controller makes kubepods.slice one group, capped below the
# node (kubelet's system-reserved keeps CPU for the node's daemons). Without it each reclaimer competed
# on its own with the peer and the agent: under TCG, where zram's compression costs many times what it
# does on hardware, 100 reclaimers kept both vCPUs busy and the peer pass did not finish in 20 minutes.
echo +cpu >$CG/cgroup.subtree_control || die "cpu controller"
log boot kernel=$(uname -r) mglru=$(cat /sys/kernel/mm/lru_gen/enabled 2>/dev/null || echo absent) \
  mem_kib=$(awk '/MemTotal/{print $2}' /proc/meminfo)

t0=$(now)
/lab/cgtree mk $CG "$N" >/tmp/containers || die "tree"
echo "$PODS_CPU" >$CG/kubepods.slice/cpu.max || die "kubepods.slice cpu.max $PODS_CPU"
log tree cgroups=$(find $CG/kubepods.slice -type d | wc -l) containers=$(wc -l </tmp/containers) \
  seconds=$(awk -v a=$t0 -v b=$(now) 'BEGIN{printf "%.1f", b-a}')

# --- the agent: the released binary, its defaults, a cgroup budget above the tree ---
t0=$(now)
/usr/bin/sockpressure_exporter --cgroup.max=$((N * 2 + 1000)) $AGENT_ARGS >/tmp/agent.log 2>&1 &
PID=$!
until wget -q -O /dev/null $URL/healthz 2>/dev/null; do
  kill -0 $PID 2>/dev/null || { tail -20 /tmp/agent.log; die "agent exited"; }
  sleep 0.1
done
log healthz seconds=$(awk -v a=$t0 -v b=$(now) 'BEGIN{printf "%.2f", b-a}')
# Ready: the first complete sample is published (every cgroup read cold).
until wget -q -O /dev/null $URL/readyz 2>/dev/null; do
  kill -0 $PID 2>/dev/null || { tail -20 /tmp/agent.log; die "agent exited"; }
  sleep 0.2
done
log ready seconds=$(awk -v a=$t0 -v b=$(now) 'BEGIN{printf "%.2f", b-a}')

# The sample sequence and the time of that sample (seconds of the UTC day) from the JSON API's
# throttled-cgroups list (small), so that counting samples does not stretch the window by a scrape
# of every cgroup's series. The rate comes from the agent's own clock: how long the wget calls
# around the window take does not enter it.
samples() {
  wget -q -O - "$URL/api/v1/cgroups?pressure=1" | tr ',' '\n' | awk '
    /"sampleSequence"/ { gsub(/[^0-9]/, ""); seq = $0 }
    /"generated"/ { sub(/.*T/, ""); sub(/Z.*/, ""); split($0, t, ":"); at = t[1] * 3600 + t[2] * 60 + t[3] }
    END { printf "%s %.3f\n", seq, at }'
}
# How many of the reclaiming containers (/tmp/want) have a non-zero series of the family $1.
count_in() {
  awk -v fam="$1" 'NR==FNR{w[$0]=1; next}
    index($0, fam "{") == 1 && $NF > 0 && match($0, /cgroup="[^"]*"/) {
      c = substr($0, RSTART + 8, RLENGTH - 9); sub(/.*\//, "", c); if (c in w) n++ }
    END{print n+0}' /tmp/want /tmp/metrics
}
ticks() { awk '{print $14 + $15}' /proc/$PID/stat; }
status() { awk -v k="$1:" '$1==k{print $2}' /proc/$PID/status; }

# --- phases: reclaimers added up to each percentage, then the peer and one agent window ---
running=0
last=$(echo $PHASES | awk '{print $NF}')
for pct in $PHASES; do
  want=$(awk -v n=$N -v p=$pct 'BEGIN{w=int(n*p/100+0.5); if (p>0 && w<1) w=1; print w}')
  # Containers spread over the tree (every k-th), each with memory.high below what it touches.
  total=$(wc -l </tmp/containers)
  [ "$want" -gt "$total" ] && want=$total
  if [ "$want" -gt "$running" ]; then
    awk -v w=$want -v t=$total 'NR % int(t/w) == 0 && c < w {print; c++}' /tmp/containers >/tmp/reclaiming
    tail -n +$((running + 1)) /tmp/reclaiming | while read -r c; do
      echo $HIGH >$c/memory.high
      (echo 0 >$c/cgroup.procs && exec /lab/ballast $BALLAST $PASS_MS) >/dev/null 2>&1 &
    done
    running=$want
    log reclaimers started=$running high=$HIGH ballast=$BALLAST mem_available_kib=$(awk '/MemAvailable/{print $2}' /proc/meminfo)
  fi
  sleep "$SETTLE"
  peer=$(/lab/cgtree pass $CG 3)
  log peer $peer
  set -- $(samples); s1=$1 a1=$2; c1=$(ticks); w1=$(now)
  # Halfway through, where each of the agent's threads is waiting (wchan and kernel stack): a
  # cycle that takes longer than its CPU time waits somewhere.
  (sleep $((WINDOW / 2)); for t in /proc/$PID/task/*; do
     log thread pct=$pct name=$(cat $t/comm) state=$(awk '{print $3}' $t/stat) wchan=$(cat $t/wchan)
     head -6 $t/stack 2>/dev/null | sed 's/^/LAB stack /'
   done) &
  sleep "$WINDOW"
  c2=$(ticks); set -- $(samples); s2=$1 a2=$2; w2=$(now)
  wget -q -O /tmp/metrics $URL/metrics
  # Protobuf too, as Prometheus asks for it first: the high-water mark covers both renderings.
  wget -q -O /tmp/metrics.pb \
    --header 'Accept: application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited' \
    $URL/metrics
  # Seen: the agent reports reclaim scanning on every reclaiming container (events too, if any).
  seen=0 events=0
  if [ "$running" -gt 0 ]; then
    # By the container's own directory (cri-containerd-<64 hex>.scope, unique): the cgroup label
    # leaves out the leading slices that the next one's name implies.
    sed 's|.*/||' /tmp/reclaiming >/tmp/want
    seen=$(count_in sockpressure_memcg_reclaim_scanned_pages_total)
    events=$(count_in sockpressure_memcg_socket_pressure_events_total)
  fi
  log window pct=$pct reclaiming=$running seen=$seen events=$events $peer \
    agent_ticks=$((c2 - c1)) hz=$(getconf CLK_TCK 2>/dev/null || echo 100) samples=$(awk -v a=$s1 -v b=$s2 'BEGIN{print b-a}') \
    seconds=$(awk -v a=$w1 -v b=$w2 'BEGIN{printf "%.2f", b-a}') \
    agent_seconds=$(awk -v a=$a1 -v b=$a2 'BEGIN{d = b - a; if (d < 0) d += 86400; printf "%.3f", d}') \
    sample_wall_s=$(awk '$1=="sockpressure_sample_duration_seconds"{print $2}' /tmp/metrics) \
    overruns=$(awk '$1=="sockpressure_sample_overruns_total"{print $2}' /tmp/metrics) \
    sample_cpu_s=$(awk '$1=="sockpressure_sample_cpu_seconds"{print $2}' /tmp/metrics) \
    cgroupfs_wall_s=$(awk '$1=="sockpressure_collector_duration_seconds{collector=\"cgroupfs\"}"{print $2}' /tmp/metrics) \
    bpf_wall_s=$(awk '$1=="sockpressure_collector_duration_seconds{collector=\"bpf\"}"{print $2}' /tmp/metrics) \
    rss_kib=$(status VmRSS) hwm_kib=$(status VmHWM) metrics_bytes=$(wc -c </tmp/metrics) protobuf_bytes=$(wc -c </tmp/metrics.pb) \
    memcgs=$(find $CG -name memory.stat | wc -l)
  if [ "$PERF" = 1 ] && [ "$pct" = "$last" ]; then
    echo 0 >/proc/sys/kernel/kptr_restrict
    echo -1 >/proc/sys/kernel/perf_event_paranoid
    /usr/bin/perf record -g -p $PID -o /tmp/perf.data -- sleep "$WINDOW" >/tmp/perf.log 2>&1 ||
      { sed 's/^/PERF /' /tmp/perf.log; }
    # Flat first (where the cycles are), then each hot symbol's callers (why); the callers need
    # frame pointers in the agent (a -fno-omit-frame-pointer build passed with --agent).
    /usr/bin/perf report --stdio --no-children -g none --sort dso,sym --percent-limit 0.3 -i /tmp/perf.data 2>&1 |
      grep -v '^$' | head -80 | sed 's/^/PERF /'
    /usr/bin/perf report --stdio --children -g caller,0.5,callee,function,percent --percent-limit 2 \
      -i /tmp/perf.data 2>&1 | grep -v '^$' | head -400 | sed 's/^/PERF /'
    log perf done
  fi
done
log done
sed 's/^/AGENTLOG /' /tmp/agent.log | tail -20
poweroff -f
