// Memory held after thousands of cgroups go away (issue 13): the last holder
// of a large snapshot or rendered body returns the freed memory when it lets
// go, not before and not on a timer.
#include <gtest/gtest.h>

#include <thread>

#include <memory>

#include "absl/strings/str_cat.h"
#include "exporter/common/memory.h"
#include "exporter/outputs/metrics_endpoint.h"
#include "exporter/sampler/sampler.h"
#include "exporter/sources/source.h"

namespace sockpressure {
namespace {

// A hierarchy of a root and `*n` children, complete, with memory.stat counters.
std::unique_ptr<Source> ChurnSource(const size_t* n) {
  return MakeFunctionSource("churn", [n](Sample& s) {
    s.cgroups.reserve(*n + 1);
    for (size_t i = 0; i <= *n; ++i) {
      CgroupReading c;
      c.path = i == 0 ? "/" : absl::StrCat("/churn.slice/pod", i, "-", std::string(60, 'x'), ".scope");
      c.id = i + 1;
      c.parent = i == 0 ? -1 : 0;
      c.pgscan = c.pgsteal = 1000;
      c.anon_bytes = 1 << 20;
      s.id_index[c.id] = static_cast<int>(i);
      s.cgroups.push_back(std::move(c));
    }
    s.cgroups_complete = true;
    s.MarkLive(Signal::kReclaim, Tier::kMemoryStat);
    s.MarkLive(Signal::kSocketPressure, Tier::kMemoryStat);
    return absl::OkStatus();
  });
}

std::unique_ptr<Sampler> NewSampler(const size_t* n) {
  std::vector<std::unique_ptr<Source>> sources;
  sources.push_back(ChurnSource(n));
  return std::make_unique<Sampler>(std::move(sources), std::make_unique<StateTracker>(), 1.0);
}

TEST(ChurnMemoryTest, LastHolderOfALargeSnapshotReturnsTheMemory) {
  size_t n = 5000;
  std::unique_ptr<Sampler> sampler = NewSampler(&n);
  sampler->SampleOnce();
  uint64_t before = FreeMemoryReturns();
  sampler->SampleOnce();  // same size: replacing the previous one returns nothing
  EXPECT_EQ(FreeMemoryReturns(), before);
  std::shared_ptr<const Snapshot> scrape = sampler->Latest();  // a scrape still rendering it
  n = 5;
  sampler->SampleOnce();
  EXPECT_EQ(FreeMemoryReturns(), before);  // the scrape still holds the large one
  scrape.reset();
  EXPECT_EQ(FreeMemoryReturns(), before + 1);
  sampler->SampleOnce();
  EXPECT_EQ(FreeMemoryReturns(), before + 1);
}

TEST(ChurnMemoryTest, ADeclineOverManySamplesReturnsTheMemoryOnce) {
  size_t n = 3000;
  std::unique_ptr<Sampler> sampler = NewSampler(&n);
  sampler->SampleOnce();
  uint64_t before = FreeMemoryReturns();
  // 300 fewer per sample: no one snapshot is 1000 larger than the next.
  for (int i = 0; i < 3; ++i) {
    n -= 300;
    sampler->SampleOnce();
    EXPECT_EQ(FreeMemoryReturns(), before) << n;
  }
  n -= 300;  // 1200 fewer than the peak
  sampler->SampleOnce();
  EXPECT_EQ(FreeMemoryReturns(), before + 1);
  n -= 300;  // the peak is now the last drop's
  sampler->SampleOnce();
  EXPECT_EQ(FreeMemoryReturns(), before + 1);
}

const char kProto[] = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily";

TEST(ChurnMemoryTest, EndpointDropsTheBodiesOfOlderSnapshotsOnPublish) {
  size_t n = 5000;
  std::unique_ptr<Sampler> sampler = NewSampler(&n);
  sampler->SampleOnce();
  MetricsEndpoint endpoint(sampler.get(), BuildInfo{"t", "t", "t"}, EmitOptions{});
  sampler->AddListener([&endpoint](const std::shared_ptr<const Snapshot>& s) { endpoint.DropStale(s->sequence); });
  size_t text = endpoint.Render("text/plain").body->size();
  size_t proto = endpoint.Render(kProto).body->size();
  EXPECT_EQ(endpoint.cached_bytes(), text + proto);
  EXPECT_EQ(endpoint.Render(kProto).body->size(), proto);  // served from the cache
  uint64_t before = FreeMemoryReturns();
  sampler->SampleOnce();  // same size: the bodies go, no memory is returned
  EXPECT_EQ(endpoint.cached_bytes(), 0u);
  EXPECT_EQ(FreeMemoryReturns(), before);
  endpoint.Render("text/plain");
  n = 5;
  sampler->SampleOnce();  // the large body and snapshot go, and their memory with them
  EXPECT_EQ(endpoint.cached_bytes(), 0u);
  EXPECT_EQ(FreeMemoryReturns(), before + 1);
}

TEST(ChurnMemoryTest, WithoutPublishTheNextScrapeDropsTheOldBodies) {
  size_t n = 5000;
  std::unique_ptr<Sampler> sampler = NewSampler(&n);
  sampler->SampleOnce();
  MetricsEndpoint endpoint(sampler.get(), BuildInfo{"t", "t", "t"}, EmitOptions{});
  size_t text = endpoint.Render("text/plain").body->size();
  size_t proto = endpoint.Render(kProto).body->size();
  n = 5;
  uint64_t before = FreeMemoryReturns();
  sampler->SampleOnce();
  // The cache is now the last holder of the large snapshot.
  EXPECT_EQ(endpoint.cached_bytes(), text + proto);
  EXPECT_EQ(FreeMemoryReturns(), before);
  size_t small = endpoint.Render(kProto).body->size();
  // The text body of the old snapshot went too, though only protobuf was scraped.
  EXPECT_EQ(endpoint.cached_bytes(), small);
  EXPECT_EQ(FreeMemoryReturns(), before + 1);
}

// The bodies go before a cycle builds its sample and snapshot, so that they
// are not held through the cycle's peak; the next scrape renders anew.
TEST(ChurnMemoryTest, EndpointDropsItsBodiesBeforeACycle) {
  size_t n = 5000;
  std::unique_ptr<Sampler> sampler = NewSampler(&n);
  sampler->SampleOnce();
  MetricsEndpoint endpoint(sampler.get(), BuildInfo{"t", "t", "t"}, EmitOptions{});
  size_t held_in_cycle = 1;
  sampler->AddBeforeCycle([&] {
    endpoint.DropCached();
    held_in_cycle = endpoint.cached_bytes();
  });
  std::shared_ptr<const std::string> text = endpoint.Render("text/plain").body;
  size_t proto = endpoint.Render(kProto).body->size();
  EXPECT_EQ(endpoint.cached_bytes(), text->size() + proto);
  sampler->SampleOnce();
  EXPECT_EQ(held_in_cycle, 0u);
  EXPECT_FALSE(text->empty());  // a response still writing keeps its body
  EXPECT_GT(endpoint.Render(kProto).body->size(), 0u);
  EXPECT_EQ(endpoint.cached_bytes(), endpoint.Render(kProto).body->size());
}

// Concurrent scrapers of one sample share one rendering: one body in memory
// and one render's CPU, however many ask at once.
TEST(ChurnMemoryTest, ConcurrentScrapersShareOneBody) {
  size_t n = 5000;
  std::unique_ptr<Sampler> sampler = NewSampler(&n);
  sampler->SampleOnce();
  MetricsEndpoint endpoint(sampler.get(), BuildInfo{"t", "t", "t"}, EmitOptions{});
  for (const char* accept : {"text/plain", kProto}) {
    std::vector<std::thread> threads;
    std::vector<const std::string*> bodies(6, nullptr);
    for (size_t i = 0; i < bodies.size(); ++i) {
      threads.emplace_back([&, i] { bodies[i] = endpoint.Render(accept).body.get(); });
    }
    for (std::thread& t : threads) t.join();
    for (const std::string* b : bodies) EXPECT_EQ(b, bodies[0]) << accept;
  }
}

}  // namespace
}  // namespace sockpressure
