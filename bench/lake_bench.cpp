// bench/lake: what it costs to land records in SkipprLake (issues #5 and #18), beside a baseline
// measured in the same run (STYLE.md, "Benchmarks print ratios from one run"); targets are printed,
// never asserted.
//
//   1. file → SkipprLake, a table over input formats (JSON lines, CSV, Parquet) × sizes (--sizes):
//      the real `skipprd sync --once` (a child process: discover, WAL commits and landing included)
//      of the file into a fresh local warehouse and DATA_DIR, beside DuckDB's one-line COPY
//      read_json / read_csv / read_parquet of the same file → Parquet (zstd) at its default thread
//      count (the machine's cores, which skipprd's reader, sync, committer and lander threads
//      share), run the way a user runs it: `duckdb -c "COPY ..."`, a fresh process
//      (duckdb_copy, timed and measured like skipprd's). For reference, the same COPY in
//      this process's DuckDB, warm (its allocator's memory already mapped, its file pages cached;
//      no user's one-line run gets that) at its default threads and, at the sizes timed in
//      best-of rounds, one thread. Per row: skipprd's seconds, rows/s and MB/s of input, DuckDB's
//      seconds, the ratio (the one-line process's seconds / skipprd's) against the target,
//      the ratio to the warm in-process COPY, and both processes' peak RSS (the children's
//      ru_maxrss). The Parquet input is written by DuckDB from the JSON-lines file before
//      anything is timed; each input is deleted once its format is done, and a size is skipped
//      (with a note) when the work directory has less than 3× its input free. Below
//      kSingleRoundRows: a warm-up round, then kPairedRounds interleaved rounds, each figure the
//      median of its rounds and each ratio the median of the rounds' own ratios (the two runs of
//      a round see the same machine, whose speed drifts by a fifth over seconds: a best-of
//      ratio was as often a lucky baseline run as a change); from it, one round.
//   1b. the sync of the smallest size's JSON-lines file with no transform and with one
//      transform.aggregates entry keyed by ride_id (one key per row: a 2M-key aggregate at 2M
//      rows; sum and count measures), in interleaved pairs, medians as in (1); `sync --once`
//      drains the
//      aggregates processor before it exits, so its time includes the aggregation.
//   2. commit latency: lake::LakeWriter::Land in-process, --landings distinct landings (one WAL
//      slice each, so each has its own landing id) of one prepared batch into one table, each
//      timed: data file, statistics, manifest, manifest list, metadata and catalog swap.
//   3. data files and manifests per 10M rows in the table's current snapshot (iceberg:: metadata,
//      manifest list, manifests), after the last sync of each row of (1) and after the landings of
//      (2).
//
//   bench_lake [--sizes N,N... | --rows N] [--quick] [--landings N] [--landing-rows N]
//              [--skipprd PATH] [--dir PATH]
//
// --sizes defaults to 2000000,20000000 (--quick: 200000); --rows N is --sizes N. Everything is
// written under a temporary directory (in --dir, else $TMPDIR) removed at the end.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bench_common.hpp"
#include "iceberg/iceberg.hpp"
#include "lake/lake.hpp"
#include "schema/schema.hpp"

namespace fs = std::filesystem;
using namespace skippr;
using namespace skippr::bench;

namespace {

constexpr uint64_t kLargeRows = 20'000'000;  // the second size
// From this many rows, (1) times one round without a warm-up and without the 1-thread baseline.
constexpr uint64_t kSingleRoundRows = 10'000'000;
constexpr int kPairedRounds = 5;  // timed rounds below kSingleRoundRows, after one warm-up
constexpr double kFreeSpaceFactor = 3.0;  // a size runs only with this many times its input free
constexpr double kBytesPerGb = 1e9;
constexpr double kTargetRssMib = 1024;           // the peak RSS target at 20M rows
constexpr double kTargetAggregateRatio = 1.25;  // sync with the aggregate / without, at most
constexpr uint64_t kDefaultLandings = 200;
constexpr uint64_t kQuickLandings = 50;
constexpr uint64_t kDefaultLandingRows = 50'000;
constexpr uint64_t kRowsPerReport = 10'000'000;  // the "files and manifests per 10M rows"
constexpr const char* kPipeline = "p";
constexpr const char* kTableNamespace = "bench";
constexpr const char* kLandingNamespace = "rides";  // the table of the in-process landings
constexpr const char* kParquetZstd = "FORMAT parquet, COMPRESSION zstd";

// ---------------------------------------------------------------------------------------------
// Flags

struct Flags {
  std::vector<uint64_t> sizes;  // rows of each input size, in the order measured
  uint64_t landings = kDefaultLandings;
  uint64_t landing_rows = kDefaultLandingRows;
  fs::path skipprd;     // default: the skipprd of this build tree
  fs::path parent_dir;  // where the temporary directory is made; default $TMPDIR
};

// "2000000,20000000" → {2000000, 20000000}.
std::vector<uint64_t> ParseSizes(const std::string& text) {
  std::vector<uint64_t> sizes;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(',', start), text.size());
    const std::string part = text.substr(start, end - start);
    if (part.empty() || part.find_first_not_of("0123456789") != std::string::npos) {
      Fail(fmt::format("--sizes takes row counts separated by commas, not '{}'", text));
    }
    sizes.push_back(std::stoull(part));
    start = end + 1;
  }
  return sizes;
}

