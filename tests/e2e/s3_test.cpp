// The S3 source end to end: the real skipprd reading objects from an S3-compatible server
// (s3rver on loopback) into a local SkipprLake — exactly once across SIGKILLs and a server that
// goes away mid-sync, unchanged objects never read twice, changed ones compared with what was
// read, and doctor telling the truth about the bucket.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "aws/aws.hpp"
#include "core/environment.hpp"
#include "e2e/process.hpp"
#include "e2e/skipprd_runner.hpp"
#include "support/aws_servers.hpp"
#include "support/gzip.hpp"
#include "support/scale.hpp"

namespace skippr::testing {
namespace {

using ::testing::HasSubstr;

// The first row of `skipprd query --plain` in `dir`, as text.
std::vector<std::string> QueryFirstRow(const TempDir& dir, const std::string& sql,
                                       std::map<std::string, std::string> env) {
  ProcessResult result = Skipprd(dir, {"query", "--plain", "--sql", sql}, std::move(env));
  EXPECT_EQ(result.exit_code, 0) << result.err;
  const nlohmann::json answer = nlohmann::json::parse(result.out, nullptr, false);
  std::vector<std::string> row;
  if (answer.is_object() && !answer["rows"].empty()) {
    for (const auto& value : answer["rows"][0]) row.push_back(value.get<std::string>());
  }
  return row;
}

class S3SourceE2e : public ServerSuite<S3SourceE2e, S3Server> {
 public:
  static std::unique_ptr<S3Server> StartServer(std::string* why_not) {
    return S3Server::Start(why_not, {.fault_proxy = true});
  }

 protected:
  void SetUp() override {
    ServerSuite::SetUp();
    if (HasFatalFailure()) return;
    server_->InjectFaults(nlohmann::json::object());
    bucket_ = "source-" + std::to_string(++buckets_);
    server_->CreateBucket(bucket_);
    environment_ = MapEnvironment(server_->ClientEnvironment());
    auto client = aws::S3Client::Open({}, environment_);
    ASSERT_TRUE(client.ok());
    client_ = std::move(client).value();
    dir_.Write("skippr.yml", fmt::format(R"(data_sources:
  bucket:
    S3:
      s3_bucket: {}
      s3_prefix: landing/
data_sinks:
  lake:
    SkipprLake:
      warehouse: "file://{}/warehouse"
      commit_interval_seconds: 1
pipelines:
  events:
    data_source: data_sources.bucket
    data_sink: data_sinks.lake
)",
                                         bucket_, dir_.path()));
  }

  // Uploads what WriteInput wrote under input/ as objects under landing/, and removes the files.
  void UploadInput() {
    for (const auto& entry : std::filesystem::directory_iterator(dir_.Sub("input"))) {
      std::ifstream in(entry.path(), std::ios::binary);
      std::stringstream bytes;
      bytes << in.rdbuf();
      Put("landing/" + entry.path().filename().string(), bytes.str());
    }
    std::filesystem::remove_all(dir_.Sub("input"));
  }

  void Put(const std::string& key, const std::string& bytes) {
    auto put = client_->PutObject(bucket_, key, bytes);
    ASSERT_TRUE(put.ok()) << put.status().ToString();
  }

  std::map<std::string, std::string> Env(std::map<std::string, std::string> extra = {}) const {
    std::map<std::string, std::string> env = server_->ClientEnvironment();
    env.insert(extra.begin(), extra.end());
    return env;
  }

  std::vector<std::string> CountAndChecksum() {
    return QueryRow(dir_,
                    "SELECT count(*), count(DISTINCT id), sum(id * 31 + amount) FROM "
                    "events.events");
  }

