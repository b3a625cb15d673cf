// bench/lake: what it costs to land records in SkipprLake (issue #5), beside a baseline measured in
// the same run (STYLE.md, "Benchmarks print ratios from one run"); targets are printed, never
// asserted.
//
//   1. file → SkipprLake: the real `skipprd sync --once` (a child process: discover, WAL commits
//      and landing included) on a JSON-lines file, with a SkipprLake sink in a local warehouse,
//      beside DuckDB in-process COPY read_json → Parquet (zstd) with its default thread count (the
//      machine's cores, which skipprd's reader, sync, committer and lander threads share) and,
//      for reference, one thread. Also skipprd's peak RSS (the
//      child's ru_maxrss).
//   2. commit latency: lake::LakeWriter::Land in-process, --landings distinct landings (one WAL
//      slice each, so each has its own landing id) of one prepared batch into one table, each
//      timed: data file, statistics, manifest, manifest list, metadata and catalog swap.
//   3. data files and manifests per 10M rows in the table's current snapshot (iceberg:: metadata,
//      manifest list, manifests), after a sync of (1) and after the landings of (2).
//
//   bench_lake [--rows N] [--quick] [--landings N] [--landing-rows N] [--skipprd PATH] [--dir PATH]
//
// Everything is written under a temporary directory (in --dir, else $TMPDIR) removed at the end.
#include <fmt/format.h>
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

constexpr uint64_t kDefaultLandings = 200;
constexpr uint64_t kQuickLandings = 50;
constexpr uint64_t kDefaultLandingRows = 50'000;
constexpr uint64_t kRowsPerReport = 10'000'000;  // the "files and manifests per 10M rows"
constexpr const char* kPipeline = "p";
constexpr const char* kPipelineInstance = "0123456789abcdef0123456789abcdef";
constexpr const char* kTableNamespace = "bench";
constexpr const char* kLandingNamespace = "rides";  // the table of the in-process landings

// ---------------------------------------------------------------------------------------------
// Flags

struct Flags {
  uint64_t rows = kDefaultRows;
  uint64_t landings = kDefaultLandings;
  uint64_t landing_rows = kDefaultLandingRows;
  fs::path skipprd;     // default: the skipprd of this build tree
  fs::path parent_dir;  // where the temporary directory is made; default $TMPDIR
};

