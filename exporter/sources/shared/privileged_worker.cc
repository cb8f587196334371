#include "exporter/sources/shared/privileged_worker.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "exporter/common/logging.h"
#include "exporter/common/thread_privilege.h"

namespace sockpressure {

struct PrivilegedWorker::Impl {
  std::mutex run_mu;  // one Run() at a time
  std::mutex mu;      // guards the fields below
  std::condition_variable cv;
  const std::function<void()>* job = nullptr;
  bool done = false;
  std::string stranded;  // why the worker could not go home; then it takes no job
  bool started = false;
  std::thread::id id;
  int home = -1;  // this thread's network namespace when it started

  // After a job: back to the namespace the worker started in. Only when the job left it: setns
  // needs CAP_SYS_ADMIN even to re-enter the current namespace, and an unprivileged agent's jobs
  // never leave, so asking would strand a worker that never moved.
  std::string GoHome() {
    if (home >= 0 && AtHome()) return "";
    if (home >= 0 && ::setns(home, CLONE_NEWNET) == 0) return "";
    return absl::StrCat("the privileged worker cannot return to its network namespace: ",
                        home < 0 ? "it could not open it" : std::strerror(errno));
  }

  bool AtHome() const {
    struct stat here, start;
    return ::stat("/proc/thread-self/ns/net", &here) == 0 && ::fstat(home, &start) == 0 &&
           here.st_dev == start.st_dev && here.st_ino == start.st_ino;
  }

  void Loop() {
    NameThisThread("sp-priv");
    ForbidNewPrivileges();
    home = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      cv.wait(lock, [&] { return job != nullptr; });
      const std::function<void()>* fn = job;
      lock.unlock();
      (*fn)();
      std::string err = GoHome();
      lock.lock();
      if (!err.empty() && stranded.empty()) {
        stranded = err;
        SP_LOG_ERROR(err, "; the census of other network namespaces stops");
      }
      job = nullptr;
      done = true;
      cv.notify_all();
    }
  }

  void StartLocked() {
    std::thread t([this] { Loop(); });
    id = t.get_id();
    t.detach();  // lives as long as the process, as the singleton does
    started = true;
  }
};

PrivilegedWorker& PrivilegedWorker::Get() {
  static PrivilegedWorker* w = new PrivilegedWorker;  // lives as long as the process
  return *w;
}

PrivilegedWorker::PrivilegedWorker() : impl_(new Impl) {}

void PrivilegedWorker::Start() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (!impl_->started) impl_->StartLocked();
}

bool PrivilegedWorker::OnWorker() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->started && impl_->id == std::this_thread::get_id();
}

std::string PrivilegedWorker::Run(const std::function<void()>& fn) {
  Impl* i = impl_;
  if (OnWorker()) {
    fn();
    std::string err = i->GoHome();
    std::lock_guard<std::mutex> lock(i->mu);
    if (!err.empty() && i->stranded.empty()) i->stranded = err;
    return err;
  }
  std::lock_guard<std::mutex> serial(i->run_mu);
  std::unique_lock<std::mutex> lock(i->mu);
  if (!i->stranded.empty()) return i->stranded;
  if (!i->started) i->StartLocked();
  i->job = &fn;
  i->done = false;
  i->cv.notify_all();
  i->cv.wait(lock, [&] { return i->done; });
  return i->stranded;
}

}  // namespace sockpressure
