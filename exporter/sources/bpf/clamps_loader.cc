#include "exporter/sources/bpf/clamps_loader.h"

#include <bpf/btf.h>

#include "absl/strings/str_cat.h"

#include "clamps.skel.h"
#include "exporter/sources/bpf/bpf_maps.h"
#include "sockpressure_bpf.h"

namespace sockpressure {

ClampsLoader::ClampsLoader() : ProgramLoader({sp_clamps__open, sp_clamps__load, sp_clamps__destroy}) {}

std::unique_ptr<ClampsLoader> ClampsLoader::Attach(const BpfEnv& env, const std::vector<std::string>& attach_types,
                                                   bool reattach, ProbeLog& log) {
  std::unique_ptr<ClampsLoader> c(new ClampsLoader());
  std::string once_only;  // the first attach type that attached but not again
  for (const std::string& attach : attach_types) {
    Tier tier;
    if (attach == "fexit") {
      tier = Tier::kFentry;
      if (!env.HasBtfFunc("__tcp_select_window")) {
        log.Skip("window_clamps", attach, "__tcp_select_window not in kernel BTF");
        continue;
      }
    } else if (attach == "kprobe") {
      tier = Tier::kKprobe;
      if (!KallsymsHas(env.procfs, "__tcp_select_window")) {
        log.Skip("window_clamps", attach, "__tcp_select_window not in kallsyms");
        continue;
      }
    } else if (attach == "tp_btf") {
      tier = Tier::kTpBtf;
      if (btf__find_by_name_kind(env.vmlinux, "btf_trace_tcp_rcv_space_adjust", BTF_KIND_TYPEDEF) <= 0) {
        log.Skip("window_clamps", attach, "no BTF for tracepoint tcp_rcv_space_adjust");
        continue;
      }
    } else if (attach == "raw_tp") {
      tier = Tier::kRawTp;
    } else {
      continue;
    }
    std::string why = c->skel_.Load(
        [&](sp_clamps* s) -> Skeleton<sp_clamps>::Programs {
          s->rodata->targ_v1 = env.v1;
          bpf_program* prog = attach == "fexit"    ? s->progs.clamp_fexit
                              : attach == "kprobe" ? s->progs.clamp_kprobe
                              : attach == "tp_btf" ? s->progs.clamp_tp_btf
                                                   : s->progs.clamp_raw_tp;
          return {{bpf_program__name(prog), prog}};
        },
        &bpf_program__attach, attach == "kprobe" ? " (kernel without kprobes?)" : "");
    if (!why.empty()) {
      log.Skip("window_clamps", attach, why);
      continue;
    }
    if (reattach) why = c->skel_.CheckRelink();
    if (!why.empty()) {
      // 5.10-5.12 with fexit: a lower tier that can come and go costs
      // nothing on a healthy node; the fexit one would cost every segment.
      log.Skip("window_clamps", attach,
               absl::StrCat("attaches once but not again after a detach (", why,
                            "; kernels before 5.13 refuse a tracing program's second attach), and clamps on "
                            "demand detach it"));
      if (once_only.empty()) once_only = attach;
      continue;
    }
    c->tier_ = tier;
    c->stats_fd_ = bpf_map__fd(c->skel_->maps.stats);
    log.Attached("window_clamps", attach);
    return c;
  }
  if (once_only.empty()) return nullptr;
  // No attach type comes back after a detach: keep the best one attached.
  c = Attach(env, {once_only}, false, log);
  if (c) c->reattachable_ = false;
  return c;
}

uint64_t ClampsLoader::Collect(Sample& sample, bool program_stats) {
  auto& by_id = sample.clamps[tier_];
  detached_reads_ = attached() ? 0 : detached_reads_ + 1;
  const bool stand = detached_reads_ > 2 && program_stats == held_timed_;
  if (!stand) held_stats_ = Stats();
  clamps_.Read(bpf_map__fd(skel_->maps.clamps), held_stats_[SP_STAT_CLAMPS],
               [&](uint64_t id, uint64_t n) { by_id[id].clamps = n; });
  sample.MarkLive(Signal::kWindowClamps, tier_);
  if (stand) {
    skel_.AddHeldProgramStats(sample, held_programs_);
    return held_stats_[SP_STAT_LOST];
  }
  const size_t before = sample.program_stats.size();
  const uint64_t lost = Finish(sample, program_stats, held_stats_);
  held_programs_.assign(sample.program_stats.begin() + static_cast<std::ptrdiff_t>(before), sample.program_stats.end());
  held_timed_ = program_stats;
  return lost;
}

}  // namespace sockpressure
