// Helpers shared by the unit tests.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

#include "exporter/sources/sample.h"

namespace sockpressure::testing {

inline std::string Fixture(const std::string& tree) { return std::string(SOCKPRESSURE_FIXTURES) + "/" + tree; }

inline const CgroupReading* FindCgroup(const Sample& s, const std::string& path) {
  for (const CgroupReading& c : s.cgroups) {
    if (c.path == path) return &c;
  }
  return nullptr;
}

inline void WriteFile(const std::filesystem::path& p, const std::string& text) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

// A fresh temporary directory, removed when the object goes away.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "sockpressure-test-XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace sockpressure::testing
