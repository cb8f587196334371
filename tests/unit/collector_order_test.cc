// The collection order is the registry's rows, and a row names the
// collectors whose results it reads from the same Sample: start-up refuses a
// registry that lists a collector before one it runs after.
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "exporter/sources/source.h"

namespace sockpressure {
namespace {

SourceRegistration Row(std::string name, std::vector<std::string> after) {
  return {std::move(name), true, "test", CollectorCadence::kEveryCycle, std::move(after),
          [](const SourceContext&) { return std::unique_ptr<Source>(); }};
}

TEST(CollectorOrderTest, TheRegistryRunsEachCollectorAfterThoseItReads) {
  EXPECT_TRUE(CheckCollectorOrder(RegisteredSources()).ok()) << CheckCollectorOrder(RegisteredSources());
  // The contracts the rows declare: the walk follows bpf's vmpressure tier,
  // the censuses map ids through cgroupfs' cgroups, sock_diag defers to the iterator.
  auto after = [](const std::string& name) {
    for (const SourceRegistration& r : RegisteredSources()) {
      if (r.name == name) return r.after;
    }
    ADD_FAILURE() << name << " is not registered";
    return std::vector<std::string>();
  };
  EXPECT_EQ(after("cgroupfs"), std::vector<std::string>{"bpf"});
  EXPECT_EQ(after("bpf_census"), std::vector<std::string>{"cgroupfs"});
  EXPECT_EQ(after("sock_diag"), (std::vector<std::string>{"cgroupfs", "bpf_census"}));
}

TEST(CollectorOrderTest, ACollectorListedBeforeOneItRunsAfterIsAnError) {
  EXPECT_TRUE(CheckCollectorOrder({Row("bpf", {}), Row("cgroupfs", {"bpf"}), Row("census", {"cgroupfs"})}).ok());
  absl::Status early = CheckCollectorOrder({Row("cgroupfs", {"bpf"}), Row("bpf", {})});
  EXPECT_EQ(early.code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(absl::StrContains(early.message(), "collector cgroupfs is listed before collector bpf")) << early;
  absl::Status itself = CheckCollectorOrder({Row("bpf", {"bpf"})});
  EXPECT_EQ(itself.code(), absl::StatusCode::kInternal) << "a collector cannot run after itself";
  absl::Status unknown = CheckCollectorOrder({Row("cgroupfs", {"ebpf"})});
  EXPECT_EQ(unknown.code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(absl::StrContains(unknown.message(), "ebpf, which is not registered")) << unknown;
}

}  // namespace
}  // namespace sockpressure
