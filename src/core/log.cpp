#include "core/log.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/details/os.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <memory>
#include <mutex>
#include <vector>

#include "core/file.hpp"
#include "core/redact.hpp"

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

constexpr mode_t kLogFileMode = 0600;

// Formats with `pattern` after masking secrets in the message (core/redact.hpp): every sink of
// the process logger uses one, so no call site has to remember.
class RedactingFormatter final : public spdlog::formatter {
 public:
  explicit RedactingFormatter(std::string pattern)
      : pattern_(std::move(pattern)),
        inner_(std::make_unique<spdlog::pattern_formatter>(pattern_)) {}

  void format(const spdlog::details::log_msg& message, spdlog::memory_buf_t& dest) override {
    const std::string redacted = Redact(std::string_view(message.payload.data(), message.payload.size()));
    spdlog::details::log_msg copy = message;
    copy.payload = redacted;
    inner_->format(copy, dest);
  }
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<RedactingFormatter>(pattern_);
  }

 private:
  std::string pattern_;
  std::unique_ptr<spdlog::pattern_formatter> inner_;
};

// Opens <log_dir>/<name> for appending without following a symbolic link (in place of the file
// or of the directory: the directory is opened O_NOFOLLOW and the file relative to it), refusing
// anything but a regular file with one link, and sets it to 0600 whatever the umask (a file an
// older skipprd left 0644 too).
Result<int> OpenLogFile(const std::string& log_dir, const std::string& name) {
  const std::string path = (std::filesystem::path(log_dir) / name).string();
  const int directory_fd = ::open(log_dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (directory_fd < 0) {
    return Status::IOError(fmt::format(
        "cannot open the log directory '{}': {}{}", log_dir, std::strerror(errno),
        errno == ELOOP || errno == ENOTDIR ? " (a symbolic link or a file is in its place; it is "
                                             "not followed — remove it)"
                                           : ""));
  }
  const int fd = ::openat(directory_fd, name.c_str(),
                          O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK,
                          kLogFileMode);
  const int open_errno = errno;
  ::close(directory_fd);
  if (fd < 0) {
    return Status::IOError(fmt::format(
        "cannot open the log file '{}': {}{}", path, std::strerror(open_errno),
        open_errno == ELOOP ? " (a symbolic link is in its place; it is not followed — remove it)"
                            : ""));
  }
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode) || info.st_nlink != 1) {
    ::close(fd);
    return Status::IOError(fmt::format(
        "the log file '{}' is not a regular file with a single link; it is not written — remove it",
        path));
  }
  if ((info.st_mode & 07777) != kLogFileMode && ::fchmod(fd, kLogFileMode) != 0) {
    const int chmod_errno = errno;
    ::close(fd);
    return Status::IOError(
        fmt::format("cannot set mode 0600 on the log file '{}': {}", path, std::strerror(chmod_errno)));
  }
  return fd;
}

// skipprd.<YYYY-MM-DD>.log in local time, a new file at the first message of each day. On
// write(2) rather than spdlog's fopen-based daily sink, which follows symbolic links and creates
// files with the umask's mode.
class DailyLogFileSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  static Result<std::shared_ptr<DailyLogFileSink>> Open(const std::string& log_dir) {
    std::shared_ptr<DailyLogFileSink> sink(new DailyLogFileSink(log_dir));
    const std::string day = DayOf(spdlog::log_clock::now());
    SKIPPR_ASSIGN_OR_RETURN(sink->fd_, OpenLogFile(log_dir, FileName(day)));
    sink->day_ = day;
    return sink;
  }
  ~DailyLogFileSink() override {
    if (fd_ >= 0) ::close(fd_);
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& message) override {
    const std::string day = DayOf(message.time);
    if (day != day_) {
      // A new day's file that cannot be opened (a link placed there meanwhile) leaves the old
      // one in use rather than losing the line.
      Result<int> next = OpenLogFile(log_dir_, FileName(day));
      if (next.ok()) {
        ::close(fd_);
        fd_ = *next;
        day_ = day;
      }
    }
    spdlog::memory_buf_t formatted;
    formatter_->format(message, formatted);
    size_t written = 0;
    while (written < formatted.size()) {
      const ssize_t n = ::write(fd_, formatted.data() + written, formatted.size() - written);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;  // a full disk loses log lines, never the process
      written += static_cast<size_t>(n);
    }
  }
  void flush_() override {}  // write(2) leaves nothing buffered in the process

 public:
  // The file written now (today's, or the last day's one that could be opened).
  std::string path() {
    std::lock_guard<std::mutex> lock(mutex_);
    return (std::filesystem::path(log_dir_) / FileName(day_)).string();
  }

 private:
  explicit DailyLogFileSink(std::string log_dir) : log_dir_(std::move(log_dir)) {}
  static std::string DayOf(spdlog::log_clock::time_point time) {
    const std::tm local = spdlog::details::os::localtime(spdlog::log_clock::to_time_t(time));
    return fmt::format("{:04}-{:02}-{:02}", local.tm_year + 1900, local.tm_mon + 1, local.tm_mday);
  }
  static std::string FileName(const std::string& day) { return "skipprd." + day + ".log"; }

  std::string log_dir_;
  std::string day_;
  int fd_ = -1;
};

// The file sink InitLogging made last (none: logging to stderr only).
std::mutex file_sink_mutex;
std::shared_ptr<DailyLogFileSink> file_sink;  // guarded by file_sink_mutex

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
    stderr_sink->set_formatter(std::make_unique<RedactingFormatter>("%^%L%$ %H:%M:%S.%e %v"));
    sinks.push_back(stderr_sink);
    lowest = std::min(lowest, ToSpdlog(*options.stderr_level));
  }
  // Durably: the log directory is usually the first thing made under DATA_DIR, and DATA_DIR's own
  // entry must survive a power cut with the pipeline state skipprd then writes into it. The log
  // file itself is opened with open(2) below, not through the Env: the Env has no O_NOFOLLOW or
  // 0600 notion, and log lines are not data whose durability a fault test checks.
  Status file_status = CreatePrivateDirectories(*Env::Default(), options.log_dir, "log");
  Result<std::shared_ptr<DailyLogFileSink>> opened =
      file_status.ok() ? DailyLogFileSink::Open(options.log_dir)
                       : Result<std::shared_ptr<DailyLogFileSink>>(file_status);
  std::shared_ptr<DailyLogFileSink> opened_file_sink;
  if (opened.ok()) {
    opened_file_sink = *opened;
    ::chmod(options.log_dir.c_str(), 0700);  // also a logs/ an older skipprd made with the umask
    opened_file_sink->set_level(std::min(spdlog::level::info, lowest));
    opened_file_sink->set_formatter(std::make_unique<RedactingFormatter>("%Y-%m-%dT%H:%M:%S.%f%z %l [%P] %v"));
    sinks.push_back(opened_file_sink);
  } else {
    file_status = Status::IOError("cannot write the log file under '" + options.log_dir + "': " +
                                  opened.status().message() +
                                  (options.stderr_level ? "; logging to stderr only"
                                                        : "; no log file is written this run (--log "
                                                          "logs to stderr)"));
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
  return file_sink == nullptr ? "" : file_sink->path();
}

void ShutdownLogging() {
  spdlog::default_logger()->flush();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("skipprd"));
  std::lock_guard<std::mutex> lock(file_sink_mutex);
  file_sink.reset();
}

}  // namespace skippr
