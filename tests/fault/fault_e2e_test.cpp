// The real skipprd binary under disk faults, injected one level below everything it links: an
// LD_PRELOAD interposer (tests/fault/fault_preload.c) fails fsync/fdatasync with EIO, fails writes
// with ENOSPC after N bytes or shortens them, for the files it is pointed at — LMDB's data.mdb,
// the Parquet files DuckDB writes, WAL segments, the lake's metadata files, SQLite's catalog — and
// turns each SIGKILL crash point into a power cut (every write not yet fsynced undone, every name
// its directory did not sync reverted). After each fault the run exits 1 naming the file; after
// each power cut a clean run lands every source row exactly once (count, distinct ids, checksum)
// and reclaims the WAL.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "e2e/process.hpp"
#include "e2e/skipprd_runner.hpp"

namespace skippr::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// A pipeline `events` reading input/ and landing in a SkipprLake warehouse in `dir`, in small
// segments and small landings so that one run commits and lands several times.
std::string LakeConfig(const TempDir& dir) {
  return fmt::format(R"(data_sources:
  source: {{File: {{path: input}}}}
data_sinks:
  lake:
    SkipprLake:
      warehouse: file://{}/warehouse
      table_namespace: landed
      target_file_size_bytes: 1048576
      commit_interval_seconds: 1
pipelines:
  events:
    data_source: data_sources.source
    data_sink: data_sinks.lake
)",
                     dir.path());
}

const std::map<std::string, std::string> kSmallBuffers = {{"BUFFER_THRESHOLD_BYTES", "400000"}};

// The interposer's settings for a run: power cuts over DATA_DIR and the warehouse, and optionally
// one fault.
std::map<std::string, std::string> Interposed(const TempDir& dir, const std::string& kind = "",
                                              const std::string& path = "",
                                              uint64_t after = 0) {
  fs::create_directories(dir.Sub("trash"));
  std::map<std::string, std::string> env = kSmallBuffers;
  env["LD_PRELOAD"] = SKIPPR_FAULT_PRELOAD;
  env["SKIPPR_FAULT_ROOTS"] = dir.Sub("data") + ":" + dir.Sub("warehouse");
  env["SKIPPR_FAULT_TRASH"] = dir.Sub("trash");
  env["SKIPPR_FAULT_REPORT"] = dir.Sub("fault-report");
  if (!kind.empty()) {
    env["SKIPPR_FAULT_KIND"] = kind;
    env["SKIPPR_FAULT_PATH"] = path;
    env["SKIPPR_FAULT_AFTER"] = std::to_string(after);
  }
  return env;
}

// Lines the interposer wrote since the last call ("power_cut ...", "fsync_eio <path>", ...).
std::vector<std::string> TakeReport(const TempDir& dir) {
  std::vector<std::string> lines;
  std::ifstream report(dir.Sub("fault-report"));
  for (std::string line; std::getline(report, line);) lines.push_back(line);
  fs::remove(dir.Sub("fault-report"));
  return lines;
}

size_t SegmentFiles(const TempDir& dir) {
  size_t count = 0;
  const fs::path wal = dir.Sub("data/events/wal");
  if (!fs::exists(wal)) return 0;
  for (const auto& entry : fs::directory_iterator(wal)) count += entry.path().extension() == ".seg";
  return count;
}

ProcessResult Sync(const TempDir& dir, std::map<std::string, std::string> env = kSmallBuffers) {
  return Skipprd(dir, {"sync", "-p", "events", "--once"}, std::move(env));
}

// The source so far and what a clean run must leave: every row landed once, the WAL reclaimed.
class Source {
 public:
  explicit Source(const TempDir& dir) : dir_(dir) {}

  void AddInput(const std::string& prefix, int64_t rows = 20000) {
    checksum_ += WriteInput(dir_, 2, rows, rows_, prefix);
    rows_ += rows;
  }

