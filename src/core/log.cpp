#include "core/log.hpp"

#include <spdlog/sinks/daily_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <vector>

#include "core/file.hpp"

namespace skippr {

namespace {
spdlog::level::level_enum ToSpdlog(LogLevel level) {
  switch (level) {
    case LogLevel::kTrace:
      return spdlog::level::trace;
    case LogLevel::kDebug:
      return spdlog::level::debug;
    case LogLevel::kInfo:
      return spdlog::level::info;
    case LogLevel::kWarn:
      return spdlog::level::warn;
    case LogLevel::kError:
      return spdlog::level::err;
  }
  return spdlog::level::info;
}
}  // namespace

Result<LogLevel> ParseLogLevel(std::string_view text) {
  std::string name(text);
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (name == "trace") return LogLevel::kTrace;
  if (name == "debug") return LogLevel::kDebug;
  if (name == "info") return LogLevel::kInfo;
  if (name == "warn" || name == "warning") return LogLevel::kWarn;
  if (name == "error") return LogLevel::kError;
  return Status::InvalidArgument("unknown log level '" + std::string(text) +
                                 "'; use trace, debug, info, warn or error");
}

Status InitLogging(const LogOptions& options) {
  std::vector<spdlog::sink_ptr> sinks;
  auto lowest = spdlog::level::info;
  if (options.stderr_level) {
    auto stderr_sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
    stderr_sink->set_level(ToSpdlog(*options.stderr_level));
    stderr_sink->set_pattern("%^%L%$ %H:%M:%S.%e %v");
    sinks.push_back(stderr_sink);
    lowest = std::min(lowest, ToSpdlog(*options.stderr_level));
  }
  // Durably: the log directory is usually the first thing made under DATA_DIR, and DATA_DIR's own
  // entry must survive a power cut with the pipeline state skipprd then writes into it.
  Status file_status = CreateDirectoriesDurably(*Env::Default(), options.log_dir);
  std::string failure = file_status.message();
  if (file_status.ok()) {
    try {
      auto file_sink = std::make_shared<spdlog::sinks::daily_file_format_sink_mt>(
          (std::filesystem::path(options.log_dir) / "skipprd.%Y-%m-%d.log").string(), 0, 0);
      file_sink->set_level(std::min(spdlog::level::info, lowest));
      file_sink->set_pattern("%Y-%m-%dT%H:%M:%S.%f%z %l [%P] %v");
      sinks.push_back(file_sink);
    } catch (const std::exception& error) {
      failure = error.what();
    }
  }
  if (!failure.empty()) {
    file_status = Status::IOError("cannot write the log file under '" + options.log_dir +
                                  "': " + failure + "; logging to stderr only");
  }
  auto logger = std::make_shared<spdlog::logger>("skipprd", sinks.begin(), sinks.end());
  logger->set_level(lowest);
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
  return file_status;
}

void ShutdownLogging() {
  spdlog::default_logger()->flush();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("skipprd"));
}

}  // namespace skippr
