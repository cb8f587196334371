// Command-line flags in the node_exporter style: --web.listen-address=:19100,
// --collector.cgroupfs / --no-collector.cgroupfs, repeatable list flags.
//
// Why not absl/flags: its flag names must be C identifiers (ABSL_FLAG
// declares a variable), and users of node_exporter expect dotted, dashed
// names; absl is still used for durations and strings.
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace sockpressure {

// Not thread-safe; used once at start-up. Defaults are the values the
// destination variables hold when the flag is registered.
//
// Every Int is within [0, kMaxFlagInt] and every Duration within
// [0, kMaxFlagDuration]: no flag needs more, and beyond them values overflow
// the int and time arithmetic they feed (an infinite interval busy-looped
// the sampler; 2^31 requests wrapped to a negative limit).
class FlagSet {
 public:
  static constexpr int64_t kMaxFlagInt = INT32_MAX;
  static inline const absl::Duration kMaxFlagDuration = absl::Hours(24);

  void String(std::string name, std::string* dst, std::string help);
  void Bool(std::string name, bool* dst, std::string help);  // also --no-NAME
  void Int(std::string name, int64_t* dst, std::string help);
  void Duration(std::string name, absl::Duration* dst, std::string help);
  void StringList(std::string name, std::vector<std::string>* dst, std::string help);  // repeatable

  // Parses argv[1..]. Arguments that do not start with "--" are collected in
  // `positional` (e.g. the `doctor` command). "--help" and "--version" set
  // the corresponding outputs instead of failing.
  absl::Status Parse(int argc, const char* const* argv, std::vector<std::string>* positional, bool* help,
                     bool* version);

  std::string Usage(const std::string& program) const;

  // Whether Parse() met flag `name` (as --name, --name=V or --no-name): how
  // a deprecated spelling is told apart from its default, to apply it over
  // its replacement and say so.
  bool Given(const std::string& name) const { return given_.count(name) > 0; }

 private:
  struct Flag {
    std::string name, help, default_text, type;
    bool is_bool = false;
    std::function<absl::Status(const std::string&)> set;
  };
  const Flag* Find(const std::string& name) const;
  std::vector<Flag> flags_;
  std::set<std::string> given_;
};

}  // namespace sockpressure
