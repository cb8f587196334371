#include "exporter/common/parse.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "exporter/sources/shared/kernel_probe.h"
#include "test_util.h"

#include <gtest/gtest.h>

namespace sockpressure {
namespace {

TEST(ParseTest, FlatKeyedKeepsGoodLinesAndReportsBadOnes) {
  FlatKeyed kv = ParseFlatKeyed("anon 4096\nfile 8192\ngarbage\npgscan x\n");
  EXPECT_EQ(kv.Get("anon"), 4096u);
  EXPECT_EQ(kv.Get("file"), 8192u);
  EXPECT_FALSE(kv.Get("pgscan").has_value());
  EXPECT_EQ(kv.bad_lines.size(), 2u);
}

TEST(ParseTest, PsiBothLinesAndUnknownFields) {
  Psi psi = ParsePsi(
      "some avg10=1.50 avg60=0.25 avg300=0.00 total=2400\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=1200 extra=1\n");
  ASSERT_TRUE(psi.some && psi.full);
  EXPECT_FALSE(psi.malformed);
  EXPECT_DOUBLE_EQ(psi.some->avg10, 1.5);
  EXPECT_EQ(psi.some->total_us, 2400u);
  EXPECT_EQ(psi.full->total_us, 1200u);
}

TEST(ParseTest, PsiMalformed) {
  Psi psi = ParsePsi("some avg10=garbage\n");
  EXPECT_TRUE(psi.malformed);
  EXPECT_FALSE(psi.some.has_value());
}

TEST(ParseTest, NetstatPairsHeaderAndValues) {
  ProtoCounters c = ParseNetstat("TcpExt: PruneCalled TCPRcvQDrop\nTcpExt: 12 3\nIpExt: InNoRoutes\nIpExt: 0\n");
  EXPECT_FALSE(c.malformed);
  EXPECT_EQ(c.tables["TcpExt"]["PruneCalled"], 12u);
  EXPECT_EQ(c.tables["TcpExt"]["TCPRcvQDrop"], 3u);
  EXPECT_EQ(c.tables["IpExt"]["InNoRoutes"], 0u);
}

TEST(ParseTest, NetstatColumnMismatchIsMalformed) {
  ProtoCounters c = ParseNetstat("TcpExt: PruneCalled RcvPruned\nTcpExt: 12\n");
  EXPECT_TRUE(c.malformed);
  EXPECT_TRUE(c.tables.empty());
}

TEST(ParseTest, Sockstat) {
  auto rows = ParseSockstat("sockets: used 214\nTCP: inuse 9 orphan 0 tw 2 alloc 13 mem 12\n");
  EXPECT_EQ(rows["TCP"]["mem"], 12u);
  EXPECT_EQ(rows["sockets"]["used"], 214u);
}

TEST(ParseTest, UintList) {
  auto v = ParseUintList("22932\t30578\t45864\n");
  ASSERT_TRUE(v);
  EXPECT_EQ(*v, (std::vector<uint64_t>{22932, 30578, 45864}));
  EXPECT_FALSE(ParseUintList("1 two 3"));
}

TEST(ParseTest, SwapsCountsDevicesAndSizes) {
  Swaps s = ParseSwaps(
      "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n/dev/zram0 partition\t786428\t\t242000\t\t100\n");
  EXPECT_FALSE(s.malformed);
  EXPECT_EQ(s.devices, 1);
  EXPECT_EQ(s.size_bytes, 786428u * 1024);
  EXPECT_EQ(s.used_bytes, 242000u * 1024);
  Swaps none = ParseSwaps("Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n");
  EXPECT_EQ(none.devices, 0);
  EXPECT_FALSE(none.malformed);
}

TEST(ParseTest, NosocketOnlyBeforeInitArguments) {
  EXPECT_TRUE(CmdlineHasNosocket("ro quiet cgroup.memory=nosocket"));
  EXPECT_TRUE(CmdlineHasNosocket("cgroup.memory=nokmem,nosocket root=/dev/vda"));
  EXPECT_FALSE(CmdlineHasNosocket("cgroup.memory=nokmem"));
  EXPECT_FALSE(CmdlineHasNosocket("ro -- cgroup.memory=nosocket"));
  EXPECT_FALSE(CmdlineHasNosocket(""));
}

}  // namespace
}  // namespace sockpressure

namespace sockpressure {
namespace {

// The sysctl is read every sample through one kept descriptor: a change
// written in place (as the kernel's sysctl file changes) is seen, and a
// procfs without it (before 5.8) reads as off.
TEST(BpfStatsFlagTest, KeptFileSeesEachChange) {
  testing::TempDir dir;
  BpfStatsFlag missing(dir.path().string(), 0);
  EXPECT_FALSE(missing.Enabled());
  std::filesystem::create_directories(dir.path() / "sys" / "kernel");
  const std::filesystem::path file = dir.path() / "sys" / "kernel" / "bpf_stats_enabled";
  auto write = [&file](const char* text) {
    std::FILE* f = std::fopen(file.c_str(), "r+");
    if (f == nullptr) f = std::fopen(file.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(text, f);
    std::fclose(f);
  };
  write("1\n");
  BpfStatsFlag flag(dir.path().string(), 0);
  EXPECT_TRUE(flag.Enabled());
  write("0\n");
  EXPECT_FALSE(flag.Enabled());
  write("1\n");
  EXPECT_TRUE(flag.Enabled());
  EXPECT_TRUE(missing.Enabled()) << "a sysctl that appears later is found";
}

TEST(BpfStatsFlagTest, ReadAtMostOncePerInterval) {
  testing::TempDir dir;
  std::filesystem::create_directories(dir.path() / "sys" / "kernel");
  const std::filesystem::path file = dir.path() / "sys" / "kernel" / "bpf_stats_enabled";
  auto write = [&file](const char* text) {
    std::FILE* f = std::fopen(file.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(text, f);
    std::fclose(f);
  };
  write("1\n");
  BpfStatsFlag hourly(dir.path().string(), 3600);
  BpfStatsFlag shortly(dir.path().string(), 0.05);
  EXPECT_TRUE(hourly.Enabled());
  EXPECT_TRUE(shortly.Enabled());
  write("0\n");
  EXPECT_TRUE(hourly.Enabled()) << "not read again within the interval: the last reading stands";
  EXPECT_TRUE(shortly.Enabled());
  std::this_thread::sleep_for(std::chrono::milliseconds(80));
  EXPECT_FALSE(shortly.Enabled()) << "read again once the interval passed";
  EXPECT_TRUE(hourly.Enabled());
}

}  // namespace
}  // namespace sockpressure
