// bench/cdc_lake: CDC changes landed in a SkipprLake table as the source's final state, as the
// lander does it — lake::LakeWriter::Land of each landing's batches merged by key (equality
// deletes), then LakeWriter::Maintain — in this process, over one table:
//   1. a snapshot of --rows rows (landings of 100,000 rows), then --landings landings of
//      --changes changes each (70% updates of existing keys, 15% inserts, 15% deletes, each change
//      with an increasing order token), every landing timed with the maintenance after it;
//      prints changes/s and landing p50/p99 (with and without the landings that ran maintenance);
//   2. the table's live data and delete files after the last landing, and how many maintenance
//      snapshots ran;
//   3. a full scan (count, sums) through query's view of the table: the snapshot just before the
//      last maintenance, the current one, and a freshly compacted copy of the same rows (one
//      file, no deletes) — medians of 5, the ratios against the compacted copy (target: the
//      current table <= 1.5x).
// The batches are built in memory, as a landing round holds them once it has read its slices from
// the WAL; reading the WAL is not timed here (bench/wal measures it).
//
//   bench_cdc_lake [--rows N] [--landings N] [--changes N] [--dir PATH]
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench_common.hpp"
#include "iceberg/iceberg.hpp"
#include "lake/lake.hpp"
#include "query/query.hpp"
#include "schema/schema.hpp"

namespace fs = std::filesystem;
using namespace skippr;
using namespace skippr::bench;

