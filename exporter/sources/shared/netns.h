// Network namespaces of the node, for the sock_diag census.
//
// inet_diag answers only for the network namespace of the netlink socket
// (net/ipv4/inet_diag.c uses sock_net(skb->sk)), and pod sockets live in
// their own namespaces. A netlink socket stays bound to the namespace it was
// created in, so we create one per namespace from the privileged worker
// (privileged_worker.h), which setns()-es into each and back.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"

namespace sockpressure {

struct NetnsRef {
  uint64_t inode = 0;  // namespace id (st_ino of the nsfs file)
  std::string path;    // a file that refers to it (/proc/PID/ns/net, /run/netns/NAME)
  bool own = false;    // the namespace of the calling thread
};

// All distinct network namespaces: every /proc/PID/ns/net under `procfs`
// plus the bind mounts under `run_netns_dirs` (ip netns, CNI), deduplicated
// by inode. The caller's own namespace is first.
std::vector<NetnsRef> ListNetworkNamespaces(const std::string& procfs,
                                            const std::vector<std::string>& run_netns_dirs = {"/run/netns"});

// The same list, kept between samples so that an idle node does not pay a
// readlink() per process per second. Every call re-reads the cheap parts
// (this thread's namespace, the /run/netns bind mounts, the /proc pid list)
// and resolves only pids it has not seen; every `full_rescan` it marks every
// pid to be resolved again. A call resolves at most `resolve_per_list` pids,
// new ones first: so a namespace is picked up within one call when a new
// process (or a bind mount) holds it, unless more processes than that started
// at once, and within `full_rescan` (or as many calls as it takes to get
// through the node's processes at that rate) when an existing process moved
// into it (unshare/setns without a new pid). A cached path that names
// another namespace by then is caught by OpenInNamespaces() (inode check)
// and skipped rather than counted twice. Not thread-safe: one caller (the
// sampler thread).
class NetnsScanner {
 public:
  static constexpr std::chrono::seconds kDefaultFullRescan{60};
  // A readlink of /proc/PID/ns/net costs tens of microseconds on hardware
  // and milliseconds in the lab's emulated guest, where resolving 7,500
  // processes at once held one sample for 34 s.
  static constexpr size_t kResolvePerList = 256;
  explicit NetnsScanner(std::string procfs, std::vector<std::string> run_netns_dirs = {"/run/netns"},
                        std::chrono::steady_clock::duration full_rescan = kDefaultFullRescan,
                        size_t resolve_per_list = kResolvePerList);
  std::vector<NetnsRef> List();

 private:
  struct Resolved {
    uint64_t inode = 0;  // 0: unreadable, tried again after the next full rescan
    uint64_t round = 0;  // the full rescan in which it was resolved
  };
  std::string procfs_;
  std::vector<std::string> run_netns_dirs_;
  std::chrono::steady_clock::duration full_rescan_;
  size_t resolve_per_list_;
  std::chrono::steady_clock::time_point last_full_;
  uint64_t round_ = 0;  // full rescans so far; 0 before the first
  std::unordered_map<uint64_t, Resolved> by_pid_;
};

// Calls open() once inside each namespace (in order): the caller's own
// namespace on the calling thread, the others on the privileged worker,
// which setns()-es there, and returns what it returned: an fd bound to
// that namespace (a netlink socket, a BPF iterator), or -1 with *err set.
// Entries are -1 also where the namespace vanished or setns() was refused.
std::vector<int> OpenInNamespaces(const std::vector<NetnsRef>& namespaces,
                                  const std::function<int(std::string* err)>& open, std::string* first_error);

// Opens one socket(domain, type, protocol) inside each namespace (in order),
// as OpenInNamespaces() does. Entries are -1 where the namespace vanished or
// setns() was refused (needs CAP_SYS_ADMIN; opening another user's
// /proc/PID/ns/net needs CAP_SYS_PTRACE). The caller owns the fds.
std::vector<int> OpenSocketsInNamespaces(const std::vector<NetnsRef>& namespaces, int domain, int type,
                                         int protocol, std::string* first_error);

}  // namespace sockpressure
