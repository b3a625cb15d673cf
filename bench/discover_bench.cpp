// bench/discover: skipprd's parse-and-type throughput (File source + Shaper, the path `skipprd
// discover` takes) for JSON lines and CSV, beside DuckDB's read_json / read_csv materialising the
// same file with the same thread count, in the same run. Prints ratios (STYLE.md, "Benchmarks print
// ratios from one run"); no thresholds.
//
//   bench_discover [--rows N] [--quick] [--dir PATH] [--threads T]
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bench_common.hpp"
#include "config/config.hpp"
#include "schema/schema.hpp"
#include "sources/sources.hpp"

namespace fs = std::filesystem;
using namespace skippr;
using namespace skippr::bench;

namespace {

// ---------------------------------------------------------------------------------------------
// Flags

struct Flags {
  uint64_t rows = kDefaultRows;
  std::string dir;  // empty: a fresh temporary directory, removed at the end
  int threads = 1;
};

Flags ParseFlags(int argc, char** argv) {
  Flags flags;
  BenchArgs args(argc, argv, "--rows N, --quick, --dir PATH, --threads T");
  while (args.Next()) {
    if (args.Is("--rows")) {
      flags.rows = args.Unsigned();
    } else if (args.Is("--quick")) {
      flags.rows = kQuickRows;
    } else if (args.Is("--dir")) {
      flags.dir = args.Value();
    } else if (args.Is("--threads")) {
      flags.threads = static_cast<int>(args.Unsigned());
    } else {
      args.FailUnknown();
    }
  }
  if (flags.rows == 0 || flags.threads < 1) Fail("--rows and --threads must be positive");
  return flags;
}

// ---------------------------------------------------------------------------------------------
// Memory

// The process's resident-set high-water mark (VmHWM), and a reset of it (Linux ≥ 4.0), so each side
// can be measured on its own.
double PeakRssMib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;  // kB
  }
  return 0;
}

void ResetPeakRss() { std::ofstream("/proc/self/clear_refs") << "5"; }

// ---------------------------------------------------------------------------------------------
// skipprd side: the File source and the Shaper, as `skipprd discover` drives them (all rows).

struct SkipprRun {
  uint64_t records = 0;
  uint64_t deadletters = 0;
  std::string types;  // the inferred top-level types, for the report
};

std::string DescribeTypes(const schema::PipelineSchema& schema) {
  std::string types;
  for (const auto& [name, ns] : schema.namespaces) {
    for (const Field& field : ns.fields) {
      types += (types.empty() ? "" : ", ") + field.type.ToString();
    }
  }
  return types;
}

SkipprRun ReadWithSkippr(const fs::path& file) {
  config::ConnectorConfig connector;
  connector.kind = "File";
  connector.settings["path"] = file.string();
  Result<std::unique_ptr<sources::Source>> source = sources::MakeSource(connector);
  if (!source.ok()) Fail(fmt::format("File source: {}", source.status().message()));
  sources::ReadOptions options;
  options.max_records_per_partition = 0;  // every row
  if (Status opened = (*source)->Open({}, options); !opened.ok()) {
    Fail(fmt::format("File source open: {}", opened.message()));
  }
  schema::Shaper shaper({}, schema::ShaperOptions{"bench"});
  SkipprRun run;
  while (true) {
    Result<std::optional<sources::SourceBatch>> batch = (*source)->Next();
    if (!batch.ok()) Fail(fmt::format("File source read: {}", batch.status().message()));
    if (!*batch) break;
    for (sources::SourceRecord& record : (*batch)->records) {
      if (shaper.Absorb(std::move(record.value), (*batch)->OriginOf(record), (*batch)->context)) {
        ++run.deadletters;
      }
    }
    run.records += (*batch)->records.size();
    run.deadletters += (*batch)->deadletters.size();
  }
  shaper.Seal();
  run.types = DescribeTypes(shaper.schema());
  return run;
}

double TimeSkippr(const fs::path& file, uint64_t expected_rows, std::string& types) {
  const Clock::time_point start = Clock::now();
  const SkipprRun run = ReadWithSkippr(file);
  const double seconds = SecondsSince(start);
  if (run.deadletters != 0 || run.records != expected_rows) {
    Fail(fmt::format("skipprd read {}: {} records and {} deadletters, expected {} and 0",
                     file.string(), run.records, run.deadletters, expected_rows));
  }
  types = run.types;
  return seconds;
}

// ---------------------------------------------------------------------------------------------
// DuckDB side: an in-memory database (bench_common) materialising every column with CREATE TABLE
// AS.

