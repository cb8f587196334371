#include "exporter/sources/bpf/bpf_source.h"

#include <fcntl.h>
#include <linux/capability.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "exporter/common/file_reader.h"
#include "exporter/common/logging.h"
#include "exporter/sources/bpf/capabilities.h"
#include "exporter/sources/bpf/kernel_probe.h"
#include "exporter/sources/cgroupfs_source.h"

#ifdef SOCKPRESSURE_WITH_BPF
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "exporter/sources/bpf/bpf_maps.h"
#include "clamps.skel.h"
#include "memcg_iter.skel.h"
#include "sockpressure_bpf.h"
#include "vmpressure.skel.h"
#endif

namespace sockpressure {
namespace {

std::mutex flags_mu;
std::set<std::string, std::less<>> enabled_probes;

#ifdef SOCKPRESSURE_WITH_BPF

// libbpf's own messages go to debug level; the last warning is kept so a
// failed variant can name the kernel's reason in the one start-up line.
thread_local std::string last_libbpf_warning;
int LibbpfPrint(enum libbpf_print_level level, const char* fmt, va_list args) {
  if (level == LIBBPF_DEBUG && !LogEnabled(LogLevel::kDebug)) return 0;
  std::string line(16384, '\0');  // verifier logs are long
  int n = std::vsnprintf(line.data(), line.size(), fmt, args);
  line.resize(n > 0 ? std::min<size_t>(static_cast<size_t>(n), line.size() - 1) : 0);
  while (!line.empty() && line.back() == '\n') line.pop_back();
  if (level == LIBBPF_WARN) last_libbpf_warning = line;
  SP_LOG_DEBUG("libbpf: ", line);
  return 0;
}

std::string Errno(int err) { return std::strerror(err < 0 ? -err : err); }

double MonotonicSeconds() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}
uint64_t MonotonicNs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);  // == bpf_ktime_get_ns()
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

bool KallsymsHas(const std::string& procfs, absl::string_view sym) {
  absl::StatusOr<std::string> text = ReadFileToString(JoinPath(procfs, "kallsyms"));
  if (!text.ok()) return false;
  std::string needle = absl::StrCat(" ", sym, "\n");
  // "addr T sym\n" or "addr t sym\t[module]\n"
  return text->find(absl::StrCat(" T", needle)) != std::string::npos ||
         text->find(absl::StrCat(" t", needle)) != std::string::npos;
}

// ---------------------------------------------------------------------------

class BpfSourceImpl final : public BpfSource {
 public:
  explicit BpfSourceImpl(const BpfOptions& opt) : opt_(opt) {
    libbpf_set_print(LibbpfPrint);
    MemoryHierarchy h = DetectMemoryHierarchy(opt_.paths.cgroupfs);
    v1_ = h.v1;
    memory_root_ = h.root;
    hz_ = KernelConfigHz(opt_.paths.procfs).value_or(0);

    std::string priv = MissingBpfPrivilege();
    if (!priv.empty()) {
      SP_LOG_WARN("eBPF tiers disabled: ", priv,
                  "; the agent runs on the cgroupfs and sock_diag tiers");
      for (const char* p : {"vmpressure", "socket_pressure", "window_clamps"}) probes_.push_back({p, "none", false});
      return;
    }
    btf_ = btf__load_vmlinux_btf();
    if (!btf_) {
      SP_LOG_WARN("eBPF tiers disabled: no kernel BTF (/sys/kernel/btf/vmlinux: ", Errno(errno),
                  "); the agent runs on the cgroupfs and sock_diag tiers");
      for (const char* p : {"vmpressure", "socket_pressure", "window_clamps"}) probes_.push_back({p, "none", false});
      return;
    }
    if (opt_.vmpressure) SetUpVmpressure();
    if (opt_.pressure) SetUpIter();
    if (opt_.clamps) SetUpClamps();
    btf__free(btf_);
    btf_ = nullptr;
    if (vmp_ || iter_ || clamps_) {
      // After attaching, reading maps and creating iterator fds still go
      // through bpf(2), which on kernels < 6.5 with unprivileged BPF
      // disabled checks bpf_capable() on every command.
      NeedCapabilities(CapBit(kCapBpf) | CapBit(CAP_SYS_ADMIN) * (LastKernelCap() < kCapBpf),
                       "bpf map reads and iterator fds");
    }
  }