Flags ParseFlags(int argc, char** argv) {
  bool is_quick = false;
  std::optional<std::vector<uint64_t>> sizes;
  std::optional<uint64_t> landings;
  Flags flags;
  BenchArgs args(argc, argv,
                 "--sizes N,N..., --rows N, --quick, --landings N, --landing-rows N, "
                 "--skipprd PATH, --dir PATH");
  while (args.Next()) {
    if (args.Is("--sizes") || args.Is("--rows")) {
      if (sizes) Fail("give --sizes or --rows once");
      sizes = ParseSizes(args.Value());
    } else if (args.Is("--quick")) {
      is_quick = true;
    } else if (args.Is("--landings")) {
      landings = args.Unsigned();
    } else if (args.Is("--landing-rows")) {
      flags.landing_rows = args.Unsigned();
    } else if (args.Is("--skipprd")) {
      flags.skipprd = args.Value();
    } else if (args.Is("--dir")) {
      flags.parent_dir = args.Value();
    } else {
      args.FailUnknown();
    }
  }
  flags.sizes = sizes.value_or(is_quick ? std::vector<uint64_t>{kQuickRows}
                                        : std::vector<uint64_t>{kDefaultRows, kLargeRows});
  flags.landings = landings.value_or(is_quick ? kQuickLandings : kDefaultLandings);
  const bool has_empty_size = std::count(flags.sizes.begin(), flags.sizes.end(), 0) > 0;
  if (has_empty_size || flags.landings == 0 || flags.landing_rows == 0) {
    Fail("--sizes (--rows), --landings and --landing-rows must be positive");
  }
  ResolveSkipprdAndDir(flags.skipprd, flags.parent_dir);
  return flags;
}

// What every measurement needs.
struct Bench {
  const Flags& flags;
  fs::path work_dir;  // temporary, removed at the end
  Launcher& launcher;
  fs::path duckdb_copy;  // the duckdb_copy program, beside this one
};

// ---------------------------------------------------------------------------------------------
// A table's current snapshot: its data files and manifests.

struct TableCounts {
  uint64_t rows = 0;  // the snapshot's total-records
  uint64_t data_files = 0;
  uint64_t manifests = 0;
  uint64_t snapshots = 0;  // in the metadata's history
};

template <typename T>
T OrFail(Result<T> result, std::string_view what) {
  if (!result.ok()) Fail(fmt::format("{}: {}", what, result.status().message()));
  return std::move(result).value();
}

TableCounts CountTable(const std::string& table_location) {
  const iceberg::VersionedMetadata current =
      OrFail(iceberg::ReadCurrentMetadata(table_location), "reading the table metadata");
  const iceberg::Snapshot* snapshot = current.metadata.CurrentSnapshot();
  if (snapshot == nullptr) Fail(fmt::format("table {} has no snapshot", table_location));
  TableCounts counts;
  counts.snapshots = current.metadata.snapshots.size();
  counts.rows = std::stoull(snapshot->summary.at("total-records"));
  const iceberg::ManifestList list = OrFail(
      iceberg::ReadManifestList(OrFail(iceberg::EnvPathOfUri(snapshot->manifest_list), "uri")),
      "reading the manifest list");
  for (const iceberg::ManifestFile& manifest_file : list.manifests) {
    ++counts.manifests;
    const iceberg::Manifest manifest =
        OrFail(iceberg::ReadManifest(OrFail(iceberg::EnvPathOfUri(manifest_file.manifest_path),
                                            "uri"),
                                     manifest_file.manifest_length),
               "reading a manifest");
    for (const iceberg::ManifestEntry& entry : manifest.entries) {
      counts.data_files += entry.status != iceberg::EntryStatus::kDeleted;
    }
  }
  return counts;
}

