#include "exporter/cli/flag_set.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace sockpressure {

void FlagSet::String(std::string name, std::string* dst, std::string help) {
  flags_.push_back({std::move(name), std::move(help), absl::StrCat("\"", *dst, "\""), "string", false,
                    [dst](const std::string& v) {
                      *dst = v;
                      return absl::OkStatus();
                    }});
}

void FlagSet::Bool(std::string name, bool* dst, std::string help) {
  flags_.push_back({name, std::move(help), *dst ? "true" : "false", "bool", true,
                    [dst, name](const std::string& v) {
                      std::string lower = absl::AsciiStrToLower(v);
                      if (lower == "true" || lower == "1" || lower.empty()) *dst = true;
                      else if (lower == "false" || lower == "0") *dst = false;
                      else return absl::InvalidArgumentError(absl::StrCat("--", name, ": not a boolean: '", v, "'"));
                      return absl::OkStatus();
                    }});
}

void FlagSet::Int(std::string name, int64_t* dst, std::string help) {
  flags_.push_back({name, std::move(help), absl::StrCat(*dst), "int", false, [dst, name](const std::string& v) {
                      int64_t parsed = 0;
                      if (!absl::SimpleAtoi(v, &parsed)) {
                        return absl::InvalidArgumentError(absl::StrCat("--", name, ": not an integer: '", v, "'"));
                      }
                      if (parsed < 0 || parsed > kMaxFlagInt) {
                        return absl::InvalidArgumentError(
                            absl::StrCat("--", name, ": must be between 0 and ", kMaxFlagInt, ", got '", v, "'"));
                      }
                      *dst = parsed;
                      return absl::OkStatus();
                    }});
}

void FlagSet::Duration(std::string name, absl::Duration* dst, std::string help) {
  flags_.push_back({name, std::move(help), absl::FormatDuration(*dst), "duration", false,
                    [dst, name](const std::string& v) {
                      absl::Duration parsed;
                      if (!absl::ParseDuration(v, &parsed)) {
                        return absl::InvalidArgumentError(
                            absl::StrCat("--", name, ": not a duration (e.g. 1s, 500ms): '", v, "'"));
                      }
                      if (parsed < absl::ZeroDuration() || parsed > kMaxFlagDuration) {
                        return absl::InvalidArgumentError(absl::StrCat("--", name, ": must be between 0s and ",
                                                                       absl::FormatDuration(kMaxFlagDuration),
                                                                       ", got '", v, "'"));
                      }
                      *dst = parsed;
                      return absl::OkStatus();
                    }});
}

void FlagSet::StringList(std::string name, std::vector<std::string>* dst, std::string help) {
  flags_.push_back({std::move(name), absl::StrCat(help, " (repeatable)"), "[]", "string", false,
                    [dst](const std::string& v) {
                      dst->push_back(v);
                      return absl::OkStatus();
                    }});
}

const FlagSet::Flag* FlagSet::Find(const std::string& name) const {
  for (const Flag& f : flags_) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

absl::Status FlagSet::Parse(int argc, const char* const* argv, std::vector<std::string>* positional, bool* help,
                            bool* version) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (!absl::StartsWith(arg, "-") || arg == "-") {
      positional->push_back(arg);
      continue;
    }
    std::string body = arg.substr(absl::StartsWith(arg, "--") ? 2 : 1);
    if (body == "help" || body == "h") {
      *help = true;
      continue;
    }
    if (body == "version") {
      *version = true;
      continue;
    }
    std::string name = body, value;
    bool has_value = false;
    if (size_t eq = body.find('='); eq != std::string::npos) {
      name = body.substr(0, eq);
      value = body.substr(eq + 1);
      has_value = true;
    }
    const Flag* f = Find(name);
    if (f == nullptr && absl::StartsWith(name, "no-")) {
      const Flag* neg = Find(name.substr(3));
      if (neg != nullptr && neg->is_bool && !has_value) {
        absl::Status s = neg->set("false");
        if (!s.ok()) return s;
        given_.insert(neg->name);
        continue;
      }
    }
    if (f == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag ", arg, " (see --help)"));
    }
    if (!has_value && !f->is_bool) {
      if (i + 1 >= argc) return absl::InvalidArgumentError(absl::StrCat("flag --", name, " needs a value"));
      value = argv[++i];
      has_value = true;
    }
    absl::Status s = f->set(has_value ? value : "true");
    if (!s.ok()) return s;
    given_.insert(f->name);
  }
  return absl::OkStatus();
}

std::string FlagSet::Usage(const std::string& program) const {
  std::string out = absl::StrCat("usage: ", program, " [<flags>] [doctor]\n\nFlags:\n");
  std::vector<const Flag*> sorted;
  for (const Flag& f : flags_) sorted.push_back(&f);
  std::stable_sort(sorted.begin(), sorted.end(), [](const Flag* a, const Flag* b) { return a->name < b->name; });
  for (const Flag* f : sorted) {
    std::string head = f->is_bool ? absl::StrCat("--[no-]", f->name) : absl::StrCat("--", f->name, "=", f->type);
    absl::StrAppend(&out, "  ", head, "\n      ", f->help, " (default: ", f->default_text, ")\n");
  }
  absl::StrAppend(&out, "  --help\n      Show this help.\n  --version\n      Show the version.\n");
  return out;
}

}  // namespace sockpressure
