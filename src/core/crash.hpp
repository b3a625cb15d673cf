// Crash testing built in (issue: the WAL issue; docs/formats/wal.md lists the points).
// SKIPPR_CRASH_POINT=<name> makes the process SIGKILL itself when it reaches that point, so tests can
// prove that every step of the commit protocol and of recovery survives a crash;
// SKIPPR_CRASH_POINT=<name>@<n>, when it reaches it the n-th time (a point passed once per batch,
// crashed at after some have been committed).
#pragma once

#include <string_view>

namespace skippr {

// SIGKILLs the process if SKIPPR_CRASH_POINT names this point. Costs one comparison otherwise.
void CrashPoint(std::string_view name);

// In-process crash tests (tests/fault/, under a fault-injecting Env) observe every crash point
// instead: while an observer is set, CrashPoint calls it with the point's name and never kills.
// The observer may throw to stop the code under test right there (as the crash would). Set it
// before, and clear it (nullptr) after, the code it observes runs.
using CrashPointObserver = void (*)(std::string_view name);
void SetCrashPointObserver(CrashPointObserver observer);

// Chaos mode (pipeline chaos_mode: true or SKIPPR_CHAOS_MODE=yes): a background thread SIGKILLs the
// process at a random moment between SKIPPR_CHAOS_MIN_SECONDS (15) and SKIPPR_CHAOS_MAX_SECONDS (60)
// after this call. Logs "Chaos mode throwing a random exit..." first.
void StartChaosMode();

}  // namespace skippr
