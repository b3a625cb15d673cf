#include "core/log.hpp"

#include <spdlog/sinks/daily_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <memory>
#include <mutex>
#include <vector>

namespace skippr {

namespace {
// The file sink InitLogging made last (none: logging to stderr only).
std::mutex file_sink_mutex;
std::shared_ptr<spdlog::sinks::daily_file_format_sink_mt> file_sink;  // guarded by the mutex

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
  Status file_status;
  std::shared_ptr<spdlog::sinks::daily_file_format_sink_mt> opened_file_sink;
  try {
    std::filesystem::create_directories(options.log_dir);
    opened_file_sink = std::make_shared<spdlog::sinks::daily_file_format_sink_mt>(
        (std::filesystem::path(options.log_dir) / "skipprd.%Y-%m-%d.log").string(), 0, 0);
    opened_file_sink->set_level(std::min(spdlog::level::info, lowest));
    opened_file_sink->set_pattern("%Y-%m-%dT%H:%M:%S.%f%z %l [%P] %v");
    sinks.push_back(opened_file_sink);
  } catch (const std::exception& error) {
    file_status = Status::IOError("cannot write the log file under '" + options.log_dir +
                                  "': " + error.what() + "; logging to stderr only");
  }
  auto logger = std::make_shared<spdlog::logger>("skipprd", sinks.begin(), sinks.end());
  logger->set_level(lowest);
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
  {
    std::lock_guard<std::mutex> lock(file_sink_mutex);
    file_sink = std::move(opened_file_sink);
  }
  return file_status;
}

std::string LogFilePath() {
  std::lock_guard<std::mutex> lock(file_sink_mutex);
  return file_sink == nullptr ? "" : file_sink->filename();
}

void ShutdownLogging() {
  spdlog::default_logger()->flush();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("skipprd"));
  std::lock_guard<std::mutex> lock(file_sink_mutex);
  file_sink.reset();
}

}  // namespace skippr