  static int buckets_;
  TempDir dir_;
  std::string bucket_;
  MapEnvironment environment_;
  std::unique_ptr<aws::S3Client> client_;
};

int S3SourceE2e::buckets_ = 0;

std::vector<std::string> Expected(int64_t rows, int64_t checksum) {
  return {std::to_string(rows), std::to_string(rows), std::to_string(checksum)};
}

TEST_F(S3SourceE2e, EveryObjectLandsOnceAndAnUnchangedObjectIsNotReadAgain) {
  int64_t rows = 6000;
  int64_t checksum = WriteInput(dir_, 6, rows);
  UploadInput();
  // Compressed objects are read as compressed files are; hidden keys and folder markers are not.
  const std::string gzip_lines = "{\"id\":900001,\"name\":\"gz\",\"amount\":5}\n";
  Put("landing/more/extra.jsonl.gz", GzipMember(gzip_lines));
  rows += 1;
  checksum += 900001 * 31 + 5;
  Put("landing/_SUCCESS", "");
  Put("landing/.staging/half.jsonl", "{\"id\":-1,\"name\":\"hidden\",\"amount\":0}\n");
  Put("landing/more/", "");
  Put("elsewhere/outside.jsonl", "{\"id\":-2,\"name\":\"outside\",\"amount\":0}\n");

  ProcessResult first = Skipprd(dir_, {"sync", "-p", "events", "--once", "--log", "debug"}, Env());
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_THAT(first.err, HasSubstr("downloading s3://" + bucket_ + "/landing/part-1000.jsonl"));
  EXPECT_EQ(CountAndChecksum(), Expected(rows, checksum));

  ProcessResult again = Skipprd(dir_, {"sync", "-p", "events", "--once", "--log", "debug"}, Env());
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_THAT(again.err, ::testing::Not(HasSubstr("downloading s3://")))
      << "an object read to its end and unchanged is not downloaded again";
  EXPECT_EQ(CountAndChecksum(), Expected(rows, checksum));

  // A new object: only its rows.
  const std::string added = "{\"id\":900002,\"name\":\"new\",\"amount\":7}\n";
  Put("landing/zz-added.jsonl", added);
  rows += 1;
  checksum += 900002 * 31 + 7;
  // An object replaced by one that appends to it (a new ETag; the bytes read are still its start):
  // only what was appended is new.
  Put("landing/more/extra.jsonl.gz",
      GzipMember(gzip_lines) + GzipMember("{\"id\":900003,\"name\":\"gz2\",\"amount\":9}\n"));
  rows += 1;
  checksum += 900003 * 31 + 9;
  ProcessResult third = Skipprd(dir_, {"sync", "-p", "events", "--once"}, Env());
  ASSERT_EQ(third.exit_code, 0) << third.err;
  EXPECT_EQ(CountAndChecksum(), Expected(rows, checksum));
  EXPECT_EQ(QueryRow(dir_, "SELECT count(*) FROM events.events WHERE id < 0"),
            std::vector<std::string>{"0"});
}

TEST_F(S3SourceE2e, RandomKillsServerErrorsCutDownloadsAndARestartLandEveryRowExactlyOnce) {
  const int64_t rows = Scaled(200000, 10);
  const int64_t checksum = WriteInput(dir_, 20, rows);
  UploadInput();
  // Every fifth request answered 500, every third download cut halfway, all through the kills.
  server_->InjectFaults({{"status_every", 5}, {"status", 500}, {"reset_body_every", 3}});
  const auto small_buffers = Env({{"BUFFER_THRESHOLD_BYTES", "1000000"}});
  std::mt19937 random(20261205);
  std::uniform_int_distribution<int> delay_ms(50, 700);
  for (int kill = 0; kill < 20; ++kill) {
    SyncAndKillAfter(dir_, "events", std::chrono::milliseconds(delay_ms(random)), small_buffers);
  }
  // The server goes away and comes back while a sync reads: requests retry, nothing is lost.
  RunningProcess sync = StartProcess(SKIPPRD_BINARY, {"sync", "-p", "events", "--once"},
                                     OptionsFor(dir_, small_buffers));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::string why_not;
  ASSERT_TRUE(server_->Restart(&why_not)) << why_not;
  ProcessResult restarted = sync.Wait();
  EXPECT_EQ(restarted.exit_code, 0) << restarted.err;
  ProcessResult final_run = Skipprd(dir_, {"sync", "-p", "events", "--once"}, Env());
  ASSERT_EQ(final_run.exit_code, 0) << final_run.err;
  const nlohmann::json faults = server_->FaultCounters();
  EXPECT_GT(faults["statuses"].get<int>(), 0) << faults;
  EXPECT_GT(faults["resets"].get<int>(), 0) << faults;
  EXPECT_EQ(CountAndChecksum(), Expected(rows, checksum));
  const nlohmann::json table = ReadWithIcebird(dir_.path() + "/warehouse", "default", "events");
  EXPECT_EQ(table["rows"].size(), static_cast<size_t>(rows));
}

TEST_F(S3SourceE2e, DoctorAndSyncNameABucketTheyCannotRead) {
  ProcessResult healthy = Skipprd(dir_, {"doctor"}, Env());
  EXPECT_EQ(healthy.exit_code, 0) << healthy.out << healthy.err;
  EXPECT_THAT(healthy.out,
              HasSubstr("s3://" + bucket_ + "/landing/ is readable at " + server_->endpoint()));

  dir_.Write("skippr.yml", fmt::format(R"(data_sources:
  bucket:
    S3:
      s3_bucket: no-such-bucket
      s3_prefix: landing/
data_sinks:
  lake:
    SkipprLake:
      warehouse: "file://{}/warehouse"
pipelines:
  events:
    data_source: data_sources.bucket
    data_sink: data_sinks.lake
)",
                                       dir_.path()));
  ProcessResult missing = Skipprd(dir_, {"doctor"}, Env());
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_THAT(missing.out + missing.err, HasSubstr("s3://no-such-bucket/landing/"));
  EXPECT_THAT(missing.out + missing.err, HasSubstr("the bucket does not exist"));
  ProcessResult sync = Skipprd(dir_, {"sync", "-p", "events", "--once"}, Env());
  EXPECT_NE(sync.exit_code, 0);
  EXPECT_THAT(sync.err, HasSubstr("the bucket does not exist"));

