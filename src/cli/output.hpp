// Internal to cli/: the progress | text | json output modes shared by discover and sync.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/status.hpp"

namespace skippr::cli {

enum class OutputMode { kProgress, kText, kJson };
// "progress" | "text" | "json" (the flag's values are checked by CLI11).
OutputMode ParseOutputMode(const std::string& text);

// One run's output: text lines on stdout, or JSON events (one per line) each carrying event,
// run_id, phase and timestamp; in progress mode a live line on stderr when it is a terminal.
class RunOutput {
 public:
  RunOutput(OutputMode mode, std::string phase);

  bool is_json() const { return mode_ == OutputMode::kJson; }
  void Text(const std::string& line) const;  // ignored in json mode
  void Event(const std::string& event, nlohmann::ordered_json fields) const;  // json mode only
  // Progress mode on a terminal: rewrites one status line on stderr (at most 10 times a second).
  void Progress(const std::string& status);
  void EndProgress();
  int64_t elapsed_ms() const;

 private:
  OutputMode mode_;
  std::string phase_;
  std::string run_id_;
  bool shows_progress_ = false;
  bool has_progress_line_ = false;
  std::chrono::steady_clock::time_point started_;
  std::chrono::steady_clock::time_point last_progress_;
};

std::string UtcTimestampNow();  // "2026-11-30T05:12:00.123Z"

// A result's text to standard output as it streams (query::TextOutput); a write that fails (a
// full disk, a closed pipe when SIGPIPE is ignored) is an IOError that stops the result.
Status WriteToStdout(std::string_view text);

// One JSON document on one line. Text that is not UTF-8 (a file name, a key read from input) is
// written with U+FFFD in place of its bad bytes: nlohmann's dump would throw on it.
template <typename JsonType>
std::string JsonText(const JsonType& document) {
  return document.dump(-1, ' ', false, JsonType::error_handler_t::replace);
}

}  // namespace skippr::cli
