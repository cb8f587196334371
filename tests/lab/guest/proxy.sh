# The reporter's workload (lab.cond=proxy or proxy-REMEDY), sourced by /init after the ballast is
# resident in A. A real nginx reverse proxy runs in A beside the hot ballast; its upstream, a second
# nginx serving a file, is in netns peer behind the netem link, so the proxy's upstream socket is the
# receiver the kernel clamps. curl in the root cgroup downloads through the proxy, and real fio in B
# runs the original report's job scaled to the guest (tests/lab/README.md lists every change).
#
# Timeline: a control phase first (the same proxy, ballast and download, fio not yet started: nothing
# reclaims, nothing may throttle), then the remedy if the condition names one, then fio and the usual
# warm-up, then the throttled phase, in which `sockpressure_exporter doctor` runs once. The host holds
# both phases to the agent's verdict (lab.py).

TOOLS=/opt/tools
mount -t ext4 -o ro,noatime /dev/vdb $TOOLS || die "mount tools disk (curl, fio, nginx)"
# The tools' libraries are on their disk; only these programs get them.
tool() { LD_LIBRARY_PATH=$TOOLS/lib "$TOOLS/bin/$@"; }
CONTROL=$(arg control 20)
# The client reads at most this fast (curl --limit-rate): a proxy's clients are usually slower than
# its upstream, so its buffers fill and it stops reading, and the upstream socket's queue fills, which
# is when the kernel clamps a socket under pressure (__tcp_select_window: free space below half). It
# also leaves TCG's CPU to fio: at full speed curl and the two nginx took it, fio's reclaim stopped and
# with it the pressure (measured: 3,657 kB/s, 0 clamped samples, A under pressure 63 s of 220).
CLIENT_RATE=$(arg client_rate 4M)
FIO_JOBS=$(arg fio_jobs 2)
REMEDY=${COND#proxy}
REMEDY=${REMEDY#-}

# --- upstream: nginx in netns peer (root cgroup, never throttled) serving a 64 MiB file from tmpfs ---
mkdir -p /tmp/up /tmp/nginx
dd if=/dev/urandom of=/tmp/up/big.bin bs=1M count=64 2>/dev/null || die "upstream file"
cat >/tmp/nginx/upstream.conf <<EOF
worker_processes 1;
daemon off;
user root root;
pid /tmp/nginx/upstream.pid;
error_log stderr warn;
events { worker_connections 64; }
http {
  access_log off;
  sendfile on;
  server { listen 10.9.0.2:80; root /tmp/up; }
}
EOF
# The proxy: nginx's defaults, except that a response is never spooled to a temporary file
# (proxy_max_temp_file_size 0): the guest's files are RAM, and a file charged to A would be one more
# load the report's proxy did not have.
cat >/tmp/nginx/proxy.conf <<EOF
worker_processes 1;
daemon off;
user root root;
pid /tmp/nginx/proxy.pid;
error_log stderr warn;
events { worker_connections 256; }
http {
  access_log off;
  server {
    listen 127.0.0.1:8080;
    location / { proxy_pass http://10.9.0.2:80; proxy_max_temp_file_size 0; }
  }
}
EOF
# Niced like the lab's sender, for the same reason (it carries the veth softirq work).
$IP netns exec peer sh -c 'renice -n "$1" -p $$ >/dev/null; shift; exec "$@"' sh "$SENDER_NICE" \
  env LD_LIBRARY_PATH=$TOOLS/lib $TOOLS/bin/nginx -c /tmp/nginx/upstream.conf 2>&1 | sed 's/^/upstream: /' &
# The proxy's master and worker start in A: the upstream sockets the worker opens are charged to A.
in_cgroup $CGA env LD_LIBRARY_PATH=$TOOLS/lib $TOOLS/bin/nginx -c /tmp/nginx/proxy.conf 2>&1 | sed 's/^/proxy: /' &
i=0
until [ "$(tool curl -s -o /dev/null -r 0-0 -w '%{http_code}' http://127.0.0.1:8080/big.bin)" = 206 ]; do
  i=$((i + 1)); [ $i -gt 60 ] && die "proxy not answering"; sleep 1
done
log proxy_ready proxy_pids="$(cat /sys/fs/cgroup/$CGA/cgroup.procs | tr '\n' ' ')"

now() { cut -d' ' -f1 /proc/uptime; }
# download SECS TAG: curl through the proxy for SECS seconds, the file again each time it completes,
# while `ss` samples the proxy's upstream socket at 1 Hz (rcv_ssthresh <= 4*advmss: clamped). Prints
# "LAB ss" per sample and "LAB TAG bytes= seconds= kBps= checks= clamped_checks=" at the end; the
# throttled phase's line is the lab's recv_result, its first clamped sample clamp_first. With HOLD set
# the download goes on past SECS (at most 150 s more) until the file HOLD exists: doctor, started with
# the download, takes tens of seconds to load its probes under TCG, and a proxy with no download in
# flight has no socket its cgroup's pressure could throttle.
download() {
  secs=$1 tag=$2
  t0=$(now)
  (
    end=$(awk -v t="$t0" -v s="$secs" 'BEGIN{printf "%d", t + s}')
    total=0
    while :; do
      up=$(cut -d. -f1 /proc/uptime)
      left=$((end - up))
      if [ $left -lt 1 ]; then
        [ -n "$HOLD" ] && [ ! -f "$HOLD" ] && [ $left -gt -150 ] || break
        left=5
      fi
      b=$(tool curl -s -o /dev/null --limit-rate "$CLIENT_RATE" --max-time $left -w '%{size_download}' \
        http://127.0.0.1:8080/big.bin)
      total=$((total + ${b:-0}))
    done
    echo $total >/tmp/download.$tag
  ) &
  dl=$!
  n=0 clamped=0 i=0
  while kill -0 $dl 2>/dev/null && [ $i -lt $((secs + 200)) ]; do
    sleep 1
    i=$((i + 1))
    [ "$tag" = recv_result ] && [ $i -eq 1 ] && [ -n "$DOCTOR_CB" ] && $DOCTOR_CB
    s=$($SS -tmi state established "( dst 10.9.0.2 and dport = :80 )" 2>/dev/null |
      tr -s ' \t' '\n' | grep -E '^(rcv_ssthresh|rcv_space|advmss|skmem)' | tr '\n' ' ')
    echo "LAB ss t=$i phase=$tag $s"
    th=$(echo "$s" | sed -n 's/.*rcv_ssthresh:\([0-9]*\).*/\1/p')
    mss=$(echo "$s" | sed -n 's/.*advmss:\([0-9]*\).*/\1/p')
    [ -n "$th" ] && [ -n "$mss" ] || continue
    n=$((n + 1))
    if [ "$th" -le $((4 * mss)) ]; then
      clamped=$((clamped + 1))
      [ "$tag" = recv_result ] && [ $clamped -eq 1 ] && echo "LAB clamp_first t=$i rcv_ssthresh=$th advmss=$mss"
    fi
  done
  wait $dl
  bytes=$(cat /tmp/download.$tag 2>/dev/null || echo 0)
  echo "LAB $tag bytes=$bytes $(awk -v t0="$t0" -v t1="$(now)" -v b="$bytes" \
    'BEGIN{printf "seconds=%.1f kBps=%.0f", t1 - t0, b / (t1 - t0) / 1000}') checks=$n clamped_checks=$clamped"
}

# --- control: the proxy and the ballast, no fio ---
log control_start seconds=$CONTROL
download "$CONTROL" control_result
A_WS=$(cat /sys/fs/cgroup/$CGA/memory.current)
log control_end A_current=$A_WS

# --- the remedy under test, applied before fio starts ---
case $REMEDY in
  "") ;;
  swapmax) echo 0 >/sys/fs/cgroup/$CGA/memory.swap.max || die "memory.swap.max" ;;
  # The working set: A's memory.current in the control phase (the ballast and the proxy, healthy).
  low) echo "$A_WS" >/sys/fs/cgroup/$CGA/memory.low || die "memory.low" ;;
  min) echo "$A_WS" >/sys/fs/cgroup/$CGA/memory.min || die "memory.min" ;;
  swapoff) swapoff /dev/zram0 || die "swapoff" ;;
  nosocket) grep -q cgroup.memory=nosocket /proc/cmdline || die "proxy-nosocket without cgroup.memory=nosocket" ;;
  *) die "unknown remedy $REMEDY" ;;
