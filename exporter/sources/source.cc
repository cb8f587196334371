#include "absl/strings/string_view.h"
#include "exporter/sources/source.h"

#include "exporter/common/file_reader.h"

namespace sockpressure {
namespace {

class FunctionSource final : public Source {
 public:
  FunctionSource(std::string name, std::function<absl::Status(Sample&)> collect)
      : name_(std::move(name)), collect_(std::move(collect)) {}
  absl::string_view name() const override { return name_; }
  absl::Status Collect(Sample& sample) override { return collect_(sample); }

 private:
  std::string name_;
  std::function<absl::Status(Sample&)> collect_;
};

}  // namespace

std::unique_ptr<Source> MakeFunctionSource(std::string name, std::function<absl::Status(Sample&)> collect) {
  return std::make_unique<FunctionSource>(std::move(name), std::move(collect));
}

absl::StatusOr<std::string> ReadProcFile(const std::string& root, absl::string_view relative) {
  return ReadKernelFile(JoinPath(root, relative));
}

absl::Status WithProcFile(const std::string& root, absl::string_view relative,
                          const std::function<absl::Status(const std::string&)>& use) {
  absl::StatusOr<std::string> text = ReadProcFile(root, relative);
  if (!text.ok()) return IsAbsent(text.status()) ? absl::OkStatus() : text.status();
  return use(*text);
}

int Sample::IndexOfId(uint64_t id) const {
  return id_index.Find(id);
}

absl::string_view CgroupModeName(CgroupMode mode) {
  switch (mode) {
    case CgroupMode::kUnified: return "unified";
    case CgroupMode::kHybrid: return "hybrid";
    case CgroupMode::kLegacy: return "legacy";
    default: return "unknown";
  }
}

}  // namespace sockpressure
