// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Pruning and memory drops: what the kernel does to a receiver after the
 * window clamp, counted per memcg (sk->sk_memcg, as in clamps.bpf.c).
 *
 * tcp_data_queue() and tcp_data_queue_ofo() (net/ipv4/tcp_input.c) call
 * tcp_try_rmem_schedule() before queueing a segment. When the socket's
 * receive memory is over sk_rcvbuf or sk_rmem_schedule() fails (memcg
 * socket pressure, tcp_mem), it calls tcp_prune_queue(), which counts
 * PruneCalled, collapses the out-of-order queue and then the receive queue
 * with tcp_collapse() (TCPRcvCollapsed, one per skb merged away), prunes the
 * out-of-order queue with tcp_prune_ofo_queue() (OfoPruned, each skb freed
 * with SKB_DROP_REASON_TCP_OFO_QUEUE_PRUNE) and, if that is still not enough,
 * gives up (RcvPruned). The caller then drops the arriving segment with
 * SKB_DROP_REASON_PROTO_MEM (TCPRcvQDrop in order, TCPOFODrop out of order).
 *
 * What can be observed, checked against the BTF of 6.1, 6.12 and 6.18
 * (tests/lab/core_fields.py):
 *   tcp_prune_queue        inlined into tcp_try_rmem_schedule on all three:
 *                          no symbol, so PruneCalled has no per-socket twin
 *   tcp_try_rmem_schedule  traceable, but called for every segment queued
 *                          on the slow path: tracing it would put a handler
 *                          on the hot receive path
 *   tcp_collapse           traceable; called only by tcp_prune_queue (with
 *                          the receive queue: `list` != NULL) and by
 *                          tcp_collapse_ofo_queue (with `root`): cold
 *   tcp_prune_ofo_queue    traceable; (sk) on 6.1, (sk, in_skb) on 6.12;
 *                          counts OfoPruned iff the out-of-order queue is
 *                          not empty, which we read at entry: cold
 *   skb:kfree_skb          fires for drops only (consume_skb has its own
 *                          tracepoint), with the reason since 5.17 (PROTO_MEM
 *                          and TCP_OFO_QUEUE_PRUNE exist on 6.1) and the
 *                          receiving socket (rx_sk) since 6.11; before
 *                          that only skb->sk, which is set for queued
 *                          (owned) skbs such as pruned out-of-order ones,
 *                          but not for an arriving segment (tcp_v4_rcv does
 *                          not set it; early demux does, and loopback never
 *                          early-demuxes: its skbs carry a dst)
 *
 * Two handlers, each with several entry points; the agent loads each from
 * its own skeleton instance (one refused program fails the whole object) and
 * enables one entry point of each:
 *   drops:     tp_btf/kfree_skb (with rx_sk, or without) -> raw_tp/kfree_skb
 *   functions: fentry/tcp_collapse + fentry/tcp_prune_ofo_queue ->
 *              kprobe/tcp_collapse + kprobe/tcp_prune_ofo_queue
 * None of them runs on a receive that prunes and drops nothing. */
#include "sp_common.bpf.h"

#define SP_TCP_TIME_WAIT 6     /* include/net/tcp_states.h */
#define SP_TCP_NEW_SYN_RECV 12
#define SP_IPPROTO_TCP 6

/* cgroup id of the socket's memcg -> counters. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SP_MAX_CGROUPS);
	__type(key, u64);
	__type(value, struct sp_prune_val);
} prunes SEC(".maps");

enum sp_prune_field { F_RCV_MEM_DROPS, F_OFO_PRUNED_SEGS, F_COLLAPSES, F_OFO_PRUNES };

static __always_inline void count(struct sock *sk, enum sp_prune_field f)
{
	struct mem_cgroup *memcg = BPF_CORE_READ(sk, sk_memcg);
	struct sp_prune_val zero = {}, *v;
	u64 id;

	if (!memcg) {
		stat_inc(SP_STAT_NO_MEMCG);
		return;
	}
	id = memcg_cgroup_id(memcg);
	v = lookup_or_init(&prunes, &id, &zero);
	if (!v)
		return;
	switch (f) {
	case F_RCV_MEM_DROPS: __sync_fetch_and_add(&v->rcv_mem_drops, 1); break;
	case F_OFO_PRUNED_SEGS: __sync_fetch_and_add(&v->ofo_pruned_segs, 1); break;
	case F_COLLAPSES: __sync_fetch_and_add(&v->collapses, 1); break;
	case F_OFO_PRUNES: __sync_fetch_and_add(&v->ofo_prunes, 1); break;
	}
	stat_inc(SP_STAT_COUNTED);
}

/* --- drops: skb:kfree_skb ------------------------------------------------ */

