/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Helpers shared by the sockpressure BPF programs. */
#ifndef SP_COMMON_BPF_H
#define SP_COMMON_BPF_H

#include "sp_core.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "sockpressure_bpf.h"

/* Set by the agent before load: the memory controller is on cgroup v1. */
const volatile bool targ_v1 = false;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SP_STAT_NR);
	__type(key, u32);
	__type(value, u64);
} stats SEC(".maps");

static __always_inline void stat_inc(u32 slot)
{
	u64 *v = bpf_map_lookup_elem(&stats, &slot);
	if (v)
		*v += 1; /* per-CPU slot: no atomics needed */
}

/* memcg->socket_pressure, whatever its width on this kernel. */
static __always_inline u64 memcg_deadline(struct mem_cgroup *memcg)
{
	if (bpf_core_field_exists(((struct mem_cgroup___u64 *)memcg)->socket_pressure) &&
	    bpf_core_field_size(((struct mem_cgroup___u64 *)memcg)->socket_pressure) == 8)
		return BPF_CORE_READ((struct mem_cgroup___u64 *)memcg, socket_pressure);
	if (bpf_core_field_exists(memcg->socket_pressure))
		return (u32)BPF_CORE_READ(memcg, socket_pressure); /* 32-bit kernels */
	return 0;
}

/* time_before(now, deadline) as in include/linux/jiffies.h. On 64-bit,
 * jiffies == low 64 bits of jiffies_64 == bpf_jiffies64(). */
static __always_inline bool jiffies_before(u64 now, u64 deadline, bool narrow)
{
	if (narrow)
		return (s32)((u32)now - (u32)deadline) < 0;
	return (s64)(now - deadline) < 0;
}

/* Mirrors mem_cgroup_under_socket_pressure() (include/linux/memcontrol.h,
 * <= 6.17) / mem_cgroup_sk_under_memory_pressure() (include/net/sock.h, 6.18+):
 * the socket is throttled if its memcg or any ancestor has a live deadline.
 * Before ac8a52962164 (v6.6) v1 also honoured memcg->tcpmem_pressure on the
 * socket's own memcg; on fixed v1 kernels vmpressure no longer sets
 * socket_pressure at all, so testing both is exact on either side. */
static __always_inline bool memcg_under_pressure(struct mem_cgroup *memcg)
{
	u64 now = bpf_jiffies64();
	bool narrow = bpf_core_field_size(memcg->socket_pressure) == 4 &&
		      !bpf_core_field_exists(((struct mem_cgroup___u64 *)memcg)->socket_pressure);

	if (targ_v1 && bpf_core_field_exists(memcg->tcpmem_pressure) &&
	    BPF_CORE_READ(memcg, tcpmem_pressure))
		return true;
#pragma unroll
	for (int i = 0; i < SP_MAX_DEPTH; i++) {
		struct cgroup_subsys_state *parent;

		if (jiffies_before(now, memcg_deadline(memcg), narrow))
			return true;
		parent = BPF_CORE_READ(memcg, css.parent); /* == parent_mem_cgroup() */
		if (!parent)
			break;
		/* css is the first member of struct mem_cgroup; use the relocated
		 * offset anyway instead of assuming it. */
		memcg = (void *)parent - bpf_core_field_offset(struct mem_cgroup, css);
	}
	return false;
}

static __always_inline u64 memcg_cgroup_id(struct mem_cgroup *memcg)
{
	return BPF_CORE_READ(memcg, css.cgroup, kn, id);
}

/* The value of `key` in a hash map of per-cgroup counters, inserted as
 * `zero` on first use. BPF_NOEXIST: another CPU may insert it first, so look
 * up again either way. NULL, counted as lost, when the map is full. */
static __always_inline void *lookup_or_init(void *map, const void *key, const void *zero)
{
	void *v = bpf_map_lookup_elem(map, key);

	if (v)
		return v;
	bpf_map_update_elem(map, key, zero, BPF_NOEXIST);
	v = bpf_map_lookup_elem(map, key);
	if (!v)
		stat_inc(SP_STAT_LOST);
	return v;
}

#endif /* SP_COMMON_BPF_H */
