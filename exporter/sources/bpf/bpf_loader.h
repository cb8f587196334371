// What the eBPF loaders share (built only with the programs): the
// start-up record of what was tried, the kernel facts a loader checks, and
// Skeleton<>, the one open -> rodata -> autoload -> load -> attach sequence
// with RAII. Each program has its own loader file (clamps_loader.cc,
// vmpressure_loader.cc, memcg_iter_loader.cc; tcp_census_source.cc).
//
// Every variant of a program is loaded from its own skeleton instance: one
// program the kernel refuses fails the whole object (docs/kernel.md §5).
#pragma once

#include <bpf/libbpf.h>

#include <cerrno>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "exporter/sources/bpf/bpf_maps.h"
#include "exporter/sources/sample.h"
#include "sockpressure_bpf.h"

struct btf;

namespace sockpressure {

std::string Errno(int err);
uint64_t MonotonicNs();  // CLOCK_MONOTONIC == bpf_ktime_get_ns()
bool KallsymsHas(const std::string& procfs, absl::string_view sym);
// Routes libbpf's messages (verifier logs included) to debug logging.
void RouteLibbpfLogs();

// What the loaders need to know about the running kernel, read once.
struct BpfEnv {
  const btf* vmlinux = nullptr;  // kernel BTF; valid only while loading
  std::string procfs;
  bool v1 = false;           // memory controller on cgroup v1
  std::string memory_root;   // root of the memory hierarchy
  bool HasBtfFunc(const char* name) const;
};

// Every variant tried at start-up, in order, and why the failed ones were
// skipped. Not thread-safe: filled while loading, then only read.
class ProbeLog {
 public:
  void Attached(const char* probe, const std::string& attach) { probes_.push_back({probe, attach, true, true}); }
  // No eBPF at all (privilege, BTF): nothing was tried.
  void Unavailable(const char* probe) { probes_.push_back({probe, "none", false, false}); }
  void Skip(const char* probe, const std::string& attach, const std::string& why) {
    probes_.push_back({probe, attach, false, false});
    skipped_.push_back(absl::StrCat(probe, "/", attach, ": ", why));
  }
  const std::vector<ProbeStatus>& probes() const { return probes_; }
  // A loaded probe's link went down or came back (clamp_arming.h).
  void SetAttached(absl::string_view probe, bool attached) {
    for (ProbeStatus& p : probes_) {
      if (p.probe == probe && p.loaded) p.attached = attached;
    }
  }
  void LogOnce() const;  // one line of what attached, one per skipped variant

 private:
  std::vector<ProbeStatus> probes_;
  std::vector<std::string> skipped_;
};

// One skeleton instance and the links made from it; destroys both.
// Not thread-safe: owned by one loader.
template <typename Skel>
class Skeleton {
 public:
  struct Ops {
    Skel* (*open)();
    int (*load)(Skel*);
    void (*destroy)(Skel*);
  };
  using Programs = std::vector<std::pair<std::string, bpf_program*>>;

  explicit Skeleton(Ops ops) : ops_(ops) {}
  Skeleton(const Skeleton&) = delete;
  Skeleton& operator=(const Skeleton&) = delete;
  ~Skeleton() { Reset(); }

  // Opens a fresh instance, lets `configure` set rodata and name the
  // variant's programs, loads only those and attaches each with `attach`.
  // Returns "" when all attached, else why not (the instance is released).
  std::string Load(const std::function<Programs(Skel*)>& configure,
                   const std::function<bpf_link*(bpf_program*)>& attach = &bpf_program__attach,
                   absl::string_view attach_hint = "") {
    Reset();
    attach_ = attach;
    attach_hint_ = std::string(attach_hint);
    skel_ = ops_.open();
    if (!skel_) return absl::StrCat("open: ", Errno(errno));
    programs_ = configure(skel_);
    for (auto& [name, prog] : programs_) bpf_program__set_autoload(prog, true);
    if (int err = ops_.load(skel_)) {
      Reset();
      return absl::StrCat("load refused: ", Errno(err));
    }
    std::string why = Link();
    if (!why.empty()) Reset();
    return why;
  }

  // Destroys the links and keeps the programs loaded (their maps, counts
  // and program stats survive): the programs stop running.
  void Unlink() {
    for (bpf_link* l : links_) bpf_link__destroy(l);
    links_.clear();
    if (up_since_ns_) linked_ns_ += MonotonicNs() - up_since_ns_;
    up_since_ns_ = 0;
  }
  // Attaches the loaded programs again as Load() did. Returns "" or why not
  // (then no link is left and the programs stay loaded). Needs the attach
  // capabilities (capabilities.h, BpfAttachCapabilities()).
  std::string Relink() {
    if (!skel_) return "not loaded";
    if (!links_.empty()) return "";
    std::string why = Link();
    if (!why.empty()) {
      Unlink();
      ++attach_failures_;
    }
    return why;
  }
  bool linked() const { return up_since_ns_ != 0; }
  // Detaches the loaded programs and attaches them again, as attaching on
  // demand will: before 5.13 the kernel refuses a tracing (fentry/fexit)
  // program's second attach, its first having consumed the target
  // (docs/kernel.md). "" when they are attached again; not counted in the
  // attaches or attach failures.
  std::string CheckRelink() {
    const uint64_t attaches = attaches_;
    Unlink();
    std::string why = Link();
    attaches_ = attaches;
    linked_ns_ = 0;
    return why;
  }

