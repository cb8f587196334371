// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Pressure state: walk every memory cgroup once per sample and report its
 * memcg->socket_pressure deadline next to bpf_jiffies64().
 *
 * vmpressure() (mm/vmpressure.c) sets socket_pressure = jiffies + HZ when a
 * >=512-page window of a non-root memcg ends above the LOW level; the memcg
 * is throttled while jiffies < deadline. Sampling the deadline needs no
 * hot-path probe and works on kernels that allow BPF iterators but not
 * fentry/kprobes (kernel/bpf/cgroup_iter.c, v6.1+).
 *
 * The agent attaches it with the fd of the memory hierarchy root: on cgroup
 * v2 that is the unified root, on hybrid/legacy hosts the v1 "memory" mount
 * (walking the default v2 root there only yields the root, whose
 * subsys[memory] is NULL). Order: BPF_CGROUP_ITER_DESCENDANTS_PRE. */
#include "sp_common.bpf.h"

/* Walk generation, bumped by the agent (mmaped .bss) before each walk. */
__u64 gen = 0; /* __u64, not u64: the skeleton header names this type */
/* What the agent reads without a map lookup (mmaped .bss): records written
 * (new memcgs, or a deadline or flags that changed; a failed write counts),
 * memcgs visited, and the jiffies when this walk began. A walk that wrote
 * none and visited as many memcgs as the map holds left the map as it was,
 * bar gen and now: the agent then need not read it (a batched read visits
 * all SP_MAX_CGROUPS buckets). */
__u64 changed = 0;
__u64 visited = 0;
/* On cgroup v1, memcgs whose sockets may be charged to them: a v1 socket
 * gets sk_memcg only once its memcg's memory.kmem.tcp.limit_in_bytes was
 * written (memcg->tcpmem_active; mem_cgroup_sk_alloc), and memcg socket
 * pressure of either kind throttles only sockets with sk_memcg. A walk that
 * counts none tells the agent that no memcg can throttle any socket until a
 * tcp limit is written. Counted conservatively: every memcg when the field
 * cannot be read. */
__u64 charged = 0;
__u64 walk_gen = 0;
__u64 walk_start = 0;

/* cgroup id -> state at the last walk. The records go to a map rather than
 * the seq_file because cgroup_iter cannot resume a walk across read() calls
 * (cgroup_iter_seq_start returns -EOPNOTSUPP for *pos > 0), so a walk that
 * wrote more than one read() buffer of records (a few hundred cgroups) failed.
 * The map holds up to SP_MAX_CGROUPS; the seq_file stays empty. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SP_MAX_CGROUPS);
	__type(key, u64);
	__type(value, struct sp_memcg_state);
} memcg_state SEC(".maps");

SEC("iter/cgroup")
int memcg_iter(struct bpf_iter__cgroup *ctx)
{
	struct cgroup *cgrp = ctx->cgroup;
	struct cgroup_subsys_state *css;
	struct mem_cgroup *memcg;
	struct sp_memcg_state rec = {}, *old;
	u64 id;
	int idx;

	if (!cgrp) /* end of walk (the iterator calls us once more with NULL) */
		return 0;
	stat_inc(SP_STAT_RUNS);
	idx = bpf_core_enum_value(enum cgroup_subsys_id, memory_cgrp_id);
	css = BPF_CORE_READ(cgrp, subsys[idx]);
	if (!css) /* a cgroup without the memory controller has no deadline */
		return 0;
	id = BPF_CORE_READ(cgrp, kn, id);
	memcg = (void *)css - bpf_core_field_offset(struct mem_cgroup, css);
	rec.now = bpf_jiffies64();
	rec.gen = gen;
	rec.deadline = memcg_deadline(memcg);
	if (bpf_core_field_size(memcg->socket_pressure) == 4 &&
	    !bpf_core_field_exists(((struct mem_cgroup___u64 *)memcg)->socket_pressure))
		rec.flags |= SP_REC_DEADLINE_32;
	if (bpf_core_field_exists(memcg->tcpmem_pressure) && BPF_CORE_READ(memcg, tcpmem_pressure))
		rec.flags |= SP_REC_TCPMEM_PRESSURE;
	if (!bpf_core_field_exists(memcg->tcpmem_active) || BPF_CORE_READ(memcg, tcpmem_active))
		charged++;
	if (walk_gen != gen) {
		walk_gen = gen;
		walk_start = rec.now;
	}
	visited++;
	/* One walk at a time (the seq_file's lock): plain updates suffice. */
	old = bpf_map_lookup_elem(&memcg_state, &id);
	if (old && old->deadline == rec.deadline && old->flags == rec.flags) {
		old->now = rec.now;
		old->gen = gen;
		return 0;
	}
	changed++;
	if (bpf_map_update_elem(&memcg_state, &id, &rec, BPF_ANY))
		stat_inc(SP_STAT_LOST); /* more memory cgroups than SP_MAX_CGROUPS */
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