  auto unreachable = Env();
  unreachable["AWS_ENDPOINT_URL_S3"] = fmt::format("http://127.0.0.1:{}", FreeLoopbackPort());
  ProcessResult down = Skipprd(dir_, {"doctor"}, unreachable);
  EXPECT_NE(down.exit_code, 0);
  EXPECT_THAT(down.out + down.err, HasSubstr(unreachable["AWS_ENDPOINT_URL_S3"]));
}

// ----- WAL_STORAGE=s3: the segments in a bucket
// ---------------------------------------------------

class WalOnS3E2e : public S3SourceE2e {
 protected:
  void SetUp() override {
    S3SourceE2e::SetUp();
    if (HasFatalFailure()) return;
    wal_bucket_ = "wal-" + bucket_;
    server_->CreateBucket(wal_bucket_);
  }

  // A File source over input/ (written by WriteInput), with a lake sink or none.
  void WriteFileConfig(bool has_sink) {
    dir_.Write("skippr.yml",
               fmt::format(R"(data_sources:
  files:
    File: {{path: input}}
data_sinks:
  lake:
    SkipprLake:
      warehouse: "file://{}/warehouse"
      commit_interval_seconds: 1
pipelines:
  events:
    data_source: data_sources.files
{})",
                           dir_.path(), has_sink ? "    data_sink: data_sinks.lake\n" : ""));
  }

  std::map<std::string, std::string> WalEnv(std::map<std::string, std::string> extra = {}) const {
    auto env = Env({{"WAL_STORAGE", "s3"}, {"SKIPPR_WAL_S3_BUCKET", wal_bucket_}});
    env.insert(extra.begin(), extra.end());
    return env;
  }

  // The segment objects of the pipeline in the WAL bucket.
  size_t SegmentObjects() {
    size_t count = 0;
    EXPECT_TRUE(client_
                    ->ForEachObject(wal_bucket_, "default/default/events/segments/",
                                    [&](const aws::ObjectInfo& object) {
                                      count += object.key.ends_with(".seg");
                                      return Status::OK();
                                    })
                    .ok());
    return count;
  }

  std::vector<std::string> QueryWithWal(const std::string& sql) {
    return QueryFirstRow(dir_, sql, WalEnv());
  }

  std::string wal_bucket_;
};

