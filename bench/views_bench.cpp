// bench/views: what the transform.aggregates processor costs (issue #6), beside a baseline
// measured in the same run (STYLE.md, "Benchmarks print ratios from one run"); targets are
// printed, never asserted.
//
//   1. processor throughput: --rows rows (10M; --quick 1M) of (customer_id long, amount long,
//      price decimal(12,2)) committed through the real WAL (wal::Wal::Commit, 100k-row segments),
//      then AggregateProcessor::ProcessCommitted over all of them, with 100k keys and with one
//      key per row (10M keys), each into a fresh store. Peak RSS of this process after each.
//   2. one incremental batch (--batch-rows, 10k) committed and applied on top of (1)'s 100k-key
//      state, beside DuckDB (in-process, its default threads) recomputing the same GROUP BY over
//      the same rows from scratch (a table generated with the same values).
//
//   bench_views [--rows N] [--quick] [--batch-rows N] [--dir PATH]
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <filesystem>
#include <memory>

#include "bench_common.hpp"
#include "transform/transform.hpp"

namespace fs = std::filesystem;
using namespace skippr;
using namespace skippr::bench;

namespace {

constexpr uint64_t kRowsPerSegment = 100'000;
constexpr uint64_t kDefaultBatchRows = 10'000;
constexpr uint64_t kFewKeys = 100'000;

template <typename T>
T OrFail(Result<T> result, std::string_view what) {
  if (!result.ok()) Fail(fmt::format("{}: {}", what, result.status().message()));
  return std::move(result).value();
}

int64_t AmountOf(uint64_t row) { return static_cast<int64_t>((row * 7919) % 100'000); }

Batch MakeBatch(uint64_t first_row, uint64_t rows, uint64_t keys) {
  Batch batch;
  batch.namespace_name = "orders";
  batch.schema_id = 1;
  batch.fields = {{1, "customer_id", LogicalType::Long(), true},
                  {2, "amount", LogicalType::Long(), true},
                  {3, "price", LogicalType::Decimal(12, 2).value(), true}};
  for (const Field& field : batch.fields) batch.columns.emplace_back(field.type);
  for (uint64_t row = first_row; row < first_row + rows; ++row) {
    batch.columns[0].Append(Value::Int(static_cast<int64_t>(row % keys)));
    batch.columns[1].Append(Value::Int(AmountOf(row)));
    batch.columns[2].Append(Value::Decimal(AmountOf(row) * 3, 12, 2));
  }
  batch.num_rows = static_cast<int64_t>(rows);
  return batch;
}

config::AggregateConfig Aggregate() {
  config::AggregateConfig aggregate;
  aggregate.id = "customer_totals";
  aggregate.key_fields = {"customer_id"};
  aggregate.measures = {{"amount_total", config::MeasureKind::kSum, "amount"},
                        {"orders", config::MeasureKind::kCount, "*"},
                        {"price_total", config::MeasureKind::kSum, "price"}};
  return aggregate;
}

double PeakRssMib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / kKibPerMib;
}

struct Pipeline {
  std::unique_ptr<store::Store> store;
  std::unique_ptr<wal::Wal> wal;
  std::unique_ptr<transform::AggregateProcessor> processor;
  std::string wal_dir;
};

Pipeline OpenPipeline(const fs::path& dir) {
  Pipeline p;
  p.wal_dir = (dir / "wal").string();
  p.store = OrFail(store::Store::Open({(dir / "store").string()}), "store");
  p.wal = OrFail(wal::Wal::Open(p.wal_dir, "p", *p.store), "wal");
  p.processor =
      OrFail(transform::AggregateProcessor::Open(*p.store, p.wal_dir, {Aggregate()}), "processor");
  return p;
}

void Commit(Pipeline& p, uint64_t first_row, uint64_t rows, uint64_t keys) {
  OrFail(p.wal->Commit({MakeBatch(first_row, rows, keys)}, "{}",
                       [](store::WriteTransaction&) { return Status::OK(); }),
         "commit");
}

// Commits `rows` rows, then times the processor over them; returns the seconds.
double ProcessAll(Pipeline& p, uint64_t rows, uint64_t keys) {
  for (uint64_t first = 0; first < rows; first += kRowsPerSegment) {
    Commit(p, first, std::min(kRowsPerSegment, rows - first), keys);
  }
  const auto started = Clock::now();
  const int64_t applied = OrFail(p.processor->ProcessCommitted(), "process");
  const double seconds = SecondsSince(started);
  if (applied != static_cast<int64_t>(rows))
    Fail(fmt::format("applied {} of {} rows", applied, rows));
  return seconds;
}

}  // namespace

int main(int argc, char** argv) {
  SetBenchName("bench/views");
  spdlog::set_level(spdlog::level::warn);
  uint64_t rows = 10'000'000;
  uint64_t batch_rows = kDefaultBatchRows;
  fs::path parent = fs::temp_directory_path();
  BenchArgs args(argc, argv, "--rows N, --quick, --batch-rows N, --dir PATH");
  while (args.Next()) {
    if (args.Is("--rows")) {
      rows = args.Unsigned();
    } else if (args.Is("--quick")) {
      rows = 1'000'000;
    } else if (args.Is("--batch-rows")) {
      batch_rows = args.Unsigned();
    } else if (args.Is("--dir")) {
      parent = args.Value();
    } else {
      args.FailUnknown();
    }
  }
  const fs::path work = MakeWorkDir(parent);
  const uint64_t few_keys = std::min(kFewKeys, rows);
  fmt::print(
      "bench/views  rows={} segments of {} rows, measures: sum(long), count(*), sum(decimal)\n",
      rows, kRowsPerSegment);

  Pipeline few = OpenPipeline(work / "few");
  const double few_seconds = ProcessAll(few, rows, few_keys);
  fmt::print("  processor, {:>9} keys        {:8.2f} s   {:6.2f} M rows/s   peak RSS {:.0f} MiB\n",
             few_keys, few_seconds, rows / few_seconds / 1e6, PeakRssMib());
  {
    Pipeline many = OpenPipeline(work / "many");
    const double many_seconds = ProcessAll(many, rows, rows);
    fmt::print(
        "  processor, {:>9} keys        {:8.2f} s   {:6.2f} M rows/s   peak RSS {:.0f} MiB\n", rows,
        many_seconds, rows / many_seconds / 1e6, PeakRssMib());
  }

  // One incremental batch on the 100k-key state, beside DuckDB recomputing the GROUP BY.
  Commit(few, rows, batch_rows, few_keys);
  const auto started = Clock::now();
  OrFail(few.processor->ProcessCommitted(), "process the batch");
  const double batch_seconds = SecondsSince(started);
  DuckDb duckdb(std::nullopt);
  const uint64_t total = rows + batch_rows;
  duckdb.Execute(fmt::format(
      "CREATE TABLE orders AS SELECT i % {} AS customer_id, (i * 7919) % 100000 AS amount, "
      "CAST(((i * 7919) % 100000) * 3 AS DECIMAL(12,2)) / 100 AS price FROM range({}) t(i)",
      few_keys, total));
  const double recompute_seconds = BestOfSeconds([&] {
    const auto start = Clock::now();
    duckdb.Execute(
        "CREATE OR REPLACE TABLE totals AS SELECT customer_id, sum(amount), count(*), "
        "sum(price) FROM orders GROUP BY customer_id");
    return SecondsSince(start);
  });
  fmt::print("  one batch of {} rows, incremental  {:8.4f} s\n", batch_rows, batch_seconds);
  fmt::print(
      "  duckdb GROUP BY over all {} rows   {:8.4f} s   (baseline, same run)   ratio {:.1f}x "
      "faster incrementally\n",
      total, recompute_seconds, recompute_seconds / batch_seconds);
  fmt::print("  peak RSS (whole run)               {:.0f} MiB\n", PeakRssMib());
  few.processor.reset();
  few.wal.reset();
  few.store.reset();
  std::error_code ignored;
  fs::remove_all(work, ignored);
  return 0;
}