Flags ParseFlags(int argc, char** argv) {
  bool is_quick = false;
  std::optional<uint64_t> rows;
  std::optional<uint64_t> landings;
  Flags flags;
  BenchArgs args(argc, argv,
                 "--rows N, --quick, --landings N, --landing-rows N, --skipprd PATH, --dir PATH");
  while (args.Next()) {
    if (args.Is("--rows")) {
      rows = args.Unsigned();
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
  flags.rows = rows.value_or(is_quick ? kQuickRows : kDefaultRows);
  flags.landings = landings.value_or(is_quick ? kQuickLandings : kDefaultLandings);
  if (flags.rows == 0 || flags.landings == 0 || flags.landing_rows == 0) {
    Fail("--rows, --landings and --landing-rows must be positive");
  }
  ResolveSkipprdAndDir(flags.skipprd, flags.parent_dir);
  return flags;
}

// What every measurement needs.
struct Bench {
  const Flags& flags;
  fs::path work_dir;  // temporary, removed at the end
  Launcher& launcher;
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
      iceberg::ReadManifestList(OrFail(iceberg::LocalPathOfUri(snapshot->manifest_list), "uri")),
      "reading the manifest list");
  for (const iceberg::ManifestFile& manifest_file : list.manifests) {
    ++counts.manifests;
    const iceberg::Manifest manifest =
        OrFail(iceberg::ReadManifest(OrFail(iceberg::LocalPathOfUri(manifest_file.manifest_path),
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
// 1. file → SkipprLake beside DuckDB COPY read_json → Parquet (zstd)

struct FileMeasurement {
  double duckdb_seconds = 0;
  double duckdb_single_thread_seconds = 0;  // the baseline bench/wal uses
  double skipprd_seconds = 0;
  uint64_t skipprd_peak_rss_kib = 0;
  uint64_t landings = 0;  // of the last sync
  TableCounts counts;     // of the last sync's table
};

FileMeasurement MeasureFileToLake(const Bench& bench, DuckDb& duckdb, DuckDb& duckdb_single_thread,
                                  const fs::path& input) {
  const uint64_t rows = bench.flags.rows;
  const fs::path config = bench.work_dir / "skippr.yml";
  const fs::path data_dir = bench.work_dir / "data";
  const fs::path warehouse = bench.work_dir / "warehouse";
  WriteSyncConfig(config, {.input = input,
                           .pipeline = kPipeline,
                           .lake_warehouse = warehouse,
                           .lake_table_namespace = kTableNamespace});
  FileMeasurement measurement;
  // Rounds of DuckDB then skipprd, a warm-up round first, keeping each one's best: this machine's
  // speed drifts over minutes, and interleaving keeps the baseline beside what it measures.
  for (int round = 0; round <= kTimedRuns; ++round) {
    const double duckdb_seconds =
        TimeDuckDbCopy(duckdb, ReadJsonSql(input), bench.work_dir / "x.parquet", rows,
                       "FORMAT parquet, COMPRESSION zstd");
    const double duckdb_single_thread_seconds =
        TimeDuckDbCopy(duckdb_single_thread, ReadJsonSql(input), bench.work_dir / "x.parquet",
                       rows, "FORMAT parquet, COMPRESSION zstd");
    fs::remove_all(warehouse);
    const SyncRun run = RunSkipprdSync(bench.launcher, bench.flags.skipprd, config, kPipeline,
                                       data_dir, bench.work_dir / "skipprd.stderr", rows);
    if (run.rows_landed != rows) {
      Fail(fmt::format("skipprd sync landed {} rows, expected {}", run.rows_landed, rows));
    }
    measurement.skipprd_peak_rss_kib = std::max(measurement.skipprd_peak_rss_kib, run.peak_rss_kib);
    if (round == kTimedRuns) {
      measurement.landings = run.landings;
      measurement.counts = CountTable(OnlyTableLocation(warehouse));
    }
    fs::remove_all(data_dir);
    fs::remove_all(warehouse);
    if (round == 0) continue;
    if (measurement.duckdb_seconds == 0 || duckdb_seconds < measurement.duckdb_seconds) {
      measurement.duckdb_seconds = duckdb_seconds;
    }
    if (measurement.duckdb_single_thread_seconds == 0 ||
        duckdb_single_thread_seconds < measurement.duckdb_single_thread_seconds) {
      measurement.duckdb_single_thread_seconds = duckdb_single_thread_seconds;
    }
    if (measurement.skipprd_seconds == 0 || run.seconds < measurement.skipprd_seconds) {
      measurement.skipprd_seconds = run.seconds;
    }
  }
  fs::remove(config);
  return measurement;
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
      const lake::Landing landing = lake::PlanLanding(kPipeline, kPipelineInstance, kLandingNamespace, {{i + 1, 0}});
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
  const Bench bench{flags, MakeWorkDir(flags.parent_dir), launcher};

  const std::optional<InputFiles> written = WriteInputFiles(bench.work_dir, flags.rows);
  if (!written) Fail(fmt::format("cannot write the input files in {}", bench.work_dir.string()));
  fs::remove(written->csv);
  const fs::path& input = written->jsonl;
  const uint64_t input_bytes = fs::file_size(input);
  {
    DuckDb duckdb(/*threads=*/std::nullopt);  // DuckDB's default, as skipprd's landing
    DuckDb duckdb_single_thread(/*threads=*/1);
    fmt::print("bench/lake  rows={} threads={} (DuckDB's default; skipprd reads, shapes, commits "
               "and lands on threads of their own, on the same cores)  rides.jsonl={:.0f} MB\n",
               flags.rows, duckdb.Threads(), input_bytes / kBytesPerMb);
    std::fflush(stdout);
    const FileMeasurement file = MeasureFileToLake(bench, duckdb, duckdb_single_thread, input);
    fmt::print("  {:<40}{}   (baseline, same run)\n",
               fmt::format("duckdb COPY read_json -> parquet zstd, {} threads", duckdb.Threads()),
               Throughput(file.duckdb_seconds, flags.rows, input_bytes));
    fmt::print("  {:<40}{}   (baseline, same run)\n",
               "duckdb COPY read_json -> parquet zstd, 1 thread",
               Throughput(file.duckdb_single_thread_seconds, flags.rows, input_bytes));
    fmt::print("  {:<40}{}   ratio {:.2f} to {} threads, {:.2f} to 1 thread  (target >= 0.5)\n",
               "skipprd sync --once -> SkipprLake",
               Throughput(file.skipprd_seconds, flags.rows, input_bytes),
               file.duckdb_seconds / file.skipprd_seconds, duckdb.Threads(),
               file.duckdb_single_thread_seconds / file.skipprd_seconds);
    fmt::print("  {:<40}{:.0f} MiB   ({} landing(s) per sync)\n", "skipprd peak RSS",
               file.skipprd_peak_rss_kib / kKibPerMib, file.landings);
    PrintCounts("files after sync --once", file.counts);
    std::fflush(stdout);
  }
  fs::remove(input);

  const LandingLatencies latencies = MeasureLandings(bench);
  PrintLandings(latencies, flags.landing_rows);
  PrintCounts(fmt::format("files after {} landings", flags.landings), latencies.counts);
  fs::remove_all(bench.work_dir);
  return 0;
}
