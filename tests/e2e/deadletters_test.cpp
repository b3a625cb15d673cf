// Deadletters are data (docs/formats/deadletters.md): committed to the WAL with their batch,
// queried as <pipeline>.deadletters, counted by `status`, landed exactly once in a SkipprLake
// deadletter sink — across kills at every landing crash point — or discarded without one, and
// never written by discover. Through the real binary.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "e2e/process.hpp"
#include "e2e/skipprd_runner.hpp"

namespace skippr::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using Rows = std::vector<std::vector<std::string>>;

std::string DataWarehouse(const TempDir& dir) { return dir.path() + "/warehouse"; }
std::string DeadletterWarehouse(const TempDir& dir) { return dir.path() + "/dead"; }

// `events` reading input/ (File), with a SkipprLake data sink and/or a SkipprLake deadletter sink
// (table_namespace `errors`) as asked, plus `extra` appended to the pipeline's entry.
std::string Config(const TempDir& dir, bool has_data_sink, bool has_deadletter_sink,
                   const std::string& extra = "") {
  std::string yaml = "data_sources:\n  files:\n    File: {path: input}\n";
  if (has_data_sink) {
    yaml += fmt::format("data_sinks:\n  lake:\n    SkipprLake:\n      warehouse: file://{}\n"
                        "      table_namespace: landed\n      target_file_size_bytes: 1048576\n",
                        DataWarehouse(dir));
  }
  if (has_deadletter_sink) {
    yaml += fmt::format("deadletter_sinks:\n  dl:\n    SkipprLake:\n      warehouse: file://{}\n"
                        "      table_namespace: errors\n",
                        DeadletterWarehouse(dir));
  }
  yaml += "pipelines:\n  events:\n    data_source: data_sources.files\n";
  if (has_data_sink) yaml += "    data_sink: data_sinks.lake\n";
  if (has_deadletter_sink) yaml += "    deadletter_sink: deadletter_sinks.dl\n";
  return yaml + extra;
}

// Four good records (ids 1, 3, 4, 6) and four bad ones, one of each kind of failure.
void WriteMixedInput(const TempDir& dir) {
  dir.Write("input/a.jsonl", "{\"id\":1,\"name\":\"a\"}\n{\"id\":2,\n{\"id\":3,\"name\":\"c\"}\n[1,2]\n");
  dir.Write("input/b.csv", "id,name\n4,d\n5,e,extra\n6,f\n");
  dir.Write("input/c.jsonl", "{\"id\":7,\"name\":\"\xff\"}\n");
}

// What each bad record of WriteMixedInput becomes: file, line, record number, code, record.
const Rows kMixedDeadletters = {
    {"a.jsonl", "2", "2", "invalid_json", "{\"id\":2,"},
    {"a.jsonl", "4", "4", "not_an_object", "[1,2]"},
    {"b.csv", "3", "2", "csv_field_count", "5,e,extra"},
    {"c.jsonl", "1", "1", "invalid_utf8", "{\"id\":7,\"name\":\"\xef\xbf\xbd\"}"},
};
const char* const kDeadletterColumns =
    "regexp_extract(source_uri, '[^/]*$'), line, offset_pos, failure_code, record";

nlohmann::json StatusOf(const TempDir& dir) {
  ProcessResult status = Skipprd(dir, {"status", "-p", "events", "--output", "json"});
  EXPECT_EQ(status.exit_code, 0) << status.err;
  if (status.exit_code != 0) return nlohmann::json::object();
  return nlohmann::json::parse(status.out)["pipelines"][0];
}

// committed, live, landed, discarded as `status --output json` counts them.
std::vector<int64_t> DeadletterCounts(const TempDir& dir) {
  const nlohmann::json counts = StatusOf(dir)["deadletters"];
  return {counts["committed"].get<int64_t>(), counts["live"].get<int64_t>(),
          counts["landed"].get<int64_t>(), counts["discarded"].get<int64_t>()};
}