  ~BpfSourceImpl() override {
    if (clamps_link_) bpf_link__destroy(clamps_link_);
    if (clamps_) sp_clamps__destroy(clamps_);
    if (iter_link_) bpf_link__destroy(iter_link_);
    if (iter_) sp_memcg_iter__destroy(iter_);
    for (bpf_link* l : vmp_links_) bpf_link__destroy(l);
    if (vmp_) sp_vmpressure__destroy(vmp_);
    if (btf_) btf__free(btf_);
  }

  absl::Status Collect(Sample& sample) override;

  std::vector<ProbeStatus> Probes() const override { return probes_; }
  std::vector<uint64_t> Stats(absl::string_view probe) const override {
    if (probe == "window_clamps" && clamps_) return ReadStats(bpf_map__fd(clamps_->maps.stats));
    if (probe == "socket_pressure" && iter_) return ReadStats(bpf_map__fd(iter_->maps.stats));
    if (probe == "vmpressure" && vmp_) return ReadStats(bpf_map__fd(vmp_->maps.stats));
    return {};
  }
  std::vector<std::pair<std::string, int>> ProgramFds() const override {
    std::vector<std::pair<std::string, int>> out;
    if (clamps_) out.emplace_back(clamps_prog_name_, bpf_program__fd(clamps_prog_));
    if (iter_) out.emplace_back("memcg_iter", bpf_program__fd(iter_->progs.memcg_iter));
    for (const auto& [name, prog] : vmp_progs_) out.emplace_back(name, bpf_program__fd(prog));
    return out;
  }
  std::vector<uint64_t> LastIterCgroupIds() const override { return last_iter_ids_; }

 private:
  static int LastKernelCap() {
    absl::StatusOr<std::string> v = ReadFileToString("/proc/sys/kernel/cap_last_cap");
    return v.ok() ? std::atoi(v->c_str()) : 40;
  }
  void Skip(const char* probe, const std::string& attach, const std::string& why) {
    probes_.push_back({probe, attach, false});
    skipped_.push_back(absl::StrCat(probe, "/", attach, ": ", why));
  }
  bool HasBtfFunc(const char* name) const { return btf__find_by_name_kind(btf_, name, BTF_KIND_FUNC) > 0; }
  void SetUpClamps();
  void SetUpIter();
  void SetUpVmpressure();
  void LogSetUp();
  void CollectIter(Sample& sample);
  void CollectVmpressure(Sample& sample);
  struct IterRecord {
    uint64_t cgroup_id;
    sp_memcg_state state;
  };
  bool RunIter(std::vector<IterRecord>& recs, std::string* err);

  BpfOptions opt_;
  bool v1_ = false;
  std::string memory_root_;
  int hz_ = 0;
  btf* btf_ = nullptr;
  std::vector<ProbeStatus> probes_;
  std::vector<std::string> skipped_;
  bool first_collect_ = true;

  sp_clamps* clamps_ = nullptr;
  bpf_link* clamps_link_ = nullptr;
  bpf_program* clamps_prog_ = nullptr;
  std::string clamps_prog_name_;
  Tier clamps_tier_ = Tier::kNone;

  sp_memcg_iter* iter_ = nullptr;
  bpf_link* iter_link_ = nullptr;
  uint64_t iter_gen_ = 0;
  bool iter_error_logged_ = false;
  std::vector<uint64_t> last_iter_ids_;
  struct IterState {
    uint64_t deadline = 0, now = 0;
    PressureState st;
  };
  std::unordered_map<uint64_t, IterState> iter_state_;

