// The signals the agent reports and the tiers that can produce them.
//
// Every per-cgroup signal can come from several sources of different quality
// ("tiers"). Each sample, the sampler uses the best tier that produced data
// and `sockpressure_signal_source{signal,source}` says which one it was.
#pragma once

#include <array>
#include "absl/strings/string_view.h"

namespace sockpressure {

enum class Signal : int {
  kReclaim = 0,         // scanned/reclaimed pages and vmpressure window verdicts
  kSocketPressure = 1,  // memcg->socket_pressure asserted / active
  kWindowClamps = 2,    // rcv_ssthresh pulled down to 4*advmss under pressure
  kClampedSockets = 3,  // census of sockets clamped right now
  kSockThrottled = 4,   // the kernel's own counter (memory.events sock_throttled, 6.19+)
  kRcvMemDrops = 5,     // segments dropped on receive for lack of memory (skb:kfree_skb reasons)
  kTcpPrunes = 6,       // receive-queue collapses and out-of-order prunes (tcp_prune_queue's work)
};
inline constexpr int kSignalCount = 7;

// Lower value = better. The order is the preference order.
enum class Tier : int {
  kFentry = 0,
  kKprobe = 1,
  kIter = 2,
  kTpBtf = 3,
  kRawTp = 4,
  kSockDiag = 5,
  kMemoryEvents = 6,
  kMemoryStat = 7,
  kNone = 8,
};
inline constexpr int kTierCount = 9;

constexpr absl::string_view SignalName(Signal s) {
  constexpr std::array<absl::string_view, kSignalCount> names = {
      "reclaim",        "socket_pressure", "window_clamps", "clamped_sockets",
      "sock_throttled", "rcv_mem_drops",   "tcp_prunes"};
  return names[static_cast<int>(s)];
}

constexpr absl::string_view TierName(Tier t) {
  constexpr std::array<absl::string_view, kTierCount> names = {
      "fentry", "kprobe", "iter", "tp_btf", "raw_tp", "sock_diag", "memory_events", "memory_stat", "none"};
  return names[static_cast<int>(t)];
}

}  // namespace sockpressure
