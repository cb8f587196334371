// Small run-time facts about the running kernel that the BPF tiers need.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace sockpressure {

// CONFIG_HZ of the running kernel from /proc/config.gz or
// /boot/config-<release>; nullopt when neither is readable. socket_pressure
// deadlines are jiffies + HZ (mm/vmpressure.c), so HZ converts them to time.
std::optional<int> KernelConfigHz(const std::string& procfs_root);

// Rounds a measured jiffies/second rate to the nearest CONFIG_HZ choice
// (100, 250, 300, 1000); nullopt when it is far from all of them.
std::optional<int> RoundToKernelHz(double rate);

// kernel.bpf_stats_enabled (read only; the agent never changes it): the
// file is kept open and re-read with one pread() (a sysctl file regenerates
// its text at offset 0), not looked up each time, and at most once per
// `reread_seconds`: a /proc/sys read is one of the dearest syscalls of an
// idle sample (about 40 us on the project's VM), and the flag only says
// whether the kernel counts run time, which the agent then exports from
// the next read on (0: every call).
// Not thread-safe: one collector owns it.
class BpfStatsFlag {
 public:
  BpfStatsFlag(const std::string& procfs_root, double reread_seconds);
  BpfStatsFlag(const BpfStatsFlag&) = delete;
  BpfStatsFlag& operator=(const BpfStatsFlag&) = delete;
  ~BpfStatsFlag();
  bool Enabled();

 private:
  bool Read();
  std::string path_;
  std::string buf_;
  int fd_ = -1;
  uint64_t reread_ns_;
  uint64_t read_ns_ = 0;  // steady_clock ns of the last read; 0: never
  bool enabled_ = false;
};

// Why the kernel-side tiers (eBPF, sock_diag) cannot be matched with the
// cgroups under `cgroupfs_root`, or "" when they can. They report the running
// kernel's cgroup ids, which only mean something against the live cgroup
// filesystem: not against a fixture tree (--path.cgroupfs in tests and
// simulations), nor when there is no memory hierarchy at all.
std::string KernelTiersUnusableReason(const std::string& cgroupfs_root);

}  // namespace sockpressure
