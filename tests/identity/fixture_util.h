// Loads tests/identity/fixtures: cgroup path sets and the pod lists they
// resolve against (see make_fixtures.py for the format).
#pragma once

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace sockpressure::testing {

struct FixtureRow {
  std::string path, parse, labels;
};

struct FixtureSet {
  std::string name, pods_file;
  std::vector<FixtureRow> rows;
};

inline std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline std::string FixturePath(const std::string& name) { return std::string(IDENTITY_FIXTURES) + "/" + name; }

inline FixtureSet LoadFixture(const std::string& name) {
  FixtureSet set;
  set.name = name;
  for (absl::string_view line : absl::StrSplit(ReadAll(FixturePath(name)), '\n', absl::SkipEmpty())) {
    if (absl::ConsumePrefix(&line, "# pods: ")) {
      set.pods_file = std::string(line.substr(0, line.find(' ')));
      continue;
    }
    if (absl::StartsWith(line, "#")) continue;
    std::vector<std::string> cols = absl::StrSplit(line, '\t');
    if (cols.size() != 3) continue;
    set.rows.push_back({cols[0], cols[1], cols[2]});
  }
  return set;
}

inline const std::vector<std::string>& FixtureNames() {
  static const std::vector<std::string> names = {
      "systemd-containerd-v1.txt", "systemd-containerd-v2.txt", "cgroupfs-containerd-v1.txt",
      "cgroupfs-containerd-v2.txt", "systemd-crio-v1.txt",       "systemd-crio-v2.txt",
      "cgroupfs-crio-v1.txt",       "cgroupfs-crio-v2.txt",       "systemd-docker-v1.txt",
      "systemd-docker-v2.txt",      "cgroupfs-docker-v1.txt",     "cgroupfs-docker-v2.txt",
      "kind-systemd-containerd-v2.txt",
  };
  return names;
}

}  // namespace sockpressure::testing
