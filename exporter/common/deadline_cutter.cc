#include "exporter/common/deadline_cutter.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "exporter/common/syscall_filter.h"
#include "exporter/common/thread_privilege.h"

namespace sockpressure {

DeadlineCutter::DeadlineCutter(std::string thread_name)
    : name_(std::move(thread_name)), thread_([this] { Run(); }) {}

DeadlineCutter::~DeadlineCutter() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  for (int fd : fds_) ::close(fd);
}

void DeadlineCutter::Arm(std::chrono::steady_clock::time_point deadline) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    armed_ = true;
    cut_ = false;
    deadline_ = shut_down_ ? std::min(deadline, std::chrono::steady_clock::now()) : deadline;
  }
  cv_.notify_all();
}

void DeadlineCutter::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    shut_down_ = true;
    if (armed_) deadline_ = std::min(deadline_, std::chrono::steady_clock::now());
  }
  cv_.notify_all();
}

bool DeadlineCutter::Watch(int fd) {
  // fcntl, not dup: the client threads' filter allows it (syscall_filter.cc).
  int copy = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (copy < 0) return false;
  std::lock_guard<std::mutex> lock(mu_);
  fds_.push_back(copy);
  if (cut_) ::shutdown(copy, SHUT_RDWR);  // opened past the deadline: no further wait
  return true;
}

bool DeadlineCutter::Disarm() {
  std::lock_guard<std::mutex> lock(mu_);
  armed_ = false;
  for (int fd : fds_) ::close(fd);
  fds_.clear();
  return cut_;
}

void DeadlineCutter::Run() {
  EnterUnprivilegedThread(name_.c_str());
  ConfineThisThread(SyscallProfile::kServe);  // only shuts sockets down
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (!armed_) {
      cv_.wait(lock);
    } else if (std::chrono::steady_clock::now() < deadline_) {
      cv_.wait_until(lock, deadline_);
    } else {
      // The request's sockets, shut under its blocked call, which then fails
      // at once; again soon, for one it opens after this.
      for (int fd : fds_) ::shutdown(fd, SHUT_RDWR);
      cut_ = true;
      cv_.wait_for(lock, std::chrono::milliseconds(100));
    }
  }
}

}  // namespace sockpressure
