#include "exporter/sources/source_flags.h"

#include <time.h>

#include <algorithm>
#include <initializer_list>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "exporter/sources/shared/capabilities.h"
#include "exporter/sources/shared/privileged_worker.h"

namespace sockpressure {
namespace {

// Splits a comma list of eBPF attach types; an error when one is not in
// `allowed`.
absl::Status ParseAttachList(const char* flag, const std::string& text,
                             std::initializer_list<absl::string_view> allowed, std::vector<std::string>* out) {
  *out = absl::StrSplit(text, ',', absl::SkipEmpty());
  for (const std::string& a : *out) {
    if (std::find(allowed.begin(), allowed.end(), a) == allowed.end()) {
      return absl::InvalidArgumentError(absl::StrCat("--", flag, ": unknown attach type '", a, "'"));
    }
  }
  return absl::OkStatus();
}

// A collector that needs a capability to collect, run on the privileged
// worker (shared/privileged_worker.h), so that the sampler thread needs
// none. Its CPU time there is added to the sample's.
class OnPrivilegedWorker : public Source {
 public:
  explicit OnPrivilegedWorker(std::unique_ptr<Source> source) : source_(std::move(source)) {}
  absl::string_view name() const override { return source_->name(); }
  bool collects_on_worker() const override { return true; }
  absl::Status Collect(Sample& sample) override {
    absl::Status status;
    double cpu = 0;
    std::string err = PrivilegedWorker::Get().Run([&] {
      const double start = ThreadCpuSeconds();
      status = source_->Collect(sample);
      cpu = ThreadCpuSeconds() - start;
    });
    sample.worker_cpu_seconds += cpu;
    if (!err.empty() && status.ok()) return absl::InternalError(err);
    return status;
  }

