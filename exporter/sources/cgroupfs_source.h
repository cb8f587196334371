// Collector "cgroupfs": walks the memory cgroup hierarchy (v2, or the v1
// memory controller on hybrid/legacy hosts) and reads each cgroup's memory
// files into Sample::cgroups.
//
// Why these files: the vmpressure estimate needs memory.stat pgscan/pgsteal
// (docs/kernel.md §3); sock_throttled in memory.events.local
// is the kernel's own throttle counter from 6.19; the rest are the context an
// SRE needs (swap, anon vs file, sockets, PSI, limits).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/strings/string_view.h"
#include "exporter/sources/source.h"

namespace sockpressure {

struct CgroupfsOptions {
  CgroupfsOptions(size_t max = 5000, uint64_t slow = 1) : max_cgroups(max), slow_every(slow) {}
  // Export at most this many cgroups: those with reclaim activity or socket
  // memory (and their ancestors) first, then the rest shallowest first. The
  // others are counted (sockpressure_cgroups_untracked).
  size_t max_cgroups = 5000;
  // The full pass, every this many samples (and on the first): every
  // directory is listed again; with read_context (or when --cgroup.max cut
  // the last sample) every cgroup is read too, with the slow files (limits,
  // sizes, events, PSI). In between only the subtrees whose reclaim counters
  // moved are read, and of a moving parent's children only those the
  // remainder check cannot leave out (docs/sampling.md).
  uint64_t slow_every = 1;
  // Keep memory.stat and the directory open and re-read them with pread().
  // kAuto: only on a real cgroupfs, whose files are never replaced; a plain
  // directory tree (fixtures) may swap a file by rename(2).
  enum class KeepFiles { kAuto, kAlways, kNever };
  KeepFiles keep_files = KeepFiles::kAuto;
  // Read every cgroup's slow files on the full pass (the context series
  // need them). Off: only a cgroup whose reclaim moved has them read, once
  // per full pass.
  bool read_context = true;
  // --cgroup.include/exclude/level: whether a cgroup path is exported; empty
  // exports every cgroup. Called once per cgroup when it is first seen.
  std::function<bool(absl::string_view path)> exported;
  // Descriptors the collector may keep open; 0: from RLIMIT_NOFILE.
  size_t fd_budget = 0;
  // Watch every listed directory with inotify (dir_watcher.h): a directory
  // is listed again when a cgroup is created or removed in it, at once, and
  // the full pass lists none of the watched ones. Off: every directory is
  // listed on the full pass (and when a moving one's link count changed).
  bool watch_dirs = true;
};

std::unique_ptr<Source> NewCgroupfsSource(const Paths& paths, CgroupfsOptions options);

}  // namespace sockpressure
