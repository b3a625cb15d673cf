#include "cli/last_resort.hpp"

#include <fmt/format.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <mutex>

#include "cli/cli.hpp"
#include "core/log.hpp"
#include "core/redact.hpp"

// ASan and TSan catch these signals themselves and print a far better report than ours.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SKIPPR_HAS_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define SKIPPR_HAS_SANITIZER 1
#endif
#endif

namespace skippr::cli::internal {

namespace {

constexpr std::string_view kUnknownLogFile = "under DATA_DIR/logs";

std::mutex log_file_mutex;
std::string log_file;  // guarded by log_file_mutex

// The end of the signal handler's line, prepared outside the handler (which may only write).
constexpr size_t kSignalTailCapacity = 4096;
char signal_tail[kSignalTailCapacity];
std::atomic<size_t> signal_tail_bytes{0};

std::string ReportTail(std::string_view path) {
  return fmt::format("; this is a bug, please report it with the log file {}",
                     path.empty() ? kUnknownLogFile : path);
}

void PrepareSignalTail(const std::string& path) {
  const std::string tail = Redact(ReportTail(path)) + "\n";
  signal_tail_bytes.store(0);  // a signal meanwhile writes no tail rather than half of one
  const size_t bytes = std::min(tail.size(), kSignalTailCapacity);
  std::memcpy(signal_tail, tail.data(), bytes);
  signal_tail_bytes.store(bytes);
}

// InternalErrorMessage redacts (an exception's text may quote a setting's value) rather than rely
// on the redacting stderr and the log sinks alone; the log line goes through the process logger
// and so through the log file sink core/log.cpp opens.
void ReportInternalError(std::string_view what) {
  const std::string message = InternalErrorMessage(what);
  fmt::print(stderr, "{}\n", message);
  std::fflush(stderr);
  if (LogFilePath().empty()) return;  // before logging started, spdlog would print on stdout
  spdlog::error("{}", message);
  spdlog::default_logger()->flush();
}

[[noreturn]] void OnTerminate() {
  std::string what = "std::terminate was called without an exception";
  if (std::exception_ptr current = std::current_exception()) {
    try {
      std::rethrow_exception(current);
    } catch (const std::exception& error) {
      what = fmt::format("an exception escaped a thread: {}", error.what());
    } catch (...) {
      what = "an exception of unknown type escaped a thread";
    }
  }
  ReportInternalError(what);
  _exit(kExitFailure);
}

#ifndef SKIPPR_HAS_SANITIZER
void WriteAll(const char* text, size_t bytes) {
  while (bytes > 0) {
    const ssize_t written = write(STDERR_FILENO, text, bytes);
    if (written <= 0) return;
    text += written;
    bytes -= static_cast<size_t>(written);
  }
}

const char* SignalDescription(int signal_number) {
  switch (signal_number) {
    case SIGSEGV: return "invalid memory access (SIGSEGV; a stack overflow looks like this too)";
    case SIGBUS: return "invalid memory access (SIGBUS)";
    case SIGFPE: return "arithmetic fault (SIGFPE)";
    case SIGILL: return "illegal instruction (SIGILL)";
    case SIGABRT: return "aborted (SIGABRT)";
    default: return "fatal signal";
  }
}

// Async-signal-safe: write(2) and _exit(2) only.
void OnFatalSignal(int signal_number) {
  constexpr std::string_view kHead = "skipprd: internal error: ";
  WriteAll(kHead.data(), kHead.size());
  const char* description = SignalDescription(signal_number);
  WriteAll(description, std::strlen(description));
  const size_t tail_bytes = signal_tail_bytes.load();
  if (tail_bytes > 0) {
    WriteAll(signal_tail, tail_bytes);
  } else {
    WriteAll("\n", 1);
  }
  _exit(kExitFailure);
}

// Big enough for the handler; a stack overflow leaves the thread's own stack unusable.
constexpr size_t kAlternateStackBytes = 64 * 1024;
alignas(16) char alternate_stack[kAlternateStackBytes];

void InstallSignalHandlers() {
  stack_t stack{};
  stack.ss_sp = alternate_stack;
  stack.ss_size = kAlternateStackBytes;
  sigaltstack(&stack, nullptr);
  struct sigaction action {};
  action.sa_handler = OnFatalSignal;
  action.sa_flags = SA_ONSTACK | SA_RESETHAND;  // a fault inside the handler ends the process
  sigemptyset(&action.sa_mask);
  for (int signal_number : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) {
    sigaction(signal_number, &action, nullptr);
  }
}
#endif

}  // namespace

std::string InternalErrorMessage(std::string_view what) {
  std::lock_guard<std::mutex> lock(log_file_mutex);
  return Redact(fmt::format("skipprd: internal error: {}{}", what, ReportTail(log_file)));
}

int RunWithLastResort(const std::function<int()>& body) {
  try {
    return body();
  } catch (const std::exception& error) {
    ReportInternalError(error.what());
  } catch (...) {
    ReportInternalError("an exception of unknown type");
  }
  return kExitFailure;
}

void InstallLastResortHandlers() {
  std::set_terminate(OnTerminate);
#ifndef SKIPPR_HAS_SANITIZER
  InstallSignalHandlers();
#endif
  PrepareSignalTail("");
}

void SetLastResortLogFile(const std::string& path) {
  {
    std::lock_guard<std::mutex> lock(log_file_mutex);
    log_file = path;
  }
  PrepareSignalTail(path);
}

}  // namespace skippr::cli::internal
