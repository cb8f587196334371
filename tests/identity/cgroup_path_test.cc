// Path parsing and pod-list parsing against real node layouts
// (fixtures/*.txt: every driver x runtime x cgroup version).
#include "exporter/identity/cgroup_path.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "exporter/identity/pod_index.h"
#include "tests/identity/fixture_util.h"

namespace sockpressure {
namespace {

using testing::FixtureNames;
using testing::LoadFixture;

std::string Describe(const std::optional<CgroupPodRef>& ref) {
  if (!ref) return "-";
  std::string s = absl::StrCat(ref->pod_uid, "/", ref->qos);
  if (ref->role == ContainerRole::kNone) return s;
  return absl::StrCat(s, "/", ref->role == ContainerRole::kMonitor ? "monitor" : "container", "/",
                      ref->runtime.empty() ? "-" : ref->runtime, "/", ref->container_id);
}

class FixtureTest : public ::testing::TestWithParam<std::string> {};

TEST_P(FixtureTest, ParsesEveryPath) {
  testing::FixtureSet set = LoadFixture(GetParam());
  ASSERT_GT(set.rows.size(), 20u) << set.name;
  int pods = 0, containers = 0;
  for (const testing::FixtureRow& row : set.rows) {
    std::optional<CgroupPodRef> ref = ParseCgroupPath(row.path);
    EXPECT_EQ(Describe(ref), row.parse) << row.path;
    if (ref) ++(ref->role == ContainerRole::kNone ? pods : containers);
  }
  EXPECT_GE(pods, 5);
  EXPECT_GE(containers, 8);
}

INSTANTIATE_TEST_SUITE_P(Layouts, FixtureTest, ::testing::ValuesIn(FixtureNames()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string n = info.param.substr(0, info.param.size() - 4);
                           for (char& c : n) {
                             if (c == '-') c = '_';
                           }
                           return n;
                         });

TEST(CgroupPathTest, RejectsLookalikes) {
  // Not below kubepods, bad UIDs, QoS parents and the kubepods roots.
  for (const char* p : {
           "/",
           "/kubepods",
           "/kubepods/burstable",
           "/kubepods.slice/kubepods-besteffort.slice",
           "/system.slice/pod6f1c2a4e-8b3d-4c5e-9f7a-1b2c3d4e5f60",
           "/user.slice/user-1000.slice/podman-pod6f1c2a4e_8b3d_4c5e_9f7a_1b2c3d4e5f60.slice",
           "/kubepods/burstable/podnot-a-uid",
           "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod6f1c2a4e_8b3d.slice",
           "/machine.slice/libpod-0123456789abcdef0123456789abcdef.scope",
       }) {
    EXPECT_FALSE(ParseCgroupPath(p).has_value()) << p;
  }
}

TEST(CgroupPathTest, PodLevelAndUnknownChildren) {
  auto ref = ParseCgroupPath("/kubepods/besteffort/pod9e8d7c6b-5a49-4382-b716-a5f4e3d2c1b0/not-a-container");
  ASSERT_TRUE(ref.has_value());
  EXPECT_EQ(ref->role, ContainerRole::kNone);
  EXPECT_EQ(ref->qos, "besteffort");
  // Upper-case hex (never written by the kubelet, but harmless) is folded.
  ref = ParseCgroupPath("/kubepods.slice/kubepods-pod0A1B2C3D_4E5F_4A6B_8C7D_9E0F1A2B3C4D.slice/docker-ABCDEF0123456789.scope");
  ASSERT_TRUE(ref.has_value());
  EXPECT_EQ(ref->pod_uid, "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d");
  EXPECT_EQ(ref->qos, "guaranteed");
  EXPECT_EQ(ref->container_id, "abcdef0123456789");
  EXPECT_EQ(ref->runtime, "docker");
}

TEST(PodIndexTest, ParsesRealShape) {
  absl::StatusOr<PodIndex> index = ParsePodList(testing::ReadAll(testing::FixturePath("pods-containerd.json")));
  ASSERT_TRUE(index.ok()) << index.status();
  ASSERT_EQ(index->size(), 5u);
  const PodInfo& web = index->at("6f1c2a4e-8b3d-4c5e-9f7a-1b2c3d4e5f60");
  EXPECT_EQ(web.namespace_name, "default");
  EXPECT_EQ(web.name, "web-0");
  EXPECT_EQ(web.qos, "burstable");
  // 2 containers + 1 init + 1 ephemeral, all with IDs.
  EXPECT_EQ(web.containers.size(), 4u);
  std::vector<std::string> names;
  for (const auto& [id, name] : web.containers) {
    EXPECT_EQ(id.size(), 64u);
    names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"debugger-x7k2p", "init-perms", "metrics", "nginx"}));
  // The pending pod's container has no ID yet.
  EXPECT_TRUE(index->at("11111111-2222-4333-8444-555555555555").containers.empty());
  // Static pod UIDs are kept as the kubelet reports them.
  EXPECT_EQ(index->count("3c5d1f0e8a7b6c9d2e4f1a0b9c8d7e6f"), 1u);
}

TEST(PodIndexTest, SchemesAndErrors) {
  EXPECT_EQ(StripContainerIdScheme("cri-o://ABC123"), "abc123");
  EXPECT_EQ(StripContainerIdScheme("docker://abc"), "abc");
  EXPECT_EQ(StripContainerIdScheme("abc"), "abc");
  EXPECT_FALSE(ParsePodList("{\"items\": [").ok());
  EXPECT_FALSE(ParsePodList("<html>").ok());
  absl::StatusOr<PodIndex> empty = ParsePodList(R"({"kind":"PodList","apiVersion":"v1","metadata":{},"items":null})");
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_TRUE(empty->empty());
}

}  // namespace
}  // namespace sockpressure
