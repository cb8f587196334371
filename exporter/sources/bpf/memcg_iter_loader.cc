#include "exporter/sources/bpf/memcg_iter_loader.h"

#include <bpf/btf.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "exporter/common/logging.h"
#include "exporter/sources/shared/kernel_probe.h"
#include "memcg_iter.skel.h"
#include "sockpressure_bpf.h"

namespace sockpressure {
namespace {

// time_before(now, deadline), as the kernel asks it of socket_pressure: the
// walk records both in jiffies (0: never asserted).
bool DeadlineLive(uint64_t now, uint64_t deadline) {
  return deadline != 0 && static_cast<int64_t>(now - deadline) < 0;
}

}  // namespace

struct MemcgIterLoader::Record {
  uint64_t cgroup_id;
  sp_memcg_state state;
};

MemcgIterLoader::MemcgIterLoader() : ProgramLoader({sp_memcg_iter__open, sp_memcg_iter__load, sp_memcg_iter__destroy}) {}
MemcgIterLoader::~MemcgIterLoader() = default;

std::unique_ptr<MemcgIterLoader> MemcgIterLoader::Attach(const BpfEnv& env, int hz, double uncharged_walk_seconds,
                                                         ProbeLog& log) {
  const std::string attach = "iter";
  if (env.memory_root.empty()) {
    log.Skip("socket_pressure", attach, "no memory cgroup hierarchy found");
    return nullptr;
  }
  if (btf__find_by_name_kind(env.vmlinux, "bpf_iter__cgroup", BTF_KIND_STRUCT) <= 0) {
    log.Skip("socket_pressure", attach, "kernel has no cgroup iterator (needs 6.1+)");
    return nullptr;
  }
  // The walk starts at the memory hierarchy root: the v1 "memory" mount on
  // hybrid hosts, where the default (v2 root) walk sees no memcgs.
  int fd = ::open(env.memory_root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    log.Skip("socket_pressure", attach, absl::StrCat("open ", env.memory_root, ": ", Errno(errno)));
    return nullptr;
  }
  auto attach_iter = [fd](bpf_program* prog) {
    union bpf_iter_link_info linfo;
    std::memset(&linfo, 0, sizeof linfo);
    linfo.cgroup.cgroup_fd = static_cast<uint32_t>(fd);
    linfo.cgroup.order = BPF_CGROUP_ITER_DESCENDANTS_PRE;
    LIBBPF_OPTS(bpf_iter_attach_opts, opts, .link_info = &linfo, .link_info_len = sizeof linfo);
    return bpf_program__attach_iter(prog, &opts);
  };
  std::unique_ptr<MemcgIterLoader> it(new MemcgIterLoader());
  std::string why = it->skel_.Load(
      [&](sp_memcg_iter* s) -> Skeleton<sp_memcg_iter>::Programs {
        s->rodata->targ_v1 = env.v1;
        return {{"memcg_iter", s->progs.memcg_iter}};
      },
      attach_iter);
  ::close(fd);  // the link holds its own reference to the cgroup
  if (!why.empty()) {
    log.Skip("socket_pressure", attach, why);
    return nullptr;
  }
  log.Attached("socket_pressure", attach);
  it->tier_ = Tier::kIter;
  it->stats_fd_ = bpf_map__fd(it->skel_->maps.stats);
  it->hz_ = hz;
  it->v1_ = env.v1;
  it->uncharged_walk_ns_ = static_cast<uint64_t>(std::max(0.0, uncharged_walk_seconds) * 1e9);
  if (it->hz_ == 0) it->MeasureHz();
  return it;
}

void MemcgIterLoader::MeasureHz() {
  // No kernel config to read CONFIG_HZ from: measure jiffies per second.
  std::string err;
  const uint64_t t0 = MonotonicNs();
  if (Run(&err) && !records_.empty()) {
    const uint64_t first = records_[0].state.now;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const double seconds = static_cast<double>(MonotonicNs() - t0) * 1e-9;
    if (Run(&err) && !records_.empty()) {
      hz_ = RoundToKernelHz(static_cast<double>(records_[0].state.now - first) / seconds).value_or(0);
    }
  }
  if (hz_ == 0) {
    hz_ = 250;
    SP_LOG_WARN("CONFIG_HZ unknown (no /proc/config.gz or /boot/config-*); assuming 250 for pressure seconds");
  }
}

bool MemcgIterLoader::Run(std::string* err) {
  const uint64_t gen = ++gen_;
  skel_->bss->gen = gen;  // mmaped .bss: seen by the next walk
  const uint64_t changed = skel_->bss->changed, visited = skel_->bss->visited, charged = skel_->bss->charged;
  int fd = bpf_iter_create(bpf_link__fd(skel_.link(0)));
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
  walked_ns_ = MonotonicNs();
  charged_ = skel_->bss->charged - charged;
  if (Unchanged(changed, visited)) {
    // The map holds the last read's records, refreshed in place: no read.
    for (Record& r : records_) {
      r.state.gen = gen;
      r.state.now = skel_->bss->walk_start;
    }
    return true;
  }
  records_.clear();
  std::vector<uint64_t> stale;
  const int map_fd = bpf_map__fd(skel_->maps.memcg_state);
  ReadHashMap<sp_memcg_state>(map_fd, [&](uint64_t id, const sp_memcg_state& v) {
    if (v.gen == gen) {
      records_.push_back({id, v});
    } else {
      stale.push_back(id);  // not visited by this walk: the cgroup is gone
    }
  });
  for (uint64_t id : stale) bpf_map_delete_elem(map_fd, &id);
  return true;
}

bool MemcgIterLoader::Unchanged(uint64_t changed_before, uint64_t visited_before) const {
  if (skel_->bss->changed != changed_before || skel_->bss->visited - visited_before != records_.size()) return false;
  // Exact only where no deadline was live at the last read: a live one adds
  // time up to each memcg's own visit, which the walk's start would cut.
  // Such a deadline lasts one second (HZ); an idle node has none.
  for (const Record& r : records_) {
    if (static_cast<int64_t>(r.state.now - r.state.deadline) < 0) return false;
  }
  return true;
}

bool MemcgIterLoader::WalkCanWait() const {
  return NothingCanThrottle() && MonotonicNs() - walked_ns_ < uncharged_walk_ns_;
}

bool MemcgIterLoader::NothingCanThrottle() const {
  if (!v1_ || charged_ != 0 || walked_ns_ == 0) return false;
  for (const Record& r : records_) {
    if (r.state.flags & SP_REC_TCPMEM_PRESSURE) return false;
    if (DeadlineLive(r.state.now, r.state.deadline)) return false;
  }
  return true;
}

void MemcgIterLoader::Collect(Sample& sample, bool program_stats) {
  const bool walk = !WalkCanWait() || held_programs_.empty() || held_timed_ != program_stats;
  CollectPressure(sample, walk);
  if (!walk) {
    skel_.AddHeldProgramStats(sample, held_programs_);
    return;
  }
  const size_t before = sample.program_stats.size();
  Finish(sample, program_stats);
  held_programs_.assign(sample.program_stats.begin() + static_cast<std::ptrdiff_t>(before), sample.program_stats.end());
  held_timed_ = program_stats;
}

void MemcgIterLoader::CollectPressure(Sample& sample, bool walk) {
  std::string err;
  if (walk && !Run(&err)) {
    if (!error_logged_) {
      error_logged_ = true;
      SP_LOG_WARN("cgroup iterator: ", err, "; socket pressure falls back to the next tier");
    }
    return;
  }
  last_ids_.clear();
  const uint64_t hz = static_cast<uint64_t>(hz_);
  for (const Record& rec : records_) {
    const sp_memcg_state& r = rec.state;
    last_ids_.push_back(rec.cgroup_id);
    auto [it, fresh] = state_.try_emplace(rec.cgroup_id);
    State& s = it->second;
    if (fresh) {
      // First sight: a live deadline was asserted within the last HZ.
      if (DeadlineLive(r.now, r.deadline)) s.st.assertions = 1;
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
    s.st.active = DeadlineLive(r.now, r.deadline) || (r.flags & SP_REC_TCPMEM_PRESSURE);
    sample.pressure[Tier::kIter][rec.cgroup_id] = s.st;
  }
  sample.MarkLive(Signal::kSocketPressure, Tier::kIter);
}

}  // namespace sockpressure
