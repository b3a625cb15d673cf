// cli/: the last resort (last_resort.hpp). Every path is driven for real: exceptions thrown into
// RunWithLastResort, and in death-test children the faults themselves (a null write, a stack
// overflow, a failed SKIPPR_CHECK, an exception escaping a thread) with the handlers installed.
#include "cli/last_resort.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "core/check.hpp"
#include "core/log.hpp"
#include "core/redact.hpp"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SKIPPR_TEST_HAS_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define SKIPPR_TEST_HAS_SANITIZER 1
#endif
#endif

namespace skippr::cli::internal {
namespace {

using ::testing::ExitedWithCode;
using ::testing::HasSubstr;

TEST(CliLastResort, AnExceptionIsAnInternalErrorWithExitCodeOne) {
  SetLastResortLogFile("");
  ::testing::internal::CaptureStderr();
  const int exit_code = RunWithLastResort([]() -> int { throw std::runtime_error("boom"); });
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(exit_code, 1);
  EXPECT_EQ(err,
            "skipprd: internal error: boom; this is a bug, please report it with the log file "
            "under DATA_DIR/logs\n");
}

TEST(CliLastResort, TheMessageNamesTheLogFileAndUnknownExceptionsAreCaughtToo) {
  SetLastResortLogFile("/srv/data/logs/skipprd.2026-11-30.log");
  ::testing::internal::CaptureStderr();
  const int exit_code = RunWithLastResort([]() -> int { throw 42; });
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(exit_code, 1);
  EXPECT_EQ(err,
            "skipprd: internal error: an exception of unknown type; this is a bug, please report "
            "it with the log file /srv/data/logs/skipprd.2026-11-30.log\n");
  EXPECT_EQ(RunWithLastResort([] { return 7; }), 7) << "a normal exit code passes through";
  SetLastResortLogFile("");
}

// An exception's text may quote a secret: masked on stderr and in the log file, which is the one
// the process logger writes (core/log.cpp's own sink) and the one the message names.
TEST(CliLastResort, TheMessageIsRedactedOnStderrAndInTheLogFile) {
  const std::filesystem::path log_dir =
      std::filesystem::temp_directory_path() / ("skippr-cli-test-" + std::to_string(::getpid()));
  std::filesystem::remove_all(log_dir);
  ASSERT_TRUE(InitLogging(LogOptions{std::nullopt, log_dir.string()}).ok());
  const std::string log_file = LogFilePath();
  ASSERT_EQ(std::filesystem::path(log_file).parent_path(), log_dir);
  SetLastResortLogFile(log_file);
  RegisterSecret("s3cr3t-value");
  ::testing::internal::CaptureStderr();
  const int exit_code = RunWithLastResort(
      []() -> int { throw std::runtime_error("cannot connect with s3cr3t-value"); });
  const std::string err = ::testing::internal::GetCapturedStderr();
  ShutdownLogging();
  ForgetSecretsForTesting();
  SetLastResortLogFile("");
  EXPECT_EQ(exit_code, 1);
  EXPECT_EQ(err, "skipprd: internal error: cannot connect with ***; this is a bug, please report "
                 "it with the log file " + log_file + "\n");
  std::stringstream logged;
  logged << std::ifstream(log_file).rdbuf();
  EXPECT_THAT(logged.str(), HasSubstr("internal error: cannot connect with ***"));
  EXPECT_THAT(logged.str(), ::testing::Not(HasSubstr("s3cr3t-value")));
  std::filesystem::remove_all(log_dir);
}

TEST(CliLastResortDeathTest, AnExceptionEscapingAThreadExitsOne) {
  EXPECT_EXIT(
      {
        InstallLastResortHandlers();
        SetLastResortLogFile("/logs/today.log");
        std::thread([] { throw std::runtime_error("worker failed"); }).join();
      },
      ExitedWithCode(1),
      "skipprd: internal error: an exception escaped a thread: worker failed; this is a bug, "
      "please report it with the log file /logs/today.log");
}

#ifdef SKIPPR_TEST_HAS_SANITIZER
TEST(CliLastResortDeathTest, FatalSignalsAreLeftToTheSanitizer) {
  GTEST_SKIP() << "built with a sanitizer: its own handlers report fatal signals";
}
#else
// Recurses until the stack runs out (the volatile buffer keeps every frame); `limit` is never
// reached, it only tells the compiler the recursion may end.
int Overflow(int depth, int limit) {
  volatile char frame[1024];
  frame[0] = static_cast<char>(depth);
  if (depth == limit) return 0;
  return Overflow(depth + 1, limit) + frame[0];
}

TEST(CliLastResortDeathTest, AnInvalidMemoryAccessExitsOneWithTheMessage) {
  EXPECT_EXIT(
      {
        InstallLastResortHandlers();
        SetLastResortLogFile("/logs/today.log");
        raise(SIGSEGV);
      },
      ExitedWithCode(1),
      "skipprd: internal error: invalid memory access \\(SIGSEGV; a stack overflow looks like "
      "this too\\); this is a bug, please report it with the log file /logs/today.log");
}

TEST(CliLastResortDeathTest, AStackOverflowReachesTheHandlerOnItsOwnStack) {
  EXPECT_EXIT(
      {
        InstallLastResortHandlers();
        Overflow(0, -1);
      },
      ExitedWithCode(1), "skipprd: internal error: invalid memory access \\(SIGSEGV");
}

TEST(CliLastResortDeathTest, AFailedCheckAbortsIntoTheHandler) {
  EXPECT_EXIT(
      {
        InstallLastResortHandlers();
        const int rows = 3;
        SKIPPR_CHECK_MSG(rows == 4, "slice 7");
      },
      ExitedWithCode(1),
      "internal invariant failed at .*cli_test.cpp:[0-9]+: rows == 4 — slice 7\n"
      "skipprd: internal error: aborted \\(SIGABRT\\)");
}

TEST(CliLastResortDeathTest, ArithmeticAndIllegalInstructionFaultsExitOne) {
  for (int signal_number : {SIGFPE, SIGILL, SIGBUS}) {
    EXPECT_EXIT(
        {
          InstallLastResortHandlers();
          raise(signal_number);
        },
        ExitedWithCode(1), "skipprd: internal error: ");
  }
}
#endif

}  // namespace
}  // namespace skippr::cli::internal
