// Memory held after thousands of cgroups go away (issue 13): the last holder
// of a large snapshot (the sampler, or a /metrics stream still being written)
// returns the freed memory when it lets go, not before and not on a timer.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "exporter/common/memory.h"
#include "exporter/outputs/metrics_endpoint.h"
#include "exporter/outputs/proto_writer.h"
#include "exporter/outputs/text_writer.h"
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

// /metrics is rendered a piece at a time while it is sent: no piece holds
// much more than one family over every cgroup, and the pieces add up to the
// exposition written in one go.
TEST(ChurnMemoryTest, EndpointStreamsTheExpositionInPiecesOfAboutOneFamily) {
  size_t n = 5000;
  std::unique_ptr<Sampler> sampler = NewSampler(&n);
  sampler->SampleOnce();
  std::shared_ptr<const Snapshot> snap = sampler->Latest();
  const BuildInfo build{"t", "t", "t"};
  MetricsEndpoint endpoint(sampler.get(), build, EmitOptions{});
  for (bool protobuf : {false, true}) {
    std::unique_ptr<MetricWriter> whole = protobuf ? NewProtoWriter() : NewTextWriter();
    WriteSnapshotMetrics(*snap, build, EmitOptions{}, *whole);
    const std::string expected = whole->Finish();
    MetricsBody body = endpoint.OpenSnapshot(snap, protobuf);
    std::string all;
    size_t pieces = 0, largest = 0;
    for (bool more = true; more;) {
      std::string piece;
      more = body.stream->Next(&piece);
      ++pieces;
      largest = std::max(largest, piece.size());
      all += piece;
    }
    EXPECT_EQ(all, expected) << protobuf;
    // 5,000 cgroups: about 130 B per cgroup and family in text, so a family
    // is about 0.65 MB; the whole body is several MB.
    EXPECT_GE(pieces, 4u) << protobuf;
    EXPECT_LT(largest, expected.size() / 3) << protobuf;
    EXPECT_LT(largest, 1u << 20) << protobuf;
  }
}

// A stream holds its snapshot until it is done, so a scrape being written
// when thousands of cgroups go away is the last holder and returns the
// memory when it ends, not before.
TEST(ChurnMemoryTest, AStreamBeingWrittenIsTheLastHolderOfItsSnapshot) {
  size_t n = 5000;
  std::unique_ptr<Sampler> sampler = NewSampler(&n);
  sampler->SampleOnce();
  MetricsEndpoint endpoint(sampler.get(), BuildInfo{"t", "t", "t"}, EmitOptions{});
  MetricsBody body = endpoint.Open("text/plain");
  std::string piece;
  ASSERT_TRUE(body.stream->Next(&piece));
  uint64_t before = FreeMemoryReturns();
  n = 5;
  sampler->SampleOnce();
  EXPECT_EQ(FreeMemoryReturns(), before);  // the stream still renders the large snapshot
  while (body.stream->Next(&piece)) {
  }
  EXPECT_NE(piece.find("pod4999-"), std::string::npos);  // it rendered that snapshot to the end
  body.stream.reset();
  EXPECT_EQ(FreeMemoryReturns(), before + 1);
  body = endpoint.Open(kProto);  // the next scrape renders the latest, small one
  EXPECT_LT(ReadAll(*body.stream).size(), 20000u);
}

// Concurrent scrapers each get a whole, identical exposition.
TEST(ChurnMemoryTest, ConcurrentScrapersEachGetTheWholeExposition) {
  size_t n = 2000;
  std::unique_ptr<Sampler> sampler = NewSampler(&n);
  sampler->SampleOnce();
  MetricsEndpoint endpoint(sampler.get(), BuildInfo{"t", "t", "t"}, EmitOptions{});
  for (bool protobuf : {false, true}) {
    const std::string expected = endpoint.RenderSnapshot(*sampler->Latest(), protobuf);
    std::vector<std::thread> threads;
    std::vector<std::string> bodies(6);
    for (size_t i = 0; i < bodies.size(); ++i) {
      threads.emplace_back(
          [&, i] { bodies[i] = ReadAll(*endpoint.OpenSnapshot(sampler->Latest(), protobuf).stream); });
    }
    for (std::thread& t : threads) t.join();
    for (const std::string& b : bodies) EXPECT_EQ(b, expected) << protobuf;
  }
}

}  // namespace
}  // namespace sockpressure
