#include "support/s3_server.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "aws/aws.hpp"
#include "core/environment.hpp"

namespace skippr::testing {

namespace {

const char* const kAccessKey = "S3RVER";  // s3rver's built-in account
const char* const kSecretKey = "S3RVER";

bool AcceptsConnections(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  const bool connected = connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  close(fd);
  return connected;
}

}  // namespace

std::unique_ptr<S3Server> S3Server::Start(std::string* why_not) {
  std::unique_ptr<S3Server> server(new S3Server());
  server->port_ = FreeLoopbackPort();
  std::filesystem::create_directories(server->dir_.Sub("objects"));
  if (!server->Launch(why_not)) return nullptr;
  return server;
}

bool S3Server::Launch(std::string* why_not) {
  const std::string script = std::string(SKIPPR_SOURCE_DIR) +
                             "/third_party/test_servers/node_modules/s3rver/bin/s3rver.js";
  if (!std::filesystem::exists(script)) {
    *why_not = script + " is missing: run scripts/setup.sh";
    return false;
  }
  const std::string objects = dir_.Sub("objects");
  const std::string log = dir_.Sub("s3rver.log");
  const std::string port = std::to_string(port_);
  const pid_t parent = getpid();
  // The death signal follows the thread that forks: only the main thread's lives as long as the
  // test process. A server restarted from another thread is stopped by the destructor alone.
  const bool is_main_thread = gettid() == parent;
  pid_ = fork();
  if (pid_ == 0) {
    if (is_main_thread) prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlives the test
    if (getppid() != parent) _exit(1);
    const int out = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    dup2(out, 1);
    dup2(out, 2);
    // s3rver encrypts continuation tokens with DES, which Node's OpenSSL 3 keeps in its legacy
    // provider.
    execlp("node", "node", "--openssl-legacy-provider", script.c_str(), "-d", objects.c_str(), "-a",
           "127.0.0.1", "-p", port.c_str(), "--silent", static_cast<char*>(nullptr));
    _exit(127);
  }
  for (int tries = 0; tries < 300; ++tries) {
    if (AcceptsConnections(port_)) return true;
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      *why_not = "s3rver exited at start; see " + log;
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  *why_not = "s3rver did not accept connections within 30 s; see " + log;
  Stop();
  return false;
}

void S3Server::Stop() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

S3Server::~S3Server() { Stop(); }

bool S3Server::Restart(std::string* why_not) {
  Stop();
  return Launch(why_not);
}

std::string S3Server::endpoint() const { return fmt::format("http://127.0.0.1:{}", port_); }

std::map<std::string, std::string> S3Server::ClientEnvironment() const {
  return {{"AWS_ENDPOINT_URL_S3", endpoint()},
          {"AWS_REGION", "us-east-1"},
          {"AWS_ACCESS_KEY_ID", kAccessKey},
          {"AWS_SECRET_ACCESS_KEY", kSecretKey},
          {"AWS_EC2_METADATA_DISABLED", "true"}};
}

void S3Server::CreateBucket(const std::string& bucket) const {
  MapEnvironment environment(ClientEnvironment());
  auto client = aws::S3Client::Open({}, environment);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  const Status created = (*client)->CreateBucket(bucket);
  ASSERT_TRUE(created.ok()) << created.ToString();
}

}  // namespace skippr::testing
