// A small leveled logger (Debian's abseil 20220623 predates absl/log).
// Lines go to stderr as "level=info msg=..." in logfmt, like node_exporter.
// Thread-safe: each line is written with one write(2).
#pragma once

#include <string>
#include "absl/strings/string_view.h"

#include "absl/strings/str_cat.h"

namespace sockpressure {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

// Parses "debug", "info", "warn", "error". Returns false on anything else.
bool ParseLogLevel(absl::string_view text, LogLevel* out);
void SetLogLevel(LogLevel level);
bool LogEnabled(LogLevel level);
void LogLine(LogLevel level, absl::string_view message);

template <typename... Args>
void Log(LogLevel level, const Args&... args) {
  if (LogEnabled(level)) LogLine(level, absl::StrCat(args...));
}
#define SP_LOG_DEBUG(...) ::sockpressure::Log(::sockpressure::LogLevel::kDebug, __VA_ARGS__)
#define SP_LOG_INFO(...) ::sockpressure::Log(::sockpressure::LogLevel::kInfo, __VA_ARGS__)
#define SP_LOG_WARN(...) ::sockpressure::Log(::sockpressure::LogLevel::kWarn, __VA_ARGS__)
#define SP_LOG_ERROR(...) ::sockpressure::Log(::sockpressure::LogLevel::kError, __VA_ARGS__)

}  // namespace sockpressure
