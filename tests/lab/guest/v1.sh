# Sourced by guest/init for lab.cond=v1 (tests/lab/v1_check.py); never returns.
#
# The memory controller on cgroup v1, where the kernel charges a socket to its memcg only once that
# memcg's memory.kmem.tcp.limit_in_bytes was written (tcpmem_active), and v1's memcg socket pressure
# is tcpmem_pressure: set when a charged socket's memory would pass that limit. With no limit written
# anywhere no memcg can throttle a socket, and the agent samples once per context interval
# (docs/sampling.md, "Where nothing can move"). This boot checks both sides on a real kernel:
#   1. idle, no limit written: the agent says it samples every context interval;
#   2. a limit written on A during such a wait, and at once a slow reader in A receiving a stream: the
#      kernel refuses A's socket memory (memory.kmem.tcp.failcnt, the ground truth), and the agent
#      samples every interval again, names A under socket pressure and counts its clamps.
# Every step is a "LAB v1 ..." line; the host times them on arrival and judges.

V1=/sys/fs/cgroup/memory
umount /sys/fs/cgroup || die "umount cgroup2"
mount -t tmpfs cgroup /sys/fs/cgroup && mkdir $V1 && mount -t cgroup -o memory memory $V1 ||
  die "cgroup v1 memory controller"
mkdir $V1/A || die "mkdir A"
TCP_LIMIT=$(arg v1_tcp_limit 64K)
V1_READ_KBPS=$(arg v1_read_kbps 100)
log cgroups A_id=$(stat -c %i $V1/A) v1=1 tcpmem_active_files=$(ls $V1/A/memory.kmem.tcp.limit_in_bytes 2>/dev/null | wc -l)

AGENT=/usr/bin/sockpressure_exporter
[ -x $AGENT ] || die "agent_missing"
a=$(arg agent_args "" | tr ',;' ' ,')
# Straight to the console: a pipe (through sed, as init prefixes its agents) would hold its log lines back.
$AGENT --web.listen-address=:$AGENT_PORT $a &
log agent_started n=1 port=$AGENT_PORT args="$a"

# (Not wget -T: Debian 12's busybox wget crashes with it.)
scrape() { timeout 5 wget -q -O /tmp/v1.metrics "http://127.0.0.1:$AGENT_PORT/metrics" 2>/dev/null; }
# value NAME [CGROUP]: the sample's value (first series; of CGROUP's series when given), empty if absent.
value() {
  awk -v n="$1" -v cg="$2" '$1 == n || index($1, n "{") == 1 {
    if (cg == "" || index($1, "cgroup=\"" cg "\"")) { print $2; exit } }' /tmp/v1.metrics
}
uptime_s() { cut -d' ' -f1 /proc/uptime; }

# 1. Idle: wait (bounded) for the agent to say it samples every context interval.
i=0 interval=""
while [ $i -lt 200 ]; do
  scrape && interval=$(value sockpressure_sample_interval_seconds)
  [ "$interval" = 10 ] && break
  sleep 1; i=$((i + 1))
done
log v1 phase=idle interval="${interval:-absent}" after=$i \
  sources=\"$(awk '$1 ~ /^sockpressure_signal_source\{/ && $2 == 1' /tmp/v1.metrics | sed 's/.*signal="//; s/",source="/=/; s/".*//' | tr '\n' ' ')\" \
  attached=\"$(awk '$1 ~ /^sockpressure_probe_attached\{/ && $2 == 1' /tmp/v1.metrics | sed 's/.*probe="//; s/",attach="/=/; s/".*//' | tr '\n' ' ')\"
# Let the wait begin: the limit must be written between two cycles of the agent, not just after one.
# (The first wait comes about a minute after start: the window-clamp program, attached at start-up,
# is detached after 60 s quiet, and a cycle with it attached does not wait.)
sleep 3

# 2. The limit, then at once the stream into a slow reader in A (the accepted socket is charged when
# the acceptor is already in A and A is tcpmem_active).
echo "$TCP_LIMIT" >$V1/A/memory.kmem.tcp.limit_in_bytes || die "memory.kmem.tcp.limit_in_bytes"
log v1 phase=limit_written limit=$(cat $V1/A/memory.kmem.tcp.limit_in_bytes) uptime=$(uptime_s)
PORT=5001
# tcprecv prints its own LAB lines (clamp_first, recv_result ... clamped_checks=N): the window seen
# from inside the socket.
sh -c 'echo $$ >'"$V1/A/cgroup.procs"' && exec /lab/tcprecv '"$PORT 30 60 $V1_READ_KBPS" &
sleep 0.5
$IP netns exec peer /lab/tcpsend 10.9.0.1 $PORT 27 >/dev/null 2>&1 &

# 3. Poll the agent every second for 32 s (the receiver's 30 s and its result line): when it samples
# every interval again, when it first names A under socket pressure, and A's clamps.
i=0 back="" seen="" clamps=0
while [ $i -lt 32 ]; do
  sleep 1; i=$((i + 1))
  scrape || continue
  if [ -z "$back" ] && [ "$(value sockpressure_sample_interval_seconds)" = 1 ]; then
    back=1; log v1 phase=back t=$i
  fi
  if [ -z "$seen" ] && [ "$(value sockpressure_memcg_socket_pressure_active /A)" = 1 ]; then
    seen=1; log v1 phase=pressure_seen t=$i
  fi
  c=$(value sockpressure_tcp_window_clamps_total /A); [ -n "$c" ] && clamps=$c
done
log v1 phase=done failcnt=$(cat $V1/A/memory.kmem.tcp.failcnt) \
  max_usage=$(cat $V1/A/memory.kmem.tcp.max_usage_in_bytes) clamps="$clamps" \
  interval="$(value sockpressure_sample_interval_seconds)"
sleep "$LINGER"
poweroff -f
