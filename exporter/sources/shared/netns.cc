#include "exporter/sources/shared/netns.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "exporter/common/file_reader.h"
#include "exporter/sources/shared/privileged_worker.h"

namespace sockpressure {

NetnsScanner::NetnsScanner(std::string procfs, std::vector<std::string> run_netns_dirs,
                           std::chrono::steady_clock::duration full_rescan, size_t resolve_per_list)
    : procfs_(std::move(procfs)), run_netns_dirs_(std::move(run_netns_dirs)), full_rescan_(full_rescan),
      resolve_per_list_(resolve_per_list) {}

std::vector<NetnsRef> NetnsScanner::List() {
  std::vector<NetnsRef> out;
  std::unordered_set<uint64_t> seen;
  struct stat st;
  // thread-self: the namespace of this (sampler) thread, which is the one a
  // plain socket() here would query.
  std::string self = JoinPath(procfs_, "thread-self/ns/net");
  if (::stat(self.c_str(), &st) != 0) self = JoinPath(procfs_, "self/ns/net");
  if (::stat(self.c_str(), &st) == 0) {
    seen.insert(st.st_ino);
    out.push_back({static_cast<uint64_t>(st.st_ino), self, true});
  } else {
    out.push_back({0, "", true});  // procfs elsewhere: still query our own namespace
  }
  auto add = [&](const std::string& path) {
    struct stat s;
    if (::stat(path.c_str(), &s) != 0) return;  // gone, or no ptrace access
    if (!seen.insert(s.st_ino).second) return;
    out.push_back({static_cast<uint64_t>(s.st_ino), path, false});
  };
  for (const std::string& dir : run_netns_dirs_) {
    if (DIR* d = ::opendir(dir.c_str())) {
      while (struct dirent* de = ::readdir(d)) {
        if (de->d_name[0] != '.') add(JoinPath(dir, de->d_name));
      }
      ::closedir(d);
    }
  }
  const auto now = std::chrono::steady_clock::now();
  if (round_ == 0 || now - last_full_ >= full_rescan_) {
    last_full_ = now;
    ++round_;
  }
  // The live pids, in /proc's order.
  std::vector<uint64_t> pids;
  if (DIR* d = ::opendir(procfs_.c_str())) {
    while (struct dirent* de = ::readdir(d)) {
      if (de->d_name[0] >= '1' && de->d_name[0] <= '9') pids.push_back(std::strtoull(de->d_name, nullptr, 10));
    }
    ::closedir(d);
  }
  auto path_of = [&](uint64_t pid) { return absl::StrCat(procfs_, "/", pid, "/ns/net"); };
  std::unordered_map<uint64_t, Resolved> by_pid;  // the live pids only
  by_pid.reserve(pids.size());
  size_t budget = resolve_per_list_;
  auto resolve = [&](uint64_t pid) {
    --budget;
    // readlink is cheaper than stat here and yields "net:[INODE]".
    char link[64];
    Resolved r{0, round_};
    ssize_t n = ::readlink(path_of(pid).c_str(), link, sizeof link - 1);
    if (n > 5) {
      link[n] = 0;
      r.inode = std::strtoull(link + 5, nullptr, 10);  // skip "net:["
    }
    by_pid[pid] = r;
  };
  // New pids first (a new pod's namespace), then those resolved before the
  // last full rescan, longest ago first; the others keep their cached
  // namespace until their turn.
  std::vector<std::pair<uint64_t, uint64_t>> stale;  // round, pid
  for (uint64_t pid : pids) {
    auto cached = by_pid_.find(pid);
    if (cached == by_pid_.end()) {
      if (budget > 0) resolve(pid);
    } else {
      by_pid[pid] = cached->second;
      if (cached->second.round != round_) stale.emplace_back(cached->second.round, pid);
    }
  }
  if (budget > 0 && !stale.empty()) {
    const size_t n = std::min(budget, stale.size());
    std::partial_sort(stale.begin(), stale.begin() + static_cast<std::ptrdiff_t>(n), stale.end());
    for (size_t i = 0; i < n; ++i) resolve(stale[i].second);
  }
  for (uint64_t pid : pids) {
    auto r = by_pid.find(pid);
    if (r == by_pid.end() || r->second.inode == 0 || !seen.insert(r->second.inode).second) continue;
    out.push_back({r->second.inode, path_of(pid), false});
  }
  by_pid_.swap(by_pid);
  return out;
}

std::vector<NetnsRef> ListNetworkNamespaces(const std::string& procfs, const std::vector<std::string>& run_netns_dirs) {
  return NetnsScanner(procfs, run_netns_dirs, std::chrono::steady_clock::duration::zero(), SIZE_MAX).List();
}

std::vector<int> OpenInNamespaces(const std::vector<NetnsRef>& namespaces,
                                  const std::function<int(std::string* err)>& open, std::string* first_error) {
  std::vector<int> fds(namespaces.size(), -1);
  auto open_here = [&](size_t i) {
    std::string err;
    fds[i] = open(&err);
    if (fds[i] < 0 && first_error->empty()) *first_error = err;
  };
  // The caller's own namespace needs no setns(): open it right here. On a
  // node without pods this is the only one, and no other thread is involved.
  bool foreign = false;
  for (size_t i = 0; i < namespaces.size(); ++i) {
    if (namespaces[i].own) {
      open_here(i);
    } else {
      foreign = true;
    }
  }
  if (!foreign) return fds;
  std::string worker_error = PrivilegedWorker::Get().Run([&] {
    for (size_t i = 0; i < namespaces.size(); ++i) {
      const NetnsRef& ns = namespaces[i];
      if (ns.own) continue;
      int nsfd = ::open(ns.path.c_str(), O_RDONLY | O_CLOEXEC);
      if (nsfd < 0) {
        if (first_error->empty()) *first_error = absl::StrCat("open ", ns.path, ": ", std::strerror(errno));
        continue;
      }
      // A cached path may now name another namespace (its process moved):
      // opening there would count that namespace twice, or this one never.
      struct stat st;
      if (ns.inode != 0 && (::fstat(nsfd, &st) != 0 || st.st_ino != ns.inode)) {
        ::close(nsfd);
        if (first_error->empty()) *first_error = absl::StrCat(ns.path, ": no longer namespace ", ns.inode);
        continue;
      }
      int rc = ::setns(nsfd, CLONE_NEWNET);
      int err = errno;
      ::close(nsfd);
      if (rc != 0) {
        if (first_error->empty()) *first_error = absl::StrCat("setns ", ns.path, ": ", std::strerror(err));
        continue;
      }
      open_here(i);
    }
  });
  if (!worker_error.empty() && first_error->empty()) *first_error = worker_error;
  return fds;
}

std::vector<int> OpenSocketsInNamespaces(const std::vector<NetnsRef>& namespaces, int domain, int type,
                                         int protocol, std::string* first_error) {
  return OpenInNamespaces(
      namespaces,
      [&](std::string* err) {
        int fd = ::socket(domain, type | SOCK_CLOEXEC, protocol);
        if (fd < 0) *err = absl::StrCat("socket: ", std::strerror(errno));
        return fd;
      },
      first_error);
}

}  // namespace sockpressure
