// Helpers shared by the cgroupfs collector tests: a sample taken through
// the collector, a cgroup's scan count in it, and a collector driven
// through the state layer once per simulated second.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>

#include "exporter/sources/source.h"
#include "exporter/state/state_tracker.h"
#include "test_util.h"

namespace sockpressure::testing {

inline Sample Take(Source& src) {
  Sample s;
  absl::Status st = src.Collect(s);
  EXPECT_TRUE(st.ok()) << st;
  return s;
}

// UINT64_MAX when the cgroup or its pgscan is not in the sample.
inline uint64_t ScanOf(const Sample& s, const std::string& path) {
  const CgroupReading* c = FindCgroup(s, path);
  return c && c->pgscan ? *c->pgscan : UINT64_MAX;
}

// Not thread-safe: one test drives it.
class TrackedCollector {
 public:
  explicit TrackedCollector(Source& src) : src_(src) {}
  // One sample one second after the last, through the state layer.
  std::shared_ptr<const Snapshot> Next() {
    Sample s = Take(src_);
    s.monotonic_seconds = now_;
    now_ += 1;
    return tracker_.Update(std::move(s), {}, 0);
  }

 private:
  Source& src_;
  StateTracker tracker_;
  double now_ = 10;
};

}  // namespace sockpressure::testing
