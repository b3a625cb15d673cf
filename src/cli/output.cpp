#include "cli/output.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <random>

#include "core/redact.hpp"

namespace skippr::cli {

OutputMode ParseOutputMode(const std::string& text) {
  if (text == "json") return OutputMode::kJson;
  if (text == "text") return OutputMode::kText;
  return OutputMode::kProgress;
}

Status WriteToStdout(std::string_view text) {
  if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0) {
    return Status::IOError(
        fmt::format("writing the result to standard output failed: {}", std::strerror(errno)));
  }
  return Status::OK();
}

std::string UtcTimestampNow() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const auto millis =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%S", &utc);
  return fmt::format("{}.{:03}Z", text, millis);
}

RunOutput::RunOutput(OutputMode mode, std::string phase)
    : mode_(mode), phase_(std::move(phase)), started_(std::chrono::steady_clock::now()) {
  std::random_device random;
  run_id_ = fmt::format("{:08x}{:08x}", random(), random());
  shows_progress_ = mode_ == OutputMode::kProgress && isatty(STDERR_FILENO) == 1;
}

void RunOutput::Text(const std::string& line) const {
  if (mode_ == OutputMode::kJson) return;
  fmt::print("{}\n", Redact(line));
  std::fflush(stdout);
}

void RunOutput::Event(const std::string& event, nlohmann::ordered_json fields) const {
  if (mode_ != OutputMode::kJson) return;
  nlohmann::ordered_json line = {{"event", event},
                                 {"run_id", run_id_},
                                 {"phase", phase_},
                                 {"timestamp", UtcTimestampNow()}};
  for (auto& [key, value] : fields.items()) line[key] = value;
  fmt::print("{}\n", Redact(JsonText(line)));
  std::fflush(stdout);
}

void RunOutput::Progress(const std::string& status) {
  if (!shows_progress_) return;
  const auto now = std::chrono::steady_clock::now();
  if (has_progress_line_ && now - last_progress_ < std::chrono::milliseconds(100)) return;
  last_progress_ = now;
  fmt::print(stderr, "\r\033[2K{}", status);
  std::fflush(stderr);
  has_progress_line_ = true;
}

void RunOutput::EndProgress() {
  if (!has_progress_line_) return;
  fmt::print(stderr, "\r\033[2K");
  std::fflush(stderr);
  has_progress_line_ = false;
}

int64_t RunOutput::elapsed_ms() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               started_)
      .count();
}

}  // namespace skippr::cli
