// The one thread that keeps a capability.
//
// After the eBPF programs are attached, what still needs privilege is
// entering other network namespaces for the TCP census (setns() needs
// CAP_SYS_ADMIN, opening another process's /proc/PID/ns/net CAP_SYS_PTRACE)
// and, before Linux 6.5, bpf(2) on the fds the agent holds (CAP_BPF). The
// collectors that declared such a need (NeedCapabilities() in their factory)
// collect on this thread, `sp-priv`; every other thread — HTTP, sampler,
// kubelet, Alertmanager, main once it only waits for signals — holds none
// (exporter/common/thread_privilege.h). docs/threat-model.md has the model.
//
// setns() moves only the calling thread, so a job may leave this thread in
// another namespace: it goes back to the one it started in after every job,
// and never pins a namespace whose pod is gone.
#pragma once

#include <functional>
#include <string>

namespace sockpressure {

// Thread-safe: Run() serialises its callers.
class PrivilegedWorker {
 public:
  static PrivilegedWorker& Get();

  // Starts the thread now, so that it inherits the calling thread's
  // capabilities: main() calls this after DropUnneededCapabilities() and
  // before it drops its own. Without it, the first Run() starts the thread
  // (with the caller's capabilities).
  void Start();

  // Runs fn on the worker thread and waits for it; on the worker itself it
  // runs inline. Afterwards the worker is back in its own network namespace.
  // Returns "" or why it could not go back (the worker then refuses every
  // later job with that message rather than run them in a foreign
  // namespace).
  std::string Run(const std::function<void()>& fn);

  // Whether the calling thread is the worker.
  bool OnWorker() const;

 private:
  struct Impl;
  PrivilegedWorker();
  Impl* const impl_;  // lives as long as the process, as the singleton does
};

}  // namespace sockpressure