TEST_F(WalOnS3E2e, WithoutASinkTheWalIsTheDatasetAndQueryReadsItFromTheBucket) {
  WriteFileConfig(/*has_sink=*/false);
  const int64_t rows = 30000;
  const int64_t checksum = WriteInput(dir_, 6, rows);
  ProcessResult sync = Skipprd(dir_, {"sync", "-p", "events", "--once"},
                               WalEnv({{"BUFFER_THRESHOLD_BYTES", "300000"}}));
  ASSERT_EQ(sync.exit_code, 0) << sync.err;
  EXPECT_GT(SegmentObjects(), 1u);
  EXPECT_FALSE(std::filesystem::exists(dir_.Sub("data/events/wal"))) << "no segment on local disk";
  EXPECT_EQ(QueryWithWal("SELECT count(*), count(DISTINCT id), sum(id * 31 + amount) FROM "
                         "events.events"),
            Expected(rows, checksum));
}

TEST_F(WalOnS3E2e, DoctorListsAndWritesTheWalPrefixOrNamesWhyItCannot) {
  WriteFileConfig(/*has_sink=*/false);
  ProcessResult healthy = Skipprd(dir_, {"doctor"}, WalEnv());
  EXPECT_THAT(healthy.out, HasSubstr(fmt::format(
                               "pipeline 'events': WAL segments in s3://{}/default/default/events/"
                               "segments (listed and written at {})",
                               wal_bucket_, server_->endpoint())));
  auto missing = WalEnv();
  missing["SKIPPR_WAL_S3_BUCKET"] = "no-such-wal-bucket";
  ProcessResult broken = Skipprd(dir_, {"doctor"}, missing);
  EXPECT_NE(broken.exit_code, 0);
  EXPECT_THAT(broken.out, HasSubstr("WAL_STORAGE=s3: cannot list and write "
                                    "s3://no-such-wal-bucket/default/default/events/segments"));
  EXPECT_THAT(broken.out, HasSubstr("the bucket does not exist"));
}

TEST_F(WalOnS3E2e, EveryRowLandsExactlyOnceAcrossKillsCrashPointsAndLostAnswers) {
  WriteFileConfig(/*has_sink=*/true);
  int64_t rows = Scaled(150000, 10);
  int64_t checksum = WriteInput(dir_, 10, rows);
  // Every seventh request fails with a 500 and every fifth write's answer is lost after it took
  // effect, through every run below.
  server_->InjectFaults({{"status_every", 7}, {"status", 500}, {"lose_put_every", 5}});
  const auto small_buffers = WalEnv({{"BUFFER_THRESHOLD_BYTES", "1000000"}});
  std::mt19937 random(20261206);
  std::uniform_int_distribution<int> delay_ms(100, 900);
  for (int kill = 0; kill < 20; ++kill) {
    SyncAndKillAfter(dir_, "events", std::chrono::milliseconds(delay_ms(random)), small_buffers);
  }
  // Killed at each moment of a commit to the bucket: the segment uploaded and the store not yet
  // told, and so on.
  for (const std::string point :
       {"wal.after_segment_write", "wal.after_fdatasync", "wal.after_store_commit",
        "landing.before_store_commit", "landing.after_store_commit"}) {
    const int64_t extra = 2000;
    checksum += WriteInput(dir_, 2, extra, rows, "extra-" + point);
    rows += extra;
    auto env = small_buffers;
    env["SKIPPR_CRASH_POINT"] = point;
    ProcessResult crashed = Skipprd(dir_, {"sync", "-p", "events", "--once"}, env);
    EXPECT_EQ(crashed.exit_code, 128 + SIGKILL) << point << " was not reached\n" << crashed.err;
  }
  ProcessResult final_run = Skipprd(dir_, {"sync", "-p", "events", "--once"}, WalEnv());
  ASSERT_EQ(final_run.exit_code, 0) << final_run.err;
  const nlohmann::json faults = server_->FaultCounters();
  EXPECT_GT(faults["lost_puts"].get<int>(), 0) << faults;
  EXPECT_GT(faults["statuses"].get<int>(), 0) << faults;
  EXPECT_EQ(SegmentObjects(), 0u) << "landed segments are deleted from the bucket";
  EXPECT_EQ(QueryWithWal("SELECT count(*), count(DISTINCT id), sum(id * 31 + amount) FROM "
                         "events.events"),
            Expected(rows, checksum));
  const nlohmann::json table = ReadWithIcebird(dir_.path() + "/warehouse", "default", "events");
  EXPECT_EQ(table["rows"].size(), static_cast<size_t>(rows));
}

