// bench/bench_common: what the benchmarks of bench/ share: failing with a message, the work
// directory, the rides-like input generator (a pure function of the row index), the JSON-lines and
// CSV writers, timing, an in-process DuckDB and its table-function SQL, child processes (the
// Launcher, peak RSS) and the real `skipprd sync --once` on a File source.
#pragma once

#include <duckdb.h>
#include <fmt/format.h>
#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace skippr::bench {

constexpr uint64_t kDefaultRows = 2'000'000;  // rows of the input files (--rows)
constexpr uint64_t kQuickRows = 200'000;      // with --quick
constexpr int kTimedRuns = 3;  // after one warm-up run
constexpr double kBytesPerMb = 1e6;
constexpr double kKibPerMib = 1024.0;

// ---------------------------------------------------------------------------------------------
// Failing, and the work directory

// Names the benchmark in Fail()'s messages ("bench/wal"); call first in main.
void SetBenchName(std::string name);

// Prints "bench/...: message" to stderr, removes the work directory (if MakeWorkDir made one) and
// exits 1.
[[noreturn]] void Fail(const std::string& message);

// A fresh directory in `parent_dir` ("bench_wal.XXXXXX"), removed by Fail() too; the benchmark
// removes it at the end.
std::filesystem::path MakeWorkDir(const std::filesystem::path& parent_dir);

// The skipprd of the build tree this benchmark was built in (build/src/skipprd).
std::filesystem::path DefaultSkipprd();

// A benchmark's command line, walked flag by flag; the caller handles each:
//   BenchArgs args(argc, argv, "--rows N, --quick, --dir PATH");
//   while (args.Next()) {
//     if (args.Is("--rows")) rows = args.Unsigned(); else if ... else args.FailUnknown();
//   }
class BenchArgs {
 public:
  BenchArgs(int argc, char** argv, std::string usage)
      : argc_(argc), argv_(argv), usage_(std::move(usage)) {}
  bool Next() {
    if (++index_ >= argc_) return false;
    arg_ = argv_[index_];
    return true;
  }
  bool Is(std::string_view flag) const { return arg_ == flag; }
  std::string Value();  // the word after the flag (Fail when there is none)
  uint64_t Unsigned() { return std::stoull(Value()); }
  double Number() { return std::stod(Value()); }
  [[noreturn]] void FailUnknown() const;

 private:
  int argc_;
  char** argv_;
  std::string usage_;
  int index_ = 0;
  std::string_view arg_;
};

// The --skipprd and --dir flags' defaults (this build's binary, $TMPDIR), and a check that the
// binary is there.
void ResolveSkipprdAndDir(std::filesystem::path& skipprd, std::filesystem::path& parent_dir);

std::string FileText(const std::filesystem::path& path);

// The middle value (of an odd count; the upper middle of an even one).
double Median(std::vector<double> values);

// ---------------------------------------------------------------------------------------------
// Input files: rides-like records, a pure function of the row index.

uint64_t SplitMix64(uint64_t x);

// Draws successive small random numbers from one row's seed.
class RowRandom {
 public:
  explicit RowRandom(uint64_t index) : state_(SplitMix64(index)) {}
  uint64_t Below(uint64_t bound) {
    state_ = SplitMix64(state_);
    return state_ % bound;
  }

 private:
  uint64_t state_;
};

struct Ride {
  int64_t ride_id = 0;       // long: 16 digits (not read as an epoch timestamp)
  int32_t station_id = 0;    // int
  int32_t amount_cents = 0;  // written as a double with two decimals
  std::string rider_name;
  std::string comment;  // 1–12 words; some with a comma, a few with a quoted word
  bool is_member = false;
  std::string started_at;       // "2024-01-15T10:30:00Z"
  std::string ride_date;        // "2024-01-15"
  std::string_view bike_model;  // the nested object (JSON lines only)
  int32_t bike_battery_pct = 0;
  bool bike_is_electric = false;
};

std::string MakeComment(RowRandom& random);
Ride MakeRide(uint64_t index);

std::string JsonEscaped(std::string_view text);
std::string CsvField(std::string_view text);

void AppendJsonLine(fmt::memory_buffer& out, const Ride& ride);

constexpr std::string_view kCsvHeader =
    "ride_id,station_id,amount,rider_name,comment,is_member,started_at,ride_date\n";

void AppendCsvLine(fmt::memory_buffer& out, const Ride& ride);

constexpr size_t kFlushBytes = 4 << 20;

// Writes `buffer` to `file` and empties it.
void Flush(std::ofstream& file, fmt::memory_buffer& buffer);

struct InputFiles {
  std::filesystem::path jsonl;
  std::filesystem::path csv;
};

// Writes dir/rides.jsonl and dir/rides.csv in one pass over the rows, flushing every few MB;
// nullopt when a file could not be written.
std::optional<InputFiles> WriteInputFiles(const std::filesystem::path& dir, uint64_t rows);

// ---------------------------------------------------------------------------------------------
// Timing

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start);

// One warm-up run, then the best of kTimedRuns. `run` returns the seconds of its timed part.
double BestOfSeconds(const std::function<double()>& run);

// "  1.23 s    4.56 M rows/s    789 MB/s"
std::string Throughput(double seconds, uint64_t rows, uint64_t bytes);