  void ExpectACleanRunLandsEveryRowOnce(const std::string& context) {
    ProcessResult clean = Sync(dir_);
    ASSERT_EQ(clean.exit_code, 0) << context << ": the clean run failed\n" << clean.err;
    EXPECT_EQ(QueryRow(dir_, "SELECT count(*), count(DISTINCT id), sum(id * 31 + amount) FROM "
                             "events.events"),
              (std::vector<std::string>{std::to_string(rows_), std::to_string(rows_),
                                        std::to_string(checksum_)}))
        << context;
    EXPECT_EQ(SegmentFiles(dir_), 0u) << context << ": the WAL is not reclaimed";
  }

 private:
  const TempDir& dir_;
  int64_t rows_ = 0;
  int64_t checksum_ = 0;
};

// One run killed at `point` by a power cut, then a clean run.
void PowerCutAt(const TempDir& dir, Source& source, const std::string& point) {
  SCOPED_TRACE("power cut at " + point);
  source.AddInput("extra-" + point);
  std::map<std::string, std::string> env = Interposed(dir);
  env["SKIPPR_CRASH_POINT"] = point;
  ProcessResult crashed = Sync(dir, env);
  EXPECT_EQ(crashed.exit_code, 128 + SIGKILL) << point << " was not reached\n" << crashed.err;
  EXPECT_THAT(TakeReport(dir), ::testing::Contains(::testing::StartsWith("power_cut ")))
      << "the interposer did not cut the power";
  source.ExpectACleanRunLandsEveryRowOnce("power cut at " + point);
}

// ----- the seam itself -----------------------------------------------------------------------------

// A sanitizer runtime linked into the binary defines the libc functions it intercepts (fsync,
// write, ...) and reaches libc's through dlsym(RTLD_NEXT), which finds the interposer first: the
// binary then imports none of them, yet the interposer still sees every call (the power-cut and
// fault tests below pass in those builds too).
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SKIPPR_SANITIZER_INTERCEPTS_LIBC 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SKIPPR_SANITIZER_INTERCEPTS_LIBC 1
#endif
#ifdef SKIPPR_SANITIZER_INTERCEPTS_LIBC
constexpr bool kBinaryImportsLibcDirectly = false;
#else
constexpr bool kBinaryImportsLibcDirectly = true;
#endif

// Everything the interposer replaces is called through the dynamic linker: skipprd's own code
// (libc is linked dynamically) and the libraries doing their own I/O.
TEST(FaultInterposer, TheBinaryAndItsStorageLibrariesCallLibcDynamically) {
  ProcessResult libraries = RunProcess("/usr/bin/ldd", {SKIPPRD_BINARY});
  ASSERT_EQ(libraries.exit_code, 0) << libraries.err;
  const auto path_of = [&](const std::string& name) {
    std::smatch match;
    const std::regex line(name + R"([^ ]* => (\S+))");
    return std::regex_search(libraries.out, match, line) ? match[1].str() : std::string();
  };
  const std::map<std::string, std::vector<std::string>> imports = {
      {SKIPPRD_BINARY,
       {"open", "pwrite", "ftruncate", "fdatasync", "fsync", "rename", "renameat2", "link",
        "unlink", "mkdir", "kill"}},
      {path_of("liblmdb"), {"open", "pwrite", "writev", "ftruncate", "fdatasync"}},
      {path_of("libduckdb"), {"open", "pwrite", "write", "ftruncate", "fsync", "rename", "unlink"}},
      {path_of("libsqlite3"), {"open64", "pwrite64", "ftruncate64", "fdatasync", "unlink"}},
      {path_of("libc.so"), {}},
  };
  for (const auto& [binary, symbols] : imports) {
    ASSERT_FALSE(binary.empty()) << "a library is not dynamically linked:\n" << libraries.out;
    if (symbols.empty()) continue;
    if (binary == SKIPPRD_BINARY && !kBinaryImportsLibcDirectly) continue;
    ProcessResult undefined = RunProcess("/usr/bin/nm", {"-D", "--undefined-only", binary});
    ASSERT_EQ(undefined.exit_code, 0) << undefined.err;
    for (const std::string& symbol : symbols) {
      EXPECT_TRUE(std::regex_search(undefined.out, std::regex(" U " + symbol + "(@|\\n)")))
          << binary << " does not import " << symbol << " from libc";
    }
  }
}

