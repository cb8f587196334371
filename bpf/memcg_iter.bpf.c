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

/* Set by the agent when the walk no longer fits one read(): cgroup_iter
 * cannot resume a walk across read() calls (cgroup_iter_seq_start returns
 * -EOPNOTSUPP for *pos > 0), so only cgroups that ever had socket pressure
 * are written out then. */
bool only_pressured = false;

SEC("iter/cgroup")
int memcg_iter(struct bpf_iter__cgroup *ctx)
{
	struct seq_file *seq = ctx->meta->seq;
	struct cgroup *cgrp = ctx->cgroup;
	struct cgroup_subsys_state *css;
	struct mem_cgroup *memcg;
	struct sp_memcg_rec rec = {};
	int idx;

	if (!cgrp) /* end of walk (the iterator calls us once more with NULL) */
		return 0;
	stat_inc(SP_STAT_RUNS);
	idx = bpf_core_enum_value(enum cgroup_subsys_id, memory_cgrp_id);
	css = BPF_CORE_READ(cgrp, subsys[idx]);
	rec.cgroup_id = BPF_CORE_READ(cgrp, kn, id);
	rec.now = bpf_jiffies64();
	if (css) {
		memcg = (void *)css - bpf_core_field_offset(struct mem_cgroup, css);
		rec.flags |= SP_REC_HAS_MEMCG;
		rec.deadline = memcg_deadline(memcg);
		if (bpf_core_field_size(memcg->socket_pressure) == 4 &&
		    !bpf_core_field_exists(((struct mem_cgroup___u64 *)memcg)->socket_pressure))
			rec.flags |= SP_REC_DEADLINE_32;
		if (bpf_core_field_exists(memcg->tcpmem_pressure) && BPF_CORE_READ(memcg, tcpmem_pressure))
			rec.flags |= SP_REC_TCPMEM_PRESSURE;
	}
	if (only_pressured && !rec.deadline && !(rec.flags & SP_REC_TCPMEM_PRESSURE))
		return 0;
	bpf_seq_write(seq, &rec, sizeof(rec));
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
