// An immutable string shared by every holder: a cgroup's path lives once in
// the cgroupfs walk's node, and the sample and the snapshots that carry it
// hold a reference. Copying one is a reference count, not an allocation:
// at 10,000 cgroups a sampling cycle copied 10,000 paths into its sample and
// the snapshot held them beside the walk's own (about 1.5 MiB per copy with
// Kubernetes-length paths).
//
// Thread-safe as std::shared_ptr<const std::string> is: a SharedPath may be
// copied and read from any thread; the string itself never changes.
#pragma once

#include <memory>
#include <ostream>
#include <string>
#include <utility>

namespace sockpressure {

class SharedPath {
 public:
  SharedPath() : text_(Empty()) {}
  SharedPath(std::string text) : text_(std::make_shared<const std::string>(std::move(text))) {}  // NOLINT
  SharedPath(const char* text) : SharedPath(std::string(text)) {}                                  // NOLINT

  const std::string& str() const { return *text_; }
  operator const std::string&() const { return *text_; }  // NOLINT: reads like the string it holds
  const char* c_str() const { return text_->c_str(); }
  size_t size() const { return text_->size(); }
  bool empty() const { return text_->empty(); }
  std::string substr(size_t pos, size_t n = std::string::npos) const { return text_->substr(pos, n); }
  size_t rfind(char c) const { return text_->rfind(c); }

  friend bool operator==(const SharedPath& a, const SharedPath& b) {
    return a.text_ == b.text_ || *a.text_ == *b.text_;
  }
  friend bool operator==(const SharedPath& a, const std::string& b) { return *a.text_ == b; }
  friend bool operator==(const SharedPath& a, const char* b) { return *a.text_ == b; }
  friend std::ostream& operator<<(std::ostream& os, const SharedPath& p) { return os << *p.text_; }

 private:
  // One empty string for every default-constructed path (no allocation).
  static const std::shared_ptr<const std::string>& Empty() {
    static const auto* empty = new std::shared_ptr<const std::string>(std::make_shared<const std::string>());
    return *empty;
  }
  std::shared_ptr<const std::string> text_;
};

}  // namespace sockpressure