double TimeDuckDb(DuckDb& duckdb, const std::string& table_function, uint64_t expected_rows,
                  std::string& types) {
  const Clock::time_point start = Clock::now();
  duckdb.Execute("CREATE TABLE t AS SELECT * FROM " + table_function);
  const double seconds = SecondsSince(start);
  const int64_t rows = duckdb.QueryInt64("SELECT count(*) FROM t");
  if (rows != static_cast<int64_t>(expected_rows)) {
    Fail(fmt::format("DuckDB read {} rows from {}, expected {}", rows, table_function,
                     expected_rows));
  }
  types = duckdb.QueryText(
      "SELECT string_agg(lower(data_type), ', ' ORDER BY ordinal_position) "
      "FROM information_schema.columns WHERE table_name = 't'");
  duckdb.Execute("DROP TABLE t");
  return seconds;
}

// ---------------------------------------------------------------------------------------------
// Report

struct Measurement {
  double seconds = 0;
  std::string types;
};

struct FileResult {
  std::string label;  // "JSON lines", "CSV"
  std::string duckdb_function;
  uint64_t file_bytes = 0;
  Measurement duckdb;
  Measurement skippr;
};

void PrintFileResult(const FileResult& result, uint64_t rows) {
  fmt::print("  {:<38}{}   (baseline, same run)\n",
             fmt::format("duckdb {} (CREATE TABLE AS)", result.duckdb_function),
             Throughput(result.duckdb.seconds, rows, result.file_bytes));
  fmt::print("  {:<38}{}   ratio {:.2f}\n", fmt::format("skipprd discover path ({})", result.label),
             Throughput(result.skippr.seconds, rows, result.file_bytes),
             result.duckdb.seconds / result.skippr.seconds);
  fmt::print("    types  duckdb:  {}\n", result.duckdb.types);
  fmt::print("           skipprd: {}\n", result.skippr.types);
}

fs::path MakeWorkDir(const Flags& flags, bool& is_temporary) {
  is_temporary = flags.dir.empty();
  fs::path dir = flags.dir;
  if (is_temporary) {
    std::string pattern = (fs::temp_directory_path() / "bench_discover.XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) Fail("cannot create a temporary directory");
    dir = pattern;
  }
  fs::create_directories(dir);
  return dir;
}

}  // namespace

int main(int argc, char** argv) {
  SetBenchName("bench/discover");
  const Flags flags = ParseFlags(argc, argv);
  bool is_temporary = false;
  const fs::path dir = MakeWorkDir(flags, is_temporary);
  const std::optional<InputFiles> written = WriteInputFiles(dir, flags.rows);
  if (!written) Fail(fmt::format("cannot write the input files in {}", dir.string()));
  const InputFiles& files = *written;

  FileResult json{"JSON lines", "read_json", fs::file_size(files.jsonl)};
  FileResult csv{"CSV", "read_csv ", fs::file_size(files.csv)};
  fmt::print("bench/discover  rows={} threads={}  rides.jsonl={:.0f} MB  rides.csv={:.0f} MB\n",
             flags.rows, flags.threads, json.file_bytes / kBytesPerMb,
             csv.file_bytes / kBytesPerMb);

  // skipprd first, then DuckDB, so that each side's peak RSS is its own.
  ResetPeakRss();
  json.skippr.seconds =
      BestOfSeconds([&] { return TimeSkippr(files.jsonl, flags.rows, json.skippr.types); });
  csv.skippr.seconds =
      BestOfSeconds([&] { return TimeSkippr(files.csv, flags.rows, csv.skippr.types); });
  const double skippr_peak_rss_mib = PeakRssMib();

  ResetPeakRss();
  double duckdb_peak_rss_mib = 0;
  {
    DuckDb duckdb(flags.threads);
    json.duckdb.seconds = BestOfSeconds([&] {
      return TimeDuckDb(duckdb, ReadJsonSql(files.jsonl), flags.rows, json.duckdb.types);
    });
    csv.duckdb.seconds = BestOfSeconds(
        [&] { return TimeDuckDb(duckdb, ReadCsvSql(files.csv), flags.rows, csv.duckdb.types); });
    duckdb_peak_rss_mib = PeakRssMib();
  }

  PrintFileResult(json, flags.rows);
  PrintFileResult(csv, flags.rows);
  fmt::print(
      "  peak RSS  skipprd {:.0f} MiB   duckdb {:.0f} MiB   (high-water mark of each side)\n",
      skippr_peak_rss_mib, duckdb_peak_rss_mib);

  if (is_temporary) fs::remove_all(dir);
  return 0;
}
