// Keeping only the capabilities the agent needs once the probes are attached.
//
// Loading and attaching BPF programs needs CAP_BPF + CAP_PERFMON (+
// CAP_SYS_ADMIN on kernels older than 5.8, and for some attach types);
// afterwards the agent only reads maps, creates iterator fds and enters
// network namespaces. Each feature declares what it still needs at run time
// with NeedCapabilities() from its factory; main() then calls
// DropUnneededCapabilities(), which removes every other capability from the
// effective, permitted, inheritable, ambient and bounding sets.
//
// Capabilities are per thread in Linux (capset() changes the calling thread
// only): main() drops on the main thread right after the collector
// factories, starts the privileged worker (privileged_worker.h), which
// inherits the reduced set, and then drops everything itself. The threads
// started before (HTTP, kubelet identity) dropped everything when they
// started. The reason for each kept capability is documented in
// docs/threat-model.md ("Capabilities").
#pragma once

#include <cstdint>
#include <string>

namespace sockpressure {

// CAP_BPF and CAP_PERFMON (5.8), by number: Debian's UAPI header may
// predate them.
inline constexpr int kCapPerfmon = 38;
inline constexpr int kCapBpf = 39;

// Bit masks over CAP_* numbers (linux/capability.h).
uint64_t CapBit(int cap);

// Why this process may not load tracing BPF programs (fentry, kprobe,
// tracepoints, iterators), or "" when it may: CAP_BPF+CAP_PERFMON, or
// CAP_SYS_ADMIN. Every program would fail with EPERM otherwise; callers say
// so once instead of once per attach type.
std::string MissingBpfPrivilege();

// What bpf(2) commands on fds the agent already holds (map lookups,
// BPF_ITER_CREATE on an attached link, reading the iterator) need after the
// programs are loaded: nothing on Linux >= 6.5, where the
// kernel.unprivileged_bpf_disabled check moved from every command into map
// creation and program load; CAP_BPF before (CAP_SYS_ADMIN on kernels that
// predate CAP_BPF).
uint64_t BpfRuntimeCapabilities();

// What attaching an already loaded tracing program needs (BPF_LINK_CREATE
// or BPF_RAW_TRACEPOINT_OPEN; perf_event_open() for a kprobe): CAP_BPF and
// CAP_PERFMON, or CAP_SYS_ADMIN on kernels that predate them. The
// window-clamp program is attached again whenever socket pressure appears
// (sources/bpf/clamp_arming.h), long after start-up.
uint64_t BpfAttachCapabilities();

// Adds to the set kept by DropUnneededCapabilities(), for a collector that
// needs it on every collect: its factory's caller makes it collect on the
// privileged worker. Thread-safe.
void NeedCapabilities(uint64_t mask, const char* why);
// The same for a collector that needs it only now and then: it keeps
// collecting on the sampler thread and hands just that job to the worker
// (PrivilegedWorker::Run). Thread-safe.
void NeedCapabilitiesForJobs(uint64_t mask, const char* why);
// How many calls of either asked for a capability so far: the privileged
// worker is started when any did.
int CapabilityRequests();
// How many NeedCapabilities() calls did: a collector factory that raised it
// collects on the privileged worker.
int CollectOnWorkerRequests();

// Drops everything not needed, once per process (later calls do nothing).
// No-op (and returns an empty string) when the process is not privileged.
// Returns a human-readable summary of what was kept.
std::string DropUnneededCapabilities();

// The effective capability mask of the calling thread.
uint64_t EffectiveCapabilities();

// Names of the capabilities in `mask`, comma-separated ("cap_bpf,cap_sys_admin").
std::string CapabilityNames(uint64_t mask);

}  // namespace sockpressure
