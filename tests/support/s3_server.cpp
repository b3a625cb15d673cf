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
#include "aws/internal/http.hpp"
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

std::map<std::string, std::string> EnvironmentFor(const std::string& endpoint) {
  return {{"AWS_ENDPOINT_URL_S3", endpoint},
          {"AWS_REGION", "us-east-1"},
          {"AWS_ACCESS_KEY_ID", kAccessKey},
          {"AWS_SECRET_ACCESS_KEY", kSecretKey},
          {"AWS_EC2_METADATA_DISABLED", "true"}};
}

}  // namespace

std::unique_ptr<S3Server> S3Server::Start(std::string* why_not, S3ServerOptions options) {
  std::unique_ptr<S3Server> server(new S3Server());
  const std::string modules =
      std::string(SKIPPR_SOURCE_DIR) + "/third_party/test_servers/node_modules";
  const std::string objects = server->dir_.Sub("objects");
  std::filesystem::create_directories(objects);
  server->server_.name = "s3rver";
  server->server_.port = FreeLoopbackPort();
  // s3rver encrypts continuation tokens with DES, which Node's OpenSSL 3 keeps in its legacy
  // provider.
  server->server_.script = modules + "/s3rver/bin/s3rver.js";
  server->server_.arguments = {"--openssl-legacy-provider",
                               server->server_.script,
                               "-d",
                               objects,
                               "-a",
                               "127.0.0.1",
                               "-p",
                               std::to_string(server->server_.port),
                               "--silent"};
  if (!server->Launch(server->server_, why_not)) return nullptr;
  if (options.fault_proxy) {
    server->proxy_.name = "s3_fault_proxy";
    server->proxy_.port = FreeLoopbackPort();
    server->proxy_.script = std::string(SKIPPR_SOURCE_DIR) + "/tests/support/s3_fault_proxy.mjs";
    server->proxy_.arguments = {server->proxy_.script, std::to_string(server->proxy_.port),
                                std::to_string(server->server_.port)};
    if (!server->Launch(server->proxy_, why_not)) return nullptr;
  }
  return server;
}

bool S3Server::Launch(Child& child, std::string* why_not) {
  if (!std::filesystem::exists(child.script)) {
    *why_not = child.script + " is missing: run scripts/setup.sh";
    return false;
  }
  const std::string log = dir_.Sub(child.name + ".log");
  std::vector<char*> argv = {const_cast<char*>("node")};
  for (std::string& argument : child.arguments) argv.push_back(argument.data());
  argv.push_back(nullptr);
  const pid_t parent = getpid();
  // The death signal follows the thread that forks: only the main thread's lives as long as the
  // test process. A server restarted from another thread is stopped by the destructor alone.
  const bool is_main_thread = gettid() == parent;
  child.pid = fork();
  if (child.pid == 0) {
    if (is_main_thread) prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlives the test
    if (getppid() != parent) _exit(1);
    const int out = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    dup2(out, 1);
    dup2(out, 2);
    execvp("node", argv.data());
    _exit(127);
  }
  for (int tries = 0; tries < 300; ++tries) {
    if (AcceptsConnections(child.port)) return true;
    if (waitpid(child.pid, nullptr, WNOHANG) == child.pid) {
      child.pid = -1;
      *why_not = child.name + " exited at start; see " + log;
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  *why_not = child.name + " did not accept connections within 30 s; see " + log;
  Stop(child);
  return false;
}

void S3Server::Stop(Child& child) {
  if (child.pid <= 0) return;
  kill(child.pid, SIGKILL);
  waitpid(child.pid, nullptr, 0);
  child.pid = -1;
}

S3Server::~S3Server() {
  Stop(proxy_);
  Stop(server_);
}

bool S3Server::Restart(std::string* why_not) {
  Stop(server_);
  return Launch(server_, why_not);
}

std::string S3Server::ServerEndpoint() const {
  return fmt::format("http://127.0.0.1:{}", server_.port);
}

std::string S3Server::endpoint() const {
  return proxy_.port != 0 ? fmt::format("http://127.0.0.1:{}", proxy_.port) : ServerEndpoint();
}

std::map<std::string, std::string> S3Server::ClientEnvironment() const {
  return EnvironmentFor(endpoint());
}

void S3Server::CreateBucket(const std::string& bucket) const {
  MapEnvironment environment(EnvironmentFor(ServerEndpoint()));
  auto client = aws::S3Client::Open({}, environment);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  const Status created = (*client)->CreateBucket(bucket);
  ASSERT_TRUE(created.ok()) << created.ToString();
}

namespace {

nlohmann::json ProxyExchange(int port, const std::string& method, const std::string& body) {
  aws::internal::HttpClient http;
  aws::internal::HttpRequest request;
  request.method = method;
  request.url = fmt::format("http://127.0.0.1:{}/__faults", port);
  request.body = body;
  Result<aws::internal::HttpResponse> response = http.Perform(request);
  EXPECT_TRUE(response.ok() && response->status == 200)
      << (response.ok() ? response->body : response.status().ToString());
  return response.ok() ? nlohmann::json::parse(response->body, nullptr, false) : nlohmann::json();
}

}  // namespace

void S3Server::InjectFaults(const nlohmann::json& plan) const {
  ASSERT_NE(proxy_.port, 0) << "the server was started without a fault proxy";
  ProxyExchange(proxy_.port, "POST", plan.dump());
}

nlohmann::json S3Server::FaultCounters() const {
  EXPECT_NE(proxy_.port, 0) << "the server was started without a fault proxy";
  return ProxyExchange(proxy_.port, "GET", "");
}

}  // namespace skippr::testing
