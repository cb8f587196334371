#include "exporter/sources/bpf/prunes_loader.h"

#include <bpf/btf.h>

#include <cstring>

#include "exporter/sources/bpf/bpf_maps.h"
#include "prunes.skel.h"
#include "sockpressure_bpf.h"

namespace sockpressure {
namespace {

// Arguments of the kfree_skb tracepoint after its context pointer: 3 up to
// 6.10, 4 once rx_sk was added (6.11). -1 without BTF for it.
int KfreeSkbArgs(const btf* vmlinux) {
  int id = btf__find_by_name_kind(vmlinux, "btf_trace_kfree_skb", BTF_KIND_TYPEDEF);
  if (id <= 0) return -1;
  const btf_type* t = btf__type_by_id(vmlinux, btf__resolve_type(vmlinux, static_cast<uint32_t>(id)));
  if (t && btf_is_ptr(t)) t = btf__type_by_id(vmlinux, t->type);
  if (!t || !btf_is_func_proto(t)) return -1;
  return static_cast<int>(btf_vlen(t)) - 1;
}

// Both drop reasons the program counts are enumerators of the kernel's enum
// skb_drop_reason. Without them the program would load and count nothing,
// which must not pass for a live tier (the enum itself is 5.17+; its TCP
// reasons came in later releases; 6.1 has both).
bool HasDropReasons(const btf* vmlinux) {
  int id = btf__find_by_name_kind(vmlinux, "skb_drop_reason", BTF_KIND_ENUM);
  if (id <= 0) return false;
  const btf_type* t = btf__type_by_id(vmlinux, static_cast<uint32_t>(id));
  bool mem = false, ofo = false;
  const struct btf_enum* e = btf_enum(t);
  for (uint16_t i = 0; i < btf_vlen(t); ++i) {
    const char* name = btf__name_by_offset(vmlinux, e[i].name_off);
    if (!name) continue;
    mem = mem || std::strcmp(name, "SKB_DROP_REASON_PROTO_MEM") == 0;
    ofo = ofo || std::strcmp(name, "SKB_DROP_REASON_TCP_OFO_QUEUE_PRUNE") == 0;
  }
  return mem && ofo;
}

}  // namespace

PrunesLoader::PrunesLoader(Kind kind)
    : ProgramLoader({sp_prunes__open, sp_prunes__load, sp_prunes__destroy}), kind_(kind) {}

std::unique_ptr<PrunesLoader> PrunesLoader::Attach(const BpfEnv& env, Kind kind,
                                                   const std::vector<std::string>& attach_types, ProbeLog& log) {
  const char* probe = kind == Kind::kDrops ? kDropsProbe : kFunctionsProbe;
  std::unique_ptr<PrunesLoader> p(new PrunesLoader(kind));
  const bool reasons = HasDropReasons(env.vmlinux);
  const int args = KfreeSkbArgs(env.vmlinux);
  for (const std::string& attach : attach_types) {
    Tier tier = Tier::kNone;
    if (kind == Kind::kDrops && (attach == "tp_btf" || attach == "raw_tp")) {
      tier = attach == "tp_btf" ? Tier::kTpBtf : Tier::kRawTp;
      if (!reasons || args < 3) {
        log.Skip(probe, attach, "no PROTO_MEM / TCP_OFO_QUEUE_PRUNE drop reasons in kernel BTF");
        continue;
      }
    } else if (kind == Kind::kFunctions && attach == "fentry") {
      tier = Tier::kFentry;
      if (!env.HasBtfFunc("tcp_collapse") || !env.HasBtfFunc("tcp_prune_ofo_queue")) {
        log.Skip(probe, attach, "tcp_collapse or tcp_prune_ofo_queue not in kernel BTF (inlined?)");
        continue;
      }
    } else if (kind == Kind::kFunctions && attach == "kprobe") {
      tier = Tier::kKprobe;
      if (!KallsymsHas(env.procfs, "tcp_collapse") || !KallsymsHas(env.procfs, "tcp_prune_ofo_queue")) {
        log.Skip(probe, attach, "tcp_collapse or tcp_prune_ofo_queue not in kallsyms (inlined?)");
        continue;
      }
    } else {
      continue;
    }
    std::string why = p->skel_.Load(
        [&](sp_prunes* s) -> Skeleton<sp_prunes>::Programs {
          s->rodata->targ_v1 = env.v1;
          auto& pr = s->progs;
          if (kind == Kind::kFunctions) {
            if (attach == "fentry") {
              return {{bpf_program__name(pr.collapse_fentry), pr.collapse_fentry},
                      {bpf_program__name(pr.prune_ofo_fentry), pr.prune_ofo_fentry}};
            }
            return {{bpf_program__name(pr.collapse_kprobe), pr.collapse_kprobe},
                    {bpf_program__name(pr.prune_ofo_kprobe), pr.prune_ofo_kprobe}};
          }
          // A program that reads rx_sk is refused where the tracepoint has
          // three arguments; without rx_sk an arriving segment's drop has
          // no socket (prunes.bpf.c).
          bpf_program* prog = attach == "tp_btf" ? (args >= 4 ? pr.drop_tp_btf_rx : pr.drop_tp_btf)
                                                 : (args >= 4 ? pr.drop_raw_tp_rx : pr.drop_raw_tp);
          return {{bpf_program__name(prog), prog}};
        },
        &bpf_program__attach, attach == "kprobe" ? " (kernel without kprobes?)" : "");
    if (!why.empty()) {
      log.Skip(probe, attach, why);
      continue;
    }
    p->tier_ = tier;
    p->stats_fd_ = bpf_map__fd(p->skel_->maps.stats);
    log.Attached(probe, attach);
    return p;
  }
  return nullptr;
}

uint64_t PrunesLoader::Collect(Sample& sample, bool program_stats) {
  auto& by_id = sample.prunes[tier_];
  const bool drops = kind_ == Kind::kDrops;
  std::vector<uint64_t> stats = Stats();
  prunes_.Read(bpf_map__fd(skel_->maps.prunes), stats[SP_STAT_COUNTED], [&](uint64_t id, const sp_prune_val& v) {
    PruneCounters& c = by_id[id];
    if (drops) {
      c.rcv_mem_drops = v.rcv_mem_drops;
      c.ofo_pruned_segs = v.ofo_pruned_segs;
    } else {
      c.collapses = v.collapses;
      c.ofo_prunes = v.ofo_prunes;
    }
  });
  sample.MarkLive(drops ? Signal::kRcvMemDrops : Signal::kTcpPrunes, tier_);
  return Finish(sample, program_stats, stats);
}

}  // namespace sockpressure
