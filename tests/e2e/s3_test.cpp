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
#include "support/gzip.hpp"
#include "support/aws_servers.hpp"
#include "support/scale.hpp"

namespace skippr::testing {
namespace {

using ::testing::HasSubstr;

class S3SourceE2e : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string why_not;
    server_ = S3Server::Start(&why_not, {.fault_proxy = true}).release();
    ASSERT_NE(server_, nullptr) << why_not;
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(server_, nullptr);
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

  static S3Server* server_;
  static int buckets_;
  TempDir dir_;
  std::string bucket_;
  MapEnvironment environment_;
  std::unique_ptr<aws::S3Client> client_;
};

S3Server* S3SourceE2e::server_ = nullptr;
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

}  // namespace
}  // namespace skippr::testing
