// store/: the Skippr Store in a DynamoDB table (dynalite on loopback) — the same answers as the
// LMDB store for the same transactions, snapshots that later commits do not disturb, commits that
// are all or nothing, and a writer lease that fences a second writer.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "aws/aws.hpp"
#include "core/crash.hpp"
#include "store/store.hpp"
#include "support/aws_servers.hpp"
#include "support/temp_dir.hpp"

namespace skippr::store {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

class DynamoStore : public testing::ServerSuite<DynamoStore, testing::DynamoServer> {
 public:
  static std::unique_ptr<testing::DynamoServer> StartServer(std::string* why_not) {
    return testing::DynamoServer::Start(why_not);
  }

 protected:
  void SetUp() override {
    ServerSuite::SetUp();
    if (HasFatalFailure()) return;
    environment_ = MapEnvironment(server_->ClientEnvironment());
    table_ = fmt::format("store-{}", ++tables_);
  }

  DynamoStoreOptions Options(bool writer,
                             std::chrono::milliseconds lease = std::chrono::seconds(30)) {
    return {.table = table_,
            .pipeline_key = "default#default#events",
            .environment = &environment_,
            .takes_writer_lease = writer,
            .lease_duration = lease};
  }

  std::unique_ptr<Store> OpenWriter(std::chrono::milliseconds lease = std::chrono::seconds(30)) {
    auto store = OpenDynamoStore(Options(true, lease));
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return store.ok() ? std::move(store).value() : nullptr;
  }

  std::unique_ptr<Store> OpenReader() {
    auto store = OpenDynamoStore(Options(false));
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return store.ok() ? std::move(store).value() : nullptr;
  }

  json Head() {
    auto client = aws::DynamoClient::Open({}, environment_);
    EXPECT_TRUE(client.ok());
    auto got = (*client)->Call(
        "GetItem",
        {{"TableName", table_},
         {"Key", {{"pk", {{"S", "default#default#events"}}}, {"sk", {{"S", "store#head"}}}}},
         {"ConsistentRead", true}});
    EXPECT_TRUE(got.ok());
    return got.ok() ? (*got)["Item"] : json::object();
  }

  // Moves the head's lease to another holder, as a writer elsewhere taking it over would.
  void StealLease() {
    auto client = aws::DynamoClient::Open({}, environment_);
    ASSERT_TRUE(client.ok());
    auto stolen = (*client)->Call(
        "UpdateItem",
        {{"TableName", table_},
         {"Key", {{"pk", {{"S", "default#default#events"}}}, {"sk", {{"S", "store#head"}}}}},
         {"UpdateExpression", "ADD lease_epoch :one SET lease_owner = :thief"},
         {"ExpressionAttributeValues",
          {{":one", {{"N", "1"}}}, {":thief", {{"S", "another machine"}}}}}});
    ASSERT_TRUE(stolen.ok()) << stolen.status().ToString();
  }