  sp_vmpressure* vmp_ = nullptr;
  std::vector<bpf_link*> vmp_links_;
  std::vector<std::pair<std::string, bpf_program*>> vmp_progs_;
  Tier vmp_tier_ = Tier::kNone;
};

void BpfSourceImpl::SetUpClamps() {
  for (const std::string& attach : opt_.clamp_attach) {
    Tier tier;
    const char* target;
    if (attach == "fexit") {
      tier = Tier::kFentry;
      target = "__tcp_select_window";
      if (!HasBtfFunc(target)) {
        Skip("window_clamps", attach, "__tcp_select_window not in kernel BTF");
        continue;
      }
    } else if (attach == "kprobe") {
      tier = Tier::kKprobe;
      target = "__tcp_select_window";
      if (!KallsymsHas(opt_.paths.procfs, target)) {
        Skip("window_clamps", attach, "__tcp_select_window not in kallsyms");
        continue;
      }
    } else if (attach == "tp_btf") {
      tier = Tier::kTpBtf;
      target = "tcp_rcv_space_adjust";
      if (btf__find_by_name_kind(btf_, "btf_trace_tcp_rcv_space_adjust", BTF_KIND_TYPEDEF) <= 0) {
        Skip("window_clamps", attach, "no BTF for tracepoint tcp_rcv_space_adjust");
        continue;
      }
    } else if (attach == "raw_tp") {
      tier = Tier::kRawTp;
      target = "tcp_rcv_space_adjust";
    } else {
      continue;
    }
    sp_clamps* s = sp_clamps__open();
    if (!s) {
      Skip("window_clamps", attach, absl::StrCat("open: ", Errno(errno)));
      continue;
    }
    s->rodata->targ_v1 = v1_;
    bpf_program* prog = attach == "fexit"    ? s->progs.clamp_fexit
                        : attach == "kprobe" ? s->progs.clamp_kprobe
                        : attach == "tp_btf" ? s->progs.clamp_tp_btf
                                             : s->progs.clamp_raw_tp;
    bpf_program__set_autoload(prog, true);
    last_libbpf_warning.clear();
    int err = sp_clamps__load(s);
    if (err) {
      Skip("window_clamps", attach, absl::StrCat("load refused: ", Errno(err)));
      sp_clamps__destroy(s);
      continue;
    }
    bpf_link* link = bpf_program__attach(prog);
    if (!link) {
      int e = errno;
      Skip("window_clamps", attach,
           absl::StrCat("attach to ", target, " failed: ", Errno(e),
                        attach == "kprobe" ? " (kernel without kprobes?)" : ""));
      sp_clamps__destroy(s);
      continue;
    }
    clamps_ = s;
    clamps_link_ = link;
    clamps_prog_ = prog;
    clamps_prog_name_ = bpf_program__name(prog);
    clamps_tier_ = tier;
    probes_.push_back({"window_clamps", attach, true});
    return;
  }
}

