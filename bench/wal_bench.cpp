// bench/wal: what it costs to get records into the WAL, each beside a baseline measured in the same
// run (STYLE.md, "Benchmarks print ratios from one run"); targets are printed, never asserted.
//
//   1. file → WAL: the real `skipprd sync --once` (a child process, discover included) on a
//      JSON-lines and a CSV file, beside DuckDB COPY read_json / read_csv → Parquet with DuckDB's
//      default thread count (skipprd reads, shapes and commits on three threads sharing the
//      cores) and, for reference, with one thread.
//   2. WAL append bandwidth beside `dd conv=fdatasync`, buffered and with `oflag=direct` (the WAL
//      writes segments with O_DIRECT), the faster counting: wal::Wal::Append in-process of segments
//      prepared beforehand (write, fdatasync, store commit, file creation: the I/O path); then,
//      for reference, wal::Wal::Commit with the encoding (columns → LZ4 slices) included.
//   3. peak RSS of `skipprd sync --once` on a large JSON-lines file (the child's ru_maxrss).
//
//   bench_wal [--rows N] [--quick] [--large-gb G] [--only-large | --only-wal] [--skipprd PATH]
//             [--dir PATH]
//
// Everything is written under a temporary directory (in --dir, else $TMPDIR) removed at the end.
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bench_common.hpp"
#include "sample_batches.hpp"
#include "config/config.hpp"
#include "schema/schema.hpp"
#include "sources/sources.hpp"
#include "store/store.hpp"
#include "wal/wal.hpp"

namespace fs = std::filesystem;
using namespace skippr;
using namespace skippr::bench;

