// KubeIdentityResolver: labels for every fixture layout, the refresh rules
// (new containers, sandboxes, unknown pods), backoff while the kubelet is
// down, expiry of pods that left, and labels in the /metrics exposition.
#include "exporter/common/cgroup_label.h"
#include "exporter/identity/kube_identity.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/match.h"
#include "exporter/identity/kubelet_client.h"
#include "exporter/outputs/metrics_endpoint.h"
#include "exporter/state/state_tracker.h"
#include "tests/identity/fixture_util.h"

namespace sockpressure {
namespace {

using testing::FixturePath;
using testing::ReadAll;

std::string Join(const LabelPairs& labels) {
  if (labels.empty()) return "-";
  std::vector<std::string> parts;
  for (const auto& [k, v] : labels) parts.push_back(absl::StrCat(k, "=", v));
  return absl::StrJoin(parts, ",");
}

// Options for fast tests: settle < 0 trusts the first list completely (a
// container missing from it is a sandbox right away).
KubeIdentityOptions Fast() {
  KubeIdentityOptions o;
  o.min_refresh_interval = absl::Milliseconds(20);
  o.settle = absl::Milliseconds(150);
  o.initial_backoff = absl::Milliseconds(40);
  o.max_retries = 3;
  o.max_backoff = absl::Milliseconds(200);
  o.forget_after = absl::Milliseconds(300);
  return o;
}

// A fetcher whose answer the test controls, counting calls and checking
// that no two ever overlap.
struct FakeKubelet {
  std::mutex mu;
  absl::StatusOr<std::string> answer = absl::UnavailableError("connection refused");
  std::atomic<int> calls{0}, in_flight{0}, max_in_flight{0};

