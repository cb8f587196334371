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
#include "exporter/sources/shared/privileged_worker.h"

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
    v1_ = h.v1;
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
      iter_ = MemcgIterLoader::Attach(env, hz_, opt_.context_seconds, log_);
      if (iter_) hz_ = iter_->hz();
    }
    const Tier arm = ArmingTier(env.v1);
    if (opt_.clamps) clamps_ = ClampsLoader::Attach(env, opt_.clamp_attach, arm != Tier::kNone, log_);
    if (opt_.prunes) {
      drops_ = PrunesLoader::Attach(env, PrunesLoader::Kind::kDrops, opt_.drops_attach, log_);
      prune_fns_ = PrunesLoader::Attach(env, PrunesLoader::Kind::kFunctions, opt_.prunes_attach, log_);
    }
    btf__free(vmlinux);
    if (clamps_) StartArming(clamps_->reattachable() ? arm : Tier::kNone);
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
      if (clamps_) LogArming();
    }
    const bool stats = stats_flag_.Enabled();
    uint64_t lost = 0;
    // The pressure tiers first: the clamp program's link follows what they
    // read in this same sample (clamp_arming.h).
    // The iterator visits every memcg, so its cost grows with the node, not
    // with the signal; with a vmpressure probe attached on cgroup v2 it is a
    // lower tier of the same signal and runs only when every tier is asked
    // for (IterEverySample).
    if (iter_ && IterEverySample()) iter_->Collect(sample, stats);
    if (vmp_) lost += vmp_->Collect(sample, hz_, stats, VmpressureServesPressure());
    if (clamps_) {
      ArmClamps(sample);
      lost += clamps_->Collect(sample, stats);
    }
    if (drops_) lost += drops_->Collect(sample, stats);
    if (prune_fns_) lost += prune_fns_->Collect(sample, stats);
    sample.probes.insert(sample.probes.end(), log_.probes().begin(), log_.probes().end());
    sample.events_lost += lost;
    if (SignalsQuiet()) ++sample.signal_collectors_quiet;
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
  // On cgroup v1 the iterator runs beside a vmpressure probe: v1's memcg
  // socket pressure is tcpmem_pressure (docs/kernel.md §3), which only the
  // iterator reads outside reclaim, and its walk also says whether any memcg
  // charges sockets at all (where none does, it walks once per context
  // interval: MemcgIterLoader::WalkCanWait).
  bool IterEverySample() const { return !vmp_ || opt_.all_tiers || v1_; }

  // Whether the vmpressure probe's socket pressure is a tier of that signal.
  // Not on cgroup v1 beside the iterator: there socket pressure is
  // tcpmem_pressure, set when a charged socket passes its memcg's tcp limit,
  // which the probe reads only while reclaim calls vmpressure(), and since
  // the v6.6 scope fix (in every kernel with the iterator) vmpressure() no
  // longer marks v1 memcgs at all (docs/kernel.md §3). The lab's cgroup v1
  // boot found the probe winning and A's tcp-limit throttling unnamed.
  bool VmpressureServesPressure() const { return !v1_ || !iter_; }

  // Nothing this collector reads can move unseen until the next context
  // interval: the iterator found that no memcg can throttle a socket
  // (cgroup v1 without a memcg charging sockets; on v1 it runs every
  // sample) and the window-clamp program is detached. The vmpressure (on v1
  // its reclaim cannot throttle an uncharged socket), drop and prune
  // programs count in the kernel; a later read loses none of their counts.
  bool SignalsQuiet() const {
    return iter_ && iter_->NothingCanThrottle() && (!clamps_ || !clamps_->attached());
  }

  // The pressure tier the clamp program's link follows: vmpressure on
  // cgroup v2; the iterator where it runs every sample (on v1 it also sees
  // tcpmem_pressure, which vmpressure cannot); else none (always attached).
  Tier ArmingTier(bool v1) const {
    if (!opt_.clamps_on_demand) return Tier::kNone;  // --no-bpf.clamps-on-demand: attached all the time
    if (vmp_ && !v1) return vmp_->tier();
    if (iter_ && IterEverySample()) return Tier::kIter;
    return Tier::kNone;
  }

  // Attaching again later needs the attach capabilities: the worker keeps
  // them and attaches (ArmClamps). The collector itself stays on the sampler
  // thread where its map reads need none (6.5+): a sample that hands every
  // collect to another thread pays two context switches for it.
  void StartArming(Tier tier) {
    arming_ = std::make_unique<ClampArming>(tier, opt_.clamp_quiet_seconds);
    if (tier != Tier::kNone) {
      NeedCapabilitiesForJobs(BpfAttachCapabilities(),
                              "attaching the window-clamp program when socket pressure appears");
    }
  }

  void LogArming() const {
    if (!opt_.clamps_on_demand) {
      SP_LOG_INFO("window clamps: attached all the time (--no-bpf.clamps-on-demand)");
    } else if (!clamps_->reattachable()) {
      SP_LOG_INFO("window clamps: attached all the time (no attach type this kernel accepts attaches again after "
                  "a detach)");
    } else if (arming_->tier() == Tier::kNone) {
      SP_LOG_INFO("window clamps: attached all the time (no vmpressure or cgroup iterator tier to gate on)");
    } else {
      SP_LOG_INFO("window clamps: attached only while socket pressure is live or about to be (from the ",
                  TierName(arming_->tier()), " tier), detached after ", opt_.clamp_quiet_seconds, " s quiet");
    }
  }

  // Attaches or detaches the clamp program as the pressure read in this
  // sample asks. A refused attach is logged once, counted in the program's
  // attach failures and tried again next sample; the other tiers go on.
  void ArmClamps(const Sample& sample) {
    const bool want = arming_->Update(sample, static_cast<double>(MonotonicNs()) * 1e-9);
    if (want == clamps_->attached()) return;
    if (!want) {
      clamps_->Detach();
      SP_LOG_INFO("window clamps detached: ", arming_->why());
    } else {
      std::string why;
      // Inline when this collector runs on the worker (before 6.5).
      std::string err = PrivilegedWorker::Get().Run([&] { why = clamps_->Reattach(); });
      if (why.empty()) why = err;
      if (why.empty()) {
        SP_LOG_INFO("window clamps attached: ", arming_->why());
      } else if (!attach_failure_logged_) {
        attach_failure_logged_ = true;
        SP_LOG_WARN("window clamps: attaching again failed (", why, "); counted in ",
                    "sockpressure_bpf_program_attach_failures_total, retried every sample");
      }
    }
    log_.SetAttached("window_clamps", clamps_->attached());
  }

  void Disable(const std::string& why) {
    SP_LOG_WARN("eBPF tiers disabled: ", why, "; the agent runs on the cgroupfs and sock_diag tiers");
    for (const char* p : kBpfProbeNames) log_.Unavailable(p);
  }

  BpfOptions opt_;
  BpfStatsFlag stats_flag_{opt_.paths.procfs, opt_.context_seconds};
  int hz_ = 0;
  bool v1_ = false;  // the memory controller is on cgroup v1
  ProbeLog log_;
  bool first_collect_ = true;
  bool attach_failure_logged_ = false;
  std::unique_ptr<ClampArming> arming_;  // set when clamps_ is
  std::unique_ptr<ClampsLoader> clamps_;
  std::unique_ptr<MemcgIterLoader> iter_;
  std::unique_ptr<VmpressureLoader> vmp_;
  std::unique_ptr<PrunesLoader> drops_, prune_fns_;
};

}  // namespace

bool BpfBuiltIn() { return true; }

std::unique_ptr<BpfSource> NewBpfSource(const BpfOptions& options) { return std::make_unique<BpfSourceImpl>(options); }

}  // namespace sockpressure
