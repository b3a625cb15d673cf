// The Duckdb sink end to end, in both forms: a native DuckDB database (read back by DuckDB itself)
// and an Iceberg warehouse (read back by an Iceberg reader we did not write, npm icebird) —
// exactly once across SIGKILLs during landing, schema evolution, the write policies, and
// `skipprd query` while a sync lands.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "e2e/process.hpp"
#include "e2e/skipprd_runner.hpp"
#include "support/scale.hpp"

namespace skippr::testing {
namespace {

using ::testing::HasSubstr;

// A pipeline `events` reading input/ and landing in the DuckDB database dir/out.duckdb.
std::string DatabaseConfig(const TempDir& dir, const std::string& sink_settings = "",
                           const std::string& source_settings = "") {
  return fmt::format(R"(data_sources:
  source:
    File:
      path: input{}
data_sinks:
  duck:
    Duckdb:
      database: {}/out.duckdb{}
pipelines:
  events:
    data_source: data_sources.source
    data_sink: data_sinks.duck
)",
                     source_settings, dir.path(), sink_settings);
}

std::string Database(const TempDir& dir) { return dir.path() + "/out.duckdb"; }

std::vector<std::string> DuckdbRow(const TempDir& dir, const std::string& sql) {
  const std::vector<std::vector<std::string>> rows = ReadDuckdbFile(Database(dir), sql);
  return rows.empty() ? std::vector<std::string>{} : rows[0];
}

size_t SegmentFiles(const TempDir& dir) {
  size_t count = 0;
  const std::filesystem::path wal = dir.path() + "/data/events/wal";
  if (!std::filesystem::exists(wal)) return 0;
  for (const auto& entry : std::filesystem::directory_iterator(wal)) {
    count += entry.path().extension() == ".seg";
  }
  return count;
}

TEST(DuckdbSinkCrash, RandomKillsAndEveryLandingCrashPointLandEveryRowExactlyOnce) {
  TempDir dir;
  dir.Write("skippr.yml", DatabaseConfig(dir, "\n      target_file_size_bytes: 1048576"
                                              "\n      commit_interval_seconds: 1"));
  int64_t expected_rows = Scaled(400000, 10);
  int64_t expected_checksum = WriteInput(dir, 10, expected_rows);
  const std::map<std::string, std::string> small_buffers = {{"BUFFER_THRESHOLD_BYTES", "2000000"}};
  std::mt19937 random(20261205);
  std::uniform_int_distribution<int> delay_ms(50, 900);
  int kills = 0;
  for (int round = 0; round < 20; ++round) {
    SyncAndKillAfter(dir, "events", std::chrono::milliseconds(delay_ms(random)), small_buffers);
    ++kills;
  }
  for (const std::string point :
       {"duckdb_sink.before_commit", "duckdb_sink.after_commit", "landing.before_store_commit",
        "landing.after_store_commit"}) {
    const int64_t extra_rows = Scaled(20000, 2);
    expected_checksum +=
        WriteInput(dir, 2, extra_rows, expected_rows, std::string("extra-") + point);
    expected_rows += extra_rows;
    auto env = small_buffers;
    env["SKIPPR_CRASH_POINT"] = point;
    ProcessResult crashed = Skipprd(dir, {"sync", "-p", "events", "--once"}, env);
    EXPECT_EQ(crashed.exit_code, 128 + SIGKILL) << "crash point " << point << " was not reached\n"
                                               << crashed.err;
    ++kills;
  }
  ProcessResult final_run = Skipprd(dir, {"sync", "-p", "events", "--once"});
  ASSERT_EQ(final_run.exit_code, 0) << final_run.err;
  EXPECT_GE(kills, 20);
  EXPECT_EQ(SegmentFiles(dir), 0u) << "the WAL is reclaimed";
  const std::vector<std::string> expected = {std::to_string(expected_rows),
                                             std::to_string(expected_rows),
                                             std::to_string(expected_checksum)};
  // DuckDB itself, over the file users open.
  EXPECT_EQ(DuckdbRow(dir, "SELECT count(*), count(DISTINCT id), sum(id * 31 + amount) FROM "
                           "db.main.events"),
            expected)
      << "after " << kills << " kills";
  EXPECT_EQ(QueryRow(dir, "SELECT count(*), count(DISTINCT id), sum(id * 31 + amount) FROM "
                          "events.events"),
            expected);
  // One row per landing; the rows of the landings add up to the table's.
  EXPECT_EQ(DuckdbRow(dir, "SELECT sum(rows) = (SELECT count(*) FROM db.main.events), "
                           "count(*) = count(DISTINCT landing_id) FROM db.main._skippr_landings"),
            (std::vector<std::string>{"true", "true"}));
}

TEST(DuckdbSinkQuery, CountDuringSyncWithLandingIsMonotoneAndEndsEqual) {
  TempDir dir;
  dir.Write("skippr.yml", DatabaseConfig(dir, "\n      target_file_size_bytes: 1048576"
                                              "\n      commit_interval_seconds: 1"));
  const int64_t rows = Scaled(800000, 8);
  WriteInput(dir, 8, rows);
  RecordProperty("queries_during_sync",
                 ExpectCountDuringSyncIsMonotone(dir, "events", "events", rows,
                                                 {{"BUFFER_THRESHOLD_BYTES", "2000000"}}));
  EXPECT_EQ(SegmentFiles(dir), 0u);
}

TEST(DuckdbSinkSchema, ANewColumnAndAWidenedIntegerLandAsAlterTable) {
  TempDir dir;
  dir.Write("skippr.yml", DatabaseConfig(dir));
  dir.Write("input/1.jsonl", "{\"id\": 1, \"n\": 5}\n{\"id\": 2, \"n\": 6}\n");
  ASSERT_EQ(Skipprd(dir, {"sync", "-p", "events", "--once"}).exit_code, 0);
  EXPECT_EQ(DuckdbRow(dir, "SELECT data_type FROM duckdb_columns() WHERE database_name = 'db' "
                           "AND table_name = 'events' AND column_name = 'n'"),
            std::vector<std::string>{"INTEGER"});
  dir.Write("input/2.jsonl",
            "{\"id\": 3, \"n\": 9000000000, \"note\": \"wide\"}\n{\"id\": 4, \"n\": 7}\n");
  ProcessResult second = Skipprd(dir, {"sync", "-p", "events", "--once"});
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_EQ(DuckdbRow(dir, "SELECT data_type FROM duckdb_columns() WHERE database_name = 'db' "
                           "AND table_name = 'events' AND column_name = 'n'"),
            std::vector<std::string>{"BIGINT"});
  EXPECT_EQ(DuckdbRow(dir, "SELECT count(*), sum(n), string_agg(note, ',') FROM db.main.events"),
            (std::vector<std::string>{"4", "9000000018", "wide"}));
  EXPECT_EQ(QueryRow(dir, "SELECT count(*), sum(n), string_agg(note, ',') FROM events.events"),
            (std::vector<std::string>{"4", "9000000018", "wide"}));
}

TEST(DuckdbSinkPolicy, ReplaceTableKeepsOnlyTheLatestPassRows) {
  TempDir dir;
  dir.Write("skippr.yml", DatabaseConfig(dir, "\n      write_policy: replace_table"));
  dir.Write("input/1.jsonl", "{\"id\": 1}\n{\"id\": 2}\n");
  ASSERT_EQ(Skipprd(dir, {"sync", "-p", "events", "--once"}).exit_code, 0);
  dir.Write("input/2.jsonl", "{\"id\": 3}\n");
  ASSERT_EQ(Skipprd(dir, {"sync", "-p", "events", "--once"}).exit_code, 0);
  EXPECT_EQ(DuckdbRow(dir, "SELECT count(*), sum(id) FROM db.main.events"),
            (std::vector<std::string>{"1", "3"}));
}

TEST(DuckdbSinkPolicy, MergeByKeyKeepsTheLatestRowPerPrimaryKey) {
  TempDir dir;
  dir.Write("skippr.yml", DatabaseConfig(dir, "\n      write_policy: merge_by_key",
                                         "\n      primary_key: [id]"));
  dir.Write("input/1.jsonl", "{\"id\": 1, \"v\": \"a\"}\n{\"id\": 2, \"v\": \"b\"}\n"
                             "{\"id\": 1, \"v\": \"c\"}\n");
  ASSERT_EQ(Skipprd(dir, {"sync", "-p", "events", "--once"}).exit_code, 0);
  dir.Write("input/2.jsonl", "{\"id\": 2, \"v\": \"d\"}\n{\"id\": 3, \"v\": \"e\"}\n");
  // Killed after its transaction committed, before the store recorded it: the replay is a no-op.
  EXPECT_EQ(Skipprd(dir, {"sync", "-p", "events", "--once"},
                    {{"SKIPPR_CRASH_POINT", "duckdb_sink.after_commit"}})
                .exit_code,
            128 + SIGKILL);
  ProcessResult replayed = Skipprd(dir, {"sync", "-p", "events", "--once"});
  ASSERT_EQ(replayed.exit_code, 0) << replayed.err;
  const std::string rows = "SELECT string_agg(id || '=' || v, ',' ORDER BY id) FROM ";
  EXPECT_EQ(DuckdbRow(dir, rows + "db.main.events"), std::vector<std::string>{"1=c,2=d,3=e"});
  EXPECT_EQ(QueryRow(dir, rows + "events.events"), std::vector<std::string>{"1=c,2=d,3=e"});
  EXPECT_EQ(DuckdbRow(dir, "SELECT count(*) FROM db.main._skippr_landings"),
            std::vector<std::string>{"2"});
}

TEST(DuckdbSinkConfig, ADatabaseAndAWarehouseTogetherOrNeitherAreRefused) {
  TempDir dir;
  dir.Write("input/1.jsonl", "{\"id\": 1}\n");
  dir.Write("skippr.yml", DatabaseConfig(dir, "\n      warehouse: file:///tmp/w"));
  ProcessResult both = Skipprd(dir, {"sync", "-p", "events", "--once"});
  EXPECT_NE(both.exit_code, 0);
  EXPECT_THAT(both.err, HasSubstr("Duckdb needs either 'database: /path/file.duckdb'"));
  dir.Write("skippr.yml", "data_sources:\n  source:\n    File: {path: input}\n"
                          "data_sinks:\n  duck:\n    Duckdb: {database: relative.duckdb}\n"
                          "pipelines:\n  events:\n    data_source: data_sources.source\n"
                          "    data_sink: data_sinks.duck\n");
  ProcessResult relative = Skipprd(dir, {"sync", "-p", "events", "--once"});
  EXPECT_NE(relative.exit_code, 0);
  EXPECT_THAT(relative.err, HasSubstr("must be an absolute path to a DuckDB file"));
}

// The seeds' DuckDB form: Iceberg tables at {warehouse}/{table_namespace}/{table} with
// version-hint.text, read by an Iceberg reader we did not write.
TEST(DuckdbSinkWarehouse, TheIcebergFormLandsForAnIndependentReader) {
  TempDir dir;
  dir.Write("skippr.yml", fmt::format(R"(data_sources:
  source:
    File: {{path: input}}
data_sinks:
  duck:
    Duckdb: {{warehouse: "file://{}/warehouse", table_namespace: analytics}}
pipelines:
  events:
    data_source: data_sources.source
    data_sink: data_sinks.duck
)",
                                      dir.path()));
  const int64_t checksum = WriteInput(dir, 2, 5000);
  ProcessResult sync = Skipprd(dir, {"sync", "-p", "events", "--once"});
  ASSERT_EQ(sync.exit_code, 0) << sync.err;
  EXPECT_TRUE(std::filesystem::exists(dir.path() +
                                      "/warehouse/analytics/events/metadata/version-hint.text"));
  const nlohmann::json table = ReadWithIcebird(dir.path() + "/warehouse", "analytics", "events");
  EXPECT_EQ(table["rows"].size(), 5000u);
  EXPECT_EQ(QueryRow(dir, "SELECT count(*), sum(id * 31 + amount) FROM events.events"),
            (std::vector<std::string>{"5000", std::to_string(checksum)}));
}