size_t SegmentFiles(const TempDir& dir) {
  const fs::path wal = dir.path() + "/data/events/wal";
  if (!fs::exists(wal)) return 0;
  size_t count = 0;
  for (const auto& entry : fs::directory_iterator(wal)) count += entry.path().extension() == ".seg";
  return count;
}

ProcessResult Sync(const TempDir& dir, std::map<std::string, std::string> env = {}) {
  return Skipprd(dir, {"sync", "-p", "events", "--once", "--output", "text"}, std::move(env));
}

TEST(DeadlettersWal, EachBadRecordIsARowNamingItsPlaceAndReason) {
  TempDir dir;
  dir.Write("skippr.yml", Config(dir, false, false));
  WriteMixedInput(dir);
  ProcessResult sync = Sync(dir);
  ASSERT_EQ(sync.exit_code, 0) << sync.err;
  EXPECT_THAT(sync.out, HasSubstr("Deadletters: 4 (kept in the WAL; query events.deadletters)"));

  EXPECT_EQ(QueryRows(dir, fmt::format("SELECT {} FROM events.deadletters ORDER BY 1, 2",
                                       kDeadletterColumns)),
            kMixedDeadletters);
  EXPECT_EQ(QueryRow(dir, "SELECT count(*), count(DISTINCT id), min(length(id)), "
                          "count(*) FILTER (WHERE namespace = 'events'), "
                          "count(*) FILTER (WHERE record_truncated), count(event_time), "
                          "count(*) FILTER (WHERE processed_time > TIMESTAMPTZ '2020-01-01') "
                          "FROM events.deadletters"),
            (std::vector<std::string>{"4", "4", "32", "4", "0", "0", "4"}));
  EXPECT_EQ(QueryRows(dir, "SELECT regexp_extract(source_uri, '[^/]*$'), line, "
                           "starts_with(error, 'invalid JSON'), byte_offset FROM "
                           "events.deadletters WHERE failure_code = 'invalid_json'"),
            (Rows{{"a.jsonl", "2", "true", "20"}}))
      << "the reason names the failure, the byte offset where the line starts";
  EXPECT_EQ(QueryRow(dir, "SELECT string_agg(id::VARCHAR, ',' ORDER BY id) FROM events.events"),
            (std::vector<std::string>{"1,3,4,6"}));
  EXPECT_EQ(DeadletterCounts(dir), (std::vector<int64_t>{4, 4, 0, 0}));
  EXPECT_EQ(StatusOf(dir)["live_rows"], 4) << "live rows count data rows only";

  // A second pass reads nothing new: no deadletter twice.
  ASSERT_EQ(Sync(dir).exit_code, 0);
  EXPECT_EQ(QueryRow(dir, "SELECT count(*), count(DISTINCT id) FROM events.deadletters"),
            (std::vector<std::string>{"4", "4"}));
  ProcessResult text = Skipprd(dir, {"status", "-p", "events"});
  EXPECT_THAT(text.out, HasSubstr("deadletters: 4 committed: 4 in the WAL (query "
                                  "events.deadletters)"));
  // `df` over every namespace means the data; the deadletter table is there when named.
  ProcessResult df = Skipprd(dir, {"df", "--pipeline", "events"});
  ASSERT_EQ(df.exit_code, 0) << df.err;
  EXPECT_EQ(nlohmann::json::parse(df.out)["rows"].size(), 4u);
}

TEST(DeadlettersWal, APipelineWithoutBadRecordsHasAnEmptyDeadletterTable) {
  TempDir dir;
  dir.Write("skippr.yml", Config(dir, false, false));
  WriteInput(dir, 2, 1000);
  ASSERT_EQ(Sync(dir).exit_code, 0);
  EXPECT_EQ(QueryRow(dir, "SELECT count(*) FROM events.deadletters"),
            std::vector<std::string>{"0"});
  EXPECT_EQ(QueryRow(dir, "SELECT count(*) FROM events.events"), std::vector<std::string>{"1000"});
}

