// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Clamped-socket census in the kernel: one walk of the TCP socket table of a
 * network namespace (iter/tcp, net/ipv4/tcp_ipv4.c, v5.9+) counts sockets and
 * clamped sockets per cgroup into a hash map; nothing per socket crosses to
 * userspace. The iterator walks the namespace of the task that created the
 * iterator fd (bpf_iter_init_seq_net), so the agent creates one fd per
 * network namespace from a thread that setns()-ed there.
 *
 * The clamp signature is the sock_diag tier's (IsMemcgClamp in
 * exporter/sources/sock_diag/sock_diag_source.cc), so both tiers count the
 * same sockets: tcp_adjust_rcv_ssthresh() (include/net/tcp.h) leaves
 * rcv_ssthresh == 4*advmss while data flows; a receive buffer whose usable
 * half is <= 4*advmss (SO_RCVBUF, tcp_clamp_window()) explains a small
 * window by itself and is not a memcg clamp. */
#include "sp_common.bpf.h"

#define TCP_TIME_WAIT 6
#define TCP_LISTEN 10
#define TCP_NEW_SYN_RECV 12

/* Filled by one census (all namespaces), read and emptied by the agent. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SP_MAX_CGROUPS);
	__type(key, struct sp_census_key);
	__type(value, struct sp_census_val);
} census SEC(".maps");

/* tp comes from bpf_skc_to_tcp_sock(): a trusted pointer, so plain loads
 * (CO-RE relocated by preserve_access_index) replace bpf_probe_read_kernel()
 * calls; this runs once per socket of the node. */
static __always_inline bool looks_clamped(struct tcp_sock *tp, struct sock *sk)
{
	u32 advmss = tp->advmss;
	int rcvbuf;

	if (!advmss || !tp->bytes_received)
		return false;
	if (tp->rcv_ssthresh != 4 * advmss)
		return false;
	rcvbuf = sk->sk_rcvbuf;
	return rcvbuf > 0 && (u32)rcvbuf / 2 > 4 * advmss;
}

/* Counts for the key of the previous socket, flushed into the map when the
 * key changes and at the end of the walk: most sockets of a node belong to a
 * few cgroups, so most sockets cost no map lookup. One walk at a time (the
 * agent's sampler thread is the only reader). */
struct sp_census_key acc_key;
struct sp_census_val acc;

static __always_inline void flush(void)
{
	struct sp_census_val *val;

	if (!acc.sockets)
		return;
	val = bpf_map_lookup_elem(&census, &acc_key);
	if (!val) {
		if (bpf_map_update_elem(&census, &acc_key, &acc, BPF_NOEXIST) == 0)
			goto done;
		val = bpf_map_lookup_elem(&census, &acc_key);
		if (!val) {
			stat_inc(SP_STAT_LOST); /* more cgroups than SP_MAX_CGROUPS */
			goto done;
		}
	}
	val->sockets += acc.sockets;
	val->clamped += acc.clamped;
done:
	acc.sockets = 0;
	acc.clamped = 0;
}

SEC("iter/tcp")
int tcp_census(struct bpf_iter__tcp *ctx)
{
	struct sock_common *skc = ctx->sk_common;
	struct mem_cgroup *memcg;
	struct tcp_sock *tp;
	struct sock *sk;
	u64 id = 0;
	u32 kind;
	u8 state;

	if (!skc) {
		/* Called once more with NULL only when the walk completed
		 * (bpf_iter_tcp_seq_stop): flush, and tell the agent it saw
		 * every socket. */
		u64 done = SP_CENSUS_DONE;

		flush();
		bpf_seq_write(ctx->meta->seq, &done, sizeof(done));
		return 0;
	}
	/* Same states as the sock_diag dump: no listeners, no mini sockets. */
	state = skc->skc_state;
	if (state == TCP_LISTEN || state == TCP_TIME_WAIT || state == TCP_NEW_SYN_RECV)
		return 0;
	tp = bpf_skc_to_tcp_sock(skc);
	if (!tp)
		return 0;
	sk = (struct sock *)tp;
	stat_inc(SP_STAT_RUNS);

	memcg = sk->sk_memcg;
	if (memcg) {
		kind = SP_CENSUS_MEMCG;
		id = memcg_cgroup_id(memcg);
	} else {
		stat_inc(SP_STAT_NO_MEMCG);
		kind = SP_CENSUS_UNIFIED;
		if (bpf_core_field_exists(sk->sk_cgrp_data.cgroup))
			id = BPF_CORE_READ(sk, sk_cgrp_data.cgroup, kn, id);
	}
	if (id != acc_key.id || kind != acc_key.kind) {
		flush();
		acc_key.id = id;
		acc_key.kind = kind;
	}
	acc.sockets++;
	if (looks_clamped(tp, sk)) {
		acc.clamped++;
		stat_inc(SP_STAT_CLAMPS);
	}
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
