// The bpf and bpf_census collectors as the registry builds them, the same
// whether the eBPF programs are built in (bpf_source.cc, tcp_census_source.cc
// and the loaders) or not (bpf_stub.cc): from the flags, or, where the
// kernel, the privileges or the build cannot run them, reporting why.
#include <linux/capability.h>

#include "exporter/common/logging.h"
#include "exporter/sources/bpf/bpf_source.h"
#include "exporter/sources/bpf/tcp_census_source.h"
#include "exporter/sources/shared/capabilities.h"
#include "exporter/sources/shared/cgroup_mapper.h"
#include "exporter/sources/shared/kernel_probe.h"

namespace sockpressure {
namespace {

// Built without BPF, or no privilege: reports the probes as not attached.
class NoBpfSource final : public BpfSource {
 public:
  explicit NoBpfSource(std::string why) : why_(std::move(why)) {}
  absl::Status Collect(Sample& sample) override {
    if (!logged_) {
      logged_ = true;
      SP_LOG_INFO("eBPF tiers unavailable: ", why_, "; the agent runs on the cgroupfs and sock_diag tiers");
    }
    for (const char* p : kBpfProbeNames) sample.probes.push_back({p, "none", false, false});
    return absl::OkStatus();
  }
  std::vector<ProbeStatus> Probes() const override { return {}; }
  std::vector<uint64_t> Stats(absl::string_view) const override { return {}; }
  std::vector<std::pair<std::string, int>> ProgramFds() const override { return {}; }
  std::vector<uint64_t> LastIterCgroupIds() const override { return {}; }

 private:
  std::string why_;
  bool logged_ = false;
};

class BpfCensusSource final : public Source {
 public:
  explicit BpfCensusSource(const SourceContext& ctx) : paths_(ctx.paths), mapper_(ctx.paths.cgroupfs), netns_(ctx.paths.procfs) {
    std::string unusable = KernelTiersUnusableReason(paths_.cgroupfs);
    if (!unusable.empty()) {
      why_ = unusable;
      return;
    }
    census_ = TcpCensusIter::Open(&why_);
    if (census_) {
      // Iterator fds and map reads (BpfRuntimeCapabilities(): none on >= 6.5),
      // entering namespaces (CAP_SYS_ADMIN) and opening other users'
      // /proc/PID/ns/net (CAP_SYS_PTRACE).
      NeedCapabilities(BpfRuntimeCapabilities() | CapBit(CAP_SYS_ADMIN) | CapBit(CAP_SYS_PTRACE),
                       "TCP census iterator in every network namespace");
    }
  }
  absl::string_view name() const override { return "bpf_census"; }

  absl::Status Collect(Sample& sample) override {
    sample.probes.push_back({"tcp_census", census_ ? "iter" : "none", census_ != nullptr, census_ != nullptr});
    if (!census_) {
      if (!logged_) {
        logged_ = true;
        SP_LOG_INFO("eBPF TCP census off: ", why_, "; the socket census comes from sock_diag");
      }
      return absl::OkStatus();
    }
    TcpCensusResult r = census_->Run(netns_.List());
    if (absl::Status st = r.Check("bpf_census", "walked", &logged_); !st.ok()) return st;
    mapper_.Begin();
    auto& out = sample.census[Tier::kIter];
    for (const auto& [id, c] : r.by_memcg) out[id] += c;  // charged: already a memory cgroup id
    mapper_.AddCensus(r.by_cgroup2, sample, out);
    sample.MarkLive(Signal::kClampedSockets, Tier::kIter);
    sample.events_lost += census_->Lost();
    census_->AddProgramStats(sample, stats_flag_.Enabled());
    return absl::OkStatus();
  }

 private:
  Paths paths_;
  BpfStatsFlag stats_flag_{paths_.procfs, 0};  // read once per census
  CgroupMapper mapper_;
  NetnsScanner netns_;  // the namespace list, kept between samples
  std::unique_ptr<TcpCensusIter> census_;
  std::string why_;
  bool logged_ = false;
};

}  // namespace

std::unique_ptr<BpfSource> NewUnavailableBpfSource(std::string why) {
  return std::make_unique<NoBpfSource>(std::move(why));
}

std::unique_ptr<Source> NewBpfSourceFromFlags(const SourceContext& ctx) {
  BpfOptions o;
  o.paths = ctx.paths;
  std::string unusable = KernelTiersUnusableReason(ctx.paths.cgroupfs);
  if (!unusable.empty()) return NewUnavailableBpfSource(unusable);
  o.clamps = ctx.bpf_probes.clamps;
  o.pressure = ctx.bpf_probes.pressure;
  o.vmpressure = ctx.bpf_probes.vmpressure;
  o.all_tiers = ctx.all_tiers;
  o.clamps_on_demand = ctx.bpf_clamps_on_demand;
  o.context_seconds = ctx.context_seconds;
  if (!ctx.bpf_vmpressure_attach.empty()) o.vmpressure_attach = ctx.bpf_vmpressure_attach;
  if (!ctx.bpf_clamps_attach.empty()) o.clamp_attach = ctx.bpf_clamps_attach;
  o.prunes = ctx.bpf_probes.prunes;
  if (!ctx.bpf_drops_attach.empty()) o.drops_attach = ctx.bpf_drops_attach;
  if (!ctx.bpf_prunes_attach.empty()) o.prunes_attach = ctx.bpf_prunes_attach;
  return NewBpfSource(o);
}

std::unique_ptr<Source> NewBpfCensusSource(const SourceContext& ctx) {
  if (!ctx.collectors.count("bpf")) return nullptr;  // --no-collector.bpf: no eBPF at all
  return std::make_unique<BpfCensusSource>(ctx);
}

}  // namespace sockpressure
