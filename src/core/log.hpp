// Logging: English, one event per line, numbers with units (STYLE.md). Modules log through spdlog's
// default logger, which InitLogging() points at stderr (with --log) and always at a daily file.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/status.hpp"

namespace skippr {

enum class LogLevel { kTrace, kDebug, kInfo, kWarn, kError };

// trace|debug|info|warn|error, case-insensitive.
Result<LogLevel> ParseLogLevel(std::string_view text);

struct LogOptions {
  std::optional<LogLevel>
      stderr_level;     // nullopt: nothing on stderr (the progress display owns it)
  std::string log_dir;  // receives skipprd.<YYYY-MM-DD>.log, created if missing
};

// Configures the default logger. The file always records info and above. A file that cannot be
// opened is reported in the returned Status; stderr logging (if asked for) is set up regardless.
Status InitLogging(const LogOptions& options);

// Flushes and detaches every sink (end of process, and between tests).
void ShutdownLogging();

// The log file InitLogging opened (today's), or "" when there is none.
std::string LogFilePath();

}  // namespace skippr