 private:
  static double ThreadCpuSeconds() {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
  }
  std::unique_ptr<Source> source_;
};

}  // namespace

void RegisterSourceFlags(FlagSet* flags, SourceFlags* f) {
  // In --help order; the defaults are SourceFlags' initializers.
  flags->String("path.procfs", &f->paths.procfs, "procfs mountpoint.");
  flags->String("path.sysfs", &f->paths.sysfs, "sysfs mountpoint.");
  flags->String("path.cgroupfs", &f->paths.cgroupfs, "cgroupfs mountpoint (cgroup v2, or the v1 tmpfs).");
  flags->Duration("sample.interval", &f->interval, "How often the sampler reads the signal sources (cgroupfs, bpf).");
  flags->Duration("sample.context-interval", &f->context,
                  "How often the context collectors (kernel, swaps, netstat, sockstat, vmstat, bpf_census, "
                  "sock_diag) run while nothing moves on the node; every --sample.interval while reclaim, socket "
                  "pressure, clamps or prunes move or sockets are clamped. Their last reading is exported in "
                  "between.");
  flags->Int("cgroup.max", &f->cgroup_max,
             "Maximum memory cgroups to track: those with reclaim activity or socket memory (and their ancestors) "
             "first, then the shallowest; the rest are counted in sockpressure_cgroups_untracked.");
  flags->Duration("cgroup.full-pass-interval", &f->full_pass,
                  "How often every cgroup directory is listed again and every cgroup read whole, with the slow files "
                  "(limits, sizes, PSI); in between only the subtrees whose reclaim counters moved are read.");
  flags->String("cgroup.include", &f->cgroup_include,
                "Regular expression (ECMAScript) on the cgroup path: export only the cgroups it matches whole; the "
                "others fold into their nearest exported ancestor.");
  flags->String("cgroup.exclude", &f->cgroup_exclude,
                "Regular expression (ECMAScript) on the cgroup path: do not export the cgroups it matches whole; "
                "they fold into their nearest exported ancestor.");
  flags->String("cgroup.level", &f->cgroup_level,
                "On Kubernetes: all, pod (pod cgroups, containers folded into them) or container (container cgroups, "
                "not their pods); cgroups outside pods are always exported.");
  flags->Bool("signal.all-tiers", &f->all_tiers,
              "Also export every live tier's per-cgroup verdicts side by side (sockpressure_tier_*{source}); the cgroup "
              "iterator, which visits every memcg, then runs beside a vmpressure probe too.");
  flags->String("bpf.vmpressure-attach", &f->bpf_vmpressure_attach,
                "eBPF attach types to try for vmpressure(), best first (fentry, kprobe).");
  flags->String("bpf.clamps-attach", &f->bpf_clamps_attach,
                "eBPF attach types to try for window clamps, best first (fexit, kprobe, tp_btf, raw_tp).");
  flags->Bool("bpf.clamps-on-demand", &f->bpf_clamps_on_demand,
              "Attach the per-packet window-clamp program only while some memcg's socket pressure is live or about "
              "to be, and for 60 s after (it stays loaded); --no-bpf.clamps-on-demand keeps it attached all the "
              "time, as before, and keeps no capability for attaching it again.");
  flags->String("bpf.drops-attach", &f->bpf_drops_attach,
                "eBPF attach types to try for receive memory drops on skb:kfree_skb, best first (tp_btf, raw_tp).");
  flags->String("bpf.prunes-attach", &f->bpf_prunes_attach,
                "eBPF attach types to try for tcp_collapse/tcp_prune_ofo_queue, best first (fentry, kprobe).");
}

void RegisterCollectorFlags(FlagSet* flags, SourceFlags* f) {
  for (const CollectorSwitch& r : CollectorSwitches()) {
    f->collectors[r.name] = r.enabled_by_default;
    flags->Bool(absl::StrCat("collector.", r.name), &f->collectors[r.name],
                absl::StrCat("Enable the ", r.name, " collector: ", r.help, "."));
  }
}

absl::StatusOr<SourceContext> SourceContextFromFlags(const SourceFlags& f) {
  // A registry whose rows run a collector before one whose results it reads
  // would build, and its samples would be quietly wrong: refuse to start.
  if (absl::Status order = CheckCollectorOrder(RegisteredSources()); !order.ok()) return order;
  if (f.interval < absl::Milliseconds(100) || f.cgroup_max < 1) {
    return absl::InvalidArgumentError("--sample.interval must be >= 100ms and --cgroup.max >= 1");
  }
  SourceContext ctx;
  ctx.paths = f.paths;
  ctx.max_cgroups = static_cast<size_t>(f.cgroup_max);
  ctx.interval_seconds = absl::ToDoubleSeconds(f.interval);
  ctx.full_pass_seconds = absl::ToDoubleSeconds(f.full_pass);
  ctx.context_seconds = absl::ToDoubleSeconds(f.context);
  ctx.all_tiers = f.all_tiers;
  ctx.bpf_clamps_on_demand = f.bpf_clamps_on_demand;
  ApplyCollectorSwitches(f.collectors, &ctx);
  absl::Status s = ParseAttachList("bpf.vmpressure-attach", f.bpf_vmpressure_attach, {"fentry", "kprobe"},
                                   &ctx.bpf_vmpressure_attach);
  if (s.ok()) {
    s = ParseAttachList("bpf.clamps-attach", f.bpf_clamps_attach, {"fexit", "kprobe", "tp_btf", "raw_tp"},
                        &ctx.bpf_clamps_attach);
  }
  if (s.ok()) {
    s = ParseAttachList("bpf.drops-attach", f.bpf_drops_attach, {"tp_btf", "raw_tp"}, &ctx.bpf_drops_attach);
  }
  if (s.ok()) {
    s = ParseAttachList("bpf.prunes-attach", f.bpf_prunes_attach, {"fentry", "kprobe"}, &ctx.bpf_prunes_attach);
  }
  if (!s.ok()) return s;
  return ctx;
}

std::vector<std::unique_ptr<Source>> NewEnabledSources(const SourceContext& ctx, std::vector<std::string>* names) {
  std::vector<std::unique_ptr<Source>> sources;
  for (const SourceRegistration& r : RegisteredSources()) {
    if (!ctx.collectors.count(r.name)) continue;
    const int requests = CollectOnWorkerRequests();
    if (std::unique_ptr<Source> s = r.factory(ctx)) {
      if (CollectOnWorkerRequests() != requests) s = std::make_unique<OnPrivilegedWorker>(std::move(s));
      names->push_back(r.name);
      sources.push_back(std::move(s));
    }
  }
  return sources;
}

}  // namespace sockpressure
