// `skipprd sync` end to end: every source row committed to the WAL exactly once, also across
// SIGKILLs at random moments and at every crash point of the commit protocol and of recovery.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "e2e/process.hpp"
#include "e2e/skipprd_runner.hpp"
#include "e2e/wal_reader.hpp"
#include "sources/sources.hpp"
#include "support/scale.hpp"

namespace skippr::testing {
namespace {

using ::testing::HasSubstr;

TEST(SyncSample, MillionRowsLandInTheWalWithTheGeneratorsFigures) {
  TempDir dir;
  const int64_t rows = Scaled(1000000);
  dir.Write("skippr.yml", fmt::format(R"(data_sources:
  sample: {{Sample: {{rows: {}, seed: 42}}}}
pipelines:
  bikehire:
    data_source: data_sources.sample
)", rows));
  ProcessResult result = Skipprd(dir, {"sync", "--pipeline", "bikehire", "--once", "--output", "text"});
  ASSERT_EQ(result.exit_code, 0) << result.err << result.out;
  EXPECT_THAT(result.out, HasSubstr("Sync started: pipeline=bikehire\n[start] Ingesting\n"));
  EXPECT_THAT(result.out, HasSubstr(fmt::format("Sync complete: pipeline=bikehire namespaces=1 rows={} ", rows)));

  const sources::SampleFigures expected = sources::ComputeSampleFigures(rows, 42);
  int64_t cents = 0;
  int64_t seconds = 0;
  uint64_t members = 0;
  std::set<int64_t> ride_ids;
  const WalRows wal = ReadWalRows(dir.path() + "/data/bikehire", [&](const std::string& ns, const Value& row) {
    EXPECT_EQ(ns, "bikehire");
    cents += row.Find("amount")->as_int();
    seconds += row.Find("duration_seconds")->as_int();
    members += row.Find("rider_type")->as_string() == "member" ? 1 : 0;
    ride_ids.insert(row.Find("ride_id")->as_int());
  });
  EXPECT_EQ(wal.rows, rows);
  EXPECT_EQ(ride_ids.size(), static_cast<size_t>(rows));
  EXPECT_EQ(cents, expected.amount_cents_sum);
  EXPECT_EQ(seconds, expected.duration_seconds_sum);
  EXPECT_EQ(members, expected.member_rides);
  EXPECT_GT(wal.segments, 1u);  // the 10 MiB buffer threshold split the run

  // And through `skipprd query`, the same figures.
  ProcessResult query = Skipprd(dir, {"query", "--plain", "--sql",
                                      "SELECT count(*), count(DISTINCT ride_id), sum(amount), sum(duration_seconds), "
                                      "count(*) FILTER (WHERE rider_type = 'member') FROM bikehire.bikehire"});
  ASSERT_EQ(query.exit_code, 0) << query.err;
  const auto figures = nlohmann::json::parse(query.out)["rows"][0];
  EXPECT_EQ(figures[0], std::to_string(rows));
  EXPECT_EQ(figures[1], std::to_string(rows));
  EXPECT_EQ(figures[2], fmt::format("{}.{:02}", expected.amount_cents_sum / 100, expected.amount_cents_sum % 100));
  EXPECT_EQ(figures[3], std::to_string(expected.duration_seconds_sum));
  EXPECT_EQ(figures[4], std::to_string(expected.member_rides));

  // Nothing new: a second pass commits nothing.
  ProcessResult again = Skipprd(dir, {"sync", "-p", "bikehire", "--once", "--output", "json"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_THAT(again.out, HasSubstr("\"total_rows\":0"));
}

// ----- files, with a crash test ---------------------------------------------------------------

struct WalCheck {
  int64_t rows = 0;
  size_t unique_ids = 0;
  int64_t checksum = 0;
};

WalCheck CheckWal(const TempDir& dir, const std::string& pipeline) {
  WalCheck check;
  std::set<int64_t> ids;
  const WalRows wal = ReadWalRows(dir.path() + "/data/" + pipeline, [&](const std::string&, const Value& row) {
    const int64_t id = row.Find("id")->as_int();
    ids.insert(id);
    check.checksum += id * 31 + row.Find("amount")->as_int();
  });
  check.rows = wal.rows;
  check.unique_ids = ids.size();
  return check;
}

const char* kFilesConfig = R"(data_sources:
  files: {File: {path: input}}
pipelines:
  events:
    data_source: data_sources.files
)";

TEST(SyncFiles, JsonLinesAndCsvLandExactlyOnce) {
  TempDir dir;
  dir.Write("skippr.yml", kFilesConfig);
  const int64_t rows = Scaled(300000, 6);
  const int64_t checksum = WriteInput(dir, 6, rows);
  ProcessResult result = Skipprd(dir, {"sync", "-p", "events", "--once", "--output", "json"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const WalCheck check = CheckWal(dir, "events");
  EXPECT_EQ(check.rows, rows);
  EXPECT_EQ(check.unique_ids, static_cast<size_t>(rows));
  EXPECT_EQ(check.checksum, checksum);
  ProcessResult query = Skipprd(dir, {"query", "--plain", "--sql",
                                      "SELECT count(*), count(DISTINCT id), sum(id * 31 + amount) FROM events.events"});
  ASSERT_EQ(query.exit_code, 0) << query.err;
  const auto row = nlohmann::json::parse(query.out)["rows"][0];
  EXPECT_EQ(row[0], std::to_string(rows));
  EXPECT_EQ(row[1], std::to_string(rows));
  EXPECT_EQ(row[2], std::to_string(checksum));
}

TEST(SyncCrash, RandomKillsAndEveryCrashPointLoseNothingAndDuplicateNothing) {
  TempDir dir;
  dir.Write("skippr.yml", kFilesConfig);
  int64_t expected_rows = Scaled(2000000, 10);
  const int64_t checksum = WriteInput(dir, 10, expected_rows);
  // Small commits so that kills land between, inside and after many of them.
  const std::map<std::string, std::string> small_buffers = {{"BUFFER_THRESHOLD_BYTES", "4000000"}};
  std::mt19937 random(20261130);
  std::uniform_int_distribution<int> delay_ms(50, 1500);
  int kills = 0;
  for (int round = 0; round < 50; ++round) {
    SyncAndKillAfter(dir, "events", std::chrono::milliseconds(delay_ms(random)), small_buffers);
    ++kills;
  }
  // Then one crash at every named point, each with new input so that there is work to commit.
  const std::vector<std::string> crash_points = {
      "sync.after_source_read",       "sync.before_commit",      "wal.after_segment_write",
      "wal.after_fdatasync",          "wal.after_directory_fsync", "wal.before_store_commit",
      "wal.after_store_commit",       "sync.after_commit",       "recovery.before_orphan_delete",
      "recovery.after_orphan_delete", "recovery.after_scan"};
  int64_t expected_checksum = checksum;
  const auto add_input = [&](const std::string& prefix) {
    const int64_t extra_rows = Scaled(20000, 2);
    expected_checksum += WriteInput(dir, 2, extra_rows, expected_rows, prefix);
    expected_rows += extra_rows;
  };
  for (const std::string& point : crash_points) {
    add_input("extra-" + point);
    if (point.rfind("recovery.", 0) == 0) {
      // Leave an orphan segment (written and synced, never committed) and spare files behind
      // first, so that recovery has both to delete.
      auto orphan_env = small_buffers;
      orphan_env["SKIPPR_CRASH_POINT"] = "wal.after_fdatasync";
      ProcessResult orphaned = Skipprd(dir, {"sync", "-p", "events", "--once"}, orphan_env);
      EXPECT_EQ(orphaned.exit_code, 128 + SIGKILL) << point;
    }
    auto env = small_buffers;
    env["SKIPPR_CRASH_POINT"] = point;
    ProcessResult crashed = Skipprd(dir, {"sync", "-p", "events", "--once"}, env);
    EXPECT_EQ(crashed.exit_code, 128 + SIGKILL) << "crash point " << point << " was not reached\n"
                                               << crashed.err;
  }
  ProcessResult final_run = Skipprd(dir, {"sync", "-p", "events", "--once", "--output", "text"});
  ASSERT_EQ(final_run.exit_code, 0) << final_run.err;
  const WalCheck check = CheckWal(dir, "events");
  EXPECT_EQ(check.rows, expected_rows) << "after " << kills << " random kills";
  EXPECT_EQ(check.unique_ids, static_cast<size_t>(expected_rows));
  EXPECT_EQ(check.checksum, expected_checksum);
}

TEST(SyncRecovery, MissingCommittedSegmentFailsLoudly) {
  TempDir dir;
  dir.Write("skippr.yml", kFilesConfig);
  WriteInput(dir, 2, 1000);
  ASSERT_EQ(Skipprd(dir, {"sync", "-p", "events", "--once"}).exit_code, 0);
  for (const auto& entry : std::filesystem::directory_iterator(dir.path() + "/data/events/wal")) {
    std::filesystem::remove(entry.path());
    break;
  }
  ProcessResult result = Skipprd(dir, {"sync", "-p", "events", "--once"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, HasSubstr("is committed in the catalog but its file"));
  EXPECT_THAT(result.err, HasSubstr("is missing"));
}

}  // namespace
}  // namespace skippr::testing

namespace skippr::testing {
namespace {

// `query` during a running sync sees one consistent cut each time: the count never decreases, never
// exceeds the source, and ends equal to it.
TEST(SyncQuery, CountDuringSyncIsMonotoneAndEndsEqual) {
  TempDir dir;
  dir.Write("skippr.yml", kFilesConfig);
  const int64_t rows = Scaled(1600000, 8);
  WriteInput(dir, 8, rows);
  RecordProperty("queries_during_sync",
                 ExpectCountDuringSyncIsMonotone(dir, "events", "events", rows,
                                                 {{"BUFFER_THRESHOLD_BYTES", "2000000"}}));
}

TEST(SyncQuery, PlainOutputSumsAndErrors) {
  TempDir dir;
  dir.Write("skippr.yml", kFilesConfig);
  const int64_t rows = Scaled(200000, 4);
  const int64_t checksum = WriteInput(dir, 4, rows);
  ASSERT_EQ(Skipprd(dir, {"sync", "-p", "events", "--once"}).exit_code, 0);
  ProcessResult sums = Skipprd(dir, {"query", "--plain", "--sql",
                                     "SELECT count(*), count(DISTINCT id), sum(id * 31 + amount) FROM events.events"});
  ASSERT_EQ(sums.exit_code, 0) << sums.err;
  const auto json = nlohmann::json::parse(sums.out);
  EXPECT_EQ(json["rows"][0][0], std::to_string(rows));
  EXPECT_EQ(json["rows"][0][1], std::to_string(rows));
  EXPECT_EQ(json["rows"][0][2], std::to_string(checksum));
  ProcessResult unqualified = Skipprd(dir, {"query", "--plain", "--sql", "SELECT * FROM events"});
  EXPECT_EQ(unqualified.exit_code, 1);
  EXPECT_THAT(unqualified.err, HasSubstr("query failed: unknown table 'events'"));
  EXPECT_THAT(unqualified.err, HasSubstr("events.events"));
  ProcessResult broken = Skipprd(dir, {"query", "--sql", "SELEC 1"});
  EXPECT_EQ(broken.exit_code, 1);
  EXPECT_THAT(broken.err, HasSubstr("query failed: "));
  ProcessResult status = Skipprd(dir, {"status", "-p", "events", "--output", "json"});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  const auto pipeline_status = nlohmann::json::parse(status.out)["pipelines"][0];
  EXPECT_EQ(pipeline_status["live_rows"], rows);
  EXPECT_EQ(pipeline_status["destination"], "WAL-only");
  EXPECT_EQ(pipeline_status["last_run"]["ok"], true);
  EXPECT_EQ(pipeline_status["last_run"]["rows_committed"], rows);
  EXPECT_EQ(pipeline_status["source_positions"].size(), 4u);
  ProcessResult df = Skipprd(dir, {"df", "--namespace", "events.events"});
  ASSERT_EQ(df.exit_code, 0) << df.err;
  EXPECT_EQ(nlohmann::json::parse(df.out)["rows"].size(), static_cast<size_t>(rows));
}

}  // namespace
}  // namespace skippr::testing