// ----- power cuts at every crash point ---------------------------------------------------------

// Nothing of the pipeline exists before the first run: DATA_DIR, the pipeline's directories, the
// store, the WAL and the warehouse are all new, so what that run committed or landed survives a
// power cut only if each new directory's entry was synced too.
TEST(FaultPowerCut, WhatTheVeryFirstRunCommittedOrLandedSurvivesAPowerCut) {
  for (const std::string point : {"wal.after_store_commit", "landing.after_store_commit"}) {
    SCOPED_TRACE(point);
    TempDir dir;
    dir.Write("skippr.yml", LakeConfig(dir));
    Source source(dir);
    source.AddInput("first", 100000);
    std::map<std::string, std::string> env = Interposed(dir);
    env["SKIPPR_CRASH_POINT"] = point;
    ASSERT_EQ(Sync(dir, env).exit_code, 128 + SIGKILL) << point << " was not reached";
    EXPECT_THAT(TakeReport(dir), ::testing::Contains(::testing::StartsWith("power_cut ")));
    // Committed (and, at the second point, landed and recorded) before the cut: still there.
    const std::vector<std::string> count = QueryRow(dir, "SELECT count(*) FROM events.events");
    ASSERT_EQ(count.size(), 1u) << "the pipeline's state did not survive the power cut";
    EXPECT_GT(std::stoll(count[0]), 0);
    source.ExpectACleanRunLandsEveryRowOnce("after the first run's power cut at " + point);
  }
}

// A pipeline with 100,000 rows landed, then a power cut at each point, each with new input.
void PowerCutAtEach(const std::vector<std::string>& points) {
  TempDir dir;
  dir.Write("skippr.yml", LakeConfig(dir));
  Source source(dir);
  source.AddInput("base", 100000);
  source.ExpectACleanRunLandsEveryRowOnce("before the crashes");
  for (const std::string& point : points) PowerCutAt(dir, source, point);
}

TEST(FaultPowerCut, AtEveryCommitCrashPointNothingIsLostOrDuplicated) {
  PowerCutAtEach({"sync.after_source_read", "sync.before_commit", "wal.after_directory_fsync",
                  "wal.after_segment_write", "wal.after_fdatasync", "wal.before_store_commit",
                  "wal.after_store_commit", "sync.after_commit"});
}

TEST(FaultPowerCut, AtEveryRecoveryCrashPointTheOrphanGoesAndNothingIsLost) {
  TempDir dir;
  dir.Write("skippr.yml", LakeConfig(dir));
  Source source(dir);
  for (const std::string point :
       {"recovery.before_orphan_delete", "recovery.after_orphan_delete", "recovery.after_scan"}) {
    // An orphan first: a segment written and synced, never committed (its power cut keeps it).
    source.AddInput("orphan-" + point);
    std::map<std::string, std::string> env = Interposed(dir);
    env["SKIPPR_CRASH_POINT"] = "wal.after_fdatasync";
    EXPECT_EQ(Sync(dir, env).exit_code, 128 + SIGKILL);
    TakeReport(dir);
    PowerCutAt(dir, source, point);
  }
}

TEST(FaultPowerCut, AtEveryLandingCrashPointNothingIsLostOrLandedTwice) {
  PowerCutAtEach({"landing.after_stream_written", "lake.after_data_file",
                  "iceberg.after_metadata_file",
                  "lake.before_catalog_commit", "iceberg.after_catalog_swap",
                  "lake.after_catalog_commit", "landing.before_store_commit",
                  "landing.after_store_commit"});
}

// ----- faults ----------------------------------------------------------------------------------

struct BinaryFault {
  std::string name;
  std::string kind;
  std::string path_pattern;
  uint64_t after;
  std::vector<std::string> message_parts;  // in stderr; {dir} is the test directory
};

std::string Fill(std::string text, const TempDir& dir) {
  for (size_t at; (at = text.find("{dir}")) != std::string::npos;) text.replace(at, 5, dir.path());
  return text;
}