esac
log remedy name="${REMEDY:-none}" swap.max=$(cat /sys/fs/cgroup/$CGA/memory.swap.max) \
  low=$(cat /sys/fs/cgroup/$CGA/memory.low) min=$(cat /sys/fs/cgroup/$CGA/memory.min) \
  swaps="$(tail -n +2 /proc/swaps | awk '{print $1}' | tr '\n' ' ')"

# --- fio in B: the report's job (ioengine=mmap, rw=randread, bs=256k, iodepth=256, numjobs=8),
# scaled: numjobs=lab.fio_jobs (2, one per vCPU), the lab's 1.5 GiB data file (bigger than the limit),
# time-based until the transfer ends (stopped with SIGINT, which makes fio report), and fadvise_hint=0.
# fio's default advises MADV_RANDOM on the mapping for randread, which turns readahead off: under TCG
# B then faulted page by page at 1.9 MB/s, reclaim scanned only B's file pages and left A alone during
# the transfer (A scanned 247 pages in it, nothing clamped; tests/lab/README.md). On a real machine
# the report's job was fast enough without readahead; in the emulator it needs it. iodepth is kept:
# fio caps it at 1 for a synchronous engine such as mmap, as it did for the report. ---
cat >/tmp/fio.job <<EOF
[global]
ioengine=mmap
rw=randread
bs=256k
iodepth=256
fadvise_hint=0
filename=/data/random.bin
time_based
runtime=3600
group_reporting
[report]
numjobs=$FIO_JOBS
EOF
vmp_trace_start