// The location of the one table in {warehouse}/{kTableNamespace}/.
std::string OnlyTableLocation(const fs::path& warehouse) {
  std::vector<std::string> tables;
  for (const auto& entry : fs::directory_iterator(warehouse / kTableNamespace)) {
    if (entry.is_directory()) tables.push_back(entry.path().filename().string());
  }
  if (tables.size() != 1) {
    Fail(fmt::format("expected one table in {}, found {}", (warehouse / kTableNamespace).string(),
                     tables.size()));
  }
  return OrFail(iceberg::TableLocation("file://" + warehouse.string(), kTableNamespace, tables[0]),
                "table location");
}

void PrintCounts(std::string_view label, const TableCounts& counts) {
  const double scale = static_cast<double>(kRowsPerReport) / counts.rows;
  fmt::print("  {:<40}{:6.1f} data files  {:6.1f} manifests per 10M rows   ({} and {} in {} rows, "
             "{} snapshots)\n",
             label, counts.data_files * scale, counts.manifests * scale, counts.data_files,
             counts.manifests, counts.rows, counts.snapshots);
}

// ---------------------------------------------------------------------------------------------
// 1. file → SkipprLake beside DuckDB COPY <reader> → Parquet (zstd), per input format and size

struct InputFormat {
  std::string_view name;                          // "jsonl", also the file's extension
  std::string (*read_sql)(const fs::path& file);  // DuckDB's table function over the file
  double target_ratio;  // DuckDB's seconds (default threads) / skipprd's, at least (issue #18)
};

constexpr InputFormat kJsonLines{"jsonl", ReadJsonSql, 1.0};
constexpr InputFormat kCsv{"csv", ReadCsvSql, 0.8};
constexpr InputFormat kParquet{"parquet", ReadParquetSql, 0.6};

// The baselines: DuckDB at its default thread count (the ratio's) and at one thread.
struct DuckDbBaselines {
  DuckDb default_threads{std::nullopt};
  DuckDb single_thread{1};
};

// How one (format, size) is timed: `warm_up` untimed rounds, then `timed` rounds' medians.
struct Rounds {
  int warm_up = 1;
  int timed = kPairedRounds;
  bool has_single_thread = true;  // also times DuckDB at one thread
};

Rounds RoundsFor(uint64_t rows) {
  if (rows >= kSingleRoundRows) return {.warm_up = 0, .timed = 1, .has_single_thread = false};
  return {};
}

// What a measurement's timed rounds saw of one figure; Median() is what is printed.
class RoundFigures {
 public:
  void Add(double figure) { figures_.push_back(figure); }
  double Median() const {
    if (figures_.empty()) return 0;
    std::vector<double> sorted = figures_;
    std::sort(sorted.begin(), sorted.end());
    const size_t middle = sorted.size() / 2;
    return sorted.size() % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
  }

 private:
  std::vector<double> figures_;
};

// The bytes of rides.jsonl and rides.csv at `rows` rows, scaled from the first rows.
uint64_t EstimatedInputBytes(uint64_t rows) {
  constexpr uint64_t kSampleRows = 10'000;
  const uint64_t sample_rows = std::min(rows, kSampleRows);
  fmt::memory_buffer jsonl;
  fmt::memory_buffer csv;
  for (uint64_t i = 0; i < sample_rows; ++i) {
    const Ride ride = MakeRide(i);
    AppendJsonLine(jsonl, ride);
    AppendCsvLine(csv, ride);
  }
  return static_cast<uint64_t>(static_cast<double>(jsonl.size() + csv.size()) * rows / sample_rows);
}

// False, with a printed note, when the work directory has too little space free for `rows`.
bool HasSpaceFor(const Bench& bench, uint64_t rows) {
  const double input_bytes = static_cast<double>(EstimatedInputBytes(rows));
  const double free_bytes = static_cast<double>(fs::space(bench.work_dir).available);
  if (free_bytes >= kFreeSpaceFactor * input_bytes) return true;
  fmt::print("  (skipping {} rows: {:.1f} GB free in {}, fewer than {:.0f}x the {:.1f} GB of "
             "input)\n",
             rows, free_bytes / kBytesPerGb, bench.work_dir.string(), kFreeSpaceFactor,
             input_bytes / kBytesPerGb);
  return false;
}