  static int tables_;
  MapEnvironment environment_;
  std::string table_;
};

int DynamoStore::tables_ = 0;

std::map<std::string, std::string> ScanAll(const ReadTransaction& read, Family family,
                                           std::string_view prefix = {}) {
  std::map<std::string, std::string> seen;
  EXPECT_TRUE(read.Scan(family, prefix,
                        [&](std::string_view key, std::string_view value) {
                          seen.emplace(key, value);
                          return true;
                        })
                  .ok());
  return seen;
}

TEST_F(DynamoStore, TransactionsGiveTheSameAnswersAsTheLmdbStore) {
  testing::TempDir dir;
  auto lmdb = Store::Open({.directory = dir.Sub("store")});
  ASSERT_TRUE(lmdb.ok());
  auto dynamo = OpenWriter();
  ASSERT_NE(dynamo, nullptr);
  std::mt19937 random(20261205);
  const auto key_of = [&](int n) {
    // Keys that share prefixes, one a prefix of another, and bytes 0x00 and 0xff.
    static const std::vector<std::string> stems = {
        "a", "ab", "abc", std::string("a\0b", 3), "b\xff", "offset#", "offset#x"};
    return stems[n % stems.size()] + std::to_string(n / 7);
  };
  for (int round = 0; round < 25; ++round) {
    auto lmdb_write = (*lmdb)->BeginWrite();
    auto dynamo_write = dynamo->BeginWrite();
    ASSERT_TRUE(lmdb_write.ok() && dynamo_write.ok()) << dynamo_write.status().ToString();
    for (int op = 0; op < 12; ++op) {
      const Family family = static_cast<Family>(random() % 2);
      const std::string key = key_of(static_cast<int>(random() % 30));
      switch (random() % 5) {
        case 0:
        case 1:
        case 2: {
          const std::string value = fmt::format("v{}-{}", round, op);
          ASSERT_TRUE(lmdb_write->Put(family, key, value).ok());
          ASSERT_TRUE(dynamo_write->Put(family, key, value).ok());
          break;
        }
        case 3:
          ASSERT_TRUE(lmdb_write->Delete(family, key).ok());
          ASSERT_TRUE(dynamo_write->Delete(family, key).ok());
          break;
        default:
          ASSERT_TRUE(lmdb_write->DeletePrefix(family, key.substr(0, 2)).ok());
          ASSERT_TRUE(dynamo_write->DeletePrefix(family, key.substr(0, 2)).ok());
      }
      // The session's own writes are seen, over what is committed.
      EXPECT_EQ(*lmdb_write->Get(family, key), *dynamo_write->Get(family, key));
      std::map<std::string, std::string> lmdb_seen, dynamo_seen;
      ASSERT_TRUE(lmdb_write
                      ->Scan(family, "a",
                             [&](std::string_view k, std::string_view v) {
                               lmdb_seen.emplace(k, v);
                               return true;
                             })
                      .ok());
      ASSERT_TRUE(dynamo_write
                      ->Scan(family, "a",
                             [&](std::string_view k, std::string_view v) {
                               dynamo_seen.emplace(k, v);
                               return true;
                             })
                      .ok());
      EXPECT_EQ(lmdb_seen, dynamo_seen) << "round " << round << " op " << op;
    }
    if (round % 6 == 5) continue;  // dropped: nothing of it is written
    ASSERT_TRUE(lmdb_write->Commit().ok());
    const Status committed = dynamo_write->Commit();
    ASSERT_TRUE(committed.ok()) << committed.ToString();

    auto lmdb_read = (*lmdb)->BeginRead();
    auto dynamo_read = OpenReader()->BeginRead();
    ASSERT_TRUE(lmdb_read.ok() && dynamo_read.ok());
    for (Family family : {Family::kCatalog, Family::kStreamState}) {
      EXPECT_EQ(ScanAll(*lmdb_read, family), ScanAll(*dynamo_read, family)) << "round " << round;
      for (std::string_view prefix : {"a", "ab", "offset#", "b"}) {
        EXPECT_EQ(*lmdb_read->LastKey(family, prefix), *dynamo_read->LastKey(family, prefix));
      }
      // A scan resumed part way, and one stopped early.
      std::vector<std::string> lmdb_keys, dynamo_keys;
      ASSERT_TRUE(lmdb_read
                      ->ScanFrom(family, "a", "ab",
                                 [&](std::string_view k, std::string_view) {
                                   lmdb_keys.emplace_back(k);
                                   return lmdb_keys.size() < 3;
                                 })
                      .ok());
      ASSERT_TRUE(dynamo_read
                      ->ScanFrom(family, "a", "ab",
                                 [&](std::string_view k, std::string_view) {
                                   dynamo_keys.emplace_back(k);
                                   return dynamo_keys.size() < 3;
                                 })
                      .ok());
      EXPECT_EQ(lmdb_keys, dynamo_keys);
      // A scan resumed past every key with the prefix finds nothing.
      for (const ReadTransaction* read : {&*lmdb_read, &*dynamo_read}) {
        bool visited = false;
        ASSERT_TRUE(read->ScanFrom(family, "a", "b",
                                   [&](std::string_view, std::string_view) {
                                     visited = true;
                                     return true;
                                   })
                        .ok());
        EXPECT_FALSE(visited);
      }
    }
  }
}

TEST_F(DynamoStore, ASnapshotIsNotDisturbedByLaterCommits) {
  auto writer = OpenWriter();
  ASSERT_NE(writer, nullptr);
  auto write = writer->BeginWrite();
  ASSERT_TRUE(write.ok());
  ASSERT_TRUE(write->Put(Family::kOffsets, "k", "one").ok());
  ASSERT_TRUE(write->Commit().ok());

  auto pinned = OpenReader()->BeginRead();
  ASSERT_TRUE(pinned.ok());
  write = writer->BeginWrite();
  ASSERT_TRUE(write->Put(Family::kOffsets, "k", "two").ok());
  ASSERT_TRUE(write->Put(Family::kOffsets, "new", "x").ok());
  ASSERT_TRUE(write->Commit().ok());
  write = writer->BeginWrite();
  ASSERT_TRUE(write->Delete(Family::kOffsets, "k").ok());
  ASSERT_TRUE(write->Commit().ok());

  EXPECT_EQ(*pinned->Get(Family::kOffsets, "k"), "one");
  EXPECT_EQ(*pinned->Get(Family::kOffsets, "new"), std::nullopt);
  auto fresh = writer->BeginRead();
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ(*fresh->Get(Family::kOffsets, "k"), std::nullopt);
  EXPECT_EQ(*fresh->Get(Family::kOffsets, "new"), "x");
}

TEST_F(DynamoStore, LargeValuesAndTheKeyLimit) {
  auto writer = OpenWriter();
  ASSERT_NE(writer, nullptr);
  std::string large(700'000, '\0');
  for (size_t i = 0; i < large.size(); ++i) large[i] = static_cast<char>(i * 131 % 251);
  auto write = writer->BeginWrite();
  ASSERT_TRUE(write.ok());
  ASSERT_TRUE(write->Put(Family::kSchema, "schema", large).ok());
  const Status too_long = write->Put(Family::kSchema, std::string(481, 'k'), "v");
  EXPECT_EQ(too_long.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(too_long.message(), HasSubstr("keys are 1 to 480 bytes"));
  ASSERT_TRUE(write->Commit().ok()) << "a refused key does not spend the transaction";
  auto read = OpenReader()->BeginRead();
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(*read->Get(Family::kSchema, "schema"), large);
}

TEST_F(DynamoStore, AWriterThatLostTheLeaseCommitsNothingAndTheNextNeverSeesItsAttempt) {
  auto first = OpenWriter(std::chrono::milliseconds(600));
  ASSERT_NE(first, nullptr);
  const std::string instance = first->identity().instance_id;
  EXPECT_EQ(instance.size(), 32u);
  auto write = first->BeginWrite();
  ASSERT_TRUE(write->Put(Family::kOffsets, "kept", "1").ok());
  ASSERT_TRUE(write->Commit().ok());

  StealLease();
  write = first->BeginWrite();
  ASSERT_TRUE(write.ok());
  ASSERT_TRUE(write->Put(Family::kOffsets, "kept", "overwritten?").ok());
  ASSERT_TRUE(write->Put(Family::kOffsets, "lost", "never").ok());
  const Status lost = write->Commit();
  EXPECT_EQ(lost.code(), StatusCode::kConflict) << lost.ToString();
  EXPECT_THAT(lost.message(), HasSubstr("writer lease was lost to another machine"));
  EXPECT_EQ(first->BeginWrite().status().code(), StatusCode::kConflict) << "nothing more";
  first.reset();

  // The thief never heartbeats: after a lease period of stillness the next writer takes over, and
  // the versions the failed commit wrote stay invisible.
  auto second = OpenWriter(std::chrono::milliseconds(600));
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(second->identity().instance_id, instance) << "the store's identity is kept";
  auto read = second->BeginRead();
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(*read->Get(Family::kOffsets, "kept"), "1");
  EXPECT_EQ(*read->Get(Family::kOffsets, "lost"), std::nullopt);
  write = second->BeginWrite();
  ASSERT_TRUE(write->Put(Family::kOffsets, "after", "2").ok());
  ASSERT_TRUE(write->Commit().ok());
  read = OpenReader()->BeginRead();
  EXPECT_EQ(ScanAll(*read, Family::kOffsets),
            (std::map<std::string, std::string>{{"after", "2"}, {"kept", "1"}}));
}

struct StoppedAtCrashPoint {};

void StopAfterVersions(std::string_view name) {
  if (name == "store.dynamodb.after_versions") throw StoppedAtCrashPoint{};
}

// Each writer dies with its versions written and the head not moved, then the next takes over:
// none of those attempts may ever show, however many writers in a row left one behind.
TEST_F(DynamoStore, AttemptsThatNeverReachedTheHeadStayInvisibleAcrossManyTakeovers) {
  {
    auto first = OpenWriter();
    ASSERT_NE(first, nullptr);
    auto write = first->BeginWrite();
    ASSERT_TRUE(write->Put(Family::kCatalog, "committed", "yes").ok());
    ASSERT_TRUE(write->Commit().ok());
  }
  for (int writer = 0; writer < 3; ++writer) {
    auto store = OpenWriter();
    ASSERT_NE(store, nullptr);
    auto write = store->BeginWrite();
    ASSERT_TRUE(write.ok());
    ASSERT_TRUE(write->Put(Family::kCatalog, fmt::format("attempt-{}", writer), "never").ok());
    ASSERT_TRUE(write->Put(Family::kCatalog, "committed", "overwritten?").ok());
    SetCrashPointObserver(StopAfterVersions);
    EXPECT_THROW((void)write->Commit(), StoppedAtCrashPoint);
    SetCrashPointObserver(nullptr);
  }
  auto last = OpenWriter();
  ASSERT_NE(last, nullptr);
  auto write = last->BeginWrite();
  ASSERT_TRUE(write->Put(Family::kCatalog, "after", "1").ok());
  ASSERT_TRUE(write->Commit().ok());
  auto read = OpenReader()->BeginRead();
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(ScanAll(*read, Family::kCatalog),
            (std::map<std::string, std::string>{{"after", "1"}, {"committed", "yes"}}));
}

TEST_F(DynamoStore, ASecondWriterIsRefusedWhileTheFirstIsAliveAndTakesOverOnceItIsGone) {
  auto first = OpenWriter(std::chrono::milliseconds(900));
  ASSERT_NE(first, nullptr);
  auto refused = OpenDynamoStore(Options(true, std::chrono::milliseconds(900)));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(refused.status().message(), HasSubstr("pipeline writer lease unavailable: "));
  EXPECT_THAT(refused.status().message(), HasSubstr("heartbeat is advancing"));
  first.reset();  // released on close: the next writer need not wait for it to expire
  EXPECT_TRUE(Head()["lease_released"]["BOOL"].get<bool>()) << Head();
  auto second = OpenWriter(std::chrono::milliseconds(900));
  ASSERT_NE(second, nullptr);
  EXPECT_FALSE(Head()["lease_released"]["BOOL"].get<bool>()) << Head();
}

TEST_F(DynamoStore, AReaderOfAPipelineWithoutStateIsNotFound) {
  auto reader = OpenDynamoStore(Options(false));
  EXPECT_EQ(reader.status().code(), StatusCode::kNotFound);
  auto writer = OpenWriter();
  ASSERT_NE(writer, nullptr);
  auto write = writer->BeginWrite();
  EXPECT_EQ(writer->BeginWrite().status().code(), StatusCode::kInternal)
      << "a second write transaction on the same thread would wait forever";
}

}  // namespace
}  // namespace skippr::store
