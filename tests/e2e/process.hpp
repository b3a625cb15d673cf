// Runs a program the way a user's shell would, capturing what it prints and how it exits.
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "support/temp_dir.hpp"

namespace skippr::testing {

struct ProcessResult {
  int exit_code = -1;  // 128 + signal number when killed by a signal
  std::string out;     // empty when ProcessOptions::stdout_file took it
  std::string err;
  int64_t peak_rss_bytes = 0;  // the process's (and its waited children's) largest resident set
};

struct ProcessOptions {
  std::string working_dir;                     // empty: the test's own
  std::map<std::string, std::string> set_env;  // added to (or replacing in) the test's environment
  std::vector<std::string> unset_env;          // removed from it
  std::string stdout_file;                     // standard output goes here, not into `out`
};

ProcessResult RunProcess(const std::string& program, const std::vector<std::string>& args,
                         const ProcessOptions& options = {});

// A program started in the background (for crash tests: kill it at a moment of the test's choosing).
class RunningProcess {
 public:
  RunningProcess(RunningProcess&&) = default;
  ~RunningProcess();
  pid_t pid() const { return pid_; }
  void Kill(int signal_number) const;
  ProcessResult Wait();  // waits for it to end and collects its output

 private:
  friend RunningProcess StartProcess(const std::string&, const std::vector<std::string>&,
                                     const ProcessOptions&);
  RunningProcess() = default;
  pid_t pid_ = -1;
  std::unique_ptr<TempDir> capture_;
};

RunningProcess StartProcess(const std::string& program, const std::vector<std::string>& args,
                            const ProcessOptions& options = {});

}  // namespace skippr::testing
