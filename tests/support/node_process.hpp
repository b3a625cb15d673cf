// A test server that is a Node.js program (s3rver, dynalite, the fault proxy): started on a
// loopback port, its output in a log file, killed with the test process if that dies first.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace skippr::testing {

struct NodeProcess {
  std::string name;                    // for messages and the log file's name
  std::string script;                  // the program node runs
  std::vector<std::string> arguments;  // after `node`, the script among them
  int port = 0;                        // where it listens; Launch waits until it accepts
  pid_t pid = -1;

  // Starts it (its log at <log_directory>/<name>.log) and waits until the port accepts
  // connections; false and `why_not` otherwise.
  bool Launch(const std::string& log_directory, std::string* why_not);
  // SIGKILL, and reaped. Nothing when not running.
  void Stop();
};

}  // namespace skippr::testing
