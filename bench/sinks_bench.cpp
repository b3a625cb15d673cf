// bench/sinks: what it costs to land a file in each destination, beside what that destination's
// own bulk load of the same rows costs, measured in the same run (STYLE.md, "Benchmarks print
// ratios from one run"); targets are printed, never asserted.
//
//   1. file → DuckDB database: the real `skipprd sync --once` (a child process: discover, WAL
//      commits, landing in a Duckdb sink's `database:` file) of the rides JSON-lines file, beside
//      DuckDB's own `INSERT INTO t SELECT * FROM read_json(...)` into a database file in a fresh
//      process (duckdb_copy, as `duckdb file.duckdb -c "..."` runs it). Target: ≥ 0.7×.
//   2. file → PostgreSQL (a server this benchmark starts on loopback, the tests' helper): `skipprd
//      sync --once` of the rides CSV file into a Postgres sink, beside `psql \copy` of the same
//      CSV file into a table of the same columns and types (made LIKE the sink's). Target: ≥ 0.7×.
//
// Each figure is the median of kRounds interleaved rounds after a warm-up (the two runs of a round
// see the same machine, whose speed drifts), each ratio the median of the rounds' own ratios.
//
//   bench_sinks [--rows N] [--quick] [--skipprd PATH] [--dir PATH]
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "bench_common.hpp"
#include "support/postgres_server.hpp"