// The warehouse form under kills: every row once for the independent reader and for query.
TEST(DuckdbSinkWarehouse, RandomKillsLandEveryRowExactlyOnce) {
  TempDir dir;
  dir.Write("skippr.yml", fmt::format(R"(data_sources:
  source:
    File: {{path: input}}
data_sinks:
  duck:
    Duckdb:
      warehouse: "file://{}/warehouse"
      table_namespace: analytics
      target_file_size_bytes: 1048576
      commit_interval_seconds: 1
pipelines:
  events:
    data_source: data_sources.source
    data_sink: data_sinks.duck
)",
                                      dir.path()));
  const int64_t rows = Scaled(200000, 10);
  const int64_t checksum = WriteInput(dir, 10, rows);
  std::mt19937 random(20261209);
  std::uniform_int_distribution<int> delay_ms(50, 600);
  for (int kill = 0; kill < 20; ++kill) {
    SyncAndKillAfter(dir, "events", std::chrono::milliseconds(delay_ms(random)),
                     {{"BUFFER_THRESHOLD_BYTES", "2000000"}});
  }
  ProcessResult final_run = Skipprd(dir, {"sync", "-p", "events", "--once"});
  ASSERT_EQ(final_run.exit_code, 0) << final_run.err;
  EXPECT_EQ(SegmentFiles(dir), 0u);
  const nlohmann::json table = ReadWithIcebird(dir.path() + "/warehouse", "analytics", "events");
  EXPECT_EQ(table["rows"].size(), static_cast<size_t>(rows));
  EXPECT_EQ(QueryRow(dir, "SELECT count(*), count(DISTINCT id), sum(id * 31 + amount) FROM "
                          "events.events"),
            (std::vector<std::string>{std::to_string(rows), std::to_string(rows),
                                      std::to_string(checksum)}));
}

}  // namespace
}  // namespace skippr::testing