namespace {

constexpr int64_t kSnapshotLandingRows = 100'000;
constexpr int kScanRuns = 5;

struct Flags {
  int64_t rows = 1'000'000;
  int64_t landings = 1000;
  int64_t changes = 1000;
  fs::path parent_dir;
};

Flags ParseFlags(int argc, char** argv) {
  Flags flags;
  BenchArgs args(argc, argv, "--rows N, --landings N, --changes N, --dir PATH");
  while (args.Next()) {
    if (args.Is("--rows")) {
      flags.rows = static_cast<int64_t>(args.Unsigned());
    } else if (args.Is("--landings")) {
      flags.landings = static_cast<int64_t>(args.Unsigned());
    } else if (args.Is("--changes")) {
      flags.changes = static_cast<int64_t>(args.Unsigned());
    } else if (args.Is("--dir")) {
      flags.parent_dir = args.Value();
    } else {
      args.FailUnknown();
    }
  }
  return flags;
}

schema::NamespaceSchema InvoicesSchema() {
  schema::NamespaceSchema invoices;
  invoices.name = "invoices";
  invoices.schema_id = 1;
  invoices.last_field_id = 4;
  invoices.fields = {Field{1, "id", LogicalType::Long(), false},
                     Field{2, "customer_id", LogicalType::Long(), false},
                     Field{3, "amount_cents", LogicalType::Long(), false},
                     Field{4, "memo", LogicalType::String(), false}};
  invoices.key_fields = {"id"};
  return invoices;
}

// Builds batches of changes to the invoices table, each with its CDC sidecar.
class ChangeBatch {
 public:
  ChangeBatch() {
    batch_->namespace_name = "invoices";
    batch_->schema_id = 1;
    batch_->fields = InvoicesSchema().fields;
    for (const Field& field : batch_->fields) batch_->columns.emplace_back(field.type);
    batch_->cdc.emplace();
  }
  void Add(Mutation mutation, int64_t id, uint64_t token) {
    const bool has_values = mutation != Mutation::kDelete;
    batch_->columns[0].AppendInt64(id);
    if (has_values) {
      batch_->columns[1].AppendInt64(id % 9973);
      batch_->columns[2].AppendInt64(static_cast<int64_t>(token % 100'000));
      batch_->columns[3].AppendBytes(fmt::format("memo {} at {}", id, token));
    } else {
      for (size_t column = 1; column < 4; ++column) batch_->columns[column].AppendNull();
    }
    batch_->cdc->Append(RowChange{.mutation = mutation,
                                  .event_id = std::to_string(token),
                                  .order_token = fmt::format("{:016}", token),
                                  .business_key = fmt::format("[{}]", id)});
    ++batch_->num_rows;
  }
  std::shared_ptr<const Batch> Take() { return std::move(batch_); }

 private:
  std::shared_ptr<Batch> batch_ = std::make_shared<Batch>();
};

struct Table {
  std::unique_ptr<lake::LakeWriter> writer;
  lake::LandedSnapshot snapshot;
  uint64_t next_segment = 1;
  uint64_t next_token = 1;
  int64_t maintenance_runs = 0;
  lake::LandedSnapshot before_last_maintenance;
};

// Lands `batch` as one landing merged by id, then maintains the table as the lander does.
// Returns whether maintenance committed.
bool LandAndMaintain(Table& table, std::shared_ptr<const Batch> batch) {
  const schema::NamespaceSchema schema = InvoicesSchema();
  const lake::Landing landing = lake::PlanLanding(
      "bench", "bench-instance", "invoices", {{table.next_segment++, 0}}, false, {"id"});
  Result<lake::LandingOutcome> landed = table.writer->Land(landing, schema, {std::move(batch)});
  if (!landed.ok()) Fail("landing: " + landed.status().ToString());
  table.snapshot = landed->snapshot;
  Result<lake::MaintenanceOutcome> maintained = table.writer->Maintain(schema);
  if (!maintained.ok()) Fail("maintenance: " + maintained.status().ToString());
  if (!maintained->committed) return false;
  table.before_last_maintenance = table.snapshot;
  table.snapshot = maintained->snapshot;
  ++table.maintenance_runs;
  return true;
}

double Percentile(std::vector<double> values, double fraction) {
  std::sort(values.begin(), values.end());
  const auto at = static_cast<size_t>(fraction * static_cast<double>(values.size() - 1) + 0.5);
  return values[std::min(at, values.size() - 1)];
}

// Seconds of a full scan of `rows` through query's view (median of kScanRuns, after one warm-up).
// An engine whose table bench.invoices is `rows`, as query's view reads them.
std::unique_ptr<query::Engine> EngineReading(const query::LandedRows& rows) {
  Result<std::unique_ptr<query::Engine>> engine = query::Engine::Open();
  if (!engine.ok()) Fail(engine.status().ToString());
  query::TableSource table{"bench", "invoices", InvoicesSchema().fields,
                           query::BatchList::InMemory({})};
  table.landed = rows;
  if (Status registered = (*engine)->RegisterTable(std::move(table)); !registered.ok()) {
    Fail(registered.ToString());
  }
  return std::move(engine).value();
}

double ScanSeconds(const query::LandedRows& rows) {
  const std::unique_ptr<query::Engine> engine = EngineReading(rows);
  std::vector<double> seconds;
  for (int run = 0; run <= kScanRuns; ++run) {
    const Clock::time_point start = Clock::now();
    Result<query::QueryResult> result = engine->Run(
        "SELECT count(*), sum(customer_id), sum(amount_cents), max(memo) FROM bench.invoices");
    if (!result.ok()) Fail("scan: " + result.status().ToString());
    if (run > 0) seconds.push_back(SecondsSince(start));
  }
  return Percentile(seconds, 0.5);
}

query::LandedRows RowsOf(const lake::LandedSnapshot& snapshot) {
  Result<query::LandedRows> rows = lake::LandedRowsOf(snapshot);
  if (!rows.ok()) Fail(rows.status().ToString());
  return *rows;
}

// The table's rows written again as one Parquet file without deletes: a freshly compacted copy.
query::LandedRows CompactedCopy(const query::LandedRows& rows, const fs::path& path) {
  Result<query::QueryResult> copied = EngineReading(rows)->Run(
      fmt::format("COPY (SELECT * FROM bench.invoices) TO {} (FORMAT parquet, COMPRESSION zstd)",
                  SqlQuoted(path.string())));
  if (!copied.ok()) Fail("compacted copy: " + copied.status().ToString());
  query::LandedRows compacted;
  compacted.data_files.push_back({path.string(), 1, {}});
  return compacted;
}

struct FileCounts {
  std::string data_files;
  std::string delete_files;
  std::string records;
};

FileCounts CurrentFiles(const lake::LandedSnapshot& snapshot) {
  Result<iceberg::TableMetadata> metadata =
      iceberg::ReadMetadataFile(snapshot.metadata_location);
  if (!metadata.ok()) Fail(metadata.status().ToString());
  const iceberg::Snapshot* current = metadata->FindSnapshot(snapshot.snapshot_id);
  return {current->summary.at("total-data-files"), current->summary.at("total-delete-files"),
          current->summary.at("total-records")};
}

}  // namespace

int main(int argc, char** argv) {
  SetBenchName("bench/cdc_lake");
  const Flags flags = ParseFlags(argc, argv);
  spdlog::set_level(spdlog::level::warn);
  const fs::path work_dir = MakeWorkDir(flags.parent_dir);
  Table table;
  Result<std::unique_ptr<lake::LakeWriter>> writer =
      lake::LakeWriter::Open({.pipeline = "bench",
                              .pipeline_instance = "bench-instance",
                              .warehouse = "file://" + (work_dir / "warehouse").string(),
                              .table_namespace = "bench"});
  if (!writer.ok()) Fail(writer.status().ToString());
  table.writer = std::move(writer).value();

  fmt::print("bench/cdc_lake: a snapshot of {} rows, then {} landings of {} changes each\n",
             flags.rows, flags.landings, flags.changes);
  const Clock::time_point snapshot_start = Clock::now();
  for (int64_t first = 0; first < flags.rows; first += kSnapshotLandingRows) {
    ChangeBatch batch;
    for (int64_t id = first; id < std::min(flags.rows, first + kSnapshotLandingRows); ++id) {
      batch.Add(Mutation::kSnapshot, id, table.next_token);
    }
    ++table.next_token;
    LandAndMaintain(table, batch.Take());
  }
  const double snapshot_seconds = SecondsSince(snapshot_start);
  fmt::print("  snapshot landed in {:.2f} s ({:.0f} rows/s)\n", snapshot_seconds,
             static_cast<double>(flags.rows) / snapshot_seconds);

  std::mt19937_64 random(20261205);
  int64_t next_id = flags.rows;
  std::vector<double> all_seconds;
  std::vector<double> plain_seconds;
  std::vector<double> maintained_seconds;
  const Clock::time_point changes_start = Clock::now();
  for (int64_t landing = 0; landing < flags.landings; ++landing) {
    ChangeBatch batch;
    for (int64_t change = 0; change < flags.changes; ++change) {
      const uint64_t kind = random() % 100;
      const int64_t id = static_cast<int64_t>(random() % static_cast<uint64_t>(next_id));
      if (kind < 70) {
        batch.Add(Mutation::kUpdate, id, table.next_token++);
      } else if (kind < 85) {
        batch.Add(Mutation::kInsert, next_id++, table.next_token++);
      } else {
        batch.Add(Mutation::kDelete, id, table.next_token++);
      }
    }
    const Clock::time_point start = Clock::now();
    const bool maintained = LandAndMaintain(table, batch.Take());
    const double seconds = SecondsSince(start);
    all_seconds.push_back(seconds);
    (maintained ? maintained_seconds : plain_seconds).push_back(seconds);
  }
  const double changes_seconds = SecondsSince(changes_start);
  const double total_changes = static_cast<double>(flags.landings * flags.changes);
  fmt::print("  changes landed: {:.0f} changes/s ({} changes in {:.1f} s)\n",
             total_changes / changes_seconds, flags.landings * flags.changes, changes_seconds);
  fmt::print("  landing incl. maintenance: p50 {:.1f} ms, p99 {:.1f} ms, max {:.1f} ms\n",
             Percentile(all_seconds, 0.5) * 1e3, Percentile(all_seconds, 0.99) * 1e3,
             Percentile(all_seconds, 1.0) * 1e3);
  if (!plain_seconds.empty()) {
    fmt::print("  landings without maintenance ({}): p50 {:.1f} ms, p99 {:.1f} ms\n",
               plain_seconds.size(), Percentile(plain_seconds, 0.5) * 1e3,
               Percentile(plain_seconds, 0.99) * 1e3);
  }
  if (!maintained_seconds.empty()) {
    fmt::print("  landings that ran maintenance ({}): p50 {:.1f} ms, p99 {:.1f} ms\n",
               maintained_seconds.size(), Percentile(maintained_seconds, 0.5) * 1e3,
               Percentile(maintained_seconds, 0.99) * 1e3);
  }

  const FileCounts files = CurrentFiles(table.snapshot);
  fmt::print("  after {} landings: {} data files, {} delete files, {} rows; {} maintenance "
             "snapshots\n",
             flags.landings, files.data_files, files.delete_files, files.records,
             table.maintenance_runs);

  const query::LandedRows current = RowsOf(table.snapshot);
  const double compacted_seconds =
      ScanSeconds(CompactedCopy(current, work_dir / "compacted.parquet"));
  const double current_seconds = ScanSeconds(current);
  fmt::print("  full scan, compacted copy:        {:.1f} ms (baseline, same run)\n",
             compacted_seconds * 1e3);
  fmt::print("  full scan, the table now:         {:.1f} ms   ratio {:.2f}  (target <= 1.5)\n",
             current_seconds * 1e3, current_seconds / compacted_seconds);
  if (table.maintenance_runs > 0) {
    const FileCounts before = CurrentFiles(table.before_last_maintenance);
    const double before_seconds = ScanSeconds(RowsOf(table.before_last_maintenance));
    fmt::print("  full scan, before the last maintenance ({} data, {} delete files): {:.1f} ms   "
               "ratio {:.2f}\n",
               before.data_files, before.delete_files, before_seconds * 1e3,
               before_seconds / compacted_seconds);
  }
  fs::remove_all(work_dir);
  return 0;
}