namespace skippr::bench {
namespace {

namespace fs = std::filesystem;

constexpr int kRounds = 5;
constexpr double kTarget = 0.7;

struct Flags {
  uint64_t rows = kDefaultRows;
  fs::path skipprd;
  fs::path parent_dir;
};

Flags ParseFlags(int argc, char** argv) {
  Flags flags;
  BenchArgs args(argc, argv, "--rows N, --quick, --skipprd PATH, --dir PATH");
  while (args.Next()) {
    if (args.Is("--rows")) {
      flags.rows = args.Unsigned();
    } else if (args.Is("--quick")) {
      flags.rows = kQuickRows;
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

struct Paired {
  std::vector<double> skipprd_seconds;
  std::vector<double> baseline_seconds;
  std::vector<double> ratios;  // baseline / skipprd, per round
  uint64_t skipprd_peak_rss_kib = 0;
  uint64_t baseline_peak_rss_kib = 0;
};

// A warm-up round, then kRounds rounds of the baseline then skipprd.
template <typename Baseline, typename Skipprd>
Paired MeasurePaired(const Baseline& baseline, const Skipprd& skipprd) {
  Paired paired;
  for (int round = 0; round <= kRounds; ++round) {
    const ChildRun base = baseline();
    const SyncRun ours = skipprd();
    if (round == 0) continue;  // warm-up: file pages, the allocator, PostgreSQL's buffers
    paired.baseline_seconds.push_back(base.seconds);
    paired.skipprd_seconds.push_back(ours.seconds);
    paired.ratios.push_back(base.seconds / ours.seconds);
    paired.baseline_peak_rss_kib = std::max(paired.baseline_peak_rss_kib, base.peak_rss_kib);
    paired.skipprd_peak_rss_kib = std::max(paired.skipprd_peak_rss_kib, ours.peak_rss_kib);
  }
  return paired;
}

void PrintPaired(const std::string& baseline_name, const Paired& paired, uint64_t rows) {
  const double ours = Median(paired.skipprd_seconds);
  const double base = Median(paired.baseline_seconds);
  const double ratio = Median(paired.ratios);
  fmt::print("    skipprd sync   {:7.2f} s  {:6.3f} M rows/s  peak RSS {:6.1f} MiB\n", ours,
             static_cast<double>(rows) / ours / 1e6,
             static_cast<double>(paired.skipprd_peak_rss_kib) / kKibPerMib);
  fmt::print("    {:<14} {:7.2f} s  {:6.3f} M rows/s  peak RSS {:6.1f} MiB\n", baseline_name, base,
             static_cast<double>(rows) / base / 1e6,
             static_cast<double>(paired.baseline_peak_rss_kib) / kKibPerMib);
  fmt::print("    ratio {:.2f}x (target >= {:.1f}x: {})\n", ratio, kTarget,
             ratio >= kTarget ? "met" : "NOT met");
}

// 1. file → DuckDB database.
void MeasureDuckdb(Launcher& launcher, const Flags& flags, const fs::path& work_dir,
                   const InputFiles& input) {
  const fs::path duckdb_copy = fs::read_symlink("/proc/self/exe").parent_path() / "duckdb_copy";
  const fs::path baseline_database = work_dir / "baseline.duckdb";
  const fs::path sink_database = work_dir / "sink.duckdb";
  const fs::path config = work_dir / "skippr.yml";
  std::ofstream(config) << fmt::format(
      "data_sources:\n  rides:\n    File: {{path: {}}}\n"
      "data_sinks:\n  duck:\n    Duckdb: {{database: {}}}\n"
      "pipelines:\n  p:\n    data_source: data_sources.rides\n    data_sink: data_sinks.duck\n",
      input.jsonl.string(), sink_database.string());
  const std::string read = ReadJsonSql(input.jsonl);
  const auto baseline = [&] {
    fs::remove(baseline_database);
    fs::remove(baseline_database.string() + ".wal");
    const fs::path stderr_path = work_dir / "duckdb.stderr";
    const ChildRun child = launcher.Run(
        {{duckdb_copy.string(),
          fmt::format("ATTACH {} AS d; CREATE TABLE d.t AS SELECT * FROM {} LIMIT 0; "
                      "INSERT INTO d.t SELECT * FROM {}",
                      SqlQuoted(baseline_database.string()), read, read)},
         ChildEnvironment({}),
         stderr_path});
    if (child.exit_code != 0 || child.stdout_text != fmt::format("{}\n", flags.rows)) {
      Fail(fmt::format("duckdb_copy exited {} having inserted {} rows; stderr:\n{}",
                       child.exit_code, child.stdout_text, FileText(stderr_path)));
    }
    return child;
  };
  const auto skipprd = [&] {
    fs::remove(sink_database);
    fs::remove(sink_database.string() + ".wal");
    const SyncRun run = RunSkipprdSync(launcher, flags.skipprd, config, "p", work_dir / "data",
                                       work_dir / "skipprd.stderr", flags.rows);
    if (run.rows_landed != flags.rows) {
      Fail(fmt::format("skipprd landed {} rows, expected {}", run.rows_landed, flags.rows));
    }
    return run;
  };
  fmt::print("  1. file -> DuckDB database: skipprd sync --once (Duckdb sink, database form) "
             "beside INSERT INTO t SELECT * FROM read_json(...) in a fresh DuckDB process\n");
  PrintPaired("duckdb INSERT", MeasurePaired(baseline, skipprd), flags.rows);
  fs::remove(baseline_database);
  fs::remove(sink_database);
}

// 2. file → PostgreSQL.
void MeasurePostgres(Launcher& launcher, const Flags& flags, const fs::path& work_dir,
                     const InputFiles& input) {
  std::string why_not;
  const std::unique_ptr<testing::PostgresServer> server =
      testing::PostgresServer::Start({}, &why_not);
  if (!server) Fail("cannot start PostgreSQL: " + why_not);
  const auto sql = [&](const std::string& statement) {
    auto [status, output] = server->Psql(statement, "bench");
    if (status != 0) Fail(fmt::format("psql failed: {}\n{}", output, statement));
    return output;
  };
  if (server->Psql("CREATE DATABASE bench").first != 0) Fail("cannot create the database");
  const fs::path config = work_dir / "postgres.yml";
  std::ofstream(config) << fmt::format(
      "data_sources:\n  rides:\n    File: {{path: {}}}\n"
      "data_sinks:\n  pg:\n    Postgres: {{host: 127.0.0.1, port: {}, user: skippr, database: "
      "bench, schema: landed, sslmode: disable}}\n"
      "pipelines:\n  p:\n    data_source: data_sources.rides\n    data_sink: data_sinks.pg\n",
      input.csv.string(), server->port());
  const auto skipprd = [&] {
    sql("DROP SCHEMA IF EXISTS landed CASCADE");
    const SyncRun run = RunSkipprdSync(launcher, flags.skipprd, config, "p", work_dir / "data",
                                       work_dir / "skipprd.stderr", flags.rows);
    if (run.rows_landed != flags.rows) {
      Fail(fmt::format("skipprd landed {} rows, expected {}", run.rows_landed, flags.rows));
    }
    return run;
  };
  // The baseline's table: the sink's columns and types, in the CSV file's column order.
  skipprd();
  sql("DROP TABLE IF EXISTS copied; CREATE TABLE copied (LIKE landed.p)");
  std::string header;
  std::getline(std::ifstream(input.csv), header);
  const std::string copy = fmt::format(
      "psql -X -q -h 127.0.0.1 -p {} -U skippr -d bench -c \"\\copy copied ({}) FROM '{}' WITH "
      "(FORMAT csv, HEADER true)\"",
      server->port(), header, input.csv.string());
  const auto baseline = [&] {
    sql("TRUNCATE copied");
    const fs::path stderr_path = work_dir / "psql.stderr";
    const ChildRun child =
        launcher.Run({{"/bin/sh", "-c", copy}, ChildEnvironment({}), stderr_path});
    if (child.exit_code != 0) Fail(fmt::format("`{}` failed: {}", copy, FileText(stderr_path)));
    return child;
  };
  fmt::print("  2. file -> PostgreSQL: skipprd sync --once of rides.csv (Postgres sink) beside "
             "psql \\copy of the same CSV into a table LIKE the sink's\n");
  PrintPaired("psql \\copy", MeasurePaired(baseline, skipprd), flags.rows);
  if (sql("SELECT count(*) FROM landed.p") != fmt::format("{}\n", flags.rows)) {
    Fail("the sink's table does not hold every row");
  }
}

}  // namespace
}  // namespace skippr::bench

int main(int argc, char** argv) {
  using namespace skippr::bench;
  SetBenchName("bench/sinks");
  const Flags flags = ParseFlags(argc, argv);
  Launcher launcher;  // first, while this process is small (bench_common.hpp, "Child processes")
  const std::filesystem::path work_dir = MakeWorkDir(flags.parent_dir);
  const std::optional<InputFiles> input = WriteInputFiles(work_dir, flags.rows);
  if (!input) Fail("could not write the input files");
  fmt::print("bench/sinks  rows={} ({} MB of JSON lines); medians of {} interleaved rounds after a "
             "warm-up, each ratio the median of the rounds' own (baseline s / skipprd s)\n",
             flags.rows, std::filesystem::file_size(input->jsonl) / 1'000'000, kRounds);
  MeasureDuckdb(launcher, flags, work_dir, *input);
  MeasurePostgres(launcher, flags, work_dir, *input);
  std::filesystem::remove_all(work_dir);
  return 0;
}
