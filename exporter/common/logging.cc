#include "absl/strings/string_view.h"
#include "exporter/common/logging.h"

#include <atomic>
#include <ctime>
#include <unistd.h>

namespace sockpressure {
namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};
constexpr const char* kNames[] = {"debug", "info", "warn", "error"};
}  // namespace

bool ParseLogLevel(absl::string_view text, LogLevel* out) {
  for (int i = 0; i < 4; ++i) {
    if (text == kNames[i]) {
      *out = static_cast<LogLevel>(i);
      return true;
    }
  }
  return false;
}

void SetLogLevel(LogLevel level) { g_level.store(static_cast<int>(level)); }

bool LogEnabled(LogLevel level) { return static_cast<int>(level) >= g_level.load(); }

void LogLine(LogLevel level, absl::string_view message) {
  char ts[32];
  std::time_t now = std::time(nullptr);
  struct tm tm_utc;
  gmtime_r(&now, &tm_utc);
  std::strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm_utc);
  std::string line = absl::StrCat("ts=", ts, " level=", kNames[static_cast<int>(level)], " msg=\"");
  for (char c : message) {
    if (c == '"' || c == '\\') line.push_back('\\');
    line.push_back(c == '\n' ? ' ' : c);
  }
  line += "\"\n";
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

}  // namespace sockpressure
