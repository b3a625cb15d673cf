// bench/query: `skipprd query` at scale (issue #13), beside DuckDB over the same landed Parquet
// files in the same run (STYLE.md, "Benchmarks print ratios from one run"); targets are printed,
// never asserted.
//
// For each row count (1M and 10M; --quick: 100k and 1M) two pipelines read the Sample source: one
// WAL-only ("walonly"), one landed in a SkipprLake sink ("landed"). Then each statement runs as the
// real `skipprd query` (a child process: start-up, binding, scans and output included; its peak RSS
// is the child's ru_maxrss) and as DuckDB in-process over read_parquet of the landed data files, to
// which the start-up of a trivial `skipprd query` is added so both sides pay for a process:
//   count(*)      SELECT count(*)
//   GROUP BY      SELECT rider_type, count(*), sum(amount), avg(duration_seconds) ... GROUP BY 1
//   filter        SELECT count(*), sum(amount) WHERE ride_id BETWEEN <the middle 1%>: skipprd reads
//                 only the landed files whose ride_id bounds meet the range ("files read")
//   export        SELECT * as CSV to a file (DuckDB: COPY (SELECT * FROM read_parquet) TO csv)
// The ratio is DuckDB's time over skipprd's (1 = as fast; higher is better).
//
//   bench_query [--rows N[,N...]] [--quick] [--skipprd PATH] [--dir PATH]
//
// Everything is written under a temporary directory (in --dir, else $TMPDIR) removed at the end.
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "bench_common.hpp"

namespace fs = std::filesystem;
using namespace skippr::bench;

