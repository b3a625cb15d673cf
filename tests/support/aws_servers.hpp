// A throwaway S3-compatible server (npm s3rver, pinned in third_party/test_servers) on a free
// loopback port, its objects in a temporary directory, stopped when destroyed — and killed with the
// test process if that dies first. With `fault_proxy`, clients reach it through a proxy
// (tests/support/s3_fault_proxy.mjs) that injects the faults a test asks for: S3 errors, answers
// cut mid-body, PUTs that take effect but whose answer is lost. Tests that need it fail, not skip,
// when it cannot start: scripts/setup.sh installs it.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/loopback.hpp"
#include "support/node_process.hpp"
#include "support/temp_dir.hpp"

namespace skippr::testing {

struct S3ServerOptions {
  bool fault_proxy = false;
};

class S3Server {
 public:
  // nullptr and `why_not` when the server cannot be started.
  static std::unique_ptr<S3Server> Start(std::string* why_not, S3ServerOptions options = {});
  ~S3Server();
  S3Server(const S3Server&) = delete;
  S3Server& operator=(const S3Server&) = delete;

  // http://127.0.0.1:<port> of what clients talk to: the proxy when there is one.
  std::string endpoint() const;
  // The variables a client of this server runs with: its endpoint, region and credentials.
  std::map<std::string, std::string> ClientEnvironment() const;
  // Creates `bucket` (past the proxy); fails the calling test when it cannot.
  void CreateBucket(const std::string& bucket) const;
  // Stops the server abruptly (SIGKILL) and starts it again on the same port and objects.
  bool Restart(std::string* why_not);

  // With a fault proxy: replaces its plan (s3_fault_proxy.mjs; "{}" injects nothing) and zeroes its
  // counters. Fails the calling test when the proxy does not take it.
  void InjectFaults(const nlohmann::json& plan) const;
  // The proxy's counters: requests, statuses, resets, lost_puts, ranged_gets.
  nlohmann::json FaultCounters() const;

 private:
  S3Server() = default;
  std::string ServerEndpoint() const;

  TempDir dir_;
  NodeProcess server_;
  NodeProcess proxy_;  // port 0: none
};

// A throwaway DynamoDB-compatible server (npm dynalite, pinned beside s3rver), in memory, on a
// free loopback port. Tables it creates become ACTIVE at once.
class DynamoServer {
 public:
  static std::unique_ptr<DynamoServer> Start(std::string* why_not);
  ~DynamoServer();
  DynamoServer(const DynamoServer&) = delete;
  DynamoServer& operator=(const DynamoServer&) = delete;

  std::string endpoint() const;  // http://127.0.0.1:<port>
  // Its endpoint, region and (any) credentials, as a client runs with them.
  std::map<std::string, std::string> ClientEnvironment() const;

 private:
  DynamoServer() = default;
  TempDir dir_;
  NodeProcess server_;
};

// A test suite's server: started before its first test by `Suite::StartServer(&why_not)`, stopped
// after its last; each test of a suite whose server did not start fails saying why. A suite derives
// as `class S : public ServerSuite<S, S3Server>` and calls ServerSuite::SetUp from its own.
template <typename Suite, typename Server>
class ServerSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    why_not_.clear();
    server_ = Suite::StartServer(&why_not_).release();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(server_, nullptr) << why_not_; }

  static inline Server* server_ = nullptr;
  static inline std::string why_not_;
};

}  // namespace skippr::testing