in_cgroup $CGB env LD_LIBRARY_PATH=$TOOLS/lib $TOOLS/bin/fio --readonly --output-format=terse \
  --output=/tmp/fio.out /tmp/fio.job >/tmp/fio.log 2>&1 &
FIO=$!
# fio's 256 KiB mapped reads refault more slowly than the lab's pread readers; the warm-up waits for
# fewer refaults (it is bounded by lab.warmup_max either way).
WARMUP_REFAULTS=$(arg proxy_warmup_refaults 5000)
warm_up

# --- throttled phase: the download again, doctor started with it (and the download held until it is
# done) ---
AGENT=/usr/bin/sockpressure_exporter
run_doctor() {
  log doctor_start
  ( $AGENT doctor >/tmp/doctor.out 2>/tmp/doctor.err; echo $? >/tmp/doctor.rc ) &
}
[ -x $AGENT ] && DOCTOR_CB=run_doctor
log transfer_start seconds=$TRANSFER
[ -x $AGENT ] && HOLD=/tmp/doctor.rc
download "$TRANSFER" recv_result
DOCTOR_CB= HOLD=
if [ -x $AGENT ]; then
  i=0
  while [ ! -f /tmp/doctor.rc ] && [ $i -lt 120 ]; do sleep 1; i=$((i + 1)); done
  sed 's/^/doctor: /' /tmp/doctor.out
  tail -5 /tmp/doctor.err | sed 's/^/doctor-log: /'
  log doctor_done rc=$(cat /tmp/doctor.rc 2>/dev/null || echo timeout)
fi
# $FIO is the subshell in_cgroup ran in, not fio: signal B's processes (fio's and its jobs'), as a
# terminal's ^C would, and wait until B is empty.
kill -INT $(cat /sys/fs/cgroup/$CGB/cgroup.procs) 2>/dev/null
i=0
while [ -n "$(cat /sys/fs/cgroup/$CGB/cgroup.procs)" ] && [ $i -lt 60 ]; do sleep 1; i=$((i + 1)); done
# Terse v3: field 6 read KiB, 7 read bandwidth KiB/s, 9 read runtime ms.
log fio $(awk -F';' 'NF > 9 {printf "io_kib=%s bw_kibps=%s runtime_ms=%s", $6, $7, $9}' /tmp/fio.out) \
  error="$(grep -m1 -i 'error\|fio:' /tmp/fio.log | tr '"' "'")"
vmp_trace_stop
for cg in $CGA $CGB; do
  log memory_events cg=$cg $(awk '{printf "%s=%s ", $1, $2}' /sys/fs/cgroup/$cg/memory.events)
done
