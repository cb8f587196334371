#!/usr/bin/env bash
# Golden end-to-end test: the real binary on each fixture tree, in the default
# (core) profile (golden/TREE.txt) and with --collector.context
# (golden/TREE.context.txt); its /metrics (minus values that change from run
# to run) must equal the checked-in file, and promtool must accept it.
# UPDATE_GOLDEN=1 rewrites the golden files.
AGENT="$1"
source "$(dirname "$0")/lib.sh"
command -v promtool >/dev/null || fail "promtool not found (apt-get install prometheus)"
make_work

# Run-dependent values: timings, counts of samples/requests, build revision.
normalize() {
  grep -v -E '^sockpressure_(collector_duration_seconds|collector_last_run_timestamp_seconds|sample_cpu_seconds|sample_duration_seconds|sample_overruns_total|last_sample_timestamp_seconds|samples_total|http_requests_total)' \
    | sed -E 's/^(sockpressure_build_info)\{.*\} 1$/\1{...} 1/'
}

# Turn off the eBPF and sock_diag collectors (when the binary has them): the
# fixture trees describe cgroupfs and procfs only.
# (--help is read whole first: `grep -q` exits at the first match, and under
# pipefail the agent's SIGPIPE on a long --help would fail the test at random.)
extra=()
help_text="$("$AGENT" --help)"
for c in bpf sock_diag; do
  if grep -q -- "--\[no-\]collector.$c\b" <<<"$help_text"; then extra+=("--no-collector.$c"); fi
done

status=0
for run in v2 v2_619 hybrid v1 nosocket broken k8s v2.context v2_619.context hybrid.context v1.context \
  nosocket.context broken.context k8s.context; do
  tree="${run%.context}"
  profile=(--no-collector.context); [ "$tree" != "$run" ] && profile=(--collector.context)
  port="$(free_port)"
  k8s=()
  # The Kubernetes node gets pod names from a kubelet pod list (tests/identity fixtures).
  [ "$tree" = k8s ] && k8s=(--kubelet.pods-file="$REPO_ROOT/tests/identity/fixtures/pods-containerd.json")
  start_agent "$port" --path.procfs="$FIXTURES/$tree/proc" --path.sysfs="$FIXTURES/$tree/sys" \
    --path.cgroupfs="$FIXTURES/$tree/cgroup" "${profile[@]}" "${extra[@]}" "${k8s[@]}"
  curl -fsS "http://127.0.0.1:$port/metrics" >"$WORK/$run.raw"
  promtool check metrics <"$WORK/$run.raw" >"$WORK/$run.lint" 2>&1 || { cat "$WORK/$run.lint"; fail "promtool rejected $run"; }
  normalize <"$WORK/$run.raw" >"$WORK/$run.txt"
  golden="$E2E_DIR/golden/$run.txt"
  if [ "${UPDATE_GOLDEN:-0}" = 1 ]; then
    mkdir -p "$E2E_DIR/golden"; cp "$WORK/$run.txt" "$golden"; echo "updated $golden"
  elif ! diff -u "$golden" "$WORK/$run.txt"; then
    echo "FAIL: $run differs from $golden (UPDATE_GOLDEN=1 to accept)"; status=1
  else
    echo "ok: $run ($(grep -vc '^#' "$WORK/$run.txt") series)"
  fi
done
exit "$status"
