// Collector "bpf": the eBPF tiers (bpf/*.bpf.c), each signal from the best
// attach type the running kernel accepts, falling back and never failing.
//
//   reclaim, socket_pressure  fentry/fexit vmpressure -> kprobe/kretprobe
//   socket_pressure           iter/cgroup over the memory hierarchy
//   window_clamps             fexit __tcp_select_window -> kprobe ->
//                             tp_btf tcp_rcv_space_adjust -> raw_tp
//   rcv_mem_drops             tp_btf skb:kfree_skb -> raw_tp
//   tcp_prunes                fentry tcp_collapse + tcp_prune_ofo_queue ->
//                             kprobe
//
// Every variant is loaded from its own skeleton instance: one program that
// fails to load fails the whole object (docs/kernel.md §5), so a refused fentry
// must not take the tp_btf variant down with it. Why each tier was skipped is
// logged once at start-up and exported as sockpressure_probe_loaded.
//
// The window-clamp program runs on every segment of every socket, so it is
// attached only while some memcg's socket pressure is live or about to be
// (clamp_arming.h) and stays loaded in between; sockpressure_probe_attached
// says whether it is attached now.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "exporter/sources/bpf/clamp_arming.h"
#include "exporter/sources/source.h"

namespace sockpressure {

struct BpfOptions {
  Paths paths;
  bool clamps = true;      // window clamps
  bool pressure = true;    // iter/cgroup pressure state
  bool vmpressure = true;  // vmpressure verdicts
  bool prunes = true;      // pruning and memory drops (bpf/prunes.bpf.c)
  // --signal.all-tiers: run the cgroup iterator every sample even while a
  // vmpressure probe serves the socket-pressure signal.
  bool all_tiers = false;
  // Attach types to try, best first. Tests narrow these.
  std::vector<std::string> clamp_attach = {"fexit", "kprobe", "tp_btf", "raw_tp"};
  std::vector<std::string> vmpressure_attach = {"fentry", "kprobe"};
  std::vector<std::string> drops_attach = {"tp_btf", "raw_tp"};
  std::vector<std::string> prunes_attach = {"fentry", "kprobe"};
  // The window-clamp program attached only while socket pressure is live
  // or about to be (clamp_arming.h), else all the time
  // (--no-bpf.clamps-on-demand); and the seconds without pressure before
  // it is detached (tests shorten them).
  bool clamps_on_demand = true;
  double clamp_quiet_seconds = ClampArming::kQuietSeconds;
  // --sample.context-interval: how often the cgroup iterator walks a cgroup
  // v1 node where no memcg charges sockets (memcg_iter_loader.h).
  double context_seconds = 10.0;
};

// Every probe of the collector, as sockpressure_probe_attached names them.
inline constexpr const char* kBpfProbeNames[] = {"vmpressure", "socket_pressure", "window_clamps", "tcp_drops",
                                                 "tcp_prunes"};

// False when the binary was built without the BPF objects (SOCKPRESSURE_BPF=OFF
// or no clang/bpftool/libbpf at build time).
bool BpfBuiltIn();

class BpfSource : public Source {
 public:
  absl::string_view name() const override { return "bpf"; }
  // What was tried at start-up, in order.
  virtual std::vector<ProbeStatus> Probes() const = 0;
  // SP_STAT_* slots (bpf/sockpressure_bpf.h) summed over CPUs for one probe:
  // "window_clamps", "socket_pressure" (iterator), "vmpressure", "tcp_drops"
  // or "tcp_prunes". Empty when
  // the probe is not attached.
  virtual std::vector<uint64_t> Stats(absl::string_view probe) const = 0;
  // (program name, fd) of every loaded program, for benchmarks.
  virtual std::vector<std::pair<std::string, int>> ProgramFds() const = 0;
  // Memory cgroup ids the iterator visited in the last Collect() (up to
  // SP_MAX_CGROUPS).
  virtual std::vector<uint64_t> LastIterCgroupIds() const = 0;
};

// The collector with the programs attached (bpf_source.cc), or, in a build
// without them, one that reports them "not built in" (bpf_stub.cc).
std::unique_ptr<BpfSource> NewBpfSource(const BpfOptions& options);
// A collector that attaches nothing and reports every probe as not attached,
// logging `why` once.
std::unique_ptr<BpfSource> NewUnavailableBpfSource(std::string why);

// The "bpf" collector with the probes ctx.bpf_probes turns on (its
// sub-switches, --collector.bpf_NAME). --no-collector.bpf turns all off.
std::unique_ptr<Source> NewBpfSourceFromFlags(const SourceContext& ctx);

}  // namespace sockpressure
