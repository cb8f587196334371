// The bpf collector with its programs built in. Compiled only when the eBPF
// programs are (exporter/sources/bpf/CMakeLists.txt); bpf_stub.cc stands in
// otherwise.
#include "exporter/sources/bpf/bpf_source.h"

#include <bpf/btf.h>

#include "exporter/common/logging.h"
#include "exporter/sources/bpf/clamps_loader.h"
#include "exporter/sources/bpf/memcg_iter_loader.h"
#include "exporter/sources/bpf/prunes_loader.h"
#include "exporter/sources/bpf/vmpressure_loader.h"
#include "exporter/sources/memory_hierarchy.h"
#include "exporter/sources/shared/capabilities.h"
#include "exporter/sources/shared/kernel_probe.h"

namespace sockpressure {
namespace {

// The collector: one loader per program (vmpressure, memcg_iter, clamps),
// each attached with the best variant the kernel accepts.
class BpfSourceImpl final : public BpfSource {
 public:
  explicit BpfSourceImpl(const BpfOptions& opt) : opt_(opt) {
    RouteLibbpfLogs();
    MemoryHierarchy h = DetectMemoryHierarchy(opt_.paths.cgroupfs);
    BpfEnv env;
    env.procfs = opt_.paths.procfs;
    env.v1 = h.v1;
    env.memory_root = h.root;
    hz_ = KernelConfigHz(opt_.paths.procfs).value_or(0);

    std::string priv = MissingBpfPrivilege();
    if (!priv.empty()) {
      Disable(priv);
      return;
    }
    btf* vmlinux = btf__load_vmlinux_btf();
    if (!vmlinux) {
      Disable(absl::StrCat("no kernel BTF (/sys/kernel/btf/vmlinux: ", Errno(errno), ")"));
      return;
    }
    env.vmlinux = vmlinux;
    if (opt_.vmpressure) vmp_ = VmpressureLoader::Attach(env, opt_.vmpressure_attach, log_);
    if (opt_.pressure) {
      iter_ = MemcgIterLoader::Attach(env, hz_, log_);
      if (iter_) hz_ = iter_->hz();
    }
    if (opt_.clamps) clamps_ = ClampsLoader::Attach(env, opt_.clamp_attach, log_);
    if (opt_.prunes) {
      drops_ = PrunesLoader::Attach(env, PrunesLoader::Kind::kDrops, opt_.drops_attach, log_);
      prune_fns_ = PrunesLoader::Attach(env, PrunesLoader::Kind::kFunctions, opt_.prunes_attach, log_);
    }
    btf__free(vmlinux);
    if (vmp_ || iter_ || clamps_ || drops_ || prune_fns_) {
      // After attaching, reading maps and creating iterator fds still go
      // through bpf(2), which on kernels < 6.5 with unprivileged BPF
      // disabled checks bpf_capable() on every command (docs/kernel.md §5);
      // from 6.5 only map creation and program load do, so nothing is kept.
      NeedCapabilities(BpfRuntimeCapabilities(), "bpf map reads and iterator fds");
    }
  }

  absl::Status Collect(Sample& sample) override {
    if (first_collect_) {
      first_collect_ = false;
      log_.LogOnce();
    }
    sample.probes.insert(sample.probes.end(), log_.probes().begin(), log_.probes().end());
    const bool stats = BpfStatsEnabled(opt_.paths.procfs);
    uint64_t lost = 0;
    if (clamps_) lost += clamps_->Collect(sample, stats);
    if (drops_) lost += drops_->Collect(sample, stats);
    if (prune_fns_) lost += prune_fns_->Collect(sample, stats);
    // The iterator visits every memcg, so its cost grows with the node, not
    // with the signal; with a vmpressure probe attached it is a lower tier
    // of the same signal and runs only when every tier is asked for.
    if (iter_ && (!vmp_ || opt_.all_tiers)) iter_->Collect(sample, stats);
    if (vmp_) lost += vmp_->Collect(sample, hz_, stats);
    sample.events_lost += lost;
    return absl::OkStatus();
  }

  std::vector<ProbeStatus> Probes() const override { return log_.probes(); }
  std::vector<uint64_t> Stats(absl::string_view probe) const override {
    if (probe == "window_clamps" && clamps_) return clamps_->Stats();
    if (probe == "socket_pressure" && iter_) return iter_->Stats();
    if (probe == "vmpressure" && vmp_) return vmp_->Stats();
    if (probe == PrunesLoader::kDropsProbe && drops_) return drops_->Stats();
    if (probe == PrunesLoader::kFunctionsProbe && prune_fns_) return prune_fns_->Stats();
    return {};
  }
  std::vector<std::pair<std::string, int>> ProgramFds() const override {
    std::vector<std::pair<std::string, int>> out;
    auto add = [&out](const std::vector<std::pair<std::string, int>>& fds) { out.insert(out.end(), fds.begin(), fds.end()); };
    if (clamps_) add(clamps_->ProgramFds());
    if (iter_) add(iter_->ProgramFds());
    if (vmp_) add(vmp_->ProgramFds());
    if (drops_) add(drops_->ProgramFds());
    if (prune_fns_) add(prune_fns_->ProgramFds());
    return out;
  }
  std::vector<uint64_t> LastIterCgroupIds() const override {
    return iter_ ? iter_->LastIds() : std::vector<uint64_t>{};
  }

 private:
  void Disable(const std::string& why) {
    SP_LOG_WARN("eBPF tiers disabled: ", why, "; the agent runs on the cgroupfs and sock_diag tiers");
    for (const char* p : kBpfProbeNames) log_.Unavailable(p);
  }

  BpfOptions opt_;
  int hz_ = 0;
  ProbeLog log_;
  bool first_collect_ = true;
  std::unique_ptr<ClampsLoader> clamps_;
  std::unique_ptr<MemcgIterLoader> iter_;
  std::unique_ptr<VmpressureLoader> vmp_;
  std::unique_ptr<PrunesLoader> drops_, prune_fns_;
};

}  // namespace

bool BpfBuiltIn() { return true; }

std::unique_ptr<BpfSource> NewBpfSource(const BpfOptions& options) { return std::make_unique<BpfSourceImpl>(options); }

}  // namespace sockpressure