// One size's input files, written before anything is timed.
struct Inputs {
  fs::path jsonl;
  fs::path csv;
  fs::path parquet;  // written by DuckDB from the JSON lines (zstd)
};

Inputs WriteInputs(const Bench& bench, DuckDb& duckdb, uint64_t rows) {
  const std::optional<InputFiles> written = WriteInputFiles(bench.work_dir, rows);
  if (!written) Fail(fmt::format("cannot write the input files in {}", bench.work_dir.string()));
  const Inputs inputs{written->jsonl, written->csv, bench.work_dir / "rides.parquet"};
  const int64_t copied =
      duckdb.QueryInt64(fmt::format("COPY (SELECT * FROM {}) TO {} ({})", ReadJsonSql(inputs.jsonl),
                                    SqlQuoted(inputs.parquet.string()), kParquetZstd));
  if (copied != static_cast<int64_t>(rows)) {
    Fail(fmt::format("DuckDB wrote {} rows to {}, expected {}", copied, inputs.parquet.string(),
                     rows));
  }
  return inputs;
}

// skippr.yml for a sync of `input` into the work directory's warehouse.
SyncConfig LakeSyncConfig(const Bench& bench, const fs::path& input) {
  return {.input = input,
          .pipeline = kPipeline,
          .lake_warehouse = bench.work_dir / "warehouse",
          .lake_table_namespace = kTableNamespace};
}

// One `skipprd sync --once` of `config` into a fresh warehouse and DATA_DIR, both removed
// afterwards; fails unless all `rows` landed. `counts`, when given, receives the table's counts.
SyncRun SyncToLake(const Bench& bench, const fs::path& config, uint64_t rows,
                   TableCounts* counts = nullptr) {
  const fs::path data_dir = bench.work_dir / "data";
  const fs::path warehouse = bench.work_dir / "warehouse";
  fs::remove_all(warehouse);
  const SyncRun run = RunSkipprdSync(bench.launcher, bench.flags.skipprd, config, kPipeline,
                                     data_dir, bench.work_dir / "skipprd.stderr", rows);
  if (run.rows_landed != rows) {
    Fail(fmt::format("skipprd sync landed {} rows, expected {}", run.rows_landed, rows));
  }
  if (counts != nullptr) *counts = CountTable(OnlyTableLocation(warehouse));
  fs::remove_all(data_dir);
  fs::remove_all(warehouse);
  return run;
}

struct FormatMeasurement {
  uint64_t input_bytes = 0;
  RoundFigures duckdb_process_seconds;        // the one-line COPY's own process
  uint64_t duckdb_process_peak_rss_kib = 0;
  RoundFigures duckdb_seconds;                // in this process, warm, at DuckDB's default threads
  RoundFigures duckdb_single_thread_seconds;  // none: not timed at this size
  RoundFigures skipprd_seconds;
  RoundFigures ratio;       // each round's duckdb_process_seconds / skipprd_seconds: the target's
  RoundFigures warm_ratio;  // each round's duckdb_seconds / skipprd_seconds
  uint64_t skipprd_peak_rss_kib = 0;  // the largest of every round's
  uint64_t landings = 0;              // of the last sync
  TableCounts counts;                 // of the last sync's table
};

// DuckDB's one-line COPY of `table_function` to `parquet` in a process of its own
// (duckdb_copy: `duckdb -c "COPY ..."` without the shell); fails unless it copied
// `expected_rows`.
ChildRun RunDuckDbCopyProcess(const Bench& bench, const std::string& table_function,
                              const fs::path& parquet, uint64_t expected_rows) {
  const fs::path stderr_path = bench.work_dir / "duckdb.stderr";
  const ChildRun child = bench.launcher.Run(
      {{bench.duckdb_copy.string(),
        fmt::format("COPY (SELECT * FROM {}) TO {} ({})", table_function,
                    SqlQuoted(parquet.string()), kParquetZstd)},
       ChildEnvironment({}),
       stderr_path});
  const std::string expected = fmt::format("{}\n", expected_rows);
  if (child.exit_code != 0 || child.stdout_text != expected) {
    Fail(fmt::format("{} exited {} having copied {} rows, expected {}; stderr:\n{}",
                     bench.duckdb_copy.string(), child.exit_code, child.stdout_text,
                     expected_rows, FileText(stderr_path)));
  }
  fs::remove(stderr_path);
  fs::remove(parquet);
  return child;
}

