#include "exporter/sources/shared/capabilities.h"

#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "exporter/common/logging.h"

namespace sockpressure {
namespace {

std::mutex mu;
uint64_t needed = 0;
std::string reasons;
bool dropped = false;
int requests = 0;          // NeedCapabilities() and NeedCapabilitiesForJobs() calls with a capability
int collect_requests = 0;  // NeedCapabilities() calls with a capability

// Debian's UAPI header may predate CAP_BPF (39) / CAP_PERFMON (38).
constexpr int kCapLastKnown = 40;
const char* const kNames[kCapLastKnown + 1] = {
    "cap_chown", "cap_dac_override", "cap_dac_read_search", "cap_fowner", "cap_fsetid", "cap_kill",
    "cap_setgid", "cap_setuid", "cap_setpcap", "cap_linux_immutable", "cap_net_bind_service",
    "cap_net_broadcast", "cap_net_admin", "cap_net_raw", "cap_ipc_lock", "cap_ipc_owner", "cap_sys_module",
    "cap_sys_rawio", "cap_sys_chroot", "cap_sys_ptrace", "cap_sys_pacct", "cap_sys_admin", "cap_sys_boot",
    "cap_sys_nice", "cap_sys_resource", "cap_sys_time", "cap_sys_tty_config", "cap_mknod", "cap_lease",
    "cap_audit_write", "cap_audit_control", "cap_setfcap", "cap_mac_override", "cap_mac_admin", "cap_syslog",
    "cap_wake_alarm", "cap_block_suspend", "cap_audit_read", "cap_perfmon", "cap_bpf", "cap_checkpoint_restore"};

bool GetCaps(__user_cap_data_struct data[2]) {
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  return ::syscall(SYS_capget, &hdr, data) == 0;
}

int LastCap() {
  // /proc/sys/kernel/cap_last_cap would tell exactly; probing the bounding
  // set with PR_CAPBSET_READ needs no file access.
  int last = 0;
  for (int c = 0; c <= 63; ++c) {
    if (::prctl(PR_CAPBSET_READ, c, 0, 0, 0) < 0) break;
    last = c;
  }
  return last;
}

}  // namespace

uint64_t CapBit(int cap) { return uint64_t{1} << cap; }

uint64_t BpfRuntimeCapabilities() {
  utsname u{};
  int major = 0, minor = 0;
  if (::uname(&u) == 0 && std::sscanf(u.release, "%d.%d", &major, &minor) == 2 &&
      (major > 6 || (major == 6 && minor >= 5))) {
    return 0;
  }
  return LastCap() >= kCapBpf ? CapBit(kCapBpf) : CapBit(CAP_SYS_ADMIN);
}

uint64_t BpfAttachCapabilities() {
  return LastCap() >= kCapBpf ? CapBit(kCapBpf) | CapBit(kCapPerfmon) : CapBit(CAP_SYS_ADMIN);
}

namespace {
void Keep(uint64_t mask, const char* why, bool collects) {
  std::lock_guard<std::mutex> lock(mu);
  needed |= mask;
  if (mask != 0) ++requests;
  if (mask != 0 && collects) ++collect_requests;
  absl::StrAppend(&reasons, reasons.empty() ? "" : "; ", why, ": ", CapabilityNames(mask));
}
}  // namespace

void NeedCapabilities(uint64_t mask, const char* why) { Keep(mask, why, /*collects=*/true); }

void NeedCapabilitiesForJobs(uint64_t mask, const char* why) { Keep(mask, why, /*collects=*/false); }

int CapabilityRequests() {
  std::lock_guard<std::mutex> lock(mu);
  return requests;
}

int CollectOnWorkerRequests() {
  std::lock_guard<std::mutex> lock(mu);
  return collect_requests;
}

std::string MissingBpfPrivilege() {
  uint64_t eff = EffectiveCapabilities();
  bool admin = eff & CapBit(CAP_SYS_ADMIN);
  bool bpf_perfmon = (eff & CapBit(kCapBpf)) && (eff & CapBit(kCapPerfmon));
  if (admin || bpf_perfmon) return "";
  return "missing CAP_BPF+CAP_PERFMON (or CAP_SYS_ADMIN): run as root or grant them";
}

uint64_t EffectiveCapabilities() {
  __user_cap_data_struct data[2] = {};
  if (!GetCaps(data)) return 0;
  return uint64_t{data[0].effective} | (uint64_t{data[1].effective} << 32);
}

std::string CapabilityNames(uint64_t mask) {
  std::string out;
  for (int c = 0; c < 64; ++c) {
    if (!(mask & CapBit(c))) continue;
    if (!out.empty()) out += ",";
    if (c <= kCapLastKnown) out += kNames[c];
    else absl::StrAppend(&out, "cap_", c);
  }
  return out.empty() ? "none" : out;
}

std::string DropUnneededCapabilities() {
  std::lock_guard<std::mutex> lock(mu);
  if (dropped) return "";
  dropped = true;
  __user_cap_data_struct data[2] = {};
  if (!GetCaps(data)) return "";
  uint64_t permitted = uint64_t{data[0].permitted} | (uint64_t{data[1].permitted} << 32);
  if (permitted == 0) return "";
  const uint64_t keep = needed & permitted;
  // Bounding set first: PR_CAPBSET_DROP itself needs CAP_SETPCAP, which we
  // are about to give up. This makes the drop stick across execve().
  if (permitted & CapBit(CAP_SETPCAP)) {
    for (int c = 0, last = LastCap(); c <= last; ++c) {
      if (!(keep & CapBit(c))) ::prctl(PR_CAPBSET_DROP, c, 0, 0, 0);
    }
  }
  ::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  data[0].effective = data[0].permitted = static_cast<uint32_t>(keep);
  data[1].effective = data[1].permitted = static_cast<uint32_t>(keep >> 32);
  data[0].inheritable = data[1].inheritable = 0;
  if (::syscall(SYS_capset, &hdr, data) != 0) {
    SP_LOG_WARN("could not drop capabilities: ", std::strerror(errno));
    return "";
  }
  // The mask is logged too so that tests (and operators) can compare it with
  // /proc/PID/task/*/status without a name table.
  std::string summary = absl::StrCat("kept capabilities mask 0x", absl::Hex(keep), " ", CapabilityNames(keep), " (",
                                     reasons.empty() ? "no collector needs any" : reasons, "), dropped ",
                                     CapabilityNames(permitted & ~keep), " from every set including the bounding set");
  if (!(permitted & CapBit(CAP_SETPCAP))) {
    absl::StrAppend(&summary, " (bounding set unchanged: CAP_SETPCAP was not granted)");
  }
  SP_LOG_INFO(summary);
  return summary;
}

}  // namespace sockpressure