// ----- SkipprLake on s3://: the tables in a bucket, the catalog in DynamoDB ---------------------

class LakeOnS3E2e : public WalOnS3E2e {
 public:
  static void SetUpTestSuite() {
    WalOnS3E2e::SetUpTestSuite();
    dynamo_why_not_.clear();
    dynamo_ = DynamoServer::Start(&dynamo_why_not_).release();
  }
  static void TearDownTestSuite() {
    delete dynamo_;
    dynamo_ = nullptr;
    WalOnS3E2e::TearDownTestSuite();
  }

 protected:
  void SetUp() override {
    WalOnS3E2e::SetUp();
    if (HasFatalFailure()) return;
    ASSERT_NE(dynamo_, nullptr) << dynamo_why_not_;
    lake_bucket_ = "lake-" + bucket_;
    server_->CreateBucket(lake_bucket_);
  }

  // `source` (a data_sources entry) into a lake in the lake bucket, cataloged in DynamoDB.
  void WriteLakeConfig(const std::string& source, const std::string& sink_extra = "") {
    dir_.Write("skippr.yml", fmt::format(R"(data_sources:
  bucket:
    S3: {{s3_bucket: {}, s3_prefix: landing/}}
  files:
    File: {{path: input, primary_key: [id]}}
data_sinks:
  lake:
    SkipprLake:
      warehouse: "s3://{}/warehouse/"
      catalog_table: catalog-{}
      commit_interval_seconds: 1
{}pipelines:
  events:
    data_source: data_sources.{}
    data_sink: data_sinks.lake
)",
                                         bucket_, lake_bucket_, bucket_, sink_extra, source));
  }

  std::map<std::string, std::string> LakeEnv(std::map<std::string, std::string> extra = {}) const {
    auto env = WalEnv(std::move(extra));
    env["AWS_ENDPOINT_URL_DYNAMODB"] = dynamo_->endpoint();
    return env;
  }

  std::vector<std::string> QueryLake(const std::string& sql) {
    return QueryFirstRow(dir_, sql, LakeEnv());
  }

  // The objects of the lake bucket under `prefix`.
  std::vector<std::string> LakeObjects(const std::string& prefix) {
    std::vector<std::string> keys;
    EXPECT_TRUE(client_
                    ->ForEachObject(lake_bucket_, prefix,
                                    [&](const aws::ObjectInfo& object) {
                                      keys.push_back(object.key);
                                      return Status::OK();
                                    })
                    .ok());
    return keys;
  }

  // The table as icebird reads it from the bucket, at its newest metadata version.
  nlohmann::json ReadTableFromBucket() {
    const std::string metadata_prefix = "warehouse/default/events/metadata/";
    int64_t newest = 0;
    for (const std::string& key : LakeObjects(metadata_prefix)) {
      int64_t version = 0;
      if (std::sscanf(key.c_str() + metadata_prefix.size(), "v%ld.metadata.json", &version) == 1) {
        newest = std::max(newest, version);
      }
    }
    EXPECT_GT(newest, 0) << "a metadata file in the bucket";
    const std::string location = fmt::format("s3://{}/{}v{}.metadata.json", lake_bucket_,
                                             metadata_prefix, newest);
    const std::string reader = std::string(SKIPPR_SOURCE_DIR) + "/tests/lake/read_iceberg.mjs";
    ProcessResult read = RunProcess(
        "/usr/bin/env",
        {"READ_ICEBERG_S3_ENDPOINT=" + server_->endpoint(), "node", reader, location});
    EXPECT_EQ(read.exit_code, 0) << read.err;
    if (read.exit_code != 0) return nlohmann::json::object({{"rows", nlohmann::json::array()}});
    return nlohmann::json::parse(read.out);
  }

  static inline DynamoServer* dynamo_ = nullptr;
  static inline std::string dynamo_why_not_;
  std::string lake_bucket_;
};