// Rounds of DuckDB then skipprd on `input`: this machine's speed drifts, and a round keeps the
// baseline beside what it measures.
FormatMeasurement MeasureFormat(const Bench& bench, DuckDbBaselines& duckdb,
                                const InputFormat& format, const fs::path& input, uint64_t rows) {
  const fs::path config = bench.work_dir / "skippr.yml";
  const fs::path copy_output = bench.work_dir / "x.parquet";
  WriteSyncConfig(config, LakeSyncConfig(bench, input));
  const Rounds rounds = RoundsFor(rows);
  FormatMeasurement measurement{.input_bytes = fs::file_size(input)};
  for (int round = 0; round < rounds.warm_up + rounds.timed; ++round) {
    const bool is_last = round + 1 == rounds.warm_up + rounds.timed;
    const ChildRun duckdb_process =
        RunDuckDbCopyProcess(bench, format.read_sql(input), copy_output, rows);
    measurement.duckdb_process_peak_rss_kib =
        std::max(measurement.duckdb_process_peak_rss_kib, duckdb_process.peak_rss_kib);
    const double duckdb_seconds = TimeDuckDbCopy(duckdb.default_threads, format.read_sql(input),
                                                 copy_output, rows, kParquetZstd);
    const double duckdb_single_thread_seconds =
        rounds.has_single_thread ? TimeDuckDbCopy(duckdb.single_thread, format.read_sql(input),
                                                  copy_output, rows, kParquetZstd)
                                 : 0;
    const SyncRun run = SyncToLake(bench, config, rows, is_last ? &measurement.counts : nullptr);
    measurement.skipprd_peak_rss_kib = std::max(measurement.skipprd_peak_rss_kib, run.peak_rss_kib);
    measurement.landings = run.landings;
    if (round < rounds.warm_up) continue;
    measurement.duckdb_process_seconds.Add(duckdb_process.seconds);
    measurement.duckdb_seconds.Add(duckdb_seconds);
    if (rounds.has_single_thread) {
      measurement.duckdb_single_thread_seconds.Add(duckdb_single_thread_seconds);
    }
    measurement.skipprd_seconds.Add(run.seconds);
    measurement.ratio.Add(duckdb_process.seconds / run.seconds);
    measurement.warm_ratio.Add(duckdb_seconds / run.seconds);
  }
  fs::remove(config);
  return measurement;
}

void PrintFormatHeader(int64_t duckdb_threads) {
  fmt::print("  {:<8}{:>10}{:>10}{:>11}{:>10}{:>8}{:>11}{:>8}  {:<8}{:>9}{:>8}{:>8}{:>13}{:>12}"
             "  {}\n",
             "format", "rows", "input MB", "skipprd s", "M rows/s", "MB/s",
             fmt::format("duckdb {}t", duckdb_threads), "ratio", "target",
             fmt::format("warm {}t", duckdb_threads), "warm 1t", "ratio", "skipprd MiB",
             "duckdb MiB", "target");
  std::fflush(stdout);
}

void PrintFormatRow(const InputFormat& format, uint64_t rows, const FormatMeasurement& m) {
  const double input_mb = m.input_bytes / kBytesPerMb;
  const double skipprd_seconds = m.skipprd_seconds.Median();
  const double single_thread_seconds = m.duckdb_single_thread_seconds.Median();
  const std::string single_thread =
      single_thread_seconds > 0 ? fmt::format("{:.2f}", single_thread_seconds) : "-";
  fmt::print("  {:<8}{:>10}{:>10.1f}{:>11.2f}{:>10.2f}{:>8.0f}{:>11.2f}{:>8.2f}  >= {:<5.1f}"
             "{:>9.2f}{:>8}{:>8.2f}{:>13.0f}{:>12.0f}  < {:.0f}\n",
             format.name, rows, input_mb, skipprd_seconds, rows / skipprd_seconds / 1e6,
             input_mb / skipprd_seconds, m.duckdb_process_seconds.Median(), m.ratio.Median(),
             format.target_ratio, m.duckdb_seconds.Median(), single_thread,
             m.warm_ratio.Median(),
             m.skipprd_peak_rss_kib / kKibPerMib, m.duckdb_process_peak_rss_kib / kKibPerMib,
             kTargetRssMib);
  std::fflush(stdout);
}