void BpfSourceImpl::SetUpIter() {
  const std::string attach = "iter";
  if (memory_root_.empty()) {
    Skip("socket_pressure", attach, "no memory cgroup hierarchy found");
    return;
  }
  if (btf__find_by_name_kind(btf_, "bpf_iter__cgroup", BTF_KIND_STRUCT) <= 0) {
    Skip("socket_pressure", attach, "kernel has no cgroup iterator (needs 6.1+)");
    return;
  }
  sp_memcg_iter* s = sp_memcg_iter__open();
  if (!s) {
    Skip("socket_pressure", attach, absl::StrCat("open: ", Errno(errno)));
    return;
  }
  s->rodata->targ_v1 = v1_;
  int err = sp_memcg_iter__load(s);
  if (err) {
    Skip("socket_pressure", attach, absl::StrCat("load refused: ", Errno(err)));
    sp_memcg_iter__destroy(s);
    return;
  }
  // The walk starts at the memory hierarchy root: the v1 "memory" mount on
  // hybrid hosts, where the default (v2 root) walk sees no memcgs.
  int fd = ::open(memory_root_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    Skip("socket_pressure", attach, absl::StrCat("open ", memory_root_, ": ", Errno(errno)));
    sp_memcg_iter__destroy(s);
    return;
  }
  union bpf_iter_link_info linfo;
  std::memset(&linfo, 0, sizeof linfo);
  linfo.cgroup.cgroup_fd = static_cast<uint32_t>(fd);
  linfo.cgroup.order = BPF_CGROUP_ITER_DESCENDANTS_PRE;
  LIBBPF_OPTS(bpf_iter_attach_opts, opts, .link_info = &linfo, .link_info_len = sizeof linfo);
  bpf_link* link = bpf_program__attach_iter(s->progs.memcg_iter, &opts);
  int e = errno;
  ::close(fd);  // the link holds its own reference to the cgroup
  if (!link) {
    Skip("socket_pressure", attach, absl::StrCat("attach: ", Errno(e)));
    sp_memcg_iter__destroy(s);
    return;
  }
  iter_ = s;
  iter_link_ = link;
  probes_.push_back({"socket_pressure", attach, true});
  if (hz_ == 0) {
    // No kernel config to read CONFIG_HZ from: measure jiffies per second.
    std::vector<IterRecord> a, b;
    std::string err_text;
    double t0 = MonotonicSeconds();
    if (RunIter(a, &err_text) && !a.empty()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      double t1 = MonotonicSeconds();
      if (RunIter(b, &err_text) && !b.empty()) {
        hz_ = RoundToKernelHz(static_cast<double>(b[0].state.now - a[0].state.now) / (t1 - t0)).value_or(0);
      }
    }
    if (hz_ == 0) {
      hz_ = 250;
      SP_LOG_WARN("CONFIG_HZ unknown (no /proc/config.gz or /boot/config-*); assuming 250 for pressure seconds");
    }
  }
}