  explicit operator bool() const { return skel_ != nullptr; }
  Skel* operator->() const { return skel_; }
  const Programs& programs() const { return programs_; }
  std::vector<std::pair<std::string, int>> ProgramFds() const {
    std::vector<std::pair<std::string, int>> out;
    for (const auto& [name, prog] : programs_) out.emplace_back(name, bpf_program__fd(prog));
    return out;
  }
  // Skipped runs of each program; run_time_ns/run_cnt with `timed`.
  void AddProgramStats(Sample& sample, bool timed) const {
    const size_t first = sample.program_stats.size();
    for (const auto& [name, prog] : programs_) {
      sockpressure::AddProgramStats(sample, name, bpf_program__fd(prog), timed);
    }
    AddLinkHistory(sample, first);
  }
  // The kernel's statistics of an earlier AddProgramStats() again, for a
  // program that cannot have run since (detached, or an iterator not read),
  // with the links' history as it is now: no bpf(2) call.
  void AddHeldProgramStats(Sample& sample, const std::vector<ProgramStats>& held) const {
    const size_t first = sample.program_stats.size();
    sample.program_stats.insert(sample.program_stats.end(), held.begin(), held.end());
    AddLinkHistory(sample, first);
  }
  bpf_link* link(size_t i) const { return links_.at(i); }

 private:
  void AddLinkHistory(Sample& sample, size_t first) const {
    const uint64_t up_ns = linked_ns_ + (up_since_ns_ ? MonotonicNs() - up_since_ns_ : 0);
    for (size_t i = first; i < sample.program_stats.size(); ++i) {
      ProgramStats& p = sample.program_stats[i];
      p.attached = linked();
      p.attached_seconds = static_cast<double>(up_ns) * 1e-9;
      p.attaches = attaches_;
      p.attach_failures = attach_failures_;
    }
  }
  // One link per program, in order; stops at the first failure (the links
  // made so far stay in links_ for the caller to release).
  std::string Link() {
    for (auto& [name, prog] : programs_) {
      bpf_link* link = attach_(prog);
      if (!link) return absl::StrCat("attach ", name, " failed: ", Errno(errno), attach_hint_);
      links_.push_back(link);
    }
    ++attaches_;
    up_since_ns_ = MonotonicNs();
    return "";
  }
  void Reset() {
    Unlink();
    programs_.clear();
    if (skel_) ops_.destroy(skel_);
    skel_ = nullptr;
  }

  Ops ops_;
  std::function<bpf_link*(bpf_program*)> attach_;
  std::string attach_hint_;
  Skel* skel_ = nullptr;
  Programs programs_;
  std::vector<bpf_link*> links_;
  // The links' history: CLOCK_MONOTONIC ns since they are up (0: down),
  // ns they were up before, successful and refused attaches.
  uint64_t up_since_ns_ = 0, linked_ns_ = 0, attaches_ = 0, attach_failures_ = 0;
};

// Base of the per-program loaders: the skeleton, the tier it attached as,
// and its stats map. Not thread-safe, like the loaders.
template <typename Skel>
class ProgramLoader {
 public:
  // SP_STAT_* slots (bpf/sockpressure_bpf.h) summed over CPUs.
  std::vector<uint64_t> Stats() const { return ReadStats(stats_fd_); }
  // (program name, fd) of every attached program, for benchmarks.
  std::vector<std::pair<std::string, int>> ProgramFds() const { return skel_.ProgramFds(); }
  Tier tier() const { return tier_; }

 protected:
  explicit ProgramLoader(typename Skeleton<Skel>::Ops ops) : skel_(ops) {}
  // After a Collect: the program stats (run counts and times only with
  // kernel.bpf_stats_enabled); returns the events lost so far.
  uint64_t Finish(Sample& sample, bool program_stats) { return Finish(sample, program_stats, Stats()); }
  // The same with the stats already read in this sample.
  uint64_t Finish(Sample& sample, bool program_stats, const std::vector<uint64_t>& stats) {
    skel_.AddProgramStats(sample, program_stats);
    return stats[SP_STAT_LOST];
  }

  Skeleton<Skel> skel_;
  Tier tier_ = Tier::kNone;
  int stats_fd_ = -1;  // set once loaded
};

}  // namespace sockpressure