TEST_F(LakeOnS3E2e, S3SourceToALakeInABucketLandsEveryRowOnceAcrossKillsAndFaults) {
  WriteLakeConfig("bucket");
  int64_t rows = Scaled(60000, 10);
  int64_t checksum = WriteInput(dir_, 8, rows);
  UploadInput();
  // Every seventh request to S3 fails with a 500 and every fifth write's answer is lost after it
  // took effect, through every run below.
  server_->InjectFaults({{"status_every", 7}, {"status", 500}, {"lose_put_every", 5}});
  const auto small_buffers = LakeEnv({{"BUFFER_THRESHOLD_BYTES", "500000"}});
  std::mt19937 random(20261205);
  std::uniform_int_distribution<int> delay_ms(200, 1500);
  for (int kill = 0; kill < 12; ++kill) {
    SyncAndKillAfter(dir_, "events", std::chrono::milliseconds(delay_ms(random)), small_buffers);
  }
  // Killed at each moment of a landing in the bucket: the data file uploaded and no catalog
  // commit, the catalog committed and the store not told, and so on.
  for (const std::string point : {"lake.after_data_file", "lake.before_catalog_commit",
                                  "lake.after_catalog_commit", "landing.before_store_commit"}) {
    const int64_t extra = 1500;
    checksum += WriteInput(dir_, 1, extra, rows, "extra-" + point);
    rows += extra;
    UploadInput();
    auto env = small_buffers;
    env["SKIPPR_CRASH_POINT"] = point;
    ProcessResult crashed = Skipprd(dir_, {"sync", "-p", "events", "--once"}, env);
    EXPECT_EQ(crashed.exit_code, 128 + SIGKILL) << point << " was not reached\n" << crashed.err;
  }
  ProcessResult final_run = Skipprd(dir_, {"sync", "-p", "events", "--once"}, LakeEnv());
  ASSERT_EQ(final_run.exit_code, 0) << final_run.err;
  const nlohmann::json faults = server_->FaultCounters();
  EXPECT_GT(faults["lost_puts"].get<int>(), 0) << faults;
  server_->InjectFaults(nlohmann::json::object());

  EXPECT_FALSE(std::filesystem::exists(dir_.Sub("warehouse"))) << "no table on local disk";
  EXPECT_FALSE(LakeObjects("warehouse/default/events/data/").empty());
  EXPECT_EQ(SegmentObjects(), 0u) << "landed segments are deleted from the bucket";
  const std::string sql =
      "SELECT count(*), count(DISTINCT id), sum(id * 31 + amount) FROM events.events";
  EXPECT_EQ(QueryLake(sql), Expected(rows, checksum));
  // The local copies of the data files are a cache: query fetches them again.
  std::filesystem::remove_all(dir_.Sub("data/events/sink"));
  EXPECT_EQ(QueryLake(sql), Expected(rows, checksum));
  const nlohmann::json table = ReadTableFromBucket();
  EXPECT_EQ(table["rows"].size(), static_cast<size_t>(rows));
}

TEST_F(LakeOnS3E2e, MergeByKeyReadsTheTableBackFromTheBucketWithoutLocalCopies) {
  WriteLakeConfig("files", "      write_policy: merge_by_key\n");
  const int64_t rows = 4000;
  WriteInput(dir_, 2, rows);
  ProcessResult first = Skipprd(dir_, {"sync", "-p", "events", "--once"}, LakeEnv());
  ASSERT_EQ(first.exit_code, 0) << first.err;
  // The same ids again, with other amounts: each key's row is replaced. The merge finds the
  // table's live rows in the bucket, as a fresh machine would.
  std::filesystem::remove_all(dir_.Sub("data/events/sink"));
  std::filesystem::remove_all(dir_.Sub("input"));
  dir_.Write("input/again.jsonl", [&] {
    std::string lines;
    for (int64_t id = 0; id < rows; ++id) {
      lines += fmt::format("{{\"id\":{},\"name\":\"again\",\"amount\":1}}\n", id);
    }
    return lines;
  }());
  ProcessResult second = Skipprd(dir_, {"sync", "-p", "events", "--once"}, LakeEnv());
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_EQ(QueryLake("SELECT count(*), count(DISTINCT id), sum(amount) FROM events.events"),
            (std::vector<std::string>{std::to_string(rows), std::to_string(rows),
                                      std::to_string(rows)}));
  const nlohmann::json table = ReadTableFromBucket();
  EXPECT_EQ(table["rows"].size(), static_cast<size_t>(rows));
  for (const auto& row : table["rows"]) EXPECT_EQ(row["name"], "again") << row;
}

