// aws/: the DynamoDB client against a real DynamoDB-compatible server (dynalite on loopback).
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "aws/aws.hpp"
#include "support/aws_servers.hpp"

namespace skippr::aws {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

class DynamoClientTest : public testing::ServerSuite<DynamoClientTest, testing::DynamoServer> {
 public:
  static std::unique_ptr<testing::DynamoServer> StartServer(std::string* why_not) {
    return testing::DynamoServer::Start(why_not);
  }

 protected:
  void SetUp() override {
    ServerSuite::SetUp();
    if (HasFatalFailure()) return;
    environment_ = MapEnvironment(server_->ClientEnvironment());
    auto client = DynamoClient::Open({}, environment_);
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    client_ = std::move(client).value();
    table_ = fmt::format("table-{}", ++tables_);
    bool created = false;
    const Status ensured = client_->EnsureTable(table_, "pk", "sk", &created);
    ASSERT_TRUE(ensured.ok()) << ensured.ToString();
    EXPECT_TRUE(created);
  }

  static json Item(const std::string& pk, const std::string& sk, const std::string& value) {
    return {{"pk", {{"S", pk}}}, {"sk", {{"S", sk}}}, {"value", {{"S", value}}}};
  }

  static int tables_;
  MapEnvironment environment_;
  std::unique_ptr<DynamoClient> client_;
  std::string table_;
};

int DynamoClientTest::tables_ = 0;

TEST_F(DynamoClientTest, ATableIsCreatedOnceAndAConditionalPutRefusesASecondWriter) {
  bool created = true;
  ASSERT_TRUE(client_->EnsureTable(table_, "pk", "sk", &created).ok());
  EXPECT_FALSE(created) << "it exists already";

  const json first = {{"TableName", table_},
                      {"Item", Item("pipeline", "lease", "writer-1")},
                      {"ConditionExpression", "attribute_not_exists(pk)"}};
  ASSERT_TRUE(client_->Call("PutItem", first).ok());
  json second = first;
  second["Item"] = Item("pipeline", "lease", "writer-2");
  auto refused = client_->Call("PutItem", second);
  EXPECT_EQ(refused.status().code(), StatusCode::kConflict) << refused.status().ToString();
  EXPECT_THAT(refused.status().message(), HasSubstr("dynamodb PutItem " + table_));
  EXPECT_THAT(refused.status().message(), HasSubstr("ConditionalCheckFailedException"));

  auto got =
      client_->Call("GetItem", {{"TableName", table_},
                                {"Key", {{"pk", {{"S", "pipeline"}}}, {"sk", {{"S", "lease"}}}}},
                                {"ConsistentRead", true}});
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ((*got)["Item"]["value"]["S"], "writer-1");

  // A compare-and-set on the value: only the holder may move it on.
  const json take_over = {{"TableName", table_},
                          {"Key", {{"pk", {{"S", "pipeline"}}}, {"sk", {{"S", "lease"}}}}},
                          {"UpdateExpression", "SET #v = :next"},
                          {"ConditionExpression", "#v = :expected"},
                          {"ExpressionAttributeNames", {{"#v", "value"}}},
                          {"ExpressionAttributeValues",
                           {{":next", {{"S", "writer-3"}}}, {":expected", {{"S", "writer-2"}}}}}};
  EXPECT_EQ(client_->Call("UpdateItem", take_over).status().code(), StatusCode::kConflict);
}

TEST_F(DynamoClientTest, BatchWritesAndQueriesPageThroughEveryItemInKeyOrder) {
  std::vector<json> writes;
  for (int i = 0; i < 60; ++i) {
    writes.push_back({{"PutRequest", {{"Item", Item("p", fmt::format("offset#{:03}", i), "v")}}}});
  }
  writes.push_back({{"PutRequest", {{"Item", Item("other", "offset#000", "v")}}}});
  ASSERT_TRUE(client_->BatchWrite(table_, writes).ok());
  std::vector<std::string> keys;
  const Status queried = client_->ForEachItem(
      "Query",
      {{"TableName", table_},
       {"KeyConditionExpression", "pk = :pk AND begins_with(sk, :prefix)"},
       {"ExpressionAttributeValues", {{":pk", {{"S", "p"}}}, {":prefix", {{"S", "offset#"}}}}},
       {"ConsistentRead", true},
       {"Limit", 7}},  // pages of 7: the continuation is exercised
      [&](const json& item) {
        keys.push_back(item["sk"]["S"].get<std::string>());
        return Status::OK();
      });
  ASSERT_TRUE(queried.ok()) << queried.ToString();
  ASSERT_EQ(keys.size(), 60u);
  EXPECT_EQ(keys.front(), "offset#000");
  EXPECT_EQ(keys.back(), "offset#059");
  EXPECT_TRUE(std::is_sorted(keys.begin(), keys.end()));

  std::vector<json> deletes;
  for (int i = 0; i < 30; ++i) {
    deletes.push_back(
        {{"DeleteRequest",
          {{"Key", {{"pk", {{"S", "p"}}}, {"sk", {{"S", fmt::format("offset#{:03}", i)}}}}}}}});
  }
  ASSERT_TRUE(client_->BatchWrite(table_, deletes).ok());
  int left = 0;
  ASSERT_TRUE(client_
                  ->ForEachItem("Query",
                                {{"TableName", table_},
                                 {"KeyConditionExpression", "pk = :pk"},
                                 {"ExpressionAttributeValues", {{":pk", {{"S", "p"}}}}}},
                                [&](const json&) {
                                  ++left;
                                  return Status::OK();
                                })
                  .ok());
  EXPECT_EQ(left, 30);
}

TEST_F(DynamoClientTest, ErrorsSayWhatWentWrongAndWhere) {
  auto missing = client_->Call("GetItem", {{"TableName", "no-such-table"},
                                           {"Key", {{"pk", {{"S", "a"}}}, {"sk", {{"S", "b"}}}}}});
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("dynamodb GetItem no-such-table"));
  auto invalid = client_->Call("GetItem", {{"TableName", table_}, {"Key", {{"pk", {{"S", "a"}}}}}});
  EXPECT_EQ(invalid.status().code(), StatusCode::kInvalidArgument) << invalid.status().ToString();

  // DynamoDB never goes unsigned: no credentials is an error that says where they were looked for.
  MapEnvironment none({{"AWS_ENDPOINT_URL_DYNAMODB", server_->endpoint()},
                       {"HOME", "/nonexistent"},
                       {"AWS_EC2_METADATA_DISABLED", "true"}});
  auto client = DynamoClient::Open({}, none);
  ASSERT_TRUE(client.ok());
  auto unsigned_call = (*client)->Call("ListTables", json::object());
  EXPECT_EQ(unsigned_call.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(unsigned_call.status().message(), HasSubstr("no AWS credentials"));

  DynamoOptions unreachable;
  unreachable.endpoint_url = fmt::format("http://127.0.0.1:{}", testing::FreeLoopbackPort());
  unreachable.retry.max_attempts = 2;
  unreachable.retry.first_backoff = std::chrono::milliseconds(1);
  auto down = DynamoClient::Open(unreachable, environment_);
  ASSERT_TRUE(down.ok());
  auto refused = (*down)->Call("ListTables", json::object());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(refused.status().message(), HasSubstr("gave up after 2 attempts"));
}

}  // namespace
}  // namespace skippr::aws