TEST(DeadlettersDiscover, DiscoverWritesNoDeadletterAnywhere) {
  TempDir dir;
  dir.Write("skippr.yml", Config(dir, true, true));
  WriteMixedInput(dir);
  ProcessResult discover = Skipprd(dir, {"discover", "-p", "events", "--output", "json"});
  ASSERT_EQ(discover.exit_code, 0) << discover.err;
  EXPECT_THAT(discover.out, HasSubstr("\"deadletters\":4"));
  EXPECT_EQ(SegmentFiles(dir), 0u);
  EXPECT_FALSE(fs::exists(DeadletterWarehouse(dir))) << "nothing reached the deadletter sink";
  EXPECT_FALSE(fs::exists(DataWarehouse(dir)));
  EXPECT_EQ(QueryRow(dir, "SELECT count(*) FROM events.deadletters"), std::vector<std::string>{"0"});
  EXPECT_EQ(DeadletterCounts(dir), (std::vector<int64_t>{0, 0, 0, 0}));
}

TEST(DeadlettersLake, TheDeadletterSinkReceivesEachDeadletterOnce) {
  TempDir dir;
  dir.Write("skippr.yml", Config(dir, true, true));
  WriteMixedInput(dir);
  ProcessResult sync = Sync(dir);
  ASSERT_EQ(sync.exit_code, 0) << sync.err;
  EXPECT_THAT(sync.out, HasSubstr("Deadletters landed: 4 in deadletter_sinks.dl"));
  EXPECT_EQ(SegmentFiles(dir), 0u) << "the segments holding data and deadletters are reclaimed";
  EXPECT_EQ(QueryRows(dir, fmt::format("SELECT {} FROM events.deadletters ORDER BY 1, 2",
                                       kDeadletterColumns)),
            kMixedDeadletters)
      << "read back from the deadletter sink's table";
  EXPECT_EQ(DeadletterCounts(dir), (std::vector<int64_t>{4, 0, 4, 0}));

  const nlohmann::json table = ReadWithIcebird(DeadletterWarehouse(dir), "errors", "deadletters");
  std::vector<std::string> columns;
  for (const nlohmann::json& field : table["schema"]) {
    columns.push_back(fmt::format("{}:{}", field["id"].get<int>(), field["name"].get<std::string>()));
  }
  EXPECT_EQ(columns, (std::vector<std::string>{
                         "1:id", "2:namespace", "3:record", "4:record_truncated", "5:error",
                         "6:failure_code", "7:event_time", "8:processed_time", "9:source_uri",
                         "10:offset_key", "11:offset_pos", "12:line", "13:byte_offset"}));
  std::set<std::string> codes;
  for (const nlohmann::json& row : table["rows"]) codes.insert(row["failure_code"].get<std::string>());
  EXPECT_EQ(table["rows"].size(), 4u);
  EXPECT_EQ(codes, (std::set<std::string>{"csv_field_count", "invalid_json", "invalid_utf8",
                                          "not_an_object"}));

  // Nothing new: a pass lands nothing in either table.
  ASSERT_EQ(Sync(dir).exit_code, 0);
  EXPECT_EQ(ReadWithIcebird(DeadletterWarehouse(dir), "errors", "deadletters")["rows"].size(), 4u);
  EXPECT_EQ(QueryRow(dir, "SELECT count(*) FROM events.events"), std::vector<std::string>{"4"});
}

TEST(DeadlettersLake, WithoutADeadletterSinkTheyAreDiscardedOnceTheirBatchLands) {
  TempDir dir;
  dir.Write("skippr.yml", Config(dir, true, false));
  WriteMixedInput(dir);
  ProcessResult sync = Sync(dir);
  ASSERT_EQ(sync.exit_code, 0) << sync.err;
  EXPECT_THAT(sync.out,
              HasSubstr("Discarded 4 deadletter records because no deadletter sink is configured"));
  EXPECT_EQ(SegmentFiles(dir), 0u);
  EXPECT_EQ(QueryRow(dir, "SELECT count(*) FROM events.deadletters"), std::vector<std::string>{"0"});
  EXPECT_EQ(DeadletterCounts(dir), (std::vector<int64_t>{4, 0, 0, 4}));
  EXPECT_EQ(QueryRow(dir, "SELECT count(*) FROM events.events"), std::vector<std::string>{"4"});
}