TEST_F(LakeOnS3E2e, DoctorListsAndWritesTheWarehouseAndFindsTheCatalogTable) {
  WriteLakeConfig("files");
  ProcessResult before = Skipprd(dir_, {"doctor"}, LakeEnv());
  EXPECT_THAT(before.out, HasSubstr(fmt::format(
                              "data_sinks.lake.SkipprLake: warehouse s3://{}/warehouse/ listed and "
                              "written at {}",
                              lake_bucket_, server_->endpoint())));
  EXPECT_THAT(before.out, HasSubstr(fmt::format("catalog table 'catalog-{}' does not exist at {}; "
                                                "the first sync creates it",
                                                bucket_, dynamo_->endpoint())));
  WriteInput(dir_, 1, 10);
  ProcessResult sync = Skipprd(dir_, {"sync", "-p", "events", "--once"}, LakeEnv());
  ASSERT_EQ(sync.exit_code, 0) << sync.err;
  ProcessResult after = Skipprd(dir_, {"doctor"}, LakeEnv());
  EXPECT_THAT(after.out, HasSubstr(fmt::format("catalog table 'catalog-{}' found at {}", bucket_,
                                               dynamo_->endpoint())));

  lake_bucket_ = "no-such-lake-bucket";
  WriteLakeConfig("files");
  ProcessResult missing = Skipprd(dir_, {"doctor"}, LakeEnv());
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_THAT(missing.out, HasSubstr("cannot list and write warehouse "
                                     "s3://no-such-lake-bucket/warehouse/"));
  EXPECT_THAT(missing.out, HasSubstr("the bucket does not exist"));
}

// ----- No state on the machine: the store in DynamoDB too ----------------------------------------

class NoStateOnTheMachineE2e : public LakeOnS3E2e {
 protected:
  void SetUp() override {
    LakeOnS3E2e::SetUp();
    if (HasFatalFailure()) return;
    WriteLakeConfig("bucket");
    // The same configuration with the store in a DynamoDB table of its own.
    const std::string config = fmt::format("skippr:\n  store: {{type: dynamodb, name: store-{}}}\n",
                                           bucket_);
    std::ifstream in(dir_.path() + "/skippr.yml");
    std::stringstream rest;
    rest << in.rdbuf();
    config_ = config + rest.str();
    dir_.Write("skippr.yml", config_);
  }

  // A killed writer's lease is taken over after a second of stillness, not the default 30.
  std::map<std::string, std::string> MachineEnv(std::map<std::string, std::string> extra = {}) {
    auto env = LakeEnv(std::move(extra));
    env["SKIPPR_STORE_LEASE_SECONDS"] = "1";
    return env;
  }

  // Every run starts on a machine that never ran skipprd.
  void ForgetTheMachine() { std::filesystem::remove_all(dir_.Sub("data")); }

  std::string config_;
};

