#!/bin/sh
# eBPF / sock_diag benchmarks. Usage: bench/bpf/run.sh BUILD_DIR [sockets] [GiB]
# Root only. Changes no sysctl; the census runs in a private network
# namespace created (and dropped on exit) by the benchmark process itself.
set -eu
B=${1:?usage: $0 BUILD_DIR [sockets] [GiB]}/bench/bpf/bpf_bench
"$B" iter 2000
"$B" throughput "${3:-0.5}" all 40   # + the per-event cost and the loss estimated from it
"$B" census "${2:-100000}"
"$B" drop-event 1000000                # the prunes drop handler on drops it ignores
"$B" throughput "${3:-0.5}" prunes 20  # no memory drop on plain traffic: the handler never counts