static __always_inline int handle_drop(struct sk_buff *skb, u32 reason, struct sock *rx_sk)
{
	enum sp_prune_field f;
	struct sock *sk;
	u8 state;

	/* The reasons' values differ between kernels: CO-RE relocates them
	 * from the running kernel's enum skb_drop_reason. */
	if (!bpf_core_enum_value_exists(enum skb_drop_reason, SKB_DROP_REASON_PROTO_MEM) ||
	    !bpf_core_enum_value_exists(enum skb_drop_reason, SKB_DROP_REASON_TCP_OFO_QUEUE_PRUNE))
		return 0;
	if (reason == bpf_core_enum_value(enum skb_drop_reason, SKB_DROP_REASON_PROTO_MEM))
		f = F_RCV_MEM_DROPS;
	else if (reason == bpf_core_enum_value(enum skb_drop_reason, SKB_DROP_REASON_TCP_OFO_QUEUE_PRUNE))
		f = F_OFO_PRUNED_SEGS;
	else
		return 0; /* every other drop cause: the common case, two compares */

	stat_inc(SP_STAT_RUNS);
	/* rx_sk: the socket the kernel was receiving for (sk_skb_reason_drop(),
	 * 6.11+); else the skb's owner. */
	sk = rx_sk ? rx_sk : BPF_CORE_READ(skb, sk);
	if (!sk) {
		stat_inc(SP_STAT_NO_SOCK);
		return 0;
	}
	/* Request and time-wait sockets are not full sockets: they end at
	 * sock_common and have neither sk_protocol nor sk_memcg. */
	state = BPF_CORE_READ(sk, __sk_common.skc_state);
	if (state == SP_TCP_TIME_WAIT || state == SP_TCP_NEW_SYN_RECV)
		return 0;
	/* PROTO_MEM is also UDP's reason for a failed memory charge
	 * (__udp_queue_rcv_skb); only TCP receivers are counted here. */
	if (BPF_CORE_READ(sk, sk_protocol) != SP_IPPROTO_TCP)
		return 0;
	count(sk, f);
	return 0;
}

/* Two programs per attach type, drop_<type>_rx and drop_<type>:
 *   kfree_skb(skb, location, reason, rx_sk): 6.11+ (include/trace/events/skb.h);
 *   kfree_skb(skb, location, reason): up to 6.10. A program reading a fifth
 *   argument is refused there, hence two programs. */
#define DROP_PROGS(type)                                                                                \
	SEC("?" #type "/kfree_skb")                                                                     \
	int BPF_PROG(drop_##type##_rx, struct sk_buff *skb, void *location, u32 reason, struct sock *rx_sk) \
	{                                                                                               \
		return handle_drop(skb, reason, rx_sk);                                                 \
	}                                                                                               \
	SEC("?" #type "/kfree_skb")                                                                     \
	int BPF_PROG(drop_##type, struct sk_buff *skb, void *location, u32 reason)                      \
	{                                                                                               \
		return handle_drop(skb, reason, NULL);                                                  \
	}

DROP_PROGS(tp_btf)
DROP_PROGS(raw_tp)

/* --- functions: tcp_collapse, tcp_prune_ofo_queue ------------------------ */

/* tcp_collapse(sk, list, root, head, tail, start, end): `list` is the receive
 * queue when tcp_prune_queue() collapses it, NULL when tcp_collapse_ofo_queue()
 * passes the out-of-order tree in `root`. One receive-queue pass per
 * tcp_prune_queue() call that got past the clamp and found data queued. */
static __always_inline int handle_collapse(struct sock *sk, void *list)
{
	stat_inc(SP_STAT_RUNS);
	if (list)
		count(sk, F_COLLAPSES);
	return 0;
}

/* tcp_prune_ofo_queue() returns at once on an empty out-of-order queue and
 * otherwise counts OfoPruned and frees at least one skb: reading the tree's
 * root at entry says which, without an exit probe (and without the return
 * value, whose position differs between (sk) on 6.1 and (sk, in_skb)
 * on 6.12). */
static __always_inline int handle_prune_ofo(struct sock *sk)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;

	stat_inc(SP_STAT_RUNS);
	if (BPF_CORE_READ(tp, out_of_order_queue.rb_node))
		count(sk, F_OFO_PRUNES);
	return 0;
}

/* Two programs per attach type, collapse_<type> and prune_ofo_<type>; `prog`
 * is the libbpf macro that unpacks that type's context into arguments. */
#define FUNCTION_PROGS(type, prog)                                   \
	SEC("?" #type "/tcp_collapse")                               \
	int prog(collapse_##type, struct sock *sk, void *list)        \
	{                                                            \
		return handle_collapse(sk, list);                    \
	}                                                            \
	SEC("?" #type "/tcp_prune_ofo_queue")                        \
	int prog(prune_ofo_##type, struct sock *sk)                  \
	{                                                            \
		return handle_prune_ofo(sk);                         \
	}

FUNCTION_PROGS(fentry, BPF_PROG)
FUNCTION_PROGS(kprobe, BPF_KPROBE)

char LICENSE[] SEC("license") = "Dual BSD/GPL";