void ExpectTheRunFailsNamingTheFile(const BinaryFault& fault) {
  SCOPED_TRACE(fault.name);
  TempDir dir;
  dir.Write("skippr.yml", LakeConfig(dir));
  Source source(dir);
  source.AddInput("base", 100000);
  ProcessResult failed = Sync(dir, Interposed(dir, fault.kind, fault.path_pattern, fault.after));
  EXPECT_EQ(failed.exit_code, 1) << failed.err;
  for (const std::string& part : fault.message_parts) {
    EXPECT_THAT(failed.err, HasSubstr(Fill(part, dir)));
  }
  EXPECT_THAT(TakeReport(dir), ::testing::Contains(::testing::StartsWith(fault.kind + " ")))
      << "the fault was not injected";
  source.ExpectACleanRunLandsEveryRowOnce(fault.name);
}

TEST(FaultBinary, FsyncEioOnTheStoreDuringACommit) {
  ExpectTheRunFailsNamingTheFile(
      {"fsync EIO on store/data.mdb", "fsync_eio", "*/events/store/data.mdb", 6,
       {"{dir}/data/events/store/data.mdb", "Input/output error", "nothing of this transaction "
        "was committed", "check the disk, then run again"}});
}

TEST(FaultBinary, EnospcInTheMiddleOfAParquetFileDuringALanding) {
  ExpectTheRunFailsNamingTheFile(
      {"ENOSPC in the middle of a Parquet file", "enospc", "*/landed/events/data/*.parquet",
       100000,
       {"writing Parquet file '{dir}/warehouse/landed/events/data/", ".parquet' of the landing failed",
        "No space left on device", "the landing is replayed"}});
}

TEST(FaultBinary, EnospcInTheMiddleOfAWalSegment) {
  ExpectTheRunFailsNamingTheFile(
      // Two 4 KiB blocks and a part: a segment of the input's 100,000 rows is about 28 KiB.
      {"ENOSPC in the middle of a WAL segment", "enospc", "*/events/wal/*.seg", 2 * 4096 + 100,
       {"disk full writing WAL segment '{dir}/data/events/wal/",
        "free space under DATA_DIR and run again"}});
}

TEST(FaultBinary, FdatasyncEioOnAWalSegment) {
  ExpectTheRunFailsNamingTheFile(
      {"fdatasync EIO on a WAL segment", "fsync_eio", "*/events/wal/*.seg", 2,
       {"fdatasync of '{dir}/data/events/wal/", "Input/output error",
        "nothing was committed and the run stops"}});
}

TEST(FaultBinary, FsyncEioOnTheLakeMetadataFile) {
  // v1 (the table's creation) syncs; the first landing's v2 does not.
  ExpectTheRunFailsNamingTheFile(
      {"fdatasync EIO on the lake's metadata file", "fsync_eio",
       "*/landed/events/metadata/.v*.metadata.json.*.tmp", 1,
       {"writing Iceberg metadata file {dir}/warehouse/landed/events/metadata/v2.metadata.json "
        "failed: fdatasync of '{dir}/warehouse/landed/events/metadata/.v2.metadata.json.",
        "Input/output error", "the next run retries the commit"}});
}

TEST(FaultBinary, FsyncEioOnTheSqliteCatalog) {
  ExpectTheRunFailsNamingTheFile({"fsync EIO on the SQLite catalog's WAL", "fsync_eio",
                                  "*/warehouse/skippr_catalog.db-wal", 2,
                                  {"{dir}/warehouse/skippr_catalog.db"}});
}

TEST(FaultBinary, ShortWritesToSegmentsAndParquetFilesLoseNothing) {
  TempDir dir;
  dir.Write("skippr.yml", LakeConfig(dir));
  Source source(dir);
  source.AddInput("base", 100000);
  // Not data.mdb: LMDB takes a short write for an I/O error and fails the commit.
  ProcessResult run =
      Sync(dir, Interposed(dir, "short_writes", "*/events/wal/*.seg:*/landed/events/data/*.parquet"));
  EXPECT_EQ(run.exit_code, 0) << run.err;
  source.ExpectACleanRunLandsEveryRowOnce("short writes");
}

}  // namespace
}  // namespace skippr::testing
