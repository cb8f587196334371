// Per-thread seccomp allow-lists for the threads that parse untrusted input.
//
// Capabilities say what a thread may do as root; a seccomp filter says which
// system calls it may make at all. The HTTP threads read whatever any client
// on the node's network sends, and the kubelet and Alertmanager clients read
// what those peers answer: a parser bug there must not be worth an exec, a
// ptrace, a bpf() program, entering a namespace or mounting anything. Like
// capabilities, a filter installed without SECCOMP_FILTER_FLAG_TSYNC binds
// only the calling thread (and threads it creates later), so each such
// thread confines itself, after it is set up and before it reads any input.
//
// A call outside the list fails with EPERM rather than killing the process:
// an unforeseen path (a newer libc, an nss module) must fail one request with
// an error, never take the node's agent down. The lists, and what each
// thread may still do, are in docs/threat-model.md#system-calls.
#pragma once

namespace sockpressure {

enum class SyscallProfile {
  // Serves connections it was handed: sockets it accepted, memory, time,
  // futexes, and opening files read-only (the TLS certificate and key are
  // re-read when they change). No new sockets, no connect.
  kServe,
  // kServe plus what an HTTP(S) client needs: new sockets, connect, poll,
  // and the resolver's calls (getaddrinfo reads /etc files and may send
  // datagrams).
  kClient,
};

// Installs the profile's filter on the calling thread. Needs no_new_privs
// (or CAP_SYS_ADMIN), which EnterUnprivilegedThread() sets. Returns false
// (and the thread runs unfiltered) where the kernel has no seccomp filters
// or the architecture is not one the lists are written for; a caller logs
// that once. A thread may confine itself only once.
bool ConfineThisThread(SyscallProfile profile);

// Whether this build installs filters at all (false on architectures the
// lists do not cover).
bool SyscallFilterSupported();

}  // namespace sockpressure
