/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Minimal hand-written kernel types for CO-RE.
 *
 * Why not vmlinux.h: generating it needs /sys/kernel/btf/vmlinux on the build
 * machine (docs/kernel.md §5). Every struct below carries preserve_access_index,
 * so clang records each field access as a CO-RE relocation and libbpf patches
 * the real offsets from the running kernel's BTF at load time. Only the fields
 * we read are declared; their order and the padding here are irrelevant.
 */
#ifndef SP_CORE_H
#define SP_CORE_H

#include <linux/types.h>
#include <linux/bpf.h>
/* The kprobe context: struct pt_regs on x86-64 (UAPI layout == kernel layout), struct user_pt_regs on
 * arm64 (the head of the kernel's pt_regs); bpf/CMakeLists.txt puts the target's UAPI dir first. */
#include <asm/ptrace.h>

typedef __u8 u8;
typedef __u16 u16;
typedef __u32 u32;
typedef __u64 u64;
typedef __s32 s32;
typedef __s64 s64;
typedef _Bool bool;
#define true 1
#define false 0

#pragma clang attribute push(__attribute__((preserve_access_index)), apply_to = record)

/* include/linux/kernfs.h: `u64 id` since v5.5 (kernfs_node_id union before). */
struct kernfs_node {
	u64 id;
};

/* include/linux/cgroup-defs.h. subsys[] is indexed by enum cgroup_subsys_id,
 * whose values depend on the kernel config: resolved with bpf_core_enum_value. */
struct cgroup_subsys_state;
struct cgroup {
	struct kernfs_node *kn;
	struct cgroup_subsys_state *subsys[16];
	int level;
};

struct cgroup_subsys_state {
	struct cgroup *cgroup;
	struct cgroup_subsys_state *parent;
};

enum cgroup_subsys_id {
	memory_cgrp_id = 4, /* value relocated by bpf_core_enum_value() */
};

/* include/net/dropreason-core.h (5.17+). The values move between kernels
 * (PROTO_MEM is 16 on 6.1, 19 on 6.12, 20 on 6.18): always read through
 * bpf_core_enum_value(), never these placeholders. */
enum skb_drop_reason {
	SKB_DROP_REASON_PROTO_MEM = 1,
	SKB_DROP_REASON_TCP_OFO_QUEUE_PRUNE = 2,
};

/* mm/vmpressure.c state embedded in the memcg (include/linux/vmpressure.h). */
struct vmpressure {
	unsigned long scanned;
	unsigned long reclaimed;
};

/* include/linux/memcontrol.h. socket_pressure: `unsigned long` jiffies
 * deadline up to ~v6.17, `u64` from ~v6.18 (mem_cgroup_set_socket_pressure).
 * Both flavors are declared so bpf_core_field_size() picks the real width;
 * tcpmem_pressure and tcpmem_active exist only with cgroup v1
 * (CONFIG_MEMCG_V1 from 6.11). */
struct mem_cgroup {
	struct cgroup_subsys_state css;
	struct vmpressure vmpressure;
	unsigned long socket_pressure;
	int tcpmem_pressure;
	bool tcpmem_active;
};
struct mem_cgroup___u64 {
	u64 socket_pressure;
};

/* include/net/sock.h. sock_cgroup_data holds a cgroup pointer since v5.15
 * (8520e224f547); older kernels packed it into a u64 and have no `cgroup`
 * member, which bpf_core_field_exists() detects. */
struct sock_common {
	unsigned short skc_family;
	unsigned char skc_state;
};
struct sock_cgroup_data {
	struct cgroup *cgroup;
};
struct sock {
	struct sock_common __sk_common;
	u16 sk_protocol; /* u16 since 5.6 (bfdfa51702de); earlier a bitfield */
	int sk_rcvbuf;
	struct sock_cgroup_data sk_cgrp_data;
	struct mem_cgroup *sk_memcg;
};

/* include/linux/tcp.h: fields were reordered into cache-line groups in 6.8,
 * hence CO-RE and never fixed offsets. */
struct rb_node;
struct rb_root {
	struct rb_node *rb_node;
};
struct tcp_sock {
	u32 rcv_ssthresh;
	u16 advmss;
	u64 bytes_received;
	struct rb_root out_of_order_queue; /* empty <=> rb_node == NULL */
};

/* include/linux/skbuff.h: the owning socket (set by skb_set_owner_r() for
 * queued data, by early demux for some arrivals; NULL otherwise). */
struct sk_buff {
	struct sock *sk;
};

/* kernel/bpf/cgroup_iter.c */
struct seq_file;
struct bpf_iter_meta {
	struct seq_file *seq;
	u64 session_id;
	u64 seq_num;
};
struct bpf_iter__cgroup {
	struct bpf_iter_meta *meta;
	struct cgroup *cgroup;
};

/* net/ipv4/tcp_ipv4.c (v5.9+): one call per socket of the iterator's
 * network namespace, IPv4 and IPv6 alike (both live in tcp_hashinfo). */
struct bpf_iter__tcp {
	struct bpf_iter_meta *meta;
	struct sock_common *sk_common;
};

#pragma clang attribute pop

#endif /* SP_CORE_H */
