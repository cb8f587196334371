#include "exporter/common/syscall_filter.h"

#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <vector>

#include "exporter/common/logging.h"

namespace sockpressure {
namespace {

#if defined(__x86_64__)
constexpr uint32_t kArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
constexpr uint32_t kArch = AUDIT_ARCH_AARCH64;
#else
constexpr uint32_t kArch = 0;  // not covered: no filter
#endif

// What every confined thread does once it runs: the sockets it was given,
// memory, time, futexes, reading files. The #ifdefs are calls only some
// architectures have (aarch64 has no stat, poll or time, for example).
constexpr long kServeCalls[] = {
    SYS_read, SYS_readv, SYS_write, SYS_writev, SYS_pread64, SYS_lseek, SYS_close, SYS_fstat, SYS_newfstatat,
    SYS_statx, SYS_fcntl,
#ifdef SYS_stat
    SYS_stat, SYS_lstat,
#endif
    // memory (malloc, its arenas and malloc_trim) and threads' own bookkeeping
    SYS_brk, SYS_mmap, SYS_munmap, SYS_mremap, SYS_mprotect, SYS_madvise, SYS_futex, SYS_set_robust_list,
    SYS_rseq, SYS_sigaltstack, SYS_rt_sigprocmask, SYS_rt_sigreturn, SYS_restart_syscall, SYS_exit,
    SYS_exit_group,
    // abort() and pthread_kill() signal this process's own threads
    SYS_tgkill, SYS_gettid, SYS_getpid,
    // time (the vDSO answers most; it falls back to these on some clocksources)
    SYS_clock_gettime, SYS_clock_getres, SYS_gettimeofday, SYS_nanosleep, SYS_clock_nanosleep,
#ifdef SYS_time
    SYS_time,
#endif
    SYS_sched_yield, SYS_sched_getaffinity, SYS_sysinfo, SYS_getrandom, SYS_getuid, SYS_geteuid, SYS_getgid,
    SYS_getegid,
    // the connections: accepted, read, written, shut down, watched
    SYS_accept, SYS_accept4, SYS_recvfrom, SYS_recvmsg, SYS_sendto, SYS_sendmsg, SYS_shutdown, SYS_setsockopt,
    SYS_getsockopt, SYS_getsockname, SYS_getpeername, SYS_epoll_pwait, SYS_epoll_ctl, SYS_ppoll,
#ifdef SYS_epoll_wait
    SYS_epoll_wait,  // aarch64 has only epoll_pwait, which glibc's epoll_wait() calls there
#endif
#ifdef SYS_poll
    SYS_poll,
#endif
};

// What a client needs on top: a socket of its own (the resolver also opens
// netlink and UDP sockets), connect, and the resolver's datagram calls.
constexpr long kClientCalls[] = {
    SYS_socket, SYS_connect, SYS_bind, SYS_sendmmsg, SYS_recvmmsg, SYS_pselect6, SYS_uname,
#ifdef SYS_select
    SYS_select,
#endif
};

// Sanitizer builds only: the runtime's own checks run on the confined
// threads. UBSan's vptr check probes memory through a pipe, and reports
// read /proc/self/exe and the limits; refusing them turns a clean run into
// false reports. Release builds never carry these.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr long kSanitizerCalls[] = {
#ifdef SYS_pipe
    SYS_pipe,
#endif
#ifdef SYS_readlink
    SYS_readlink,
#endif
    SYS_pipe2, SYS_readlinkat, SYS_mincore, SYS_process_vm_readv, SYS_prlimit64,
#ifdef SYS_getrlimit
    SYS_getrlimit,
#endif
};
#endif

// Flags that make openat() write, create or truncate: refused everywhere,
// so the confined threads can read certificates, tokens and /etc files but
// change none.
constexpr uint32_t kOpenWriteFlags = O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | O_APPEND;

constexpr uint32_t kAllow = SECCOMP_RET_ALLOW;
constexpr uint32_t kDeny = SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA);

sock_filter Stmt(uint16_t code, uint32_t k) { return BPF_STMT(code, k); }
sock_filter Jump(uint16_t code, uint32_t k, uint8_t jt, uint8_t jf) { return BPF_JUMP(code, k, jt, jf); }

