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
#include <map>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "e2e/process.hpp"
#include "e2e/skipprd_runner.hpp"
#include "e2e/wal_reader.hpp"
#include "support/gzip.hpp"
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
    cents += static_cast<int64_t>(row.Find("amount")->decimal_unscaled());
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
  for (int round = 0; round < ScaledRounds(50, 10); ++round) {
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

// ----- files that change between and during passes (docs/config.md, "When files change") --------

std::string EventLine(int64_t id) {
  return fmt::format("{{\"id\":{},\"name\":\"rider-{}\",\"amount\":{}}}\n", id, id % 977,
                     (id * 7919) % 100000);
}
int64_t EventChecksum(int64_t first_id, int64_t last_id) {
  int64_t checksum = 0;
  for (int64_t id = first_id; id <= last_id; ++id) checksum += id * 31 + (id * 7919) % 100000;
  return checksum;
}
std::string EventLines(int64_t first_id, int64_t last_id) {
  std::string text;
  for (int64_t id = first_id; id <= last_id; ++id) text += EventLine(id);
  return text;
}

void AppendTo(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::app) << bytes;
}

// The WAL holds ids first_id..last_id (EventLine rows), each exactly once.
void ExpectWalHoldsEachOnce(const TempDir& dir, int64_t first_id, int64_t last_id) {
  const WalCheck check = CheckWal(dir, "events");
  EXPECT_EQ(check.rows, last_id - first_id + 1);
  EXPECT_EQ(check.unique_ids, static_cast<size_t>(last_id - first_id + 1));
  EXPECT_EQ(check.checksum, EventChecksum(first_id, last_id));
}

nlohmann::json StatusOf(const TempDir& dir, const std::string& pipeline) {
  ProcessResult status = Skipprd(dir, {"status", "-p", pipeline, "--output", "json"});
  EXPECT_EQ(status.exit_code, 0) << status.err;
  return nlohmann::json::parse(status.out)["pipelines"][0];
}

