#include "support/aws_servers.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "aws/aws.hpp"
#include "aws/internal/http.hpp"
#include "core/environment.hpp"

namespace skippr::testing {

namespace {

const char* const kAccessKey = "S3RVER";  // s3rver's built-in account
const char* const kSecretKey = "S3RVER";

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
  if (!server->server_.Launch(server->dir_.path(), why_not)) return nullptr;
  if (options.fault_proxy) {
    server->proxy_.name = "s3_fault_proxy";
    server->proxy_.port = FreeLoopbackPort();
    server->proxy_.script = std::string(SKIPPR_SOURCE_DIR) + "/tests/support/s3_fault_proxy.mjs";
    server->proxy_.arguments = {server->proxy_.script, std::to_string(server->proxy_.port),
                                std::to_string(server->server_.port)};
    if (!server->proxy_.Launch(server->dir_.path(), why_not)) return nullptr;
  }
  return server;
}

S3Server::~S3Server() {
  proxy_.Stop();
  server_.Stop();
}

bool S3Server::Restart(std::string* why_not) {
  server_.Stop();
  return server_.Launch(dir_.path(), why_not);
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

std::unique_ptr<DynamoServer> DynamoServer::Start(std::string* why_not) {
  std::unique_ptr<DynamoServer> server(new DynamoServer());
  server->server_.name = "dynalite";
  server->server_.script =
      std::string(SKIPPR_SOURCE_DIR) + "/third_party/test_servers/node_modules/dynalite/cli.js";
  server->server_.port = FreeLoopbackPort();
  server->server_.arguments = {server->server_.script,
                               "--host",
                               "127.0.0.1",
                               "--port",
                               std::to_string(server->server_.port),
                               "--createTableMs",
                               "0",
                               "--deleteTableMs",
                               "0",
                               "--updateTableMs",
                               "0"};
  if (!server->server_.Launch(server->dir_.path(), why_not)) return nullptr;
  return server;
}

DynamoServer::~DynamoServer() { server_.Stop(); }

std::string DynamoServer::endpoint() const {
  return fmt::format("http://127.0.0.1:{}", server_.port);
}

std::map<std::string, std::string> DynamoServer::ClientEnvironment() const {
  return {{"AWS_ENDPOINT_URL_DYNAMODB", endpoint()},
          {"AWS_REGION", "us-east-1"},
          {"AWS_ACCESS_KEY_ID", "dynalite"},
          {"AWS_SECRET_ACCESS_KEY", "dynalite"},
          {"AWS_EC2_METADATA_DISABLED", "true"}};
}

}  // namespace skippr::testing
