// The `skipprd` command line: the edge where Status becomes text and an exit code.
// Exit codes: 0 success, 1 failure, 2 bad command line.
#pragma once

namespace skippr::cli {

inline constexpr int kExitSuccess = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

int RunCli(int argc, char** argv);

}  // namespace skippr::cli
