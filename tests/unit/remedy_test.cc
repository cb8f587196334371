// Which remedy fits a throttled cgroup, from what the snapshot shows of it and
// of its node (state/remedy.h).
#include "exporter/state/remedy.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"

namespace sockpressure {
namespace {

std::vector<std::string> Keys(const std::vector<Remedy>& remedies) {
  std::vector<std::string> keys;
  for (const Remedy& m : remedies) keys.push_back(m.key);
  return keys;
}

struct Node {
  Snapshot s;
  CgroupView c;
  CgroupLimits limits;
  Node() {
    s.swap_enabled = true;
    s.node.swaps = Swaps{};
    s.node.swaps->devices = 1;
    s.node.swaps->used_bytes = 240u << 20;
    s.node.kernel_release = "6.1.0-57-amd64";
    s.node.mglru_caps = 0;  // built in, off (Debian's default)
    c.path = "/kubepods.slice/proxy.scope";
    c.best.pressure_asserted = true;
    c.best.pressure_events_total = 5;
    c.best.ratio = 0.9995;
    c.subtree_sockets = 3;
    c.anon_bytes = 380u << 20;
    limits.memory_current = 400u << 20;
    limits.swap_max = UINT64_MAX;
    limits.memory_low = 0;
    limits.memory_min = 0;
  }
  std::vector<Remedy> Fitting() {
    c.limits = std::make_shared<const CgroupLimits>(limits);
    return FittingRemedies(s, c);
  }
};

TEST(RemedyTest, SwapOnAndNoSwapMaxFitsFirstThenTheNodeWideOnes) {
  Node n;
  std::vector<Remedy> r = n.Fitting();
  EXPECT_EQ(Keys(r), (std::vector<std::string>{"swap_max", "swap_off", "mglru", "memory_low", "nosocket"}));
  EXPECT_EQ(r[0].action, "set memory.swap.max=0 on /kubepods.slice/proxy.scope");
  EXPECT_TRUE(absl::StrContains(r[0].evidence, "swap on (1 area(s), 240.0 MiB used); its memory.swap.max is max (unset)"))
      << r[0].evidence;
  EXPECT_TRUE(absl::StrContains(r[2].evidence, "lru_gen present but off (0x0000)")) << r[2].evidence;
  EXPECT_TRUE(absl::StartsWith(r[2].effect, "lab, 6.1: with MGLRU on the lab's receiver cgroup was not scanned")) << r[2].effect;
  EXPECT_TRUE(absl::StrContains(r[3].evidence, "reclaim left 100% of its scanned pages; anon 380.0 MiB of memory.current "
                                               "400.0 MiB"))
      << r[3].evidence;
  EXPECT_EQ(r.back().action, "last resort: boot with cgroup.memory=nosocket");
  // The measured effects quote the lab's runs of the reporter's workload (tests/lab/README.md).
  EXPECT_TRUE(absl::StrContains(r[0].effect, "2,473 kB/s against 702 kB/s without it")) << r[0].effect;
  EXPECT_TRUE(absl::StrContains(r[3].effect, "memory.low at the proxy cgroup's healthy memory.current")) << r[3].effect;
  EXPECT_TRUE(absl::StrContains(r[2].effect, "in the reporter's workload the proxy's cgroup was still scanned"))
      << r[2].effect;
}

TEST(RemedyTest, WhatIsAlreadyInPlaceDoesNotFit) {
  Node n;
  n.limits.swap_max = 0;
  n.limits.memory_low = 300u << 20;
  n.s.node.mglru_caps = 7;
  n.s.node.kernel_release = "6.12.117+deb12-amd64";
  EXPECT_EQ(Keys(n.Fitting()), (std::vector<std::string>{"swap_off", "nosocket"}));
  n.s.swap_enabled = false;
  EXPECT_EQ(Keys(n.Fitting()), (std::vector<std::string>{"nosocket"}));
}

TEST(RemedyTest, OnOtherKernelsTheMglruEffectSaysWhere6_12StillThrottled) {
  Node n;
  n.s.node.kernel_release = "6.12.117+deb12-amd64";
  std::vector<Remedy> r = n.Fitting();
  ASSERT_EQ(r[2].key, "mglru");
  EXPECT_TRUE(absl::StrContains(r[2].effect, "on 6.12 the cgroup was still scanned without reclaim and throttled"));
  EXPECT_TRUE(absl::StrContains(r[2].effect, "the reporter's proxy: 6 of 18 samples clamped")) << r[2].effect;
}

TEST(RemedyTest, NothingFitsWhereNothingIsThrottled) {
  Node n;
  n.c.subtree_sockets = 0;  // pressure, nothing to throttle
  EXPECT_TRUE(n.Fitting().empty());
  Node quiet;
  quiet.c.best.pressure_asserted = false;
  quiet.c.best.pressure_events_total = 0;
  EXPECT_TRUE(quiet.Fitting().empty());
  Node nosocket;
  nosocket.s.socket_accounting_enabled = false;
  EXPECT_TRUE(nosocket.Fitting().empty());
}

TEST(RemedyTest, LimitsNotReadAreSaidSo) {
  Node n;
  n.c.v1 = false;
  Snapshot& s = n.s;
  CgroupView c = n.c;  // no limits read (the core profile before the cgroup moved)
  std::vector<Remedy> r = FittingRemedies(s, c);
  ASSERT_FALSE(r.empty());
  EXPECT_TRUE(absl::StrContains(r[0].evidence, "its memory.swap.max is not read")) << r[0].evidence;
  EXPECT_EQ(Keys(r), (std::vector<std::string>{"swap_max", "swap_off", "mglru", "nosocket"}))
      << "memory.low unread: no claim that it is unset";
}

}  // namespace
}  // namespace sockpressure
