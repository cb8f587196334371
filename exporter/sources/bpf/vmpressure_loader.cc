#include "exporter/sources/bpf/vmpressure_loader.h"

#include <bpf/btf.h>

#include <algorithm>

#include "absl/strings/str_join.h"
#include "exporter/sources/bpf/bpf_maps.h"
#include "sockpressure_bpf.h"
#include "vmpressure.skel.h"

namespace sockpressure {
namespace {

// The parameter names of vmpressure() in the running kernel's BTF.
std::vector<std::string> VmpressureParams(const btf* vmlinux) {
  std::vector<std::string> names;
  int fid = btf__find_by_name_kind(vmlinux, "vmpressure", BTF_KIND_FUNC);
  if (fid <= 0) return names;
  const btf_type* func = btf__type_by_id(vmlinux, static_cast<uint32_t>(fid));
  const btf_type* proto = btf__type_by_id(vmlinux, func->type);
  const btf_param* params = btf_params(proto);
  for (int i = 0; i < btf_vlen(proto); ++i) names.push_back(btf__name_by_offset(vmlinux, params[i].name_off));
  return names;
}

}  // namespace

VmpressureLoader::VmpressureLoader() : ProgramLoader({sp_vmpressure__open, sp_vmpressure__load, sp_vmpressure__destroy}) {}

std::unique_ptr<VmpressureLoader> VmpressureLoader::Attach(const BpfEnv& env,
                                                           const std::vector<std::string>& attach_types,
                                                           ProbeLog& log) {
  // The argument positions come from the kernel's own prototype: 6.1 is
  // (gfp, memcg, tree, scanned, reclaimed); a newer kernel may add `order`
  // (docs/kernel.md §2). Each layout has its own entry program.
  if (!env.HasBtfFunc("vmpressure")) {
    for (const std::string& a : attach_types) log.Skip("vmpressure", a, "vmpressure not in kernel BTF");
    return nullptr;
  }
  const std::vector<std::string> names = VmpressureParams(env.vmlinux);
  const std::vector<std::string> v61 = {"gfp", "memcg", "tree", "scanned", "reclaimed"};
  const std::vector<std::string> with_order = {"gfp", "order", "memcg", "tree", "scanned", "reclaimed"};
  const bool order = names == with_order;
  if (names != v61 && !order) {
    for (const std::string& a : attach_types) {
      log.Skip("vmpressure", a, absl::StrCat("unknown prototype vmpressure(", absl::StrJoin(names, ", "), ")"));
    }
    return nullptr;
  }
  std::unique_ptr<VmpressureLoader> v(new VmpressureLoader());
  for (const std::string& attach : attach_types) {
    if (attach == "kprobe" && !KallsymsHas(env.procfs, "vmpressure")) {
      log.Skip("vmpressure", attach, "vmpressure not in kallsyms");
      continue;
    }
    if (attach != "fentry" && attach != "kprobe") continue;
    const bool fentry = attach == "fentry";
    std::string why = v->skel_.Load(
        [&](sp_vmpressure* s) -> Skeleton<sp_vmpressure>::Programs {
          s->rodata->targ_v1 = env.v1;
          if (fentry) {
            return {order ? std::make_pair(std::string("vmp_fentry_order"), s->progs.vmp_fentry_order)
                          : std::make_pair(std::string("vmp_fentry"), s->progs.vmp_fentry),
                    {"vmp_fexit", s->progs.vmp_fexit}};
          }
          return {order ? std::make_pair(std::string("vmp_kprobe_order"), s->progs.vmp_kprobe_order)
                        : std::make_pair(std::string("vmp_kprobe"), s->progs.vmp_kprobe),
                  {"vmp_kretprobe", s->progs.vmp_kretprobe}};
        },
        &bpf_program__attach, fentry ? "" : " (kernel without kprobes?)");
    if (!why.empty()) {
      log.Skip("vmpressure", attach, why);
      continue;
    }
    v->tier_ = fentry ? Tier::kFentry : Tier::kKprobe;
    v->stats_fd_ = bpf_map__fd(v->skel_->maps.stats);
    log.Attached("vmpressure", attach);
    return v;
  }
  return nullptr;
}

uint64_t VmpressureLoader::Collect(Sample& sample, int hz_in, bool program_stats, bool socket_pressure) {
  auto& reclaim = sample.reclaim[tier_];
  // Not created unless served: a tier's map in the sample is its reading.
  auto* pressure = socket_pressure ? &sample.pressure[tier_] : nullptr;
  const uint64_t now_ns = MonotonicNs();
  const double hz = hz_in ? hz_in : 250;
  std::vector<uint64_t> stats = Stats();
  reclaim_.Read(bpf_map__fd(skel_->maps.reclaim), stats[SP_STAT_COUNTED], [&](uint64_t id, const sp_reclaim_val& v) {
    ReclaimCounters& r = reclaim[id];
    r.scanned = v.scanned;
    r.reclaimed = v.reclaimed;
    for (int i = 0; i < 3; ++i) r.windows[i] = v.windows[i];
    r.assertions = v.assertions;
    if (!pressure) return;
    // The deadline is jiffies-based; the assertion time is CLOCK_MONOTONIC
    // (bpf_ktime_get_ns), so the part still ahead of us is known in ns.
    double until = static_cast<double>(v.last_assert_ns) + static_cast<double>(v.last_remaining_jiffies) * 1e9 / hz;
    double ahead = std::max(0.0, until - static_cast<double>(now_ns)) * 1e-9;
    PressureState& p = (*pressure)[id];
    p.assertions = v.assertions;
    p.active = v.assertions > 0 && ahead > 0;
    p.seconds = std::max(0.0, static_cast<double>(v.pressure_jiffies) / hz - ahead);
  });
  sample.MarkLive(Signal::kReclaim, tier_);
  if (socket_pressure) sample.MarkLive(Signal::kSocketPressure, tier_);
  return Finish(sample, program_stats, stats);
}

}  // namespace sockpressure