void BpfSourceImpl::SetUpVmpressure() {
  // The argument positions come from the kernel's own prototype: 6.1 is
  // (gfp, memcg, tree, scanned, reclaimed); a newer kernel may add `order`
  // (docs: kernel notes §1.7). Each layout has its own entry program.
  int fid = btf__find_by_name_kind(btf_, "vmpressure", BTF_KIND_FUNC);
  if (fid <= 0) {
    for (const std::string& a : opt_.vmpressure_attach) Skip("vmpressure", a, "vmpressure not in kernel BTF");
    return;
  }
  const btf_type* func = btf__type_by_id(btf_, static_cast<uint32_t>(fid));
  const btf_type* proto = btf__type_by_id(btf_, func->type);
  std::vector<std::string> names;
  const btf_param* params = btf_params(proto);
  for (int i = 0; i < btf_vlen(proto); ++i) names.push_back(btf__name_by_offset(btf_, params[i].name_off));
  const std::vector<std::string> v61 = {"gfp", "memcg", "tree", "scanned", "reclaimed"};
  const std::vector<std::string> with_order = {"gfp", "order", "memcg", "tree", "scanned", "reclaimed"};
  const bool order = names == with_order;
  if (names != v61 && !order) {
    for (const std::string& a : opt_.vmpressure_attach) {
      Skip("vmpressure", a, absl::StrCat("unknown prototype vmpressure(", absl::StrJoin(names, ", "), ")"));
    }
    return;
  }
  for (const std::string& attach : opt_.vmpressure_attach) {
    if (attach == "kprobe" && !KallsymsHas(opt_.paths.procfs, "vmpressure")) {
      Skip("vmpressure", attach, "vmpressure not in kallsyms");
      continue;
    }
    if (attach != "fentry" && attach != "kprobe") continue;
    sp_vmpressure* s = sp_vmpressure__open();
    if (!s) {
      Skip("vmpressure", attach, absl::StrCat("open: ", Errno(errno)));
      continue;
    }
    s->rodata->targ_v1 = v1_;
    std::vector<std::pair<std::string, bpf_program*>> progs;
    if (attach == "fentry") {
      progs = {order ? std::make_pair(std::string("vmp_fentry_order"), s->progs.vmp_fentry_order)
                     : std::make_pair(std::string("vmp_fentry"), s->progs.vmp_fentry),
               {"vmp_fexit", s->progs.vmp_fexit}};
    } else {
      progs = {order ? std::make_pair(std::string("vmp_kprobe_order"), s->progs.vmp_kprobe_order)
                     : std::make_pair(std::string("vmp_kprobe"), s->progs.vmp_kprobe),
               {"vmp_kretprobe", s->progs.vmp_kretprobe}};
    }
    for (auto& [n, p] : progs) bpf_program__set_autoload(p, true);
    int err = sp_vmpressure__load(s);
    if (err) {
      Skip("vmpressure", attach, absl::StrCat("load refused: ", Errno(err)));
      sp_vmpressure__destroy(s);
      continue;
    }
    std::vector<bpf_link*> links;
    std::string fail;
    for (auto& [n, p] : progs) {
      bpf_link* l = bpf_program__attach(p);
      if (!l) {
        fail = absl::StrCat("attach ", n, " failed: ", Errno(errno), attach == "kprobe" ? " (kernel without kprobes?)" : "");
        break;
      }
      links.push_back(l);
    }
    if (!fail.empty()) {
      for (bpf_link* l : links) bpf_link__destroy(l);
      Skip("vmpressure", attach, fail);
      sp_vmpressure__destroy(s);
      continue;
    }
    vmp_ = s;
    vmp_links_ = std::move(links);
    vmp_progs_ = std::move(progs);
    vmp_tier_ = attach == "fentry" ? Tier::kFentry : Tier::kKprobe;
    probes_.push_back({"vmpressure", attach, true});
    return;
  }
}

void BpfSourceImpl::LogSetUp() {
  std::vector<std::string> attached;
  for (const ProbeStatus& p : probes_) {
    if (p.attached) attached.push_back(absl::StrCat(p.probe, "/", p.attach));
  }
  SP_LOG_INFO("eBPF probes attached: ", attached.empty() ? "none" : absl::StrJoin(attached, ", "));
  for (const std::string& s : skipped_) SP_LOG_INFO("eBPF tier skipped: ", s);
}

bool BpfSourceImpl::RunIter(std::vector<IterRecord>& recs, std::string* err) {
  recs.clear();
  const uint64_t gen = ++iter_gen_;
  iter_->bss->gen = gen;  // mmaped .bss: seen by the next walk
  int fd = bpf_iter_create(bpf_link__fd(iter_link_));
  if (fd < 0) {
    *err = absl::StrCat("bpf_iter_create: ", Errno(errno));
    return false;
  }
  // The walk runs inside read(); the program writes to the memcg_state map,
  // not to the seq_file, so read() returns 0 at the end of the walk.
  char sink[64];
  for (;;) {
    ssize_t n = ::read(fd, sink, sizeof sink);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      *err = absl::StrCat("iterator read: ", Errno(errno));
      ::close(fd);
      return false;
    }
    if (n == 0) break;
  }
  ::close(fd);
  std::vector<uint64_t> stale;
  const int map_fd = bpf_map__fd(iter_->maps.memcg_state);
  ReadHashMap<sp_memcg_state>(map_fd, [&](uint64_t id, const sp_memcg_state& v) {
    if (v.gen == gen) {
      recs.push_back({id, v});
    } else {
      stale.push_back(id);  // not visited by this walk: the cgroup is gone
    }
  });
  for (uint64_t id : stale) bpf_map_delete_elem(map_fd, &id);
  return true;
}