TEST_F(NoStateOnTheMachineE2e, EveryRowLandsOnceAcrossKillsWithDataDirDeletedBeforeEveryRun) {
  int64_t rows = Scaled(40000, 10);
  int64_t checksum = WriteInput(dir_, 8, rows);
  UploadInput();
  server_->InjectFaults({{"status_every", 9}, {"status", 503}, {"lose_put_every", 7}});
  const auto small_buffers = MachineEnv({{"BUFFER_THRESHOLD_BYTES", "400000"}});
  std::mt19937 random(20261205);
  std::uniform_int_distribution<int> delay_ms(300, 2500);
  for (int kill = 0; kill < 10; ++kill) {
    ForgetTheMachine();
    SyncAndKillAfter(dir_, "events", std::chrono::milliseconds(delay_ms(random)), small_buffers);
  }
  // Killed at each moment of a commit: the segment in the bucket and the store commit not done,
  // the data file in the bucket and no catalog commit, the catalog committed and the store not
  // told, and so on.
  for (const std::string point :
       {"wal.after_segment_write", "store.dynamodb.after_intent", "store.dynamodb.after_versions",
        "store.dynamodb.after_head", "wal.after_store_commit", "lake.after_data_file",
        "lake.before_catalog_commit", "lake.after_catalog_commit", "landing.before_store_commit",
        "landing.after_store_commit"}) {
    const int64_t extra = 1000;
    checksum += WriteInput(dir_, 1, extra, rows, "extra-" + point);
    rows += extra;
    UploadInput();
    ForgetTheMachine();
    auto env = small_buffers;
    env["SKIPPR_CRASH_POINT"] = point;
    ProcessResult crashed = Skipprd(dir_, {"sync", "-p", "events", "--once"}, env);
    EXPECT_EQ(crashed.exit_code, 128 + SIGKILL) << point << " was not reached\n" << crashed.err;
  }
  ForgetTheMachine();
  ProcessResult final_run = Skipprd(dir_, {"sync", "-p", "events", "--once"}, MachineEnv());
  ASSERT_EQ(final_run.exit_code, 0) << final_run.err;
  const nlohmann::json faults = server_->FaultCounters();
  EXPECT_GT(faults["lost_puts"].get<int>(), 0) << faults;
  EXPECT_GT(faults["statuses"].get<int>(), 0) << faults;
  server_->InjectFaults(nlohmann::json::object());
  EXPECT_EQ(SegmentObjects(), 0u) << "landed segments are deleted from the bucket";

  // Read from a second machine that only has the configuration.
  TempDir other;
  other.Write("skippr.yml", config_);
  EXPECT_EQ(QueryFirstRow(other,
                          "SELECT count(*), count(DISTINCT id), sum(id * 31 + amount) FROM "
                          "events.events",
                          MachineEnv()),
            Expected(rows, checksum));
  const nlohmann::json table = ReadTableFromBucket();
  EXPECT_EQ(table["rows"].size(), static_cast<size_t>(rows));
}

TEST_F(NoStateOnTheMachineE2e, DoctorNamesTheStoreTable) {
  ProcessResult doctor = Skipprd(dir_, {"doctor"}, MachineEnv());
  EXPECT_THAT(doctor.out, HasSubstr(fmt::format(
                              "pipeline 'events': Skippr Store in DynamoDB table 'store-{}': it "
                              "does not exist at {}; the first sync creates it",
                              bucket_, dynamo_->endpoint())));
  EXPECT_THAT(doctor.out, HasSubstr(fmt::format("the store is in DynamoDB table 'store-{}'",
                                                bucket_)));
  ProcessResult status = Skipprd(dir_, {"status", "-p", "events"}, MachineEnv());
  EXPECT_EQ(status.exit_code, 0) << status.err;
  EXPECT_THAT(status.out, HasSubstr("no state yet"));

}

TEST_F(NoStateOnTheMachineE2e, ASecondWriterIsRefusedWhileTheFirstRuns) {
  WriteInput(dir_, 4, Scaled(40000, 10));
  UploadInput();
  RunningProcess first = StartProcess(SKIPPRD_BINARY, {"sync", "-p", "events"},
                                      OptionsFor(dir_, MachineEnv()));
  // Once the first holds the lease (its head item says so), a second machine is refused.
  MapEnvironment environment(MachineEnv());
  auto client = aws::DynamoClient::Open({}, environment);
  ASSERT_TRUE(client.ok());
  bool held = false;
  for (int attempt = 0; attempt < 600 && !held; ++attempt) {
    auto head = (*client)->Call(
        "GetItem", {{"TableName", "store-" + bucket_},
                    {"Key", {{"pk", {{"S", "default#default#events"}}},
                             {"sk", {{"S", "store#head"}}}}},
                    {"ConsistentRead", true}});
    held = head.ok() && head->contains("Item") &&
           !(*head)["Item"]["lease_released"]["BOOL"].get<bool>();
    if (!held) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(held) << "the first writer never took the lease";
  TempDir other;
  other.Write("skippr.yml", config_);
  ProcessResult second = Skipprd(other, {"sync", "-p", "events", "--once"}, MachineEnv());
  ::kill(first.pid(), SIGTERM);
  first.Wait();
  EXPECT_NE(second.exit_code, 0);
  EXPECT_THAT(second.err, HasSubstr("pipeline writer lease unavailable"));
}

}  // namespace
}  // namespace skippr::testing
