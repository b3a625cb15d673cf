// Internal to cli/: the last resort. No input may abort, segfault or throw out of main; each cause
// found is fixed where it is, and this is the net for the ones left: one line on stderr (and in
// the log where that is safe) that names the log file to report, then exit code 1.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace skippr::cli::internal {

// "skipprd: internal error: <what>; this is a bug, please report it with the log file <path>",
// with secrets masked (core/redact.hpp).
std::string InternalErrorMessage(std::string_view what);

// Runs `body` and returns its exit code; an exception escaping it is reported as an internal
// error (stderr and the log) and yields exit code 1.
int RunWithLastResort(const std::function<int()>& body);

// std::set_terminate (an exception escaping another thread: the same message, the log flushed,
// then _exit(1)) and, unless built with a sanitizer (ASan and TSan install their own), handlers
// for SIGSEGV, SIGBUS, SIGFPE, SIGILL and SIGABRT (a failed SKIPPR_CHECK) running on an
// alternate stack, so a stack overflow reaches them too: an async-signal-safe write of one line
// to stderr, then _exit(1).
void InstallLastResortHandlers();

// The log file the messages name; set again whenever logging starts (.env may move DATA_DIR).
void SetLastResortLogFile(const std::string& path);

}  // namespace skippr::cli::internal
