#!/usr/bin/env python3
"""Generates a cgroup v2 tree shaped like a busy Kubernetes node.

usage: make_tree.py DIR N   ->  N memory cgroups:
  /kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<i>.slice/cri-containerd-<j>.scope
with the memory files a 6.1 kernel has (memory.stat has ~50 keys there).
"""
import os
import sys

STAT_KEYS = ("anon file kernel kernel_stack pagetables sec_pagetables percpu sock vmalloc shmem zswap zswapped "
             "file_mapped file_dirty file_writeback swapcached anon_thp file_thp shmem_thp inactive_anon active_anon "
             "inactive_file active_file unevictable slab_reclaimable slab_unreclaimable slab workingset_refault_anon "
             "workingset_refault_file workingset_activate_anon workingset_activate_file workingset_restore_anon "
             "workingset_restore_file workingset_nodereclaim pgscan pgsteal pgscan_kswapd pgscan_direct "
             "pgsteal_kswapd pgsteal_direct pgfault pgmajfault pgrefill pgactivate pgdeactivate pglazyfree "
             "pglazyfreed thp_fault_alloc thp_collapse_alloc").split()


def cgroup(path, i):
    os.makedirs(path, exist_ok=True)
    files = {
        "cgroup.controllers": "cpu io memory pids\n",
        "memory.stat": "".join("%s %d\n" % (k, (i * 7919 + n) * 4096) for n, k in enumerate(STAT_KEYS)),
        "memory.current": "%d\n" % (i * 4096),
        "memory.max": "max\n", "memory.high": "max\n", "memory.low": "0\n", "memory.min": "0\n",
        "memory.swap.current": "0\n", "memory.swap.max": "max\n",
        "memory.events": "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n",
        "memory.events.local": "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n",
        "memory.pressure": "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
    }
    for name, text in files.items():
        with open(os.path.join(path, name), "w") as f:
            f.write(text)


def main(root, n):
    cgroup(root, 0)
    made = 1
    qos = os.path.join(root, "kubepods.slice", "kubepods-burstable.slice")
    cgroup(os.path.join(root, "kubepods.slice"), 1)
    cgroup(qos, 2)
    made += 2
    pod = 0
    while made < n:
        pod_dir = os.path.join(qos, "kubepods-burstable-pod%08d.slice" % pod)
        cgroup(pod_dir, made)
        made += 1
        for c in range(3):
            if made >= n:
                break
            cgroup(os.path.join(pod_dir, "cri-containerd-%064x.scope" % (pod * 3 + c)), made)
            made += 1
        pod += 1


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
