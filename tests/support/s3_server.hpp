// A throwaway S3-compatible server (npm s3rver, pinned in third_party/test_servers) on a free
// loopback port, its objects in a temporary directory, stopped when destroyed — and killed with the
// test process if that dies first. Tests that need it fail, not skip, when it cannot start:
// scripts/setup.sh installs it.
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <string>

#include "support/loopback.hpp"
#include "support/temp_dir.hpp"

namespace skippr::testing {

class S3Server {
 public:
  // nullptr and `why_not` when the server cannot be started.
  static std::unique_ptr<S3Server> Start(std::string* why_not);
  ~S3Server();
  S3Server(const S3Server&) = delete;
  S3Server& operator=(const S3Server&) = delete;

  int port() const { return port_; }
  std::string endpoint() const;  // http://127.0.0.1:<port>
  // The variables a client of this server runs with: its endpoint, region and credentials.
  std::map<std::string, std::string> ClientEnvironment() const;
  // Creates `bucket`; fails the calling test when it cannot.
  void CreateBucket(const std::string& bucket) const;
  // Stops the server abruptly (SIGKILL) and starts it again on the same port and objects.
  bool Restart(std::string* why_not);

 private:
  S3Server() = default;
  bool Launch(std::string* why_not);
  void Stop();

  TempDir dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace skippr::testing
