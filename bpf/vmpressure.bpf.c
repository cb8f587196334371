// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Pressure verdicts: the kernel's own vmpressure() decisions per memcg.
 *
 * mm/vmpressure.c (v6.1):
 *   void vmpressure(gfp_t gfp, struct mem_cgroup *memcg, bool tree,
 *                   unsigned long scanned, unsigned long reclaimed)
 * For tree=false and a non-root memcg it adds scanned/reclaimed to
 * memcg->vmpressure.{scanned,reclaimed}; once >= vmpressure_win (512 pages)
 * it resets both, computes the level and, above LOW, sets
 * memcg->socket_pressure = jiffies + HZ.
 *
 * We read the vmpressure accumulators and the deadline on entry and exit:
 *   - the call was accounted if the accumulator changed (it is untouched when
 *     the gfp mask filter or !scanned returns early);
 *   - a window completed if the accumulator was reset (after < before+scanned);
 *     its level is recomputed from before+args exactly as
 *     vmpressure_calc_level() does;
 *   - socket pressure was (re)asserted if the deadline moved forward, counted
 *     once per new deadline value however many calls saw it move.
 * Two argument layouts exist, each with its own entry programs: the 5.10-6.x
 * (gfp, memcg, tree, scanned, reclaimed) and 7.x's (gfp, order,
 * memcg, tree, scanned, reclaimed). The agent reads the FUNC_PROTO parameter
 * names from the kernel BTF and enables the matching pair, or skips the tier
 * when the prototype is neither. (Selecting the argument at run time from a
 * rodata index does not work: clang merges the switch arms into one load
 * from a computed ctx offset, which the verifier rejects.) Entry/exit hand-over is keyed
 * by pid_tgid: vmpressure runs in process context (kswapd or the reclaiming
 * task) and does not nest. Another CPU reclaiming the same memcg between our
 * entry and exit reads can blur one window's attribution (the kernel's own
 * sr_lock is not ours to take); the page totals stay right.
 *
 * `tree` is taken as a u64 and narrowed by hand, never declared `bool`: the
 * x86-64 trampoline stores only an argument's own bytes into its 8-byte ctx
 * slot (one byte for a bool), and a caller may leave garbage above a bool in
 * its register, so the slot's upper bytes are whatever was there before.
 * BPF_PROG/BPF_KPROBE convert the whole slot to the declared type, and a
 * conversion to bool is "!= 0": with stale upper bytes every call read as
 * tree=true and was skipped. Seen on Debian's 5.10 in 4 of 5 boots (63,388
 * runs, 28,433 of CPU 0's all skipped, A counted once), docs/kernel.md. */
#include "sp_common.bpf.h"

#define VMPRESSURE_WIN 512 /* SWAP_CLUSTER_MAX * 16, mm/vmpressure.c */

struct entry {
	struct mem_cgroup *memcg;
	u64 scanned, reclaimed;  /* arguments */
	u64 acc_scanned, acc_reclaimed, deadline;  /* state before the call */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SP_MAX_TASKS);
	__type(key, u64);
	__type(value, struct entry);
} entries SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SP_MAX_CGROUPS);
	__type(key, u64);
	__type(value, struct sp_reclaim_val);
} reclaim SEC(".maps");

/* The low byte of the slot is the bool; see the header for why the rest is not read. */
static __always_inline bool arg_bool(u64 slot)
{
	return (u8)slot != 0;
}

static __always_inline int on_entry(struct mem_cgroup *memcg, bool tree, u64 scanned, u64 reclaimed)
{
	u64 tid = bpf_get_current_pid_tgid();
	struct entry e = {};

	stat_inc(SP_STAT_RUNS);
	/* tree=true is the v1 memory.pressure_level path; it never sets socket
	 * pressure. The root memcg has no parent css and is skipped by the
	 * kernel too (mem_cgroup_is_root()). */
	if (tree || !memcg || !scanned || !BPF_CORE_READ(memcg, css.parent)) {
		stat_inc(SP_STAT_SKIPPED);
		return 0;
	}
	e.memcg = memcg;
	e.scanned = scanned;
	e.reclaimed = reclaimed;
	e.acc_scanned = BPF_CORE_READ(memcg, vmpressure.scanned);
	e.acc_reclaimed = BPF_CORE_READ(memcg, vmpressure.reclaimed);
	e.deadline = memcg_deadline(memcg);
	if (bpf_map_update_elem(&entries, &tid, &e, BPF_ANY))
		stat_inc(SP_STAT_LOST);
	return 0;
}

/* vmpressure_calc_level() + vmpressure_level(): 0 low, 1 medium, 2 critical. */
static __always_inline int calc_level(u64 scanned, u64 reclaimed)
{
	u64 scale = scanned + reclaimed, pressure = 0;

	if (reclaimed < scanned) {
		pressure = scale - (reclaimed * scale / scanned);
		pressure = pressure * 100 / scale;
	}
	if (pressure >= 95)
		return 2;
	if (pressure >= 60)
		return 1;
	return 0;
}

