# The kernel's own socket-pressure assertions, traced (sourced by init for every condition): a kprobe on
# vmpressure() through tracefs, not the agent's eBPF, whose arguments an awk replays per cgroup name.
# vmp_trace_start before the load, vmp_trace_stop at the end logs vmp_result with each cgroup's
# windows and assertions (and overrun: events the ring buffer dropped, when the counts are a floor),
# and vmp_live with the seconds each cgroup's deadline was live, relative to the stop (vmp_mark).
# The rule replayed, per cgroup
# name (mm/vmpressure.c, tree == false: accumulate per memcg until 512 pages are scanned, then medium
# (60 %) or worse sets memcg->socket_pressure). The host passes the member offsets from the kernel's
# BTF (lab.vmp_offsets=CSS_CGROUP,CGROUP_KN,KN_NAME; core_fields.py --offsets); without them, or where
# the kernel refuses the probe, there is no trace and the host says so.
vmp_trace_start() {
  VMP_OFF=$(arg vmp_offsets "")
  TR=/sys/kernel/tracing
  VMP_AWK=
  rm -f /tmp/vmp.live /tmp/vmp.totals
  # The register of each argument: 5.10-6.x vmpressure(gfp, memcg, tree, scanned, reclaimed); 7.x adds
  # `order` after gfp (lab.vmp_layout=order, docs/kernel.md §2), which moves the rest one register on.
  # arm64 passes them in x0..x7 (kprobe_events names them %x0..%x7).
  if [ "$(uname -m)" = aarch64 ]; then
    R_GFP=%x0
    if [ "$(arg vmp_layout plain)" = order ]; then
      R_MEMCG=%x2 R_TREE=%x3 R_SCANNED=%x4 R_RECLAIMED=%x5
    else
      R_MEMCG=%x1 R_TREE=%x2 R_SCANNED=%x3 R_RECLAIMED=%x4
    fi
  elif [ "$(arg vmp_layout plain)" = order ]; then
    R_GFP=%di R_MEMCG=%dx R_TREE=%cx R_SCANNED=%r8 R_RECLAIMED=%r9
  else
    R_GFP=%di R_MEMCG=%si R_TREE=%dx R_SCANNED=%cx R_RECLAIMED=%r8
  fi
  if [ -n "$VMP_OFF" ]; then
    set -- $(echo "$VMP_OFF" | tr ',' ' ')
    # x86-64 passes arguments in di, si, dx, cx, r8, r9; the cgroup's name is memcg -> css.cgroup -> kn
    # -> name, and a :string argument is the address of the string, hence the outer +0(). tree is read
    # as u8: only its low byte is the bool (docs/kernel.md §9).
    # No command-name recording: it would hook the sched tracepoints, more text patched at run time.
  echo 0 >$TR/options/record-cmd 2>/dev/null
  if echo "p:lab/vmp vmpressure gfp=$R_GFP:u32 tree=$R_TREE:u8 scanned=$R_SCANNED:u64 reclaimed=$R_RECLAIMED:u64 cg=+0(+$3(+$2(+$1($R_MEMCG)))):string" \
        >>$TR/kprobe_events 2>/tmp/vmp.err &&
      # Only the calls the rule can count reach the ring buffer (half of them are tree == 1): under heavy
      # reclaim the awk fell behind and the buffer overwrote events (a filter patches no kernel text).
      { echo 'tree == 0 && scanned > 0' >$TR/events/lab/vmp/filter 2>/dev/null || true; } &&
      echo 1 >$TR/events/lab/vmp/enable; then
      # The awk keeps up with the pipe; the totals are rewritten on every assertion and every 2,000 calls.
      # Each assertion keeps the cgroup under pressure for HZ (deadline = jiffies + HZ): the awk merges
      # [ts, ts + 1 s) per cgroup into intervals. At the stop, vmp_trace_stop writes a marker into the
      # same ring buffer, so the intervals are written relative to it in the trace's own clock, and the
      # host places them by the vmp_mark console line logged at that moment.
      awk '/tracing_mark_write: lab_stop/ {
        for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+\.[0-9]+:$/) m = $i + 0
        out = ""
        for (k in nl) {
          l = ""
          for (j = 1; j <= nl[k]; j++) l = l (j > 1 ? "," : "") sprintf("%.1f~%.1f", IS[k, j] - m, IE[k, j] - m)
          out = out " " k "_live=" (nl[k] > 300 ? "truncated" : l)
        }
        print "mark=ok" out >"/tmp/vmp.live"; close("/tmp/vmp.live")
        dump = 1
      }
      dump {
        # The totals as of the marker (and on every assertion and every 2,000 calls).
        out = "calls=" calls
        for (k in win) out = out " " k "_windows=" win[k] " " k "_assertions=" (n[k] + 0)
        print out >"/tmp/vmp.totals"; close("/tmp/vmp.totals"); dump = 0
        if (/tracing_mark_write: lab_stop/) next
      }
      {
        g = t = s = r = c = ts = ""
        for (i = 1; i <= NF; i++) {
          if ($i ~ /^[0-9]+\.[0-9]+:$/) { ts = $i + 0; continue }
          if ($i ~ /^gfp=/) g = substr($i, 5); else if ($i ~ /^tree=/) t = substr($i, 6)
          else if ($i ~ /^scanned=/) s = substr($i, 9); else if ($i ~ /^reclaimed=/) r = substr($i, 11)
          else if ($i ~ /^cg=/) { c = substr($i, 4); gsub(/"/, "", c) }
        }
        if (t == "") next
        calls++
        # The rule: userland-helpable allocations only (__GFP_HIGHMEM|__GFP_MOVABLE|__GFP_IO|__GFP_FS),
        # something scanned, the per-memcg (tree == 0) path, never the root.
        if (t == 0 && s > 0 && and(g + 0, 202) && c != "" && c != "/") {
          S[c] += s; R[c] += r
          if (S[c] >= 512) {
            sc = S[c]; rc = R[c]; S[c] = R[c] = 0; win[c]++
            p = 0
            if (rc < sc) { scale = sc + rc; p = scale - int(rc * scale / sc); p = int(p * 100 / scale) }
            if (p >= 60) {
              n[c]++; dump = 1
              # A new interval unless this one starts while the last is still live.
              if (nl[c] > 0 && ts <= IE[c, nl[c]]) IE[c, nl[c]] = ts + 1
              else { nl[c]++; IS[c, nl[c]] = ts; IE[c, nl[c]] = ts + 1 }
            }
          }
        }
        if (dump || calls % 2000 == 0) {
          out = "calls=" calls
          for (k in win) out = out " " k "_windows=" win[k] " " k "_assertions=" (n[k] + 0)
          print out >"/tmp/vmp.totals"; close("/tmp/vmp.totals"); dump = 0
        }
      }' <$TR/trace_pipe &
      VMP_AWK=$!
      log vmp_trace on offsets="$VMP_OFF"
    else
      log vmp_trace off reason="$(tr '\n"' " '" </tmp/vmp.err) (kprobe_events refused)"
    fi
  else
    log vmp_trace off reason="no lab.vmp_offsets"
  fi
}

vmp_trace_stop() {
  [ -n "$VMP_AWK" ] || return 0
  # The event stays enabled: disabling it unregisters the kprobe (and, with record-cmd, the sched
  # tracepoint probes), and the kernel text that patches crashed a 6.12 guest with an int3 oops under
  # multi-threaded TCG (one vCPU ran the code the other was patching). The totals are read instead.
  log vmp_mark
  echo lab_stop >$TR/trace_marker 2>/dev/null
  # Recording stops at the marker (tracing_on is a flag on the ring buffer, no text patched): under heavy
  # reclaim the awk reads seconds behind the kernel, and events written after the marker would push the
  # unread ones, the marker with them, out of the buffer. Then wait until the awk reached it (bounded;
  # without it the host has the totals as of the last rewrite and no intervals).
  echo 0 >$TR/tracing_on 2>/dev/null
  i=0
  while [ ! -s /tmp/vmp.live ] && [ $i -lt 60 ]; do sleep 0.5; i=$((i + 1)); done
  # kprobe_hits (kprobe_profile) and read_events (what trace_pipe handed the awk) tell, when no call was
  # recorded, whether the probe never fired or the events were lost on the way.
  log vmp_result $(cat /tmp/vmp.totals 2>/dev/null) overrun=$(awk '/^overrun/{s += $2} END{print s + 0}' $TR/per_cpu/cpu*/stats) \
    kprobe_hits=$(awk '$1 == "vmp" {print $2}' $TR/kprobe_profile 2>/dev/null) \
    read_events=$(awk '/^read events/{s += $3} END{print s + 0}' $TR/per_cpu/cpu*/stats)
  log vmp_live $(cat /tmp/vmp.live 2>/dev/null || echo mark=none)
  kill $VMP_AWK 2>/dev/null
  VMP_AWK=
}
