// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Window clamps: count sockets whose receive window the kernel pulls down to
 * 4*advmss because their memcg is under socket pressure.
 *
 * The clamp itself is tcp_adjust_rcv_ssthresh() (include/net/tcp.h, 5.16+):
 * rcv_ssthresh = min(rcv_ssthresh, 4U * advmss), called from
 * __tcp_select_window() (tcp_output.c), tcp_grow_window() and
 * tcp_prune_queue() (tcp_input.c) when tcp_under_memory_pressure(sk). Those
 * helpers are static inline and cannot be traced, so we observe the socket
 * state instead: one handler, four entry points (best first):
 *   fexit/__tcp_select_window   state right after the clamp (global function)
 *   kprobe/__tcp_select_window  state at the next window selection (no
 *                               kretprobe needed: rcv_ssthresh stays clamped
 *                               until tcp_grow_window() raises it again, and
 *                               it cannot grow while the pressure lasts)
 *   tp_btf/tcp_rcv_space_adjust called from tcp_recvmsg on every read
 *   raw_tp/tcp_rcv_space_adjust same, for kernels without tp_btf
 * All are "?"-prefixed (not auto-loaded): the agent enables exactly one after
 * probing, because one program that fails to load fails the whole object.
 *
 * Attribution is to sk->sk_memcg, never the current task: __tcp_select_window
 * runs in softirq for ACKs. sk_memcg is NULL for root-memcg sockets, with
 * cgroup.memory=nosocket, and on v1 without memory.kmem.tcp.limit_in_bytes
 * (mem_cgroup_sk_alloc()); such sockets can never be memcg-throttled. */
#include "sp_common.bpf.h"

/* Sockets currently clamped (value 1). Only clamped sockets are inserted, and
 * the LRU evicts closed sockets, so the map stays bounded; we count
 * transitions into the clamped state, not every ACK. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, SP_MAX_SOCKETS);
	__type(key, u64);
	__type(value, u8);
} clamped_socks SEC(".maps");

/* At least the number of entries in clamped_socks (inserts add one, deletes
 * take one; LRU evictions take none, so it can only be too high). While it
 * is 0 an unclamped socket needs no map lookup: the common case, on every
 * receive, stays a few loads. */
__u64 clamped_live = 0; /* __u64: the skeleton header names this type */

/* cgroup id of the socket's memcg -> cumulative clamp transitions. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SP_MAX_CGROUPS);
	__type(key, u64);
	__type(value, u64);
} clamps SEC(".maps");

/* `btf`: sk is a BTF-typed argument (fexit, tp_btf), so fields are read with
 * plain loads the verifier checks against the kernel's BTF; kprobe and raw_tp
 * get a bare pointer and go through bpf_probe_read_kernel(). This handler
 * runs on every receive, and the helper call was most of its cost. */
#define SK_READ(btf, p, field) ((btf) ? (p)->field : BPF_CORE_READ(p, field))

static __always_inline int handle_sock(struct sock *sk, const bool btf)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct mem_cgroup *memcg;
	u64 key = (u64)sk, id, one = 1, *cnt;
	u32 ssthresh, advmss;
	u8 *state, on = 1;
	bool clamped;

	stat_inc(SP_STAT_RUNS);
	memcg = SK_READ(btf, sk, sk_memcg);
	if (!memcg) {
		stat_inc(SP_STAT_NO_MEMCG);
		return 0;
	}
	if (btf) {
		/* The BTF argument is a struct sock: tcp_sock fields beyond
		 * it need the verifier-checked cast. */
		tp = bpf_skc_to_tcp_sock(sk);
		if (!tp)
			return 0;
	}
	ssthresh = SK_READ(btf, tp, rcv_ssthresh);
	advmss = SK_READ(btf, tp, advmss);
	/* Window first: it is two loads, while the pressure test walks the
	 * memcg's ancestors, and almost every socket's window is above
	 * 4*advmss (the initial window is 10 segments). */
	clamped = advmss && ssthresh <= 4 * advmss && memcg_under_pressure(memcg);
	if (clamped)
		stat_inc(SP_STAT_PRESSURED);
	if (!clamped) {
		if (clamped_live && bpf_map_delete_elem(&clamped_socks, &key) == 0)
			__sync_fetch_and_add(&clamped_live, -1);
		return 0;
	}
	state = bpf_map_lookup_elem(&clamped_socks, &key);
	if (state)
		return 0; /* still clamped: same episode */
	if (bpf_map_update_elem(&clamped_socks, &key, &on, BPF_NOEXIST) == 0)
		__sync_fetch_and_add(&clamped_live, 1);
	id = memcg_cgroup_id(memcg);
	cnt = bpf_map_lookup_elem(&clamps, &id);
	if (cnt) {
		__sync_fetch_and_add(cnt, 1);
	} else if (bpf_map_update_elem(&clamps, &id, &one, BPF_NOEXIST)) {
		/* raced with another CPU inserting it, or the map is full */
		cnt = bpf_map_lookup_elem(&clamps, &id);
		if (cnt)
			__sync_fetch_and_add(cnt, 1);
		else
			stat_inc(SP_STAT_LOST);
	}
	stat_inc(SP_STAT_CLAMPS);
	return 0;
}

SEC("?fexit/__tcp_select_window")
int BPF_PROG(clamp_fexit, struct sock *sk, u32 ret)
{
	return handle_sock(sk, true);
}

SEC("?kprobe/__tcp_select_window")
int BPF_KPROBE(clamp_kprobe, struct sock *sk)
{
	return handle_sock(sk, false);
}

SEC("?tp_btf/tcp_rcv_space_adjust")
int BPF_PROG(clamp_tp_btf, struct sock *sk)
{
	return handle_sock(sk, true);
}

SEC("?raw_tp/tcp_rcv_space_adjust")
int BPF_PROG(clamp_raw_tp, struct sock *sk)
{
	return handle_sock(sk, false);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