static __always_inline int on_exit(void)
{
	u64 tid = bpf_get_current_pid_tgid(), id, after_acc, deadline, now;
	struct sp_reclaim_val zero = {}, *v;
	struct mem_cgroup *memcg;
	struct entry *e;
	bool accounted, completed;

	e = bpf_map_lookup_elem(&entries, &tid);
	if (!e)
		return 0;
	/* Copy the pointer out first: BPF_CORE_READ(e->memcg, ...) would emit a
	 * CO-RE relocation against our own struct entry, absent from vmlinux. */
	memcg = e->memcg;
	after_acc = BPF_CORE_READ(memcg, vmpressure.scanned);
	deadline = memcg_deadline(memcg);
	completed = e->acc_scanned + e->scanned >= VMPRESSURE_WIN && after_acc < e->acc_scanned + e->scanned;
	accounted = completed || after_acc != e->acc_scanned;
	if (!accounted && deadline == e->deadline)
		goto out;
	id = memcg_cgroup_id(memcg);
	v = lookup_or_init(&reclaim, &id, &zero);
	if (!v)
		goto out;
	if (accounted) {
		__sync_fetch_and_add(&v->scanned, e->scanned);
		__sync_fetch_and_add(&v->reclaimed, e->reclaimed);
	}
	if (completed) {
		int level = calc_level(e->acc_scanned + e->scanned, e->acc_reclaimed + e->reclaimed);

		if (level == 2)
			__sync_fetch_and_add(&v->windows[2], 1);
		else if (level == 1)
			__sync_fetch_and_add(&v->windows[1], 1);
		else
			__sync_fetch_and_add(&v->windows[0], 1);
	}
	if (deadline != e->deadline && deadline != v->last_deadline) {
		/* Every call that entered before the move and exits after it sees the
		 * deadline change, its own or another CPU's: the first exit to see a
		 * value counts it, the others find it in last_deadline. A plain
		 * read-then-write, not a compare-and-swap (5.10 has no BPF cmpxchg):
		 * two exits within the same few instructions can still both count,
		 * where before every concurrent call did. */
		u64 prev = v->last_deadline, from;

		v->last_deadline = deadline;
		now = bpf_jiffies64();
		/* Extension of the throttled period: from the latest of the deadline
		 * we entered with, the last one counted and now, to the new one. */
		from = (s64)(e->deadline - now) > 0 ? e->deadline : now;
		if ((s64)(prev - from) > 0)
			from = prev;
		__sync_fetch_and_add(&v->assertions, 1);
		if ((s64)(deadline - from) > 0)
			__sync_fetch_and_add(&v->pressure_jiffies, deadline - from);
		v->last_assert_ns = bpf_ktime_get_ns();
		v->last_remaining_jiffies = (s64)(deadline - now) > 0 ? deadline - now : 0;
		stat_inc(SP_STAT_PRESSURED);
	}
	/* After the writes: the loader re-reads the map only when this moved. */
	stat_inc(SP_STAT_COUNTED);
out:
	bpf_map_delete_elem(&entries, &tid);
	return 0;
}

/* v6.1: vmpressure(gfp, memcg, tree, scanned, reclaimed) */
SEC("?fentry/vmpressure")
int BPF_PROG(vmp_fentry, u32 gfp, struct mem_cgroup *memcg, u64 tree, unsigned long scanned,
	     unsigned long reclaimed)
{
	return on_entry(memcg, arg_bool(tree), scanned, reclaimed);
}

/* 7.x (Debian's 7.2.13 has it): vmpressure(gfp, order, memcg, tree, scanned, reclaimed) */
SEC("?fentry/vmpressure")
int BPF_PROG(vmp_fentry_order, u32 gfp, int order, struct mem_cgroup *memcg, u64 tree, unsigned long scanned,
	     unsigned long reclaimed)
{
	return on_entry(memcg, arg_bool(tree), scanned, reclaimed);
}

SEC("?fexit/vmpressure")
int vmp_fexit(u64 *ctx)
{
	return on_exit();
}

SEC("?kprobe/vmpressure")
int BPF_KPROBE(vmp_kprobe, u32 gfp, struct mem_cgroup *memcg, u64 tree, unsigned long scanned,
	       unsigned long reclaimed)
{
	return on_entry(memcg, arg_bool(tree), scanned, reclaimed);
}

/* The 6th argument's register: libbpf 1.1's BPF_KPROBE and PT_REGS_PARMn stop at 5 (PT_REGS_PARM6 came
 * in libbpf 1.2). Every architecture the agent is built for needs this program: the loader picks it on
 * kernels with the 6-argument prototype. */
#if defined(PT_REGS_PARM6)
#define SP_KPROBE_PARM6(ctx) PT_REGS_PARM6(ctx)
#elif defined(bpf_target_x86)
#define SP_KPROBE_PARM6(ctx) (__PT_REGS_CAST(ctx)->r9) /* SysV x86-64: rdi rsi rdx rcx r8 r9 */
#elif defined(bpf_target_arm64)
#define SP_KPROBE_PARM6(ctx) (__PT_REGS_CAST(ctx)->regs[5]) /* AAPCS64: x0..x7 */
#else
#error "the 6th kprobe argument's register is not known for this __TARGET_ARCH (bpf/CMakeLists.txt)"
#endif

SEC("?kprobe/vmpressure")
int BPF_KPROBE(vmp_kprobe_order, u32 gfp, int order, struct mem_cgroup *memcg, u64 tree, unsigned long scanned)
{
	unsigned long reclaimed = SP_KPROBE_PARM6(ctx);
	return on_entry(memcg, arg_bool(tree), scanned, reclaimed);
}

SEC("?kretprobe/vmpressure")
int BPF_KRETPROBE(vmp_kretprobe)
{
	return on_exit();
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