  void Set(absl::StatusOr<std::string> a) {
    std::lock_guard<std::mutex> lk(mu);
    answer = std::move(a);
  }
  PodListFetcher Fetcher() {
    return [this]() -> absl::StatusOr<std::string> {
      int now = ++in_flight;
      int prev = max_in_flight.load();
      while (now > prev && !max_in_flight.compare_exchange_weak(prev, now)) {
      }
      ++calls;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      absl::StatusOr<std::string> a;
      {
        std::lock_guard<std::mutex> lk(mu);
        a = answer;
      }
      --in_flight;
      return a;
    };
  }
};

// Calls Resolve (as the sampler would, every `period`) until `done` holds or
// `timeout` passes.
template <typename Pred>
bool ResolveUntil(KubeIdentityResolver& r, const std::vector<std::string>& paths, Pred done,
                  absl::Duration timeout = absl::Seconds(3), absl::Duration period = absl::Milliseconds(10)) {
  absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    std::vector<LabelPairs> got;
    for (const std::string& p : paths) got.push_back(r.Resolve(p));
    if (done(got)) return true;
    absl::SleepFor(period);
  }
  return false;
}

class LayoutTest : public ::testing::TestWithParam<std::string> {};

TEST_P(LayoutTest, EveryCgroupGetsItsLabels) {
  testing::FixtureSet set = testing::LoadFixture(GetParam());
  KubeIdentityOptions o = Fast();
  o.settle = -absl::Hours(1);
  KubeIdentityResolver r(FilePodListFetcher(FixturePath(set.pods_file)), set.pods_file, o);
  r.Start();
  ASSERT_TRUE(r.WaitForFirstAttempt(absl::Seconds(5)));
  int with_container = 0;
  for (const testing::FixtureRow& row : set.rows) {
    LabelPairs labels = r.Resolve(row.path);
    EXPECT_EQ(Join(labels), row.labels) << row.path;
    if (labels.size() == 3) ++with_container;
  }
  EXPECT_GE(with_container, 5);
  // Everything was in the first list, or settled as sandbox/unknown: no
  // second request.
  absl::SleepFor(absl::Milliseconds(60));
  for (const testing::FixtureRow& row : set.rows) r.Resolve(row.path);
  EXPECT_EQ(r.stats().attempts, 1u);
}

INSTANTIATE_TEST_SUITE_P(Layouts, LayoutTest, ::testing::ValuesIn(testing::FixtureNames()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string n = info.param.substr(0, info.param.size() - 4);
                           for (char& c : n) {
                             if (c == '-') c = '_';
                           }
                           return n;
                         });

constexpr char kWebPod[] =
    "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod6f1c2a4e_8b3d_4c5e_9f7a_1b2c3d4e5f60.slice";

std::string PodList(const std::string& uid, const std::string& name, const std::vector<std::string>& ids) {
  std::vector<std::string> statuses;
  for (size_t i = 0; i < ids.size(); ++i) {
    statuses.push_back(absl::StrCat(R"({"name":"c)", i, R"(","containerID":"containerd://)", ids[i], R"("})"));
  }
  return absl::StrCat(R"({"kind":"PodList","items":[{"metadata":{"name":")", name, R"(","namespace":"default","uid":")",
                      uid, R"("},"status":{"qosClass":"Burstable","containerStatuses":[)", absl::StrJoin(statuses, ","),
                      "]}}]}");
}

const std::string kUid = "6f1c2a4e-8b3d-4c5e-9f7a-1b2c3d4e5f60";
const std::string kIdA(64, 'a'), kIdB(64, 'b'), kSandbox(64, 'c');

std::string Container(const std::string& id) { return absl::StrCat(kWebPod, "/cri-containerd-", id, ".scope"); }

TEST(KubeIdentityTest, NewContainerTriggersRefresh) {
  FakeKubelet k;
  k.Set(PodList(kUid, "web-0", {kIdA}));
  KubeIdentityResolver r(k.Fetcher(), "fake", Fast());
  r.Start();
  ASSERT_TRUE(r.WaitForFirstAttempt(absl::Seconds(5)));
  EXPECT_EQ(Join(r.Resolve(Container(kIdA))), "namespace=default,pod=web-0,container=c0");
  // A restarted container: new ID, the kubelet reports it a little later.
  EXPECT_EQ(Join(r.Resolve(Container(kIdB))), "namespace=default,pod=web-0");
  k.Set(PodList(kUid, "web-0", {kIdB}));
  EXPECT_TRUE(ResolveUntil(r, {Container(kIdB)}, [](const std::vector<LabelPairs>& got) {
    return Join(got[0]) == "namespace=default,pod=web-0,container=c0";
  }));
  EXPECT_EQ(k.max_in_flight.load(), 1);
}

TEST(KubeIdentityTest, SandboxIsFoldedIntoPodAndStopsAsking) {
  FakeKubelet k;
  k.Set(PodList(kUid, "web-0", {kIdA}));
  KubeIdentityResolver r(k.Fetcher(), "fake", Fast());
  r.Start();
  ASSERT_TRUE(r.WaitForFirstAttempt(absl::Seconds(5)));
  // Sample for well past `settle`: the pause container never appears in
  // the list, keeps pod labels only, and requests stop once it settled.
  ResolveUntil(r, {Container(kSandbox), kWebPod}, [](const std::vector<LabelPairs>&) { return false; },
               absl::Milliseconds(400));
  EXPECT_EQ(Join(r.Resolve(Container(kSandbox))), "namespace=default,pod=web-0");
  EXPECT_EQ(Join(r.Resolve(kWebPod)), "namespace=default,pod=web-0");
  int calls = k.calls.load();
  // Bounded by settle / min_refresh_interval. Worst case: the first list, one
  // fetch per 20 ms started inside the 150 ms settle window (t = 0, 20, ...,
  // 140: ceil(150 / 20) = 8), the first fetch started after it (which
  // settles the sandbox), and one more requested while that fetch was in
  // flight. (150 / 20 rounded down missed one; TSan's slower threads hit it.)
  EXPECT_LE(calls, 1 + (150 + 19) / 20 + 2);
  ResolveUntil(r, {Container(kSandbox)}, [](const std::vector<LabelPairs>&) { return false; },
               absl::Milliseconds(200));
  EXPECT_EQ(k.calls.load(), calls);
}

TEST(KubeIdentityTest, NonPodCgroupsNeverFetch) {
  FakeKubelet k;
  k.Set(PodList(kUid, "web-0", {kIdA}));
  KubeIdentityResolver r(k.Fetcher(), "fake", Fast());
  r.Start();
  ASSERT_TRUE(r.WaitForFirstAttempt(absl::Seconds(5)));
  ResolveUntil(r, {"/", "/system.slice/sshd.service", "/user.slice", "/docker/" + kIdA},
               [](const std::vector<LabelPairs>& got) {
                 for (const LabelPairs& l : got) EXPECT_TRUE(l.empty());
                 return false;
               },
               absl::Milliseconds(200));
  EXPECT_EQ(k.calls.load(), 1);  // the start-up list only
}

TEST(KubeIdentityTest, KubeletDownThenUpWithBoundedBackoff) {
  FakeKubelet k;  // refuses connections
  KubeIdentityResolver r(k.Fetcher(), "fake", Fast());
  r.Start();
  ASSERT_TRUE(r.WaitForFirstAttempt(absl::Seconds(5)));
  EXPECT_TRUE(r.Resolve(kWebPod).empty());
  // 1 s of samples every 10 ms with the pod unresolved: backoff 40, 80, 160
  // ms, then 200 ms apart, so about 7 attempts, not 100.
  ResolveUntil(r, {kWebPod}, [](const std::vector<LabelPairs>& got) {
    EXPECT_TRUE(got[0].empty());
    return false;
  }, absl::Seconds(1));
  int calls = k.calls.load();
  EXPECT_GE(calls, 4);
  EXPECT_LE(calls, 10);
  k.Set(PodList(kUid, "web-0", {kIdA}));
  EXPECT_TRUE(ResolveUntil(r, {kWebPod, Container(kIdA)}, [](const std::vector<LabelPairs>& got) {
    return Join(got[0]) == "namespace=default,pod=web-0" && got[1].size() == 3;
  }));
  EXPECT_EQ(k.max_in_flight.load(), 1);
  KubeIdentityResolver::Stats s = r.stats();
  EXPECT_GE(s.failures, 4u);
  EXPECT_GE(s.successes, 1u);
}

TEST(KubeIdentityTest, GarbageResponseIsAFailure) {
  FakeKubelet k;
  k.Set(std::string("<html>502 Bad Gateway</html>"));
  KubeIdentityResolver r(k.Fetcher(), "fake", Fast());
  r.Start();
  ASSERT_TRUE(r.WaitForFirstAttempt(absl::Seconds(5)));
  EXPECT_EQ(r.stats().failures, 1u);
  EXPECT_TRUE(r.Resolve(kWebPod).empty());
}

TEST(KubeIdentityTest, GonePodsExpireOnceUnreferenced) {
  const std::string other_uid = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d";
  const std::string other_pod = "/kubepods.slice/kubepods-pod0a1b2c3d_4e5f_4a6b_8c7d_9e0f1a2b3c4d.slice";
  FakeKubelet k;
  k.Set(PodList(kUid, "web-0", {kIdA}));
  KubeIdentityResolver r(k.Fetcher(), "fake", Fast());
  r.Start();
  ASSERT_TRUE(r.WaitForFirstAttempt(absl::Seconds(5)));
  EXPECT_EQ(Join(r.Resolve(kWebPod)), "namespace=default,pod=web-0");
  // web-0 is deleted from the API and another pod starts; web-0's cgroup is
  // still being torn down, so it keeps its names while sampled.
  k.Set(PodList(other_uid, "short-lived", {kIdB}));
  EXPECT_TRUE(ResolveUntil(r, {kWebPod, other_pod}, [](const std::vector<LabelPairs>& got) {
    return Join(got[1]) == "namespace=default,pod=short-lived";
  }));
  EXPECT_EQ(Join(r.Resolve(kWebPod)), "namespace=default,pod=web-0");
  EXPECT_EQ(r.stats().cached_pods, 2u);
  // web-0's cgroup is gone (no longer sampled): after forget_after its
  // entry and the pod go.
  ResolveUntil(r, {other_pod}, [](const std::vector<LabelPairs>&) { return false; }, absl::Milliseconds(500));
  KubeIdentityResolver::Stats s = r.stats();
  EXPECT_EQ(s.cached_pods, 1u);
  EXPECT_EQ(s.cached_paths, 1u);
}

TEST(KubeIdentityTest, LabelsReachTheExposition) {
  testing::FixtureSet set = testing::LoadFixture("systemd-containerd-v2.txt");
  KubeIdentityOptions o = Fast();
  o.settle = -absl::Hours(1);
  KubeIdentityResolver r(FilePodListFetcher(FixturePath(set.pods_file)), set.pods_file, o);
  r.Start();
  ASSERT_TRUE(r.WaitForFirstAttempt(absl::Seconds(5)));

  Sample sample;
  sample.cgroup_mode = CgroupMode::kUnified;
  std::map<std::string, int> index;
  for (const testing::FixtureRow& row : set.rows) {
    CgroupReading c;
    c.path = row.path;
    c.id = sample.cgroups.size() + 1;
    size_t slash = row.path.rfind('/');
    std::string parent = slash == 0 ? "/" : row.path.substr(0, slash);
    c.parent = row.path == "/" ? -1 : index.count(parent) ? index[parent] : 0;
    CgroupLimits limits;
    limits.memory_current = 4096;
    c.limits = std::make_shared<const CgroupLimits>(limits);
    index[row.path] = static_cast<int>(sample.cgroups.size());
    sample.cgroups.push_back(c);
  }
  StateTracker tracker(&r);
  std::shared_ptr<const Snapshot> snap = tracker.Update(std::move(sample), {}, 0);
  EmitOptions context;  // the usage line is a context series (--metrics.profile=context)
  context.context = true;
  MetricsEndpoint endpoint(nullptr, {"v", "r", "c"}, context);
  std::string text = endpoint.RenderSnapshot(*snap, false);
  // Every fixture row shows up on the usage line with exactly its labels
  // (the cgroup label stays, in its label form, pod labels are added, never
  // for non-pods).
  int labelled = 0;
  for (const testing::FixtureRow& row : set.rows) {
    std::string needle = absl::StrCat("cgroup=\"", CgroupLabel(row.path), "\"");
    size_t at = std::string::npos;
    for (size_t pos = text.find("sockpressure_memcg_usage_bytes{"); pos != std::string::npos;
         pos = text.find("sockpressure_memcg_usage_bytes{", pos + 1)) {
      std::string line = text.substr(pos, text.find('\n', pos) - pos);
      if (absl::StrContains(line, needle)) at = pos;
    }
    ASSERT_NE(at, std::string::npos) << row.path;
    std::string line = text.substr(at, text.find('\n', at) - at);
    if (row.labels == "-") {
      EXPECT_FALSE(absl::StrContains(line, "pod=")) << line;
      continue;
    }
    ++labelled;
    for (absl::string_view kv : absl::StrSplit(row.labels, ',')) {
      size_t eq = kv.find('=');
      EXPECT_TRUE(absl::StrContains(line, absl::StrCat(kv.substr(0, eq), "=\"", kv.substr(eq + 1), "\"")))
          << line;
    }
    EXPECT_EQ(absl::StrContains(line, "container="), absl::StrContains(row.labels, "container=")) << line;
  }
  EXPECT_GE(labelled, 10);
}

}  // namespace
}  // namespace sockpressure
