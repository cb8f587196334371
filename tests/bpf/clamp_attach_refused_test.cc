// A refused re-attach of the window-clamp program (issue 48): logged once,
// counted in the program's attach failures, tried again each sample, and
// the collector goes on with its other tiers. The kernel is made to refuse
// only the link: a seccomp filter on this thread (and so on the privileged
// worker it starts) fails BPF_RAW_TRACEPOINT_OPEN and BPF_LINK_CREATE with
// EPERM, every other bpf(2) command still works. Run as root; skips (saying
// why) where tp_btf or the cgroup iterator is refused. Its own process: the
// filter cannot be removed.
#include <linux/bpf.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include <cerrno>

#include "exporter/sources/bpf/bpf_source.h"
#include "exporter/sources/shared/privileged_worker.h"
#include "gtest/gtest.h"
#include "tests/bpf/bpf_test_main.h"
#include "tests/bpf/sample_find.h"

namespace sockpressure {
namespace {

constexpr uint64_t kFakeMemcg = ~uint64_t{0} - 48;  // no cgroup has this id

// bpf(BPF_RAW_TRACEPOINT_OPEN or BPF_LINK_CREATE, ...) -> EPERM; all else allowed.
bool RefuseBpfLinks() {
  sock_filter prog[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_bpf, 0, 3),  // not bpf: allow
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, BPF_RAW_TRACEPOINT_OPEN, 2, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, BPF_LINK_CREATE, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
  };
  sock_fprog fprog{static_cast<unsigned short>(sizeof prog / sizeof prog[0]), prog};
  return ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fprog, 0, 0) == 0;
}

using testing::LoadedProbe;
using testing::ProgramNamed;

TEST(ClampArming, RefusedReattachIsCountedAndTheCollectorGoesOn) {
  BpfOptions o;
  o.vmpressure = false;
  o.prunes = false;
  o.clamp_attach = {"tp_btf"};
  std::unique_ptr<BpfSource> src = NewBpfSource(o);
  if (!LoadedProbe(src->Probes(), "window_clamps")) GTEST_SKIP() << "tp_btf/tcp_rcv_space_adjust refused by this kernel";
  if (!LoadedProbe(src->Probes(), "socket_pressure")) GTEST_SKIP() << "no cgroup iterator: nothing to gate on";
  Sample quiet;
  ASSERT_TRUE(src->Collect(quiet).ok());
  for (const auto& [id, p] : quiet.pressure[Tier::kIter]) {
    if (p.active) GTEST_SKIP() << "memcg " << id << " is under socket pressure on this host now";
  }
  ASSERT_FALSE(LoadedProbe(quiet.probes, "window_clamps")->attached);

  ASSERT_TRUE(RefuseBpfLinks()) << "seccomp filter: " << std::strerror(errno);
  PrivilegedWorker::Get().Start();  // inherits the filter, as the agent's worker inherits its privileges
  for (uint64_t round = 1; round <= 3; ++round) {
    Sample hot;
    hot.pressure[Tier::kIter][kFakeMemcg] = PressureState{true, round, 0.5};
    std::string err = PrivilegedWorker::Get().Run([&] { ASSERT_TRUE(src->Collect(hot).ok()); });
    ASSERT_EQ(err, "");
    EXPECT_FALSE(LoadedProbe(hot.probes, "window_clamps")->attached);
    EXPECT_TRUE(hot.IsLive(Signal::kSocketPressure, Tier::kIter)) << "the iterator tier must go on";
    EXPECT_TRUE(hot.IsLive(Signal::kWindowClamps, Tier::kTpBtf));
    const ProgramStats* prog = ProgramNamed(hot, "clamp_tp_btf");
    ASSERT_NE(prog, nullptr);
    EXPECT_FALSE(prog->attached);
    EXPECT_EQ(prog->attaches, 1u);
    EXPECT_EQ(prog->attach_failures, round) << "one refused attach per sample under pressure";
  }
}

}  // namespace
}  // namespace sockpressure

int main(int argc, char** argv) { return sockpressure::RunBpfTests(argc, argv); }