// `rows` good records and `bad` bad ones (alternating invalid JSON and a list) in input/<name>.
void WriteBatch(const TempDir& dir, const std::string& name, int first_id, int rows, int bad) {
  std::string text;
  for (int i = 0; i < rows; ++i) text += fmt::format("{{\"id\":{},\"name\":\"r\"}}\n", first_id + i);
  for (int i = 0; i < bad; ++i) text += i % 2 == 0 ? "{\"id\":\n" : "[1]\n";
  dir.Write("input/" + name + ".jsonl", text);
}

// Landing ids of the snapshots in a table's newest metadata: each landing committed once.
void ExpectEachLandingOnce(const std::string& table_directory) {
  nlohmann::json newest;
  for (const auto& entry : fs::directory_iterator(table_directory + "/metadata")) {
    if (!entry.path().string().ends_with(".metadata.json")) continue;
    std::ifstream file(entry.path());
    const nlohmann::json metadata = nlohmann::json::parse(file);
    if (newest.is_null() || metadata["snapshots"].size() > newest["snapshots"].size()) {
      newest = metadata;
    }
  }
  std::set<std::string> landing_ids;
  for (const nlohmann::json& snapshot : newest["snapshots"]) {
    landing_ids.insert(snapshot["summary"]["skippr.landing-id"].get<std::string>());
  }
  EXPECT_EQ(landing_ids.size(), newest["snapshots"].size()) << table_directory;
}

const std::vector<std::string> kLandingCrashPoints = {
    "lake.after_data_file", "lake.before_catalog_commit", "lake.after_catalog_commit",
    "landing.before_store_commit", "landing.after_store_commit"};

// Each pass reads a new file of good and bad records and is killed at one landing crash point
// (the deadletters namespace sorts before `events`, so its landing is the one killed); the run
// after lands everything: each deadletter once in the sink, each row once in the data table.
TEST(DeadlettersCrash, EveryLandingCrashPointLandsEachDeadletterExactlyOnce) {
  TempDir dir;
  dir.Write("skippr.yml", Config(dir, true, true));
  int rows = 0;
  int bad = 0;
  for (const std::string& point : kLandingCrashPoints) {
    WriteBatch(dir, "crash-" + point, rows, 300, 7);
    rows += 300;
    bad += 7;
    ProcessResult crashed = Sync(dir, {{"SKIPPR_CRASH_POINT", point}});
    EXPECT_EQ(crashed.exit_code, 128 + SIGKILL) << "crash point " << point << " was not reached\n"
                                               << crashed.err;
    // Before the replay each deadletter committed so far is visible once: in the sink or in the
    // WAL, never both (the kill may come before this pass committed its file).
    const std::vector<std::string> seen =
        QueryRow(dir, "SELECT count(*), count(DISTINCT id) FROM events.deadletters");
    ASSERT_EQ(seen.size(), 2u);
    EXPECT_EQ(seen[0], seen[1]) << "after a kill at " << point;
    EXPECT_LE(std::stoi(seen[0]), bad) << "after a kill at " << point;
  }
  ProcessResult final_run = Sync(dir);
  ASSERT_EQ(final_run.exit_code, 0) << final_run.err;
  EXPECT_EQ(SegmentFiles(dir), 0u);
  EXPECT_EQ(QueryRow(dir, "SELECT count(*), count(DISTINCT id), count(*) FILTER (WHERE "
                          "failure_code = 'invalid_json') FROM events.deadletters"),
            (std::vector<std::string>{std::to_string(bad), std::to_string(bad), "20"}));
  EXPECT_EQ(QueryRow(dir, "SELECT count(*), count(DISTINCT id) FROM events.events"),
            (std::vector<std::string>{std::to_string(rows), std::to_string(rows)}));
  EXPECT_EQ(DeadletterCounts(dir), (std::vector<int64_t>{bad, 0, bad, 0}));
  EXPECT_EQ(ReadWithIcebird(DeadletterWarehouse(dir), "errors", "deadletters")["rows"].size(),
            static_cast<size_t>(bad));
  ExpectEachLandingOnce(DeadletterWarehouse(dir) + "/errors/deadletters");
  ExpectEachLandingOnce(DataWarehouse(dir) + "/landed/events");
}