TEST(SyncFileChanges, AppendingOneLineToAFileAlreadyReadAddsExactlyOneRow) {
  TempDir dir;
  dir.Write("skippr.yml", kFilesConfig);
  const std::string path = dir.Write("input/events.jsonl", EventLines(1, 1000));
  ASSERT_EQ(Skipprd(dir, {"sync", "-p", "events", "--once"}).exit_code, 0);
  AppendTo(path, EventLine(1001));
  ProcessResult again = Skipprd(dir, {"sync", "-p", "events", "--once", "--output", "json"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_THAT(again.out, HasSubstr("\"total_rows\":1,"));
  ExpectWalHoldsEachOnce(dir, 1, 1001);
  EXPECT_EQ(StatusOf(dir, "events")["source_new_versions"], 0);
}

// A writer appends while `sync --once` runs: that pass reads the file up to its size at open, the
// next pass the rest; no line is read twice or cut in two.
TEST(SyncFileChanges, AFileGrowingDuringASyncLandsEveryLineExactlyOnce) {
  TempDir dir;
  dir.Write("skippr.yml", kFilesConfig);
  constexpr int64_t kLines = 150000;
  const std::string path = dir.Write("input/events.jsonl", EventLines(1, 1000));
  // One write(2) per line, as a logging writer does (dash's printf builtin writes each whole).
  const std::string script = fmt::format(
      "i=1001; while [ $i -le {} ]; do printf '{{\"id\":%d,\"name\":\"rider-%d\",\"amount\":%d}}\\n' "
      "$i $((i % 977)) $((i * 7919 % 100000)) >> {}; i=$((i + 1)); done",
      kLines, path);
  RunningProcess writer = StartProcess("/bin/sh", {"-c", script}, OptionsFor(dir));
  const auto size_now = [&] { return std::filesystem::file_size(path); };
  const uint64_t initial_bytes = EventLines(1, 1000).size();
  while (size_now() < initial_bytes + (64 << 10) && waitpid(writer.pid(), nullptr, WNOHANG) == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // until the writer is under way
  }
  ProcessResult during = Skipprd(dir, {"sync", "-p", "events", "--once", "--output", "text"},
                                 {{"BUFFER_THRESHOLD_BYTES", "65536"}});
  ASSERT_EQ(during.exit_code, 0) << during.err;
  const int64_t rows_during = CheckWal(dir, "events").rows;
  ASSERT_EQ(writer.Wait().exit_code, 0);
  ProcessResult after = Skipprd(dir, {"sync", "-p", "events", "--once", "--output", "text"});
  ASSERT_EQ(after.exit_code, 0) << after.err;
  ExpectWalHoldsEachOnce(dir, 1, kLines);
  EXPECT_EQ(StatusOf(dir, "events")["source_new_versions"], 0);
  RecordProperty("rows_while_growing", std::to_string(rows_during));
}

TEST(SyncFileChanges, AGzipMemberAppendedAfterTheFileWasReadLandsExactlyOnce) {
  TempDir dir;
  dir.Write("skippr.yml", kFilesConfig);
  const std::string path = dir.Write("input/events.jsonl.gz", GzipMember(EventLines(1, 5000)));
  ASSERT_EQ(Skipprd(dir, {"sync", "-p", "events", "--once"}).exit_code, 0);
  AppendTo(path, GzipMember(EventLines(5001, 5100)));
  ProcessResult again = Skipprd(dir, {"sync", "-p", "events", "--once", "--output", "json"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_THAT(again.out, HasSubstr("\"total_rows\":100,"));
  ExpectWalHoldsEachOnce(dir, 1, 5100);
}

// Rewritten in place with the same size: a new version, read from its start, counted in status;
// both versions' rows are in the WAL exactly once each, never interleaved.
TEST(SyncFileChanges, ARewriteInPlaceWithTheSameSizeIsANewVersionCountedInStatus) {
  TempDir dir;
  dir.Write("skippr.yml", kFilesConfig);
  // Fixed-width lines (4-digit ids, 5-digit amounts): the two versions have the same size.
  const auto version_lines = [](int64_t first_id) {
    std::string text;
    for (int64_t id = first_id; id < first_id + 1000; ++id) {
      text += fmt::format("{{\"id\":{},\"name\":\"r\",\"amount\":{}}}\n", id, 10000 + id);
    }
    return text;
  };
  const std::string path = dir.Write("input/events.jsonl", version_lines(1000));
  dir.Write("input/other.jsonl", EventLines(5000, 5009));
  ASSERT_EQ(Skipprd(dir, {"sync", "-p", "events", "--once"}).exit_code, 0);
  const std::string rewritten = version_lines(2000);
  ASSERT_EQ(rewritten.size(), std::filesystem::file_size(path));
  {
    std::fstream file(path, std::ios::binary | std::ios::in | std::ios::out);  // in place
    file.write(rewritten.data(), static_cast<std::streamsize>(rewritten.size()));
  }
  ASSERT_EQ(Skipprd(dir, {"sync", "-p", "events", "--once"}).exit_code, 0);
  std::map<int64_t, int> seen;
  ReadWalRows(dir.path() + "/data/events",
              [&](const std::string&, const Value& row) { ++seen[row.Find("id")->as_int()]; });
  EXPECT_EQ(seen.size(), 2010u);
  for (const auto& [id, times] : seen) EXPECT_EQ(times, 1) << "id " << id;
  EXPECT_EQ(seen.count(1000) + seen.count(1999) + seen.count(2000) + seen.count(2999), 4u);
  const nlohmann::json status = StatusOf(dir, "events");
  EXPECT_EQ(status["source_new_versions"], 1);
  const nlohmann::json& position = status["source_positions"][path];
  EXPECT_EQ(position["version"], 2);
  EXPECT_EQ(position["new_versions"], 1);
  EXPECT_EQ(position["records_consumed"], 1000);
  EXPECT_THAT(position["version_reason"].get<std::string>(), HasSubstr("rewritten in place"));
  EXPECT_EQ(status["source_positions"][dir.path() + "/input/other.jsonl"]["version"], 1);
  ProcessResult text = Skipprd(dir, {"status", "-p", "events"});
  EXPECT_THAT(text.out, HasSubstr("changed files: 1 new version(s)"));
  EXPECT_THAT(text.out, HasSubstr(path + ": version 2 ("));
}

TEST(SyncFileChanges, ATruncatedFileIsANewVersion) {
  TempDir dir;
  dir.Write("skippr.yml", kFilesConfig);
  const std::string path = dir.Write("input/events.jsonl", EventLines(1, 100));
  ASSERT_EQ(Skipprd(dir, {"sync", "-p", "events", "--once"}).exit_code, 0);
  std::filesystem::resize_file(path, EventLines(1, 40).size());
  ASSERT_EQ(Skipprd(dir, {"sync", "-p", "events", "--once"}).exit_code, 0);
  const WalCheck check = CheckWal(dir, "events");
  EXPECT_EQ(check.rows, 140);  // both versions, each once
  EXPECT_EQ(check.unique_ids, 100u);
  EXPECT_EQ(check.checksum, EventChecksum(1, 100) + EventChecksum(1, 40));
  const nlohmann::json position = StatusOf(dir, "events")["source_positions"][path];
  EXPECT_EQ(position["version"], 2);
  EXPECT_THAT(position["version_reason"].get<std::string>(), HasSubstr("fewer than the"));
}

// ----- lost or replaced state: the WAL is never deleted from under a store that does not know it --

// Each segment file's name → its size and a hash of its bytes.
std::map<std::string, std::pair<size_t, size_t>> SegmentFiles(const TempDir& dir,
                                                              const std::string& pipeline) {
  std::map<std::string, std::pair<size_t, size_t>> files;
  for (const auto& entry :
       std::filesystem::directory_iterator(dir.path() + "/data/" + pipeline + "/wal")) {
    std::ifstream in(entry.path(), std::ios::binary);
    const std::string bytes{std::istreambuf_iterator<char>(in), {}};
    files[entry.path().filename().string()] = {bytes.size(), std::hash<std::string>{}(bytes)};
  }
  return files;
}

// Without a sink the WAL is the dataset: losing the store must not make recovery delete it.
TEST(SyncRecovery, ALostStoreRefusesToStartAndKeepsEverySegment) {
  TempDir dir;
  dir.Write("skippr.yml", kFilesConfig);
  WriteInput(dir, 4, 40000);
  ASSERT_EQ(Skipprd(dir, {"sync", "-p", "events", "--once"}, {{"BUFFER_THRESHOLD_BYTES", "200000"}})
                .exit_code,
            0);
  const auto before = SegmentFiles(dir, "events");
  ASSERT_GT(before.size(), 1u);
  std::filesystem::remove_all(dir.path() + "/data/events/store");
  ProcessResult refused = Skipprd(dir, {"sync", "-p", "events", "--once"});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_THAT(refused.err, HasSubstr("WAL recovery stopped and deleted nothing"));
  EXPECT_THAT(refused.err, HasSubstr(before.begin()->first));
  EXPECT_THAT(refused.err, HasSubstr("has no record of any WAL commit"));
  EXPECT_THAT(refused.err, HasSubstr("restore the store from the same backup as the WAL"));
  EXPECT_EQ(SegmentFiles(dir, "events"), before);
  // And again: the refusal holds on the next run too.
  EXPECT_EQ(Skipprd(dir, {"sync", "-p", "events", "--once"}).exit_code, 1);
  EXPECT_EQ(SegmentFiles(dir, "events"), before);
}

// A store restored from an older backup than the WAL: the segments committed since have ids it
// never handed out.
TEST(SyncRecovery, AStoreBackupOlderThanTheWalRefusesToStart) {
  TempDir dir;
  dir.Write("skippr.yml", kFilesConfig);
  const std::map<std::string, std::string> small = {{"BUFFER_THRESHOLD_BYTES", "200000"}};
  WriteInput(dir, 2, 20000);
  ASSERT_EQ(Skipprd(dir, {"sync", "-p", "events", "--once"}, small).exit_code, 0);
  std::filesystem::copy(dir.path() + "/data/events/store", dir.path() + "/store-backup");
  WriteInput(dir, 2, 20000, 20000, "more");
  ASSERT_EQ(Skipprd(dir, {"sync", "-p", "events", "--once"}, small).exit_code, 0);
  const auto before = SegmentFiles(dir, "events");
  std::filesystem::remove_all(dir.path() + "/data/events/store");
  std::filesystem::copy(dir.path() + "/store-backup", dir.path() + "/data/events/store");
  ProcessResult refused = Skipprd(dir, {"sync", "-p", "events", "--once"});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_THAT(refused.err, HasSubstr("WAL recovery stopped and deleted nothing"));
  EXPECT_THAT(refused.err, HasSubstr("the next id this store hands out: the store is older"));
  EXPECT_THAT(refused.err, HasSubstr("from different points in time"));
  EXPECT_EQ(SegmentFiles(dir, "events"), before);
}

// Moving DATA_DIR elsewhere changes nothing: nothing in the store names its own path.
TEST(SyncRecovery, ADataDirMovedToAnotherPathCarriesOn) {
  TempDir dir;
  dir.Write("skippr.yml", kFilesConfig);
  const std::string path = dir.Write("input/events.jsonl", EventLines(1, 500));
  ASSERT_EQ(Skipprd(dir, {"sync", "-p", "events", "--once"}).exit_code, 0);
  std::filesystem::rename(dir.path() + "/data", dir.path() + "/moved");
  AppendTo(path, EventLine(501));
  ProcessOptions options = OptionsFor(dir);
  options.set_env["DATA_DIR"] = dir.path() + "/moved";
  ProcessResult moved = RunProcess(SKIPPRD_BINARY, {"sync", "-p", "events", "--once"}, options);
  ASSERT_EQ(moved.exit_code, 0) << moved.err;
  WalCheck check;
  std::set<int64_t> ids;
  check.rows = ReadWalRows(dir.path() + "/moved/events", [&](const std::string&, const Value& row) {
                 ids.insert(row.Find("id")->as_int());
               }).rows;
  EXPECT_EQ(check.rows, 501);
  EXPECT_EQ(ids.size(), 501u);
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
// ----- disk backpressure ----------------------------------------------------------------------

constexpr const char* kFileSyncConfig = R"(data_sources:
  files: {File: {path: input}}
pipelines:
  events:
    data_source: data_sources.files
)";

// A filesystem smaller than the free-space floor (here: a floor no disk has) used to pause
// `sync --once` forever while `status` promised "until 80 % used". It can never resume, so the
// pass fails at once, naming the filesystem, the floor and the settings that move it.
TEST(SyncDisk, AFloorTheFilesystemCanNeverReachFailsAtOnce) {
  TempDir dir;
  dir.Write("skippr.yml", kFileSyncConfig);
  WriteInput(dir, 1, 100);
  const std::map<std::string, std::string> env = {{"SKIPPR_DISK_MIN_FREE_BYTES", "1000000000000000000"}};
  ProcessResult sync = Skipprd(dir, {"sync", "-p", "events", "--once"}, env);
  EXPECT_EQ(sync.exit_code, 1);
  EXPECT_THAT(sync.err, HasSubstr("in all, less than the 1000.0 PB free-space floor, so reading "
                                  "could never resume; lower the floor with "
                                  "pipelines.events.disk_min_free_bytes"));
  EXPECT_THAT(sync.err, HasSubstr("the filesystem holding DATA_DIR " + dir.path() + "/data"));
  ProcessResult doctor = Skipprd(dir, {"doctor"}, env);
  EXPECT_EQ(doctor.exit_code, 1);
  EXPECT_THAT(doctor.out, HasSubstr("the filesystem is smaller than the 1000.0 PB free-space floor"));

  // The pipeline's own setting wins over the environment.
  dir.Write("skippr.yml", std::string(kFileSyncConfig) + "    disk_min_free_bytes: 0\n");
  sync = Skipprd(dir, {"sync", "-p", "events", "--once"}, env);
  ASSERT_EQ(sync.exit_code, 0) << sync.err;
  EXPECT_EQ(QueryRow(dir, "SELECT count(*) FROM events.events"), std::vector<std::string>{"100"});
}

// Pressure that does not clear: `sync --once` waits visibly (the text output, the log file and
// `status` name the rule that holds) for disk_wait_seconds, then fails with exit 1 naming the
// filesystem and the threshold; nothing was read, and once the pressure clears every row lands.
TEST(SyncDisk, PressureThatDoesNotClearEndsTheOncePassAfterABoundedWait) {
  TempDir dir;
  dir.Write("skippr.yml", kFileSyncConfig);
  const int64_t checksum = WriteInput(dir, 2, 1000);
  // Any real filesystem is at least 0.001 % used.
  const std::map<std::string, std::string> env = {{"SKIPPR_DISK_PAUSE_AT_PERCENT", "0.001"},
                                                  {"SKIPPR_DISK_RESUME_AT_PERCENT", "0"},
                                                  {"SKIPPR_DISK_WAIT_SECONDS", "2"}};
  ProcessResult sync = Skipprd(dir, {"sync", "-p", "events", "--once", "--output", "text"}, env);
  EXPECT_EQ(sync.exit_code, 1);
  EXPECT_THAT(sync.out, HasSubstr("[paused] Reading: disk pressure under DATA_DIR: "));
  EXPECT_THAT(sync.out, HasSubstr("is at or above the 0.001 % pause threshold (reading resumes at "
                                  "0 % used)"));
  EXPECT_THAT(sync.err, HasSubstr("sync events: reading stayed paused for 2 s on the filesystem "
                                  "holding DATA_DIR " + dir.path() + "/data"));
  EXPECT_THAT(sync.err, HasSubstr("or wait longer with disk_wait_seconds / SKIPPR_DISK_WAIT_SECONDS "
                                  "(now 2 s)"));
  std::string log;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path() + "/data/logs")) {
    std::ifstream file(entry.path());
    log += std::string(std::istreambuf_iterator<char>(file), {});
  }
  EXPECT_THAT(log, HasSubstr("sync events: reading paused under "));
  EXPECT_THAT(log, HasSubstr("waiting up to 2 s"));

  ProcessResult status = Skipprd(dir, {"status", "-p", "events"}, env);
  ASSERT_EQ(status.exit_code, 0) << status.err;
  EXPECT_THAT(status.out, HasSubstr("UNDER PRESSURE: sync pauses reading: "));
  EXPECT_THAT(status.out, HasSubstr("at or above the 0.001 % pause threshold"));
  EXPECT_THAT(status.out, HasSubstr("last run: FAILED"));

  ProcessResult cleared = Skipprd(dir, {"sync", "-p", "events", "--once"});
  ASSERT_EQ(cleared.exit_code, 0) << cleared.err;
  EXPECT_EQ(QueryRow(dir, "SELECT count(*), count(DISTINCT id), sum(id * 31 + amount) FROM "
                          "events.events"),
            (std::vector<std::string>{"1000", "1000", std::to_string(checksum)}));
}

TEST(SyncDisk, BadThresholdSettingsAreClearErrors) {
  TempDir dir;
  dir.Write("skippr.yml", kFileSyncConfig);
  WriteInput(dir, 1, 10);
  ProcessResult sync = Skipprd(dir, {"sync", "-p", "events", "--once"},
                               {{"SKIPPR_DISK_PAUSE_AT_PERCENT", "ninety"}});
  EXPECT_EQ(sync.exit_code, 1);
  EXPECT_THAT(sync.err, HasSubstr("environment variable SKIPPR_DISK_PAUSE_AT_PERCENT='ninety' is "
                                  "not a number from 0.001 to 100; fix or unset it"));
  sync = Skipprd(dir, {"sync", "-p", "events", "--once"}, {{"SKIPPR_DISK_RESUME_AT_PERCENT", "95"}});
  EXPECT_EQ(sync.exit_code, 1);
  EXPECT_THAT(sync.err, HasSubstr("the disk resume threshold (95 %) must be below the pause "
                                  "threshold (90 %)"));
  dir.Write("skippr.yml", std::string(kFileSyncConfig) +
                              "    disk_pause_at_percent: 70\n    disk_resume_at_percent: 75\n");
  sync = Skipprd(dir, {"sync", "-p", "events", "--once"});
  EXPECT_EQ(sync.exit_code, 1);
  EXPECT_THAT(sync.err, HasSubstr("pipelines.events.disk_resume_at_percent: must be below "
                                  "disk_pause_at_percent (70)"));
}

// `query` streams: exporting a WAL-only table and grouping it take memory bounded by the work, not
// by the rows — four times the rows, about the same peak (measured in the release build; the
// sanitizers' allocators keep freed memory). Every row arrives, in WAL order.
TEST(SyncQuery, ExportAndGroupByMemoryDoesNotGrowWithTheRows) {
  TempDir dir;
  const int64_t small_rows = Scaled(150000, 10);
  const int64_t big_rows = 4 * small_rows;
  dir.Write("skippr.yml", fmt::format(R"(data_sources:
  small: {{Sample: {{rows: {}, seed: 7}}}}
  big: {{Sample: {{rows: {}, seed: 7}}}}
pipelines:
  small: {{data_source: data_sources.small}}
  big: {{data_source: data_sources.big}}
)", small_rows, big_rows));
  for (const std::string pipeline : {"small", "big"}) {
    ProcessResult synced = Skipprd(dir, {"sync", "-p", pipeline, "--once"});
    ASSERT_EQ(synced.exit_code, 0) << synced.err;
  }
  const auto export_csv = [&](const std::string& pipeline, int64_t rows) {
    ProcessOptions options = OptionsFor(dir);
    options.stdout_file = dir.Sub(pipeline + ".csv");
    ProcessResult exported = RunProcess(
        SKIPPRD_BINARY,
        {"query", "--output", "csv", "--sql", fmt::format("SELECT * FROM {0}.{0}", pipeline)},
        options);
    EXPECT_EQ(exported.exit_code, 0) << exported.err;
    std::ifstream csv(options.stdout_file);
    std::string line;
    int64_t lines = 0;
    int64_t last_ride_id = -1;
    bool in_order = true;
    std::getline(csv, line);  // header
    for (; std::getline(csv, line); ++lines) {
      const int64_t ride_id = std::stoll(line.substr(0, line.find(',')));
      in_order = in_order && ride_id > last_ride_id;
      last_ride_id = ride_id;
    }
    EXPECT_EQ(lines, rows) << pipeline;
    EXPECT_TRUE(in_order) << "a plain SELECT keeps WAL order";
    return exported.peak_rss_bytes;
  };
  const int64_t small_export = export_csv("small", small_rows);
  const int64_t big_export = export_csv("big", big_rows);
  const auto group_by = [&](const std::string& pipeline) {
    ProcessResult grouped = Skipprd(
        dir, {"query", "--plain", "--sql",
              fmt::format("SELECT rider_type, count(*) FROM {0}.{0} GROUP BY 1 ORDER BY 1", pipeline)});
    EXPECT_EQ(grouped.exit_code, 0) << grouped.err;
    EXPECT_THAT(grouped.out, HasSubstr("member"));
    return grouped.peak_rss_bytes;
  };
  const int64_t small_group = group_by("small");
  const int64_t big_group = group_by("big");
  if (kSanitizedBuild) return;
  constexpr int64_t kMiB = 1 << 20;
  EXPECT_LT(big_export, small_export * 3 / 2 + 64 * kMiB)
      << "export peak RSS: " << small_export / kMiB << " MiB at " << small_rows << " rows, "
      << big_export / kMiB << " MiB at " << big_rows;
  EXPECT_LT(big_group, small_group * 3 / 2 + 64 * kMiB)
      << "GROUP BY peak RSS: " << small_group / kMiB << " MiB, then " << big_group / kMiB << " MiB";
  EXPECT_LT(big_export, 512 * kMiB);
}

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

// A file name that is not UTF-8 made the commit throw (nlohmann's dump of the positions in the
// segment header) and every sync abort; status showed it too.
TEST(SyncHostile, AFileNameThatIsNotUtf8IsReadAndShownWithAReplacementCharacter) {
  TempDir dir;
  dir.Write("skippr.yml", "data_sources:\n  files: {File: {path: input}}\npipelines:\n  p: "
                          "{data_source: data_sources.files}\n");
  dir.Write("input/bad\xff.jsonl", "{\"a\":1}\n{\"a\":2}\n");
  ProcessResult sync = Skipprd(dir, {"sync", "-p", "p", "--once", "--output", "text"});
  ASSERT_EQ(sync.exit_code, 0) << sync.err;
  EXPECT_EQ(QueryRow(dir, "SELECT count(*), sum(a) FROM p.p"), (std::vector<std::string>{"2", "3"}));
  ProcessResult status = Skipprd(dir, {"status", "-p", "p", "--output", "json"});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  const nlohmann::json document = nlohmann::json::parse(status.out);
  EXPECT_THAT(document["pipelines"][0]["source_positions"].dump(),
              HasSubstr("bad\xef\xbf\xbd.jsonl"));
  ASSERT_EQ(Skipprd(dir, {"sync", "-p", "p", "--once"}).exit_code, 0);
  EXPECT_EQ(QueryRow(dir, "SELECT count(*) FROM p.p"), (std::vector<std::string>{"2"}))
      << "the file's position was kept under its real name: nothing is read twice";
}

}  // namespace
}  // namespace skippr::testing