namespace {

constexpr const char* kTableNamespace = "bench";

struct Flags {
  std::vector<uint64_t> rows = {1'000'000, 10'000'000};
  fs::path skipprd;
  fs::path parent_dir;
};

Flags ParseFlags(int argc, char** argv) {
  Flags flags;
  BenchArgs args(argc, argv, "--rows N[,N...], --quick, --skipprd PATH, --dir PATH");
  while (args.Next()) {
    if (args.Is("--rows")) {
      flags.rows.clear();
      std::stringstream list(args.Value());
      for (std::string item; std::getline(list, item, ',');) flags.rows.push_back(std::stoull(item));
    } else if (args.Is("--quick")) {
      flags.rows = {100'000, 1'000'000};
    } else if (args.Is("--skipprd")) {
      flags.skipprd = args.Value();
    } else if (args.Is("--dir")) {
      flags.parent_dir = args.Value();
    } else {
      args.FailUnknown();
    }
  }
  ResolveSkipprdAndDir(flags.skipprd, flags.parent_dir);
  return flags;
}

// One row count's pipelines: `walonly` and `landed`, synced into their own
// DATA_DIR and warehouse.
struct Dataset {
  uint64_t rows = 0;
  fs::path dir;
  fs::path config;
  fs::path data_dir;
  fs::path warehouse;
  std::vector<fs::path> data_files;  // the landed Parquet files
};

void WriteConfig(const Dataset& dataset) {
  std::ofstream out(dataset.config);
  out << fmt::format(R"(data_sources:
  sample: {{Sample: {{rows: {}, seed: 7}}}}
data_sinks:
  lake: {{SkipprLake: {{warehouse: "file://{}", table_namespace: {}}}}}
pipelines:
  walonly: {{data_source: data_sources.sample}}
  landed: {{data_source: data_sources.sample, data_sink: data_sinks.lake}}
)", dataset.rows, dataset.warehouse.string(), kTableNamespace);
  if (!out) Fail(fmt::format("cannot write {}", dataset.config.string()));
}

Dataset Prepare(Launcher& launcher, const Flags& flags, const fs::path& work, uint64_t rows) {
  Dataset dataset;
  dataset.rows = rows;
  dataset.dir = work / fmt::format("rows_{}", rows);
  fs::create_directories(dataset.dir);
  dataset.config = dataset.dir / "skippr.yml";
  dataset.data_dir = dataset.dir / "data";
  dataset.warehouse = dataset.dir / "warehouse";
  WriteConfig(dataset);
  for (const std::string pipeline : {"walonly", "landed"}) {
    const ChildRun sync = launcher.Run(
        {{flags.skipprd.string(), "--config", dataset.config.string(), "sync", "--pipeline",
          pipeline, "--once", "--output", "json"},
         ChildEnvironment({{"DATA_DIR", dataset.data_dir.string()}}),
         dataset.dir / "sync.stderr"});
    if (sync.exit_code != 0) {
      Fail(fmt::format("skipprd sync -p {} exited {}:\n{}", pipeline, sync.exit_code,
                       FileText(dataset.dir / "sync.stderr")));
    }
  }
  for (const auto& entry : fs::recursive_directory_iterator(dataset.warehouse)) {
    if (entry.path().extension() == ".parquet") dataset.data_files.push_back(entry.path());
  }
  if (dataset.data_files.empty()) Fail("the landed pipeline landed no Parquet file");
  return dataset;
}

struct Statement {
  std::string name;
  std::string select;  // over the table {table}
  bool is_export = false;
  std::string target;
};

std::vector<Statement> Statements(uint64_t rows) {
  const uint64_t low = rows / 2;
  const uint64_t high = low + std::max<uint64_t>(1, rows / 100);
  return {
      {"count(*)", "SELECT count(*) FROM {table}", false, ""},
      {"GROUP BY",
       "SELECT rider_type, count(*), sum(amount), avg(duration_seconds) FROM {table} GROUP BY 1 "
       "ORDER BY 1",
       false, "walonly >= 0.25, landed >= 0.5"},
      {"filter 1%",
       fmt::format("SELECT count(*), sum(amount) FROM {{table}} WHERE ride_id BETWEEN {} AND {}",
                   low, high),
       false, ""},
      {"export CSV", "SELECT * FROM {table}", true, ">= 0.5"},
  };
}

std::string Over(const std::string& select, const std::string& table) {
  std::string sql = select;
  sql.replace(sql.find("{table}"), 7, table);
  return sql;
}

// 'text' for /bin/sh, with each ' written as '\''.
std::string ShellQuoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

struct SkipprdRun {
  double seconds = 0;
  uint64_t peak_rss_kib = 0;
  // Landed data files the statement's views read, of all the tables' landed data files (from
  // the debug log line "query: <table> reads N of its M landed data files").
  uint64_t files_read = 0;
  uint64_t files_total = 0;
};

void CountLandedFiles(const std::string& log, SkipprdRun& run) {
  constexpr std::string_view kMarker = " reads ";
  for (size_t at = log.find(kMarker); at != std::string::npos; at = log.find(kMarker, at + 1)) {
    unsigned long long read = 0;
    unsigned long long total = 0;
    const int matched =
        std::sscanf(log.c_str() + at, " reads %llu of its %llu landed data files", &read, &total);
    if (matched == 2) {
      run.files_read += read;
      run.files_total += total;
    }
  }
}

// `skipprd query` of `sql`, its output to a file (an export's CSV, or the plain JSON).
SkipprdRun RunQuery(Launcher& launcher, const Flags& flags, const Dataset& dataset,
                    const std::string& sql, bool is_export) {
  const fs::path output = dataset.dir / "query.out";
  const std::string format = is_export ? "--output csv" : "--plain";
  const std::string command = fmt::format(
      "exec {} --config {} --log debug query {} --sql {} > {}", ShellQuoted(flags.skipprd.string()),
      ShellQuoted(dataset.config.string()), format, ShellQuoted(sql), ShellQuoted(output.string()));
  const ChildRun run = launcher.Run({{"/bin/sh", "-c", command},
                                     ChildEnvironment({{"DATA_DIR", dataset.data_dir.string()}}),
                                     dataset.dir / "query.stderr"});
  if (run.exit_code != 0) {
    Fail(fmt::format("skipprd query exited {} for {}:\n{}", run.exit_code, sql,
                     FileText(dataset.dir / "query.stderr")));
  }
  fs::remove(output);
  SkipprdRun result{run.seconds, run.peak_rss_kib};
  CountLandedFiles(FileText(dataset.dir / "query.stderr"), result);
  return result;
}

std::string ParquetList(const Dataset& dataset) {
  std::string list = "[";
  for (size_t i = 0; i < dataset.data_files.size(); ++i) {
    list += (i ? ", " : "") + SqlQuoted(dataset.data_files[i].string());
  }
  return list + "]";
}

double RunDuckDb(DuckDb& duckdb, const Dataset& dataset, const Statement& statement) {
  const std::string table = "read_parquet(" + ParquetList(dataset) + ")";
  const std::string sql = Over(statement.select, table);
  const fs::path csv = dataset.dir / "duckdb.csv";
  const auto started = Clock::now();
  if (statement.is_export) {
    duckdb.Execute(fmt::format("COPY ({}) TO {} (HEADER)", sql, SqlQuoted(csv.string())));
  } else {
    duckdb.QueryText(sql);
  }
  const double seconds = SecondsSince(started);
  fs::remove(csv);
  return seconds;
}

void Report(Launcher& launcher, const Flags& flags, DuckDb& duckdb, const Dataset& dataset) {
  // What a process costs skipprd before any table is read: added to DuckDB's in-process times.
  const double startup = RunQuery(launcher, flags, dataset, "SELECT 1", false).seconds;
  fmt::print("bench/query  rows={}  landed data files={}  skipprd start-up {:.3f} s  DuckDB "
             "threads={}\n",
             dataset.rows, dataset.data_files.size(), startup, duckdb.Threads());
  fmt::print("  {:<12}{:<9}{:>10}{:>10}{:>14}{:>8}{:>12}   {}\n", "statement", "table", "skipprd",
             "peak RSS", "DuckDB+start", "ratio", "files read", "target");
  for (const Statement& statement : Statements(dataset.rows)) {
    const double duckdb_seconds = RunDuckDb(duckdb, dataset, statement) + startup;
    for (const std::string table : {"walonly", "landed"}) {
      const SkipprdRun run = RunQuery(launcher, flags, dataset,
                                      Over(statement.select, table + "." + table),
                                      statement.is_export);
      const std::string files =
          run.files_total == 0 ? "-" : fmt::format("{}/{}", run.files_read, run.files_total);
      fmt::print("  {:<12}{:<9}{:>8.2f} s{:>6.0f} MiB{:>12.2f} s{:>8.2f}{:>12}   {}\n",
                 statement.name, table, run.seconds,
                 static_cast<double>(run.peak_rss_kib) / kKibPerMib, duckdb_seconds,
                 duckdb_seconds / run.seconds, files, statement.target);
    }
  }
  fmt::print("  targets: peak RSS < 512 MiB for every statement, flat from 1M to 10M rows\n");
}

}  // namespace

int main(int argc, char** argv) {
  SetBenchName("bench/query");
  Launcher launcher;  // first, while this process is small (bench_common.hpp, "Child processes")
  const Flags flags = ParseFlags(argc, argv);
  const fs::path work = MakeWorkDir(flags.parent_dir);
  DuckDb duckdb(std::nullopt);
  for (const uint64_t rows : flags.rows) {
    const Dataset dataset = Prepare(launcher, flags, work, rows);
    Report(launcher, flags, duckdb, dataset);
    fs::remove_all(dataset.dir);
  }
  fs::remove_all(work);
  return 0;
}
