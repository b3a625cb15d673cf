// bench/cdc_lake: CDC changes landed in a SkipprLake table as the source's final state, as the
// lander does it — lake::LakeWriter::Land of each landing's batches merged by key (position
// deletes), then LakeWriter::Maintain — in this process, over one table:
//   1. a snapshot of --rows rows (landings of 100,000 rows), then --landings landings of
//      --changes changes each (70% updates of existing keys, 15% inserts, 15% deletes, each change
//      with an increasing order token), each committed to a WAL segment first; every landing timed
//      from reading its changes back from the segment to the end of the maintenance after it;
//      prints changes/s and landing p50/p99 (with and without the landings that ran maintenance);
//   2. the table's live data and delete files after the last landing, and how many maintenance
//      snapshots ran;
//   3. a full scan (count, sums) through query's view of the table: the snapshot just before the
//      last maintenance and the current one, each against a freshly compacted copy of the current
//      rows (one file, no deletes), alternating runs — the median of 15 ratios (target: the
//      current table <= 1.5x).
// (Committing to the WAL is ingest's work, not timed here: bench/wal measures it.)
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
#include "store/store.hpp"
#include "wal/segment.hpp"
#include "wal/wal.hpp"

namespace fs = std::filesystem;
using namespace skippr;
using namespace skippr::bench;

namespace {

constexpr int64_t kSnapshotLandingRows = 100'000;
constexpr int kScanRuns = 15;

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
  std::unique_ptr<store::Store> store;
  std::unique_ptr<wal::Wal> wal;
  std::unique_ptr<lake::LakeWriter> writer;
  lake::LandedSnapshot snapshot;
  uint64_t next_segment = 1;
  uint64_t next_token = 1;
  int64_t maintenance_runs = 0;
  lake::LandedSnapshot before_last_maintenance;
};

// Commits `batch` to the WAL as one segment; returns the segment's file.
std::string CommitToWal(Table& table, const Batch& batch) {
  Result<wal::PreparedSegment> segment = table.wal->Prepare({batch}, "{}");
  if (!segment.ok()) Fail("WAL prepare: " + segment.status().ToString());
  Result<wal::CommitInfo> committed = table.wal->Append(*segment, nullptr);
  if (!committed.ok()) Fail("WAL commit: " + committed.status().ToString());
  return table.wal->directory() + "/" + segment->entry.file_name;
}

// Reads the changes of the segment at `path` back, lands them as one landing merged by id, then
// maintains the table as the lander does. Returns whether maintenance committed.
bool LandAndMaintain(Table& table, const std::string& path) {
  Result<wal::SegmentReader> reader = wal::SegmentReader::Open(path);
  if (!reader.ok()) Fail("WAL read: " + reader.status().ToString());
  Result<Batch> batch = reader->ReadSlice(0);
  if (!batch.ok()) Fail("WAL read: " + batch.status().ToString());
  const schema::NamespaceSchema schema = InvoicesSchema();
  const uint64_t segment_id = table.next_segment++;
  const lake::Landing landing{.landing_id = fmt::format("bench-landing-{}", segment_id),
                              .namespace_name = "invoices",
                              .wal_segment_ids = {segment_id},
                              .key_columns = {"id"}};
  Result<lake::LandingOutcome> landed = table.writer->Land(
      landing, schema, {std::make_shared<const Batch>(std::move(batch).value())});
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

double ScanOnceSeconds(query::Engine& engine) {
  const Clock::time_point start = Clock::now();
  Result<query::QueryResult> result = engine.Run(
      "SELECT count(*), sum(customer_id), sum(amount_cents), max(memo) FROM bench.invoices");
  if (!result.ok()) Fail("scan: " + result.status().ToString());
  return SecondsSince(start);
}

struct PairedScan {
  double baseline_seconds = 0;  // medians
  double seconds = 0;
  double ratio = 0;  // median of the runs' ratios
};

// A full scan (count, sums) of `rows` and of `baseline` through query's view, alternating, kScanRuns
// of each after a warm-up: on a noisy machine each ratio compares runs made moments apart.
PairedScan ScanAgainst(const query::LandedRows& baseline, const query::LandedRows& rows) {
  const std::unique_ptr<query::Engine> baseline_engine = EngineReading(baseline);
  const std::unique_ptr<query::Engine> engine = EngineReading(rows);
  std::vector<double> baseline_seconds, seconds, ratios;
  for (int run = 0; run <= kScanRuns; ++run) {
    const double baseline_run = ScanOnceSeconds(*baseline_engine);
    const double this_run = ScanOnceSeconds(*engine);
    if (run == 0) continue;
    baseline_seconds.push_back(baseline_run);
    seconds.push_back(this_run);
    ratios.push_back(this_run / baseline_run);
  }
  return {Percentile(baseline_seconds, 0.5), Percentile(seconds, 0.5), Percentile(ratios, 0.5)};
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
  Result<std::unique_ptr<store::Store>> store =
      store::Store::Open({.directory = (work_dir / "store").string()});
  if (!store.ok()) Fail("store: " + store.status().ToString());
  table.store = std::move(store).value();
  Result<std::unique_ptr<wal::Wal>> opened =
      wal::Wal::Open((work_dir / "wal").string(), "bench", *table.store);
  if (!opened.ok()) Fail("WAL: " + opened.status().ToString());
  table.wal = std::move(opened).value();
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
    LandAndMaintain(table, CommitToWal(table, *batch.Take()));
  }
  const double snapshot_seconds = SecondsSince(snapshot_start);
  fmt::print("  snapshot landed in {:.2f} s ({:.0f} rows/s)\n", snapshot_seconds,
             static_cast<double>(flags.rows) / snapshot_seconds);

  std::mt19937_64 random(20261205);
  int64_t next_id = flags.rows;
  std::vector<double> all_seconds;
  std::vector<double> plain_seconds;
  std::vector<double> maintained_seconds;
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
    const std::string segment = CommitToWal(table, *batch.Take());
    const Clock::time_point start = Clock::now();
    const bool maintained = LandAndMaintain(table, segment);
    const double seconds = SecondsSince(start);
    all_seconds.push_back(seconds);
    (maintained ? maintained_seconds : plain_seconds).push_back(seconds);
  }
  double landing_seconds = 0;
  for (const double seconds : all_seconds) landing_seconds += seconds;
  const double total_changes = static_cast<double>(flags.landings * flags.changes);
  fmt::print("  changes landed from the WAL: {:.0f} changes/s ({} changes in {:.1f} s of "
             "landings)\n",
             total_changes / landing_seconds, flags.landings * flags.changes, landing_seconds);
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
  const query::LandedRows compacted = CompactedCopy(current, work_dir / "compacted.parquet");
  const PairedScan now = ScanAgainst(compacted, current);
  fmt::print("  full scan, compacted copy:        {:.1f} ms (baseline, same run, alternating)\n",
             now.baseline_seconds * 1e3);
  fmt::print("  full scan, the table now:         {:.1f} ms   ratio {:.2f}  (target <= 1.5)\n",
             now.seconds * 1e3, now.ratio);
  if (table.maintenance_runs > 0) {
    const FileCounts before = CurrentFiles(table.before_last_maintenance);
    const PairedScan then = ScanAgainst(compacted, RowsOf(table.before_last_maintenance));
    fmt::print("  full scan, before the last maintenance ({} data, {} delete files): {:.1f} ms   "
               "ratio {:.2f}\n",
               before.data_files, before.delete_files, then.seconds * 1e3, then.ratio);
  }
  fs::remove_all(work_dir);
  return 0;
}