// ---------------------------------------------------------------------------------------------
// 1b. the sync with and without an aggregate with one key per row

SyncAggregate OneKeyPerRideAggregate() {
  return {.id = "rides_by_id",
          .key_fields = {"ride_id"},  // unique per row
          .measures = {{"amount_total", "sum", "amount"}, {"ride_count", "count", "*"}}};
}

struct AggregateMeasurement {
  uint64_t rows = 0;
  uint64_t input_bytes = 0;  // of the JSON-lines file
  RoundFigures plain_seconds;
  RoundFigures aggregate_seconds;
  RoundFigures ratio;  // each pair's aggregate_seconds / plain_seconds
  uint64_t plain_peak_rss_kib = 0;
  uint64_t aggregate_peak_rss_kib = 0;
};

// Interleaved pairs (the table's rounds warmed up the file and the binary).
AggregateMeasurement MeasureAggregate(const Bench& bench, const fs::path& jsonl, uint64_t rows) {
  const fs::path plain_config = bench.work_dir / "plain.yml";
  const fs::path aggregate_config = bench.work_dir / "aggregate.yml";
  SyncConfig sync_config = LakeSyncConfig(bench, jsonl);
  WriteSyncConfig(plain_config, sync_config);
  sync_config.aggregate = OneKeyPerRideAggregate();
  WriteSyncConfig(aggregate_config, sync_config);
  AggregateMeasurement measurement{.rows = rows, .input_bytes = fs::file_size(jsonl)};
  for (int round = 0; round < RoundsFor(rows).timed; ++round) {
    const SyncRun plain = SyncToLake(bench, plain_config, rows);
    const SyncRun aggregated = SyncToLake(bench, aggregate_config, rows);
    if (aggregated.rows_aggregated != rows) {
      Fail(fmt::format("skipprd sync aggregated {} rows, expected {}", aggregated.rows_aggregated,
                       rows));
    }
    measurement.plain_seconds.Add(plain.seconds);
    measurement.aggregate_seconds.Add(aggregated.seconds);
    measurement.ratio.Add(aggregated.seconds / plain.seconds);
    measurement.plain_peak_rss_kib = std::max(measurement.plain_peak_rss_kib, plain.peak_rss_kib);
    measurement.aggregate_peak_rss_kib =
        std::max(measurement.aggregate_peak_rss_kib, aggregated.peak_rss_kib);
  }
  fs::remove(plain_config);
  fs::remove(aggregate_config);
  return measurement;
}

void PrintAggregate(const AggregateMeasurement& m) {
  fmt::print("  {:<44}{}   peak RSS {:.0f} MiB   (baseline, same run)\n", "without a transform",
             Throughput(m.plain_seconds.Median(), m.rows, m.input_bytes),
             m.plain_peak_rss_kib / kKibPerMib);
  fmt::print("  {:<44}{}   peak RSS {:.0f} MiB   ratio {:.2f}  (target <= {:.2f})\n",
             fmt::format("with a {}-key aggregate (sum, count)", m.rows),
             Throughput(m.aggregate_seconds.Median(), m.rows, m.input_bytes),
             m.aggregate_peak_rss_kib / kKibPerMib, m.ratio.Median(),
             kTargetAggregateRatio);
  std::fflush(stdout);
}

// ---------------------------------------------------------------------------------------------
// 1 and 1b over every size

// What (3) prints for each row of (1).
struct NamedCounts {
  std::string label;
  TableCounts counts;
};

