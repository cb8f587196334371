#include "exporter/sources/sock_diag/netns.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "exporter/common/file_reader.h"

namespace sockpressure {

std::vector<NetnsRef> ListNetworkNamespaces(const std::string& procfs, const std::vector<std::string>& run_netns_dirs) {
  std::vector<NetnsRef> out;
  std::unordered_set<uint64_t> seen;
  struct stat st;
  // thread-self: the namespace of this (sampler) thread, which is the one a
  // plain socket() here would query.
  std::string self = JoinPath(procfs, "thread-self/ns/net");
  if (::stat(self.c_str(), &st) != 0) self = JoinPath(procfs, "self/ns/net");
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
  for (const std::string& dir : run_netns_dirs) {
    if (DIR* d = ::opendir(dir.c_str())) {
      while (struct dirent* de = ::readdir(d)) {
        if (de->d_name[0] != '.') add(JoinPath(dir, de->d_name));
      }
      ::closedir(d);
    }
  }
  if (DIR* d = ::opendir(procfs.c_str())) {
    while (struct dirent* de = ::readdir(d)) {
      if (de->d_name[0] < '1' || de->d_name[0] > '9') continue;
      // readlink is cheaper than stat here and yields "net:[INODE]".
      char link[64];
      std::string p = absl::StrCat(procfs, "/", de->d_name, "/ns/net");
      ssize_t n = ::readlink(p.c_str(), link, sizeof link - 1);
      if (n <= 5) continue;
      link[n] = 0;
      uint64_t ino = std::strtoull(link + 5, nullptr, 10);  // skip "net:["
      if (ino == 0 || seen.count(ino)) continue;
      seen.insert(ino);
      out.push_back({ino, p, false});
    }
    ::closedir(d);
  }
  return out;
}

std::vector<int> OpenInNamespaces(const std::vector<NetnsRef>& namespaces,
                                  const std::function<int(std::string* err)>& open, std::string* first_error) {
  std::vector<int> fds(namespaces.size(), -1);
  // setns() changes only the calling thread's namespace; doing it on a
  // thread that exits right after keeps every other thread where it was.
  std::thread worker([&] {
    for (size_t i = 0; i < namespaces.size(); ++i) {
      const NetnsRef& ns = namespaces[i];
      if (!ns.own) {
        int nsfd = ::open(ns.path.c_str(), O_RDONLY | O_CLOEXEC);
        if (nsfd < 0) {
          if (first_error->empty()) *first_error = absl::StrCat("open ", ns.path, ": ", std::strerror(errno));
          continue;
        }
        int rc = ::setns(nsfd, CLONE_NEWNET);
        int err = errno;
        ::close(nsfd);
        if (rc != 0) {
          if (first_error->empty()) *first_error = absl::StrCat("setns ", ns.path, ": ", std::strerror(err));
          continue;
        }
      }
      std::string err;
      fds[i] = open(&err);
      if (fds[i] < 0 && first_error->empty()) *first_error = err;
    }
  });
  worker.join();
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
