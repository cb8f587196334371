// Per-thread least privilege.
//
// Capabilities, the bounding set and no_new_privs belong to a thread in
// Linux, not to the process: capset() and PR_CAPBSET_DROP change the calling
// thread only, and a new thread starts with a copy of its creator's. The
// agent serves HTTP before the eBPF programs are loaded (which needs root),
// so its threads are created by a privileged main thread; each one gives up
// everything itself, first thing, before it reads any input.
#pragma once

namespace sockpressure {

// Names the calling thread (at most 15 characters show in `top -H`, ps and
// /proc/PID/task/TID/comm).
void NameThisThread(const char* name);

// Names the calling thread (unless `name` is null), then drops every capability of it from the
// effective, permitted, inheritable and ambient sets and, where it may
// (CAP_SETPCAP), the whole bounding set, and sets no_new_privs: nothing
// this thread runs, or execs, can regain a privilege. Safe to call
// unprivileged (then it only names the thread and sets no_new_privs).
void EnterUnprivilegedThread(const char* name);

// Sets no_new_privs on the calling thread (kept capabilities stay).
void ForbidNewPrivileges();

}  // namespace sockpressure
