#include "exporter/sources/source_flags.h"

#include <algorithm>
#include <initializer_list>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

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

}  // namespace

void RegisterSourceFlags(FlagSet* flags, SourceFlags* f) {
  // One row a flag, {name, &field, help}, in --help order: the names and
  // texts are data (source_flags.json), the build writes the rows.
  flags->Add({
#include "exporter/sources/source_flags.inc"
  });
}

void RegisterCollectorFlags(FlagSet* flags, SourceFlags* f) {
  for (const CollectorSwitch& r : CollectorSwitches()) {
    f->collectors[r.name] = r.enabled_by_default;
    flags->Bool(absl::StrCat("collector.", r.name), &f->collectors[r.name],
                absl::StrCat("Enable the ", r.name, " collector: ", r.help, "."));
  }
}

absl::StatusOr<SourceContext> SourceContextFromFlags(const SourceFlags& f) {
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
    if (std::unique_ptr<Source> s = r.factory(ctx)) {
      names->push_back(r.name);
      sources.push_back(std::move(s));
    }
  }
  return sources;
}

}  // namespace sockpressure
