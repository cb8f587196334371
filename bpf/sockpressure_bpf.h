/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Types shared by the BPF programs in bpf/ and the agent (exporter/sources/bpf).
 * Plain fixed-width C so that both clang -target bpf and the C++ build see the
 * same layout. Keep every struct a multiple of 8 bytes (no implicit padding). */
#ifndef SOCKPRESSURE_BPF_H
#define SOCKPRESSURE_BPF_H

#ifdef __bpf__
typedef __u64 sp_u64;
typedef __u32 sp_u32;
#else
#include <stdint.h>
typedef uint64_t sp_u64;
typedef uint32_t sp_u32;
#endif

/* Upper bounds of the in-kernel maps. Cgroup maps are keyed by cgroup id; a
 * node with more memory cgroups than this loses updates, which are counted in
 * the SP_STAT_LOST slot (sockpressure_bpf_events_lost_total). */
#define SP_MAX_CGROUPS 16384
#define SP_MAX_SOCKETS 65536 /* per-socket LRU for clamp transitions */
#define SP_MAX_TASKS 4096    /* vmpressure entry->exit hand-over */
#define SP_MAX_DEPTH 16      /* memcg ancestors walked (cgroup depth) */

/* Slots of the per-CPU `stats` array of every object. */
enum sp_stat {
	SP_STAT_RUNS = 0,       /* handler invocations (any entry point) */
	SP_STAT_NO_MEMCG = 1,   /* sk->sk_memcg == NULL (root, v1 w/o kmem.tcp, nosocket) */
	SP_STAT_PRESSURED = 2,  /* clamps: window at <= 4*advmss and memcg chain under pressure;
	                         * vmpressure: see vmpressure.bpf.c */
	SP_STAT_CLAMPS = 3,     /* clamp transitions counted */
	SP_STAT_LOST = 4,       /* map updates that failed (map full) */
	SP_STAT_SKIPPED = 5,    /* vmpressure: tree=true, root or no memcg */
	SP_STAT_NO_SOCK = 6,    /* prunes: a memory drop with no socket to attribute it to */
	SP_STAT_COUNTED = 7,    /* prunes, vmpressure: events counted into a cgroup (after the map write) */
	SP_STAT_NR = 8,
};

/* sp_memcg_state.flags (bit 1 once meant "has a memcg"; only memcgs are
 * recorded now). */
#define SP_REC_TCPMEM_PRESSURE 2u  /* v1 memcg->tcpmem_pressure set */
#define SP_REC_DEADLINE_32 4u      /* socket_pressure is 32 bits (32-bit kernel) */

/* Per-cgroup counters of the vmpressure tier (cumulative). */
struct sp_reclaim_val {
	sp_u64 scanned, reclaimed;     /* pages passed to vmpressure(tree=false) */
	sp_u64 windows[3];             /* completed >=512-page windows: low, medium, critical */
	sp_u64 assertions;             /* socket_pressure deadline moved forward */
	sp_u64 pressure_jiffies;       /* sum of deadline extensions (jiffies) */
	sp_u64 last_assert_ns;         /* bpf_ktime_get_ns() of the last assertion */
	sp_u64 last_remaining_jiffies; /* deadline - jiffies at the last assertion */
	sp_u64 last_deadline;          /* the deadline value last counted (one count per move) */
};

/* Per-cgroup counters of the prunes program (bpf/prunes.bpf.c), cumulative.
 * The drop tier (kfree_skb) fills the first two, the function tier
 * (tcp_collapse, tcp_prune_ofo_queue) the last two. */
struct sp_prune_val {
	sp_u64 rcv_mem_drops;   /* arriving segments dropped: no receive memory (PROTO_MEM) */
	sp_u64 ofo_pruned_segs; /* queued out-of-order segments dropped by pruning */
	sp_u64 collapses;       /* receive-queue collapse passes of tcp_prune_queue() */
	sp_u64 ofo_prunes;      /* tcp_prune_ofo_queue() runs that dropped data */
};

/* Census of TCP sockets (iter/tcp), aggregated in the kernel per cgroup.
 * Sockets charged to a memcg (sk->sk_memcg) are keyed by that memcg's cgroup
 * id; the others (root memcg, v1 without kmem.tcp accounting, nosocket) by
 * the id of their cgroup v2 cgroup (sk_cgrp_data), 0 when unknown, which the
 * agent maps to a memory cgroup as it does for sock_diag. */
struct sp_census_key {
	sp_u64 id;
	sp_u32 kind; /* SP_CENSUS_* */
	sp_u32 pad;
};
#define SP_CENSUS_MEMCG 1u
#define SP_CENSUS_UNIFIED 2u
struct sp_census_val {
	sp_u64 sockets, clamped;
};
/* The only bytes the census writes to its seq_file: the walk completed. */
#define SP_CENSUS_DONE 0x73706e73646f6e65ull

/* Per-cgroup socket-pressure state written by the iter/cgroup program into a
 * hash map (not the seq_file: cgroup_iter cannot resume a walk across read()
 * calls, which capped the walk at one buffer of records). `gen` is the walk
 * that last saw the cgroup; older entries belong to removed cgroups. */
struct sp_memcg_state {
	sp_u64 deadline;   /* memcg->socket_pressure (jiffies), 0 if never set */
	sp_u64 now;        /* bpf_jiffies64() when the cgroup was visited */
	sp_u64 gen;        /* walk generation (set by the agent in .bss) */
	sp_u32 flags;      /* SP_REC_* */
	sp_u32 pad;
};

#endif /* SOCKPRESSURE_BPF_H */