constexpr uint32_t ArgLow(int n) {  // the low 32 bits of argument n (little-endian)
  return offsetof(seccomp_data, args) + 8 * n;
}

// One rule per allowed call: "nr == call → allow", two instructions, so no
// jump ever needs more than the 8 bits BPF gives it.
void AllowCalls(const long* calls, size_t n, std::vector<sock_filter>* prog) {
  for (size_t i = 0; i < n; ++i) {
    prog->push_back(Jump(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(calls[i]), 0, 1));
    prog->push_back(Stmt(BPF_RET | BPF_K, kAllow));
  }
}

// openat() only without kOpenWriteFlags. Loads an argument, so it comes
// last: every branch returns.
void AllowReadOnlyOpen(std::vector<sock_filter>* prog) {
  prog->push_back(Jump(BPF_JMP | BPF_JEQ | BPF_K, SYS_openat, 0, 4));
  prog->push_back(Stmt(BPF_LD | BPF_W | BPF_ABS, ArgLow(2)));
  prog->push_back(Jump(BPF_JMP | BPF_JSET | BPF_K, kOpenWriteFlags, 0, 1));
  prog->push_back(Stmt(BPF_RET | BPF_K, kDeny));
  prog->push_back(Stmt(BPF_RET | BPF_K, kAllow));
}

// ioctl() only as FIONREAD (bytes waiting on a socket; the resolver asks).
void AllowFionread(std::vector<sock_filter>* prog) {
  prog->push_back(Jump(BPF_JMP | BPF_JEQ | BPF_K, SYS_ioctl, 0, 4));
  prog->push_back(Stmt(BPF_LD | BPF_W | BPF_ABS, ArgLow(1)));
  prog->push_back(Jump(BPF_JMP | BPF_JEQ | BPF_K, FIONREAD, 1, 0));
  prog->push_back(Stmt(BPF_RET | BPF_K, kDeny));
  prog->push_back(Stmt(BPF_RET | BPF_K, kAllow));
}

std::vector<sock_filter> Program(SyscallProfile profile) {
  std::vector<sock_filter> prog;
  // Another architecture's calls (a 32-bit int 0x80 from a 64-bit process)
  // have other numbers: refuse them all.
  prog.push_back(Stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)));
  prog.push_back(Jump(BPF_JMP | BPF_JEQ | BPF_K, kArch, 1, 0));
  prog.push_back(Stmt(BPF_RET | BPF_K, kDeny));
  prog.push_back(Stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)));
#if defined(__x86_64__)
  // x32 calls share the architecture with the x32 bit set in the number.
  prog.push_back(Jump(BPF_JMP | BPF_JGE | BPF_K, 0x40000000u, 0, 1));
  prog.push_back(Stmt(BPF_RET | BPF_K, kDeny));
#endif
  AllowCalls(kServeCalls, std::size(kServeCalls), &prog);
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  AllowCalls(kSanitizerCalls, std::size(kSanitizerCalls), &prog);
#endif
  if (profile == SyscallProfile::kClient) {
    AllowCalls(kClientCalls, std::size(kClientCalls), &prog);
    AllowFionread(&prog);
    // AllowFionread loaded an argument: the number again for what follows.
    prog.push_back(Stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)));
  }
  AllowReadOnlyOpen(&prog);
  prog.push_back(Stmt(BPF_RET | BPF_K, kDeny));
  return prog;
}

void WarnOnce(const char* why) {
  static std::once_flag once;
  std::call_once(once, [why] {
    SP_LOG_WARN("no seccomp filter on the threads that parse untrusted input: ", why,
                " (capabilities are still dropped)");
  });
}

}  // namespace

bool SyscallFilterSupported() { return kArch != 0; }

bool ConfineThisThread(SyscallProfile profile) {
  if (!SyscallFilterSupported()) {
    WarnOnce("this architecture has no system-call list");
    return false;
  }
  std::vector<sock_filter> prog = Program(profile);
  sock_fprog fprog{static_cast<unsigned short>(prog.size()), prog.data()};
  // prctl rather than seccomp(2): the same filter, and glibc has no wrapper
  // for seccomp(2). Without TSYNC it binds this thread only.
  if (::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fprog, 0, 0) != 0) {
    WarnOnce(std::strerror(errno));
    return false;
  }
  return true;
}

}  // namespace sockpressure