// ---------------------------------------------------------------------------------------------
// DuckDB table functions over the input files

std::string SqlQuoted(const std::string& text);
std::string ReadJsonSql(const std::filesystem::path& file);
std::string ReadCsvSql(const std::filesystem::path& file);
std::string ReadParquetSql(const std::filesystem::path& file);

// ---------------------------------------------------------------------------------------------
// DuckDB: an in-memory database; any failed statement is a Fail().

class DuckDb {
 public:
  // `threads`: SET threads; nullopt keeps DuckDB's default (one per core).
  explicit DuckDb(std::optional<int> threads);
  ~DuckDb();
  DuckDb(const DuckDb&) = delete;
  DuckDb& operator=(const DuckDb&) = delete;

  void Execute(const std::string& sql);
  // The first value of the result (0 / empty when there is none).
  int64_t QueryInt64(const std::string& sql);
  std::string QueryText(const std::string& sql);
  int64_t Threads() { return QueryInt64("SELECT current_setting('threads')"); }

 private:
  void Query(const std::string& sql, const std::function<void(duckdb_result&)>& read);

  duckdb_database database_ = nullptr;
  duckdb_connection connection_ = nullptr;
};

// Seconds of `COPY (SELECT * FROM <table_function>) TO <parquet> (<copy_options>)`; fails unless it
// copied `expected_rows`. The Parquet file is removed afterwards.
double TimeDuckDbCopy(DuckDb& duckdb, const std::string& table_function,
                      const std::filesystem::path& parquet, uint64_t expected_rows,
                      const std::string& copy_options = "FORMAT parquet");

// ---------------------------------------------------------------------------------------------
// Child processes: fork/exec, stdout captured, stderr to a file, peak RSS from wait4().
//
// A child's ru_maxrss starts at the resident set of the process it was forked from (at exec the
// kernel records the old address space's high-water mark), so a skipprd forked from a benchmark
// after DuckDB and in-process batches have grown it would report their memory as its own. Children
// are therefore forked by a Launcher: a helper forked at the start of main, while the benchmark is
// small.

struct Command {
  std::vector<std::string> argv;  // argv[0] is a path
  std::vector<std::string> env;   // NAME=value
  std::filesystem::path stderr_path;
};

struct ChildRun {
  double seconds = 0;  // fork to reaped, wall clock
  int exit_code = -1;  // -1: killed by a signal
  uint64_t peak_rss_kib = 0;
  std::string stdout_text;
};

// The environment of this process with `overrides` (NAME → value) replacing or adding entries.
std::vector<std::string> ChildEnvironment(const std::map<std::string, std::string>& overrides);

class Launcher {
 public:
  // Forks the helper; call before this process grows.
  Launcher();
  ~Launcher();
  Launcher(const Launcher&) = delete;
  Launcher& operator=(const Launcher&) = delete;

  ChildRun Run(const Command& command);

 private:
  int socket_fd_ = -1;
  pid_t pid_ = -1;
};

// ---------------------------------------------------------------------------------------------
// skipprd side: `skipprd sync --pipeline P --once --output json` on a File source.

// One measure of a transform.aggregates entry (docs/config.md): `name: {kind: field}`.
struct SyncMeasure {
  std::string name;   // "amount_total"
  std::string kind;   // "sum" or "count"
  std::string field;  // "amount", or "*" for count
};

// One transform.aggregates entry.
struct SyncAggregate {
  std::string id;
  std::vector<std::string> key_fields;
  std::vector<SyncMeasure> measures;
};

struct SyncConfig {
  std::filesystem::path input;  // the File source's path (its format from the extension)
  std::string pipeline = "p";
  // Non-empty: the pipeline lands in a SkipprLake sink with this warehouse (an absolute directory)
  // and table_namespace.
  std::filesystem::path lake_warehouse;
  std::string lake_table_namespace = "bench";
  std::optional<SyncAggregate> aggregate;  // the pipeline's one transform.aggregates entry
};

// Writes the skippr.yml of `sync_config` at `path`.
void WriteSyncConfig(const std::filesystem::path& path, const SyncConfig& sync_config);

struct SyncRun {
  double seconds = 0;
  uint64_t total_rows = 0;   // committed to the WAL (the sync_complete event)
  uint64_t rows_landed = 0;  // landed in the lake
  uint64_t landings = 0;
  uint64_t peak_rss_kib = 0;
  uint64_t rows_aggregated = 0;  // applied by the transform.aggregates processor (all aggregates)
};

// One `skipprd --config <config> sync --pipeline <pipeline> --once --output json` with DATA_DIR
// `data_dir` (emptied first unless `keeps_data_dir`, left afterwards), stderr to `stderr_path`
// (removed on success); fails unless it exits 0 having committed `expected_rows`. `sync --once`
// drains the aggregates processor before it exits, so rows_aggregated is complete.
SyncRun RunSkipprdSync(Launcher& launcher, const std::filesystem::path& skipprd,
                       const std::filesystem::path& config, const std::string& pipeline,
                       const std::filesystem::path& data_dir,
                       const std::filesystem::path& stderr_path, uint64_t expected_rows,
                       bool keeps_data_dir = false);

}  // namespace skippr::bench