void BpfSourceImpl::CollectIter(Sample& sample) {
  std::vector<IterRecord> recs;
  std::string err;
  if (!RunIter(recs, &err)) {
    if (!iter_error_logged_) {
      iter_error_logged_ = true;
      SP_LOG_WARN("cgroup iterator: ", err, "; socket pressure falls back to the next tier");
    }
    return;
  }
  last_iter_ids_.clear();
  const uint64_t hz = static_cast<uint64_t>(hz_);
  for (const IterRecord& rec : recs) {
    const sp_memcg_state& r = rec.state;
    last_iter_ids_.push_back(rec.cgroup_id);
    auto live = [&](uint64_t now, uint64_t deadline) { return deadline != 0 && static_cast<int64_t>(now - deadline) < 0; };
    auto [it, fresh] = iter_state_.try_emplace(rec.cgroup_id);
    IterState& s = it->second;
    if (fresh) {
      // First sight: a live deadline was asserted within the last HZ.
      if (live(r.now, r.deadline)) s.st.assertions = 1;
    } else {
      // Time under pressure in (prev, now]: the tail of the previous
      // deadline, plus the new deadline's [deadline - HZ, deadline] window
      // (vmpressure() sets jiffies + HZ), merged.
      uint64_t a0 = s.now, a1 = s.deadline > s.now ? std::min(s.deadline, r.now) : s.now;
      uint64_t b0 = 0, b1 = 0;
      if (r.deadline != s.deadline && r.deadline != 0) {
        ++s.st.assertions;
        b0 = std::max(r.deadline - std::min(r.deadline, hz), s.now);
        b1 = std::min(r.deadline, r.now);
        if (b1 < b0) b1 = b0;
      }
      uint64_t j = (a1 - a0) + (b1 - b0);
      if (b1 > b0 && a1 > a0) j -= std::max<int64_t>(0, static_cast<int64_t>(std::min(a1, b1)) -
                                                          static_cast<int64_t>(std::max(a0, b0)));
      s.st.seconds += hz ? static_cast<double>(j) / static_cast<double>(hz) : 0;
    }
    s.deadline = r.deadline;
    s.now = r.now;
    s.st.active = live(r.now, r.deadline) || (r.flags & SP_REC_TCPMEM_PRESSURE);
    sample.pressure[Tier::kIter][rec.cgroup_id] = s.st;
  }
  sample.MarkLive(Signal::kSocketPressure, Tier::kIter);
}

void BpfSourceImpl::CollectVmpressure(Sample& sample) {
  auto& reclaim = sample.reclaim[vmp_tier_];
  auto& pressure = sample.pressure[vmp_tier_];
  const uint64_t now_ns = MonotonicNs();
  const double hz = hz_ ? hz_ : 250;
  ReadHashMap<sp_reclaim_val>(bpf_map__fd(vmp_->maps.reclaim), [&](uint64_t id, const sp_reclaim_val& v) {
    ReclaimCounters& r = reclaim[id];
    r.scanned = v.scanned;
    r.reclaimed = v.reclaimed;
    for (int i = 0; i < 3; ++i) r.windows[i] = v.windows[i];
    r.assertions = v.assertions;
    // The deadline is jiffies-based; the assertion time is CLOCK_MONOTONIC
    // (bpf_ktime_get_ns), so the part still ahead of us is known in ns.
    double until = static_cast<double>(v.last_assert_ns) + static_cast<double>(v.last_remaining_jiffies) * 1e9 / hz;
    double ahead = std::max(0.0, until - static_cast<double>(now_ns)) * 1e-9;
    PressureState& p = pressure[id];
    p.assertions = v.assertions;
    p.active = v.assertions > 0 && ahead > 0;
    p.seconds = std::max(0.0, static_cast<double>(v.pressure_jiffies) / hz - ahead);
  });
  sample.MarkLive(Signal::kReclaim, vmp_tier_);
  sample.MarkLive(Signal::kSocketPressure, vmp_tier_);
}