// Measures and prints the formats of one size in turn, deleting each input when it is done; at the
// `aggregate_rows` size, also (1b) on the JSON lines, returned for printing after the table.
std::optional<AggregateMeasurement> MeasureSize(const Bench& bench, DuckDbBaselines& duckdb,
                                                uint64_t rows, uint64_t aggregate_rows,
                                                std::vector<NamedCounts>& counts) {
  const Inputs inputs = WriteInputs(bench, duckdb.default_threads, rows);
  const std::vector<std::pair<const InputFormat*, fs::path>> runs = {
      {&kJsonLines, inputs.jsonl}, {&kCsv, inputs.csv}, {&kParquet, inputs.parquet}};
  std::optional<AggregateMeasurement> aggregate;
  for (const auto& [format, input] : runs) {
    const FormatMeasurement measurement = MeasureFormat(bench, duckdb, *format, input, rows);
    PrintFormatRow(*format, rows, measurement);
    counts.push_back({fmt::format("after sync --once, {} {} rows", format->name, rows),
                      measurement.counts});
    if (format == &kJsonLines && rows == aggregate_rows) {
      aggregate = MeasureAggregate(bench, input, rows);
    }
    fs::remove(input);
  }
  return aggregate;
}

// ---------------------------------------------------------------------------------------------
// 2. commit latency: LakeWriter::Land of one prepared batch, again and again, into one table.

// ride_id long, station_id int, amount double, rider_name string, comment string,
// is_member boolean: the first rows of the rides input, as one Batch of namespace `rides`.
std::pair<schema::NamespaceSchema, std::shared_ptr<const Batch>> MakeRidesBatch(uint64_t rows) {
  schema::NamespaceSchema namespace_schema{.name = kLandingNamespace, .schema_id = 1};
  const std::vector<std::pair<std::string, LogicalType>> columns = {
      {"ride_id", LogicalType::Long()},       {"station_id", LogicalType::Int()},
      {"amount", LogicalType::Double()},      {"rider_name", LogicalType::String()},
      {"comment", LogicalType::String()},     {"is_member", LogicalType::Boolean()}};
  for (const auto& [name, type] : columns) {
    namespace_schema.fields.push_back({++namespace_schema.last_field_id, name, type});
  }
  auto batch = std::make_shared<Batch>();
  batch->namespace_name = kLandingNamespace;
  batch->schema_id = namespace_schema.schema_id;
  batch->fields = namespace_schema.fields;
  for (const Field& field : batch->fields) batch->columns.emplace_back(field.type);
  for (uint64_t i = 0; i < rows; ++i) {
    const Ride ride = MakeRide(i);
    std::vector<Column>& columns = batch->columns;
    columns[0].Append(Value::Int(ride.ride_id));
    columns[1].Append(Value::Int(ride.station_id));
    columns[2].Append(Value::Double(ride.amount_cents / 100.0));
    columns[3].Append(Value::String(ride.rider_name));
    columns[4].Append(Value::String(ride.comment));
    columns[5].Append(Value::Bool(ride.is_member));
  }
  batch->num_rows = static_cast<int64_t>(rows);
  if (std::string reason; !batch->Validate(&reason)) Fail("the rides batch is invalid: " + reason);
  return {std::move(namespace_schema), std::move(batch)};
}

struct LandingLatencies {
  std::vector<double> seconds;  // in landing order
  TableCounts counts;
};

LandingLatencies MeasureLandings(const Bench& bench) {
  const fs::path warehouse = bench.work_dir / "landings";
  const auto [namespace_schema, batch] = MakeRidesBatch(bench.flags.landing_rows);
  const std::vector<std::shared_ptr<const Batch>> batches = {batch};
  LandingLatencies latencies;
  {
    std::unique_ptr<lake::LakeWriter> writer =
        OrFail(lake::LakeWriter::Open({.pipeline = kPipeline,
                                       .warehouse = "file://" + warehouse.string(),
                                       .table_namespace = kTableNamespace}),
               "opening the lake writer");
    for (uint64_t i = 0; i < bench.flags.landings; ++i) {
      // Segment i + 1, slice 0: a landing id of its own, as sync's successive landings have.
      const lake::Landing landing{.landing_id = fmt::format("bench-landing-{}", i + 1),
                                  .namespace_name = std::string(kLandingNamespace),
                                  .wal_segment_ids = {i + 1}};
      const Clock::time_point start = Clock::now();
      const lake::LandingOutcome outcome =
          OrFail(writer->Land(landing, namespace_schema, batches), "landing");
      latencies.seconds.push_back(SecondsSince(start));
      if (outcome.was_landed_before || outcome.rows != batch->num_rows) {
        Fail(fmt::format("landing {} was not a new landing of {} rows", i, batch->num_rows));
      }
    }
  }
  latencies.counts = CountTable(OnlyTableLocation(warehouse));
  fs::remove_all(warehouse);
  return latencies;
}