namespace {

constexpr uint64_t kBytesPerMib = 1 << 20;
constexpr double kBytesPerGb = 1e9;
constexpr uint64_t kDefaultWalTargetBytes = 512 * kBytesPerMib;
constexpr uint64_t kQuickWalTargetBytes = 128 * kBytesPerMib;
constexpr double kDefaultLargeInputGb = 5.0;  // the "peak RSS for a 5 GB input"
constexpr double kQuickLargeInputGb = 0.2;
// What sync commits per segment from the Sample source: one 100,000-record batch (its nominal 256
// bytes per record pass the 10 MiB buffer threshold at every batch).
constexpr uint64_t kRowsPerCommit = 100'000;
constexpr const char* kPipeline = "p";

// ---------------------------------------------------------------------------------------------
// Flags

struct Flags {
  uint64_t rows = kDefaultRows;
  uint64_t wal_target_bytes = kDefaultWalTargetBytes;
  double large_input_gb = kDefaultLargeInputGb;
  bool is_only_large = false;
  bool is_only_wal = false;
  fs::path skipprd;     // default: the skipprd of this build tree
  fs::path parent_dir;  // where the temporary directory is made; default $TMPDIR
};

Flags ParseFlags(int argc, char** argv) {
  bool is_quick = false;
  std::optional<uint64_t> rows;
  std::optional<double> large_input_gb;
  Flags flags;
  BenchArgs args(argc, argv,
                 "--rows N, --quick, --large-gb G, --only-large, --only-wal, --skipprd PATH, "
                 "--dir PATH");
  while (args.Next()) {
    if (args.Is("--rows")) {
      rows = args.Unsigned();
    } else if (args.Is("--quick")) {
      is_quick = true;
    } else if (args.Is("--large-gb")) {
      large_input_gb = args.Number();
    } else if (args.Is("--only-large")) {
      flags.is_only_large = true;
    } else if (args.Is("--only-wal")) {
      flags.is_only_wal = true;
    } else if (args.Is("--skipprd")) {
      flags.skipprd = args.Value();
    } else if (args.Is("--dir")) {
      flags.parent_dir = args.Value();
    } else {
      args.FailUnknown();
    }
  }
  flags.rows = rows.value_or(is_quick ? kQuickRows : kDefaultRows);
  flags.large_input_gb =
      large_input_gb.value_or(is_quick ? kQuickLargeInputGb : kDefaultLargeInputGb);
  if (is_quick) flags.wal_target_bytes = kQuickWalTargetBytes;
  if (flags.rows == 0 || flags.large_input_gb <= 0) Fail("--rows and --large-gb must be positive");
  ResolveSkipprdAndDir(flags.skipprd, flags.parent_dir);
  return flags;
}

// ---------------------------------------------------------------------------------------------
// Input files: the shared rides (bench_common), and one large JSON-lines file.

// Streams JSON lines to `path` until it holds at least `target_bytes`; returns the rows written.
uint64_t WriteLargeJsonLines(const fs::path& path, uint64_t target_bytes) {
  std::ofstream file(path, std::ios::binary);
  fmt::memory_buffer buffer;
  uint64_t written_bytes = 0;
  uint64_t rows = 0;
  while (written_bytes + buffer.size() < target_bytes) {
    AppendJsonLine(buffer, MakeRide(rows++));
    if (buffer.size() >= kFlushBytes) {
      written_bytes += buffer.size();
      Flush(file, buffer);
    }
  }
  Flush(file, buffer);
  if (!file.good()) Fail(fmt::format("cannot write the large input {}", path.string()));
  return rows;
}

// What every measurement needs.
struct Bench {
  const Flags& flags;
  fs::path work_dir;  // temporary, removed at the end
  Launcher& launcher;
};

// ---------------------------------------------------------------------------------------------
// skipprd side: `skipprd sync --once` into a fresh DATA_DIR, removed afterwards.

SyncRun RunSync(const Bench& bench, const fs::path& input, uint64_t expected_rows) {
  const fs::path config = bench.work_dir / "skippr.yml";
  WriteSyncConfig(config, {.input = input, .pipeline = kPipeline});
  const fs::path data_dir = bench.work_dir / "data";
  const SyncRun run = RunSkipprdSync(bench.launcher, bench.flags.skipprd, config, kPipeline,
                                     data_dir, bench.work_dir / "skipprd.stderr", expected_rows);
  fs::remove_all(data_dir);
  return run;
}

// ---------------------------------------------------------------------------------------------
// WAL side: Wal::Commit of one realistic batch, again and again, into a fresh store and WAL.

uint64_t ColumnBufferBytes(const Column& column) {
  uint64_t bytes = column.validity.size() + column.fixed.size() +
                   column.offsets.size() * sizeof(int64_t) + column.bytes.size();
  for (const Column& child : column.children) bytes += ColumnBufferBytes(child);
  return bytes;
}

uint64_t ColumnBufferBytes(const std::vector<Batch>& batches) {
  uint64_t bytes = 0;
  for (const Batch& batch : batches) {
    for (const Column& column : batch.columns) bytes += ColumnBufferBytes(column);
  }
  return bytes;
}

struct WalRun {
  double seconds = 0;
  uint64_t commits = 0;
  uint64_t segment_bytes = 0;
};

enum class WalMode {
  kCommit,  // Wal::Commit: encode (columns → LZ4 slices) and append, timed together
  kAppend,  // segments prepared first, untimed; Wal::Append alone is timed (the I/O path)
};

// Writes `batches` as segments until `target_bytes` of segment files are written.
WalRun RunWal(const fs::path& work_dir, const std::vector<Batch>& batches, uint64_t target_bytes,
              WalMode mode) {
  const fs::path dir = work_dir / "wal_bench";
  fs::remove_all(dir);
  WalRun run;
  {
    Result<std::unique_ptr<store::Store>> store =
        store::Store::Open({.directory = (dir / "store").string()});
    if (!store.ok()) Fail(fmt::format("store: {}", store.status().message()));
    Result<std::unique_ptr<wal::Wal>> opened =
        wal::Wal::Open((dir / "wal").string(), "bench", **store);
    if (!opened.ok()) Fail(fmt::format("WAL: {}", opened.status().message()));
    wal::Wal& wal = **opened;
    std::vector<wal::PreparedSegment> prepared;
    for (uint64_t bytes = 0; mode == WalMode::kAppend && bytes < target_bytes;) {
      Result<wal::PreparedSegment> segment = wal.Prepare(batches, "{}");
      if (!segment.ok()) Fail(fmt::format("WAL prepare: {}", segment.status().message()));
      bytes += segment->bytes.size();
      prepared.push_back(std::move(segment).value());
    }
    const Clock::time_point start = Clock::now();
    const auto count = [&](const Result<wal::CommitInfo>& info) {
      if (!info.ok()) Fail(fmt::format("WAL commit: {}", info.status().message()));
      run.segment_bytes += info->file_bytes;
      ++run.commits;
    };
    if (mode == WalMode::kAppend) {
      for (const wal::PreparedSegment& segment : prepared) count(wal.Append(segment, nullptr));
    } else {
      while (run.segment_bytes < target_bytes) count(wal.Commit(batches, "{}", nullptr));
    }
    run.seconds = SecondsSince(start);
  }
  fs::remove_all(dir);
  return run;
}

// How dd writes: through the page cache (the issue's `dd conv=fdatasync`), or straight to the
// device as the WAL does (`oflag=direct`). The faster of the two is the baseline.
enum class DdMode { kBuffered, kDirect };

// `dd if=/dev/zero of=<dir>/dd.bin bs=4M count=<n> conv=fdatasync [oflag=direct]`, timed fork to
// exit; 4 MiB blocks as the WAL's direct writes.
double TimeDd(const Bench& bench, uint64_t bytes, DdMode mode) {
  constexpr uint64_t kDdBlockBytes = 4 * kBytesPerMib;
  const fs::path output = bench.work_dir / "dd.bin";
  const fs::path stderr_path = bench.work_dir / "dd.stderr";
  std::vector<std::string> arguments = {"/bin/dd", "if=/dev/zero", "of=" + output.string(), "bs=4M",
                                        fmt::format("count={}", bytes / kDdBlockBytes),
                                        "conv=fdatasync"};
  if (mode == DdMode::kDirect) arguments.push_back("oflag=direct");
  const ChildRun child = bench.launcher.Run({arguments, ChildEnvironment({}), stderr_path});
  if (child.exit_code != 0) Fail(fmt::format("dd failed: {}", FileText(stderr_path)));
  fs::remove(output);
  fs::remove(stderr_path);
  return child.seconds;
}

// ---------------------------------------------------------------------------------------------
// The three measurements and their report

double Mib(uint64_t bytes) { return static_cast<double>(bytes) / kBytesPerMib; }

struct FileMeasurement {
  double duckdb_seconds = 0;                // DuckDB's default thread count
  double duckdb_single_thread_seconds = 0;
  double skipprd_seconds = 0;
  uint64_t skipprd_peak_rss_kib = 0;
};

void KeepFastest(double& best, double seconds) {
  if (best == 0 || seconds < best) best = seconds;
}

FileMeasurement MeasureFileToWal(const Bench& bench, DuckDb& duckdb, DuckDb& duckdb_single_thread,
                                 const fs::path& input, const std::string& table_function) {
  const uint64_t rows = bench.flags.rows;
  FileMeasurement measurement;
  // Rounds of DuckDB then skipprd, a warm-up round first, keeping each one's best: this machine's
  // speed drifts over minutes, and interleaving keeps the baseline beside what it measures.
  for (int round = 0; round <= kTimedRuns; ++round) {
    const double duckdb_seconds =
        TimeDuckDbCopy(duckdb, table_function, bench.work_dir / "x.parquet", rows);
    const double duckdb_single_thread_seconds =
        TimeDuckDbCopy(duckdb_single_thread, table_function, bench.work_dir / "x.parquet", rows);
    const SyncRun run = RunSync(bench, input, rows);
    measurement.skipprd_peak_rss_kib = std::max(measurement.skipprd_peak_rss_kib, run.peak_rss_kib);
    if (round == 0) continue;
    KeepFastest(measurement.duckdb_seconds, duckdb_seconds);
    KeepFastest(measurement.duckdb_single_thread_seconds, duckdb_single_thread_seconds);
    KeepFastest(measurement.skipprd_seconds, run.seconds);
  }
  return measurement;
}

void PrintFileMeasurement(const FileMeasurement& measurement, const std::string& duckdb_label,
                          int duckdb_threads, const std::string& format_label, uint64_t rows,
                          uint64_t input_bytes) {
  fmt::print("  {:<45}{}   (baseline, same run)\n",
             fmt::format("{}, {} threads", duckdb_label, duckdb_threads),
             Throughput(measurement.duckdb_seconds, rows, input_bytes));
  fmt::print("  {:<45}{}   (baseline, same run)\n", duckdb_label + ", 1 thread",
             Throughput(measurement.duckdb_single_thread_seconds, rows, input_bytes));
  fmt::print("  {:<45}{}   ratio {:.2f} to {} threads, {:.2f} to 1 thread  (target >= 0.5)   "
             "peak RSS {:.0f} MiB\n",
             fmt::format("skipprd sync --once ({})", format_label),
             Throughput(measurement.skipprd_seconds, rows, input_bytes),
             measurement.duckdb_seconds / measurement.skipprd_seconds, duckdb_threads,
             measurement.duckdb_single_thread_seconds / measurement.skipprd_seconds,
             measurement.skipprd_peak_rss_kib / 1024.0);
}

void RunFileToWal(const Bench& bench) {
  const Flags& flags = bench.flags;
  const std::optional<InputFiles> written = WriteInputFiles(bench.work_dir, flags.rows);
  if (!written) {
    Fail(fmt::format("cannot write the input files in {}", bench.work_dir.string()));
  }
  const InputFiles& files = *written;
  const uint64_t jsonl_bytes = fs::file_size(files.jsonl);
  const uint64_t csv_bytes = fs::file_size(files.csv);
  // skipprd reads, shapes and commits on threads of their own: DuckDB's default thread count
  // is the like-for-like baseline; single-threaded DuckDB is printed beside it.
  DuckDb duckdb(/*threads=*/std::nullopt);
  DuckDb duckdb_single_thread(/*threads=*/1);
  fmt::print("bench/wal  rows={} duckdb threads={} and 1  rides.jsonl={:.0f} MB  rides.csv={:.0f} MB\n",
             flags.rows, duckdb.Threads(), jsonl_bytes / kBytesPerMb, csv_bytes / kBytesPerMb);
  std::fflush(stdout);
  const FileMeasurement json = MeasureFileToWal(bench, duckdb, duckdb_single_thread, files.jsonl,
                                                ReadJsonSql(files.jsonl));
  PrintFileMeasurement(json, "duckdb COPY read_json -> parquet", duckdb.Threads(), "JSON lines",
                       flags.rows, jsonl_bytes);
  std::fflush(stdout);
  const FileMeasurement csv = MeasureFileToWal(bench, duckdb, duckdb_single_thread, files.csv,
                                               ReadCsvSql(files.csv));
  PrintFileMeasurement(csv, "duckdb COPY read_csv -> parquet", duckdb.Threads(), "CSV", flags.rows,
                       csv_bytes);
  std::fflush(stdout);
  fs::remove(files.jsonl);
  fs::remove(files.csv);
  fs::remove(bench.work_dir / "skippr.yml");
}

struct WalBandwidth {
  uint64_t dd_bytes = 0;
  double dd_buffered_seconds = 0;
  double dd_direct_seconds = 0;
  WalRun append;  // the best run of each
  WalRun commit;
  uint64_t column_bytes_per_commit = 0;
};

WalBandwidth MeasureWalBandwidth(const Bench& bench) {
  const uint64_t target_bytes = bench.flags.wal_target_bytes;
  const std::vector<Batch> batches = MakeSampleBatches(kRowsPerCommit);
  WalBandwidth bandwidth{.dd_bytes = target_bytes,
                         .column_bytes_per_commit = ColumnBufferBytes(batches)};
  // Rounds of dd, append and commit in turn, a warm-up round first, keeping each one's best: the
  // disk's speed drifts over a run, and interleaving keeps the baseline beside what it measures.
  const auto keep_best = [](WalRun& best, const WalRun& run) {
    if (best.commits == 0 || run.seconds < best.seconds) best = run;
  };
  for (int round = 0; round <= kTimedRuns; ++round) {
    // Each measurement starts with no dirty pages left by the one before (or by the file → WAL
    // section): writeback still under way would slow small synced writes far more than dd's one.
    sync();
    const double dd_buffered_seconds = TimeDd(bench, target_bytes, DdMode::kBuffered);
    sync();
    const double dd_direct_seconds = TimeDd(bench, target_bytes, DdMode::kDirect);
    sync();
    const WalRun append = RunWal(bench.work_dir, batches, target_bytes, WalMode::kAppend);
    sync();
    const WalRun commit = RunWal(bench.work_dir, batches, target_bytes, WalMode::kCommit);
    if (round == 0) continue;
    const auto keep_fastest = [](double& best, double seconds) {
      if (best == 0 || seconds < best) best = seconds;
    };
    keep_fastest(bandwidth.dd_buffered_seconds, dd_buffered_seconds);
    keep_fastest(bandwidth.dd_direct_seconds, dd_direct_seconds);
    keep_best(bandwidth.append, append);
    keep_best(bandwidth.commit, commit);
  }
  return bandwidth;
}

void PrintWalBandwidth(const WalBandwidth& bandwidth) {
  const double dd_buffered_mib_per_second = Mib(bandwidth.dd_bytes) / bandwidth.dd_buffered_seconds;
  const double dd_direct_mib_per_second = Mib(bandwidth.dd_bytes) / bandwidth.dd_direct_seconds;
  const double dd_mib_per_second = std::max(dd_buffered_mib_per_second, dd_direct_mib_per_second);
  fmt::print("  {:<37}{:7.0f} MiB/s   ({:.0f} MiB, best of {})   (baseline, same run)\n",
             "dd bs=4M conv=fdatasync", dd_buffered_mib_per_second, Mib(bandwidth.dd_bytes),
             kTimedRuns);
  fmt::print("  {:<37}{:7.0f} MiB/s   (baseline, same run; the faster dd counts)\n",
             "dd bs=4M conv=fdatasync oflag=direct", dd_direct_mib_per_second);
  const WalRun& append = bandwidth.append;
  const double append_mib_per_second = Mib(append.segment_bytes) / append.seconds;
  fmt::print("  {:<37}{:7.0f} MiB/s   ratio {:.2f}  (target >= 0.7)\n",
             "WAL append (segment bytes)", append_mib_per_second,
             append_mib_per_second / dd_mib_per_second);
  fmt::print(
      "    {} appends of {:.1f} MiB in {:.2f} s, {:.1f} ms each: O_DIRECT write, fdatasync, "
      "catalog commit (files created 8 at a time, one directory fsync)\n",
      append.commits, Mib(append.segment_bytes) / append.commits, append.seconds,
      append.seconds * 1000 / append.commits);
  const WalRun& commit = bandwidth.commit;
  const uint64_t column_bytes = bandwidth.column_bytes_per_commit * commit.commits;
  fmt::print("  {:<37}{:7.0f} MiB/s   ({:.0f} MiB/s of column data; encoding included)\n",
             "WAL commit (segment bytes)", Mib(commit.segment_bytes) / commit.seconds,
             Mib(column_bytes) / commit.seconds);
  fmt::print(
      "    {} commits of {} rows in {:.2f} s: {:.1f} ms and {:.1f} MiB per segment, "
      "{:.1f} MiB of column data ({:.1f}x compression)\n",
      commit.commits, kRowsPerCommit, commit.seconds, commit.seconds * 1000 / commit.commits,
      Mib(commit.segment_bytes) / commit.commits, Mib(bandwidth.column_bytes_per_commit),
      static_cast<double>(column_bytes) / commit.segment_bytes);
  std::fflush(stdout);
}

void RunLargeInput(const Bench& bench) {
  const fs::path input = bench.work_dir / "large.jsonl";
  const uint64_t target_bytes = static_cast<uint64_t>(bench.flags.large_input_gb * kBytesPerGb);
  const uint64_t rows = WriteLargeJsonLines(input, target_bytes);
  const uint64_t input_bytes = fs::file_size(input);
  const SyncRun run = RunSync(bench, input, rows);
  fmt::print("  {:<37}{} rows in {:.2f} s ({:.0f} MB/s), peak RSS {:.0f} MiB  (target < 1 GiB)\n",
             fmt::format("large input {:.1f} GB JSON lines", input_bytes / kBytesPerGb), rows,
             run.seconds, input_bytes / run.seconds / kBytesPerMb, run.peak_rss_kib / 1024.0);
  std::fflush(stdout);
  fs::remove(input);
  fs::remove(bench.work_dir / "skippr.yml");
}

}  // namespace

int main(int argc, char** argv) {
  SetBenchName("bench/wal");
  const Flags flags = ParseFlags(argc, argv);
  Launcher launcher;  // first, while this process is small (bench_common.hpp, "Child processes")
  spdlog::set_level(spdlog::level::warn);  // the in-process WAL logs every commit at info
  const Bench bench{flags, MakeWorkDir(flags.parent_dir), launcher};
  if (flags.is_only_large || flags.is_only_wal) {
    fmt::print("bench/wal  skipprd={}\n", flags.skipprd.string());
  } else {
    RunFileToWal(bench);
  }
  if (!flags.is_only_large) PrintWalBandwidth(MeasureWalBandwidth(bench));
  if (!flags.is_only_wal) RunLargeInput(bench);
  fs::remove_all(bench.work_dir);
  return 0;
}