absl::Status BpfSourceImpl::Collect(Sample& sample) {
  if (first_collect_) {
    first_collect_ = false;
    LogSetUp();
    if (opt_.drop_capabilities) DropUnneededCapabilities();
  }
  sample.probes.insert(sample.probes.end(), probes_.begin(), probes_.end());
  uint64_t lost = 0;
  const bool stats = BpfStatsEnabled(opt_.paths.procfs);
  if (clamps_) {
    auto& by_id = sample.clamps[clamps_tier_];
    ReadHashMap<uint64_t>(bpf_map__fd(clamps_->maps.clamps),
                          [&](uint64_t id, uint64_t n) { by_id[id].clamps = n; });
    sample.MarkLive(Signal::kWindowClamps, clamps_tier_);
    lost += ReadStats(bpf_map__fd(clamps_->maps.stats))[SP_STAT_LOST];
    if (stats) AddProgramStats(sample, clamps_prog_name_, clamps_prog_);
  }
  if (iter_) {
    CollectIter(sample);
    if (stats) AddProgramStats(sample, "memcg_iter", iter_->progs.memcg_iter);
  }
  if (vmp_) {
    CollectVmpressure(sample);
    lost += ReadStats(bpf_map__fd(vmp_->maps.stats))[SP_STAT_LOST];
    if (stats) {
      for (const auto& [n, p] : vmp_progs_) AddProgramStats(sample, n, p);
    }
  }
  sample.events_lost += lost;
  return absl::OkStatus();
}

#endif  // SOCKPRESSURE_WITH_BPF

// Built without BPF, or no privilege: reports the probes as not attached.
class NoBpfSource final : public BpfSource {
 public:
  explicit NoBpfSource(std::string why) : why_(std::move(why)) {}
  absl::Status Collect(Sample& sample) override {
    if (!logged_) {
      logged_ = true;
      SP_LOG_INFO("eBPF tiers unavailable: ", why_, "; the agent runs on the cgroupfs and sock_diag tiers");
    }
    for (const char* p : {"vmpressure", "socket_pressure", "window_clamps"}) sample.probes.push_back({p, "none", false});
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

}  // namespace

bool BpfBuiltIn() {
#ifdef SOCKPRESSURE_WITH_BPF
  return true;
#else
  return false;
#endif
}

std::unique_ptr<BpfSource> NewBpfSource(const BpfOptions& options) {
#ifdef SOCKPRESSURE_WITH_BPF
  return std::make_unique<BpfSourceImpl>(options);
#else
  (void)options;
  return std::make_unique<NoBpfSource>("not built in (SOCKPRESSURE_BPF=OFF or no clang/bpftool/libbpf at build time)");
#endif
}

std::unique_ptr<Source> EnableBpfProbe(absl::string_view probe) {
  std::lock_guard<std::mutex> lock(flags_mu);
  enabled_probes.insert(std::string(probe));
  return nullptr;
}

std::unique_ptr<Source> NewBpfSourceFromFlags(const SourceContext& ctx) {
  BpfOptions o;
  o.paths = ctx.paths;
  std::string unusable = KernelTiersUnusableReason(ctx.paths.cgroupfs);
  if (!unusable.empty()) return std::make_unique<NoBpfSource>(unusable);
  {
    std::lock_guard<std::mutex> lock(flags_mu);
    o.clamps = enabled_probes.count("bpf_clamps") > 0;
    o.pressure = enabled_probes.count("bpf_pressure") > 0;
    o.vmpressure = enabled_probes.count("bpf_vmpressure") > 0;
  }
  if (!ctx.bpf_vmpressure_attach.empty()) o.vmpressure_attach = ctx.bpf_vmpressure_attach;
  if (!ctx.bpf_clamps_attach.empty()) o.clamp_attach = ctx.bpf_clamps_attach;
  return NewBpfSource(o);
}

}  // namespace sockpressure