// The nearest-rank percentile of sorted values.
double Percentile(const std::vector<double>& sorted, double fraction) {
  const size_t rank = static_cast<size_t>(std::ceil(fraction * sorted.size()));
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

double MeanMs(std::vector<double>::const_iterator begin, std::vector<double>::const_iterator end) {
  double sum = 0;
  for (auto it = begin; it != end; ++it) sum += *it;
  return sum * 1000 / static_cast<double>(end - begin);
}

void PrintLandings(const LandingLatencies& latencies, uint64_t landing_rows) {
  std::vector<double> sorted = latencies.seconds;
  std::sort(sorted.begin(), sorted.end());
  fmt::print("  {:<40}p50 {:.1f} ms   p99 {:.1f} ms   max {:.1f} ms   ({} landings of {} rows)\n",
             "commit latency (LakeWriter::Land)", Percentile(sorted, 0.50) * 1000,
             Percentile(sorted, 0.99) * 1000, sorted.back() * 1000, sorted.size(), landing_rows);
  // The manifest list and the metadata file grow with every snapshot: first against last shows it.
  const size_t tail = std::max<size_t>(1, sorted.size() / 10);
  const std::vector<double>& in_order = latencies.seconds;
  fmt::print("    mean of the first {} landings {:.1f} ms, of the last {} {:.1f} ms\n", tail,
             MeanMs(in_order.begin(), in_order.begin() + static_cast<ptrdiff_t>(tail)), tail,
             MeanMs(in_order.end() - static_cast<ptrdiff_t>(tail), in_order.end()));
}

}  // namespace

int main(int argc, char** argv) {
  SetBenchName("bench/lake");
  const Flags flags = ParseFlags(argc, argv);
  Launcher launcher;  // first, while this process is small (bench_common.hpp, "Child processes")
  spdlog::set_level(spdlog::level::warn);
  const Bench bench{flags, MakeWorkDir(flags.parent_dir), launcher,
                    fs::read_symlink("/proc/self/exe").parent_path() / "duckdb_copy"};
  const uint64_t aggregate_rows = *std::min_element(flags.sizes.begin(), flags.sizes.end());

  std::vector<NamedCounts> counts;
  std::optional<AggregateMeasurement> aggregate;
  {
    DuckDbBaselines duckdb;
    const int64_t threads = duckdb.default_threads.Threads();
    fmt::print("bench/lake  sizes={} threads={} (DuckDB's default; skipprd reads, shapes, commits "
               "and lands on threads of their own, on the same cores)\n",
               fmt::join(flags.sizes, ","), threads);
    fmt::print("  1. file -> SkipprLake: skipprd sync --once beside DuckDB COPY <reader> -> parquet "
               "zstd (baseline, same run), both fresh processes: ratio = duckdb {}t s / skipprd "
               "s (the target's); warm: the COPY in this process's DuckDB, after a warm-up, for "
               "reference; below {} rows, medians of {} interleaved rounds, each ratio the median "
               "of the rounds' own ratios\n",
               threads, kSingleRoundRows, kPairedRounds);
    PrintFormatHeader(threads);
    for (const uint64_t rows : flags.sizes) {
      if (!HasSpaceFor(bench, rows)) continue;
      std::optional<AggregateMeasurement> measured =
          MeasureSize(bench, duckdb, rows, aggregate_rows, counts);
      if (measured) aggregate = measured;
    }
  }
  fmt::print("  1b. skipprd sync --once of rides.jsonl ({} rows) -> SkipprLake, with and without "
             "transform.aggregates (medians of {} interleaved pairs; the ratio, of the pairs' own "
             "ratios)\n",
             aggregate_rows, RoundsFor(aggregate_rows).timed);
  if (aggregate) {
    PrintAggregate(*aggregate);
  } else {
    fmt::print("    (not measured: the {}-row size was skipped)\n", aggregate_rows);
  }

  fmt::print("  2. in-process landings\n");
  const LandingLatencies latencies = MeasureLandings(bench);
  PrintLandings(latencies, flags.landing_rows);
  fmt::print("  3. files in the table's current snapshot\n");
  for (const NamedCounts& named : counts) PrintCounts(named.label, named.counts);
  PrintCounts(fmt::format("after {} landings", flags.landings), latencies.counts);
  fs::remove_all(bench.work_dir);
  return 0;
}