// Discarding is recorded like a landing: a kill on either side of its store commit discards each
// deadletter once.
TEST(DeadlettersCrash, DiscardingIsCountedOnceAcrossKills) {
  TempDir dir;
  dir.Write("skippr.yml", Config(dir, true, false));
  int bad = 0;
  for (const std::string point : {"landing.before_store_commit", "landing.after_store_commit"}) {
    WriteBatch(dir, std::string("discard-") + point, bad * 10, 50, 5);
    bad += 5;
    EXPECT_EQ(Sync(dir, {{"SKIPPR_CRASH_POINT", point}}).exit_code, 128 + SIGKILL) << point;
  }
  ASSERT_EQ(Sync(dir).exit_code, 0);
  EXPECT_EQ(DeadletterCounts(dir), (std::vector<int64_t>{bad, 0, 0, bad}));
  EXPECT_EQ(SegmentFiles(dir), 0u);
}

TEST(DeadlettersAggregates, AggregatesNeverCountDeadletters) {
  TempDir dir;
  // An aggregate keyed by a column only the deadletter table has: it must stay empty.
  dir.Write("skippr.yml", Config(dir, false, false,
                                 "    transform:\n      aggregates:\n        - id: by_code\n"
                                 "          key_fields: [failure_code]\n"
                                 "          measures: {n: {count: \"*\"}}\n"));
  WriteMixedInput(dir);
  ASSERT_EQ(Sync(dir).exit_code, 0);
  ProcessResult show = Skipprd(dir, {"aggregates", "show", "-p", "events", "--output", "json"});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_EQ(nlohmann::json::parse(show.out).size(), 0u) << show.out;
  ProcessResult verify = Skipprd(dir, {"aggregates", "verify", "-p", "events"});
  EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;
}

// ----- configuration ---------------------------------------------------------------------------

TEST(DeadlettersConfig, ADeadletterSinkThatIsTheDataSinkIsRefusedWithItsPlace) {
  TempDir dir;
  WriteMixedInput(dir);
  std::string yaml = Config(dir, true, false) + "    deadletter_sink: data_sinks.lake\n";
  dir.Write("skippr.yml", yaml);
  ProcessResult sync = Sync(dir);
  EXPECT_EQ(sync.exit_code, 1);
  EXPECT_THAT(sync.err, HasSubstr("skippr.yml:14:22: pipelines.events.deadletter_sink: "
                                  "'data_sinks.lake' is a data sink; deadletters need a sink of "
                                  "their own"));

  dir.Write("skippr.yml", Config(dir, true, false) + "    deadletter_sink: deadletter_sinks.gone\n");
  sync = Sync(dir);
  EXPECT_EQ(sync.exit_code, 1);
  EXPECT_THAT(sync.err, HasSubstr("skippr.yml:14:22: pipelines.events.deadletter_sink: references "
                                  "'deadletter_sinks.gone', but 'gone' is not defined"));

  // Another entry that points at the data sink's tables is the primary sink reused.
  yaml = Config(dir, true, true);
  const std::string dead = "file://" + DeadletterWarehouse(dir) + "\n      table_namespace: errors";
  yaml.replace(yaml.find(dead), dead.size(), "file://" + DataWarehouse(dir) + "\n      table_namespace: landed");
  dir.Write("skippr.yml", yaml);
  sync = Sync(dir);
  EXPECT_EQ(sync.exit_code, 1);
  EXPECT_THAT(sync.err, HasSubstr("deadletter_sinks.dl: uses warehouse 'file://" +
                                  DataWarehouse(dir) + "' and table_namespace 'landed' like "
                                  "data_sinks.lake"));
  EXPECT_EQ(SegmentFiles(dir), 0u) << "refused before anything was read";
}

}  // namespace
}  // namespace skippr::testing
