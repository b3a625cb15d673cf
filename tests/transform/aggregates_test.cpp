// transform.aggregates: the processor against random CDC streams committed through the real WAL,
// compared with a recompute over the final rows — in process, after SIGKILLs at random moments
// and at every processor crash point, and after a config change; reclaim gating and ingest that
// does not wait for the processor (pipeline level).
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <thread>

#include "core/crash.hpp"
#include "e2e/process.hpp"
#include "pipeline/landing.hpp"
#include "support/scale.hpp"
#include "pipeline/pipeline.hpp"
#include "support/temp_dir.hpp"
#include "transform/aggregate_stream.hpp"
#include "transform/transform.hpp"

namespace skippr {
namespace {

using testing::OrdersAggregate;
using testing::OrdersOracle;
using testing::OrdersStream;
using testing::TempDir;

template <typename T>
T ValueOrDie(Result<T> result) {
  if (!result.ok()) throw std::runtime_error(result.status().message());
  return std::move(result).value();
}

void OkOrDie(const Status& status) {
  if (!status.ok()) throw std::runtime_error(status.message());
}

std::map<OrdersOracle::Key, OrdersOracle::Measures> Stored(
    store::Store& store, const config::AggregateConfig& aggregate) {
  store::ReadTransaction read = ValueOrDie(store.BeginRead());
  transform::AggregateSnapshot snapshot = ValueOrDie(transform::ReadAggregate(read, aggregate));
  EXPECT_TRUE(snapshot.is_current);
  std::map<OrdersOracle::Key, OrdersOracle::Measures> groups;
  for (const transform::AggregateGroup& group : snapshot.groups)
    groups[group.keys] = group.measures;
  return groups;
}

// Commits `batches` random batches (one or two per segment) through the real WAL; returns the
// oracle of the final rows.
OrdersOracle CommitStream(store::Store& store, const std::string& wal_dir, uint64_t seed,
                          int batches, const std::function<void()>& after_commit = nullptr) {
  OrdersStream stream(seed);
  OrdersOracle oracle;
  std::unique_ptr<wal::Wal> wal = ValueOrDie(wal::Wal::Open(wal_dir, "p", store));
  std::mt19937_64 random(seed);
  for (int i = 0; i < batches;) {
    std::vector<Batch> segment;
    const int count = 1 + static_cast<int>(random() % 2);
    for (int j = 0; j < count && i < batches; ++j, ++i) segment.push_back(stream.NextBatch(oracle));
    ValueOrDie(wal->Commit(segment, "{}", [](store::WriteTransaction&) { return Status::OK(); }));
    if (after_commit) after_commit();
  }
  return oracle;
}

TEST(AggregateProcessor, RandomStreamsEqualARecomputeOverTheFinalRows) {
  const auto seeds = static_cast<uint64_t>(testing::ScaledRounds(40, 10));
  for (uint64_t seed = 1; seed <= seeds; ++seed) {
    SCOPED_TRACE(seed);
    TempDir dir;
    auto store = ValueOrDie(store::Store::Open({dir.Sub("store")}));
    transform::ProcessorOptions options;
    options.rows_per_transaction = 1 + static_cast<int64_t>(seed * 7 % 60);
    auto processor = ValueOrDie(
        transform::AggregateProcessor::Open(*store, dir.Sub("wal"), {OrdersAggregate()}, options));
    std::mt19937_64 random(seed * 1000);
    const OrdersOracle oracle = CommitStream(*store, dir.Sub("wal"), seed, 60, [&] {
      if (random() % 3 == 0) ValueOrDie(processor->ProcessCommitted());
    });
    ValueOrDie(processor->ProcessCommitted());
    EXPECT_EQ(Stored(*store, OrdersAggregate()), oracle.Recompute());
    // Processing again applies nothing: the cursor has passed everything.
    EXPECT_EQ(ValueOrDie(processor->ProcessCommitted()), 0);
    EXPECT_EQ(Stored(*store, OrdersAggregate()), oracle.Recompute());
  }
}

// The processor verifies what it reads of a segment, frame by frame (the landing verifies whole
// files): a byte flipped anywhere in a segment either stops it with Corruption or lies where it
// reads nothing, and then the groups are exact.
TEST(AggregateProcessor, AFlippedSegmentByteStopsItOrLeavesTheGroupsExact) {
  const int trials = testing::ScaledRounds(30, 8);
  std::mt19937_64 random(18);
  int stopped = 0;
  for (int trial = 0; trial < trials; ++trial) {
    SCOPED_TRACE(trial);
    TempDir dir;
    auto store = ValueOrDie(store::Store::Open({dir.Sub("store")}));
    const OrdersOracle oracle = CommitStream(*store, dir.Sub("wal"), 7, 4);
    std::vector<std::filesystem::path> segments;
    for (const auto& entry : std::filesystem::directory_iterator(dir.Sub("wal"))) {
      if (entry.path().extension() == ".seg" && entry.file_size() > 0) {
        segments.push_back(entry.path());
      }
    }
    ASSERT_FALSE(segments.empty());
    const std::filesystem::path& segment = segments[random() % segments.size()];
    const uint64_t offset = random() % std::filesystem::file_size(segment);
    {
      std::fstream file(segment, std::ios::in | std::ios::out | std::ios::binary);
      file.seekg(static_cast<std::streamoff>(offset));
      const char byte = static_cast<char>(file.get());
      file.seekp(static_cast<std::streamoff>(offset));
      file.put(static_cast<char>(byte ^ 0x5a));
    }
    auto processor = ValueOrDie(
        transform::AggregateProcessor::Open(*store, dir.Sub("wal"), {OrdersAggregate()}));
    Result<int64_t> applied = processor->ProcessCommitted();
    if (!applied.ok()) {
      EXPECT_EQ(applied.status().code(), StatusCode::kCorruption) << applied.status().message();
      ++stopped;
      continue;
    }
    EXPECT_EQ(Stored(*store, OrdersAggregate()), oracle.Recompute())
        << "byte " << offset << " of " << segment;
  }
  EXPECT_GT(stopped, 0);  // most bytes are the frames it reads
}

// `rows` rows of namespace n: k = "a", v = 2^63 − 1.
Batch MaxLongRowsOfGroupA(int rows) {
  Batch batch;
  batch.namespace_name = "n";
  batch.fields = {{1, "k", LogicalType::String(), true}, {2, "v", LogicalType::Long(), true}};
  for (const Field& field : batch.fields) batch.columns.emplace_back(field.type);
  for (int i = 0; i < rows; ++i) {
    batch.columns[0].Append(Value::String("a"));
    batch.columns[1].Append(Value::Int(INT64_MAX));
    ++batch.num_rows;
  }
  return batch;
}

// A store, a WAL and one aggregate's processor in `dir`; Commit hands a batch to the WAL and
// applies what is committed.
struct AggregateOverWal {
  AggregateOverWal(TempDir& dir, const config::AggregateConfig& aggregate)
      : store(ValueOrDie(store::Store::Open({dir.Sub("store")}))),
        wal(ValueOrDie(wal::Wal::Open(dir.Sub("wal"), "p", *store))),
        processor(ValueOrDie(transform::AggregateProcessor::Open(*store, dir.Sub("wal"),
                                                                 {aggregate}))) {}

  void Commit(const Batch& batch) {
    ValueOrDie(wal->Commit({batch}, "{}", [](store::WriteTransaction&) { return Status::OK(); }));
    ValueOrDie(processor->ProcessCommitted());
  }

  std::unique_ptr<store::Store> store;
  std::unique_ptr<wal::Wal> wal;
  std::unique_ptr<transform::AggregateProcessor> processor;
};

TEST(AggregateProcessor, ExactSumsBeyond64Bits) {
  TempDir dir;
  config::AggregateConfig aggregate;
  aggregate.id = "big";
  aggregate.key_fields = {"k"};
  aggregate.measures = {{"total", config::MeasureKind::kSum, "v"}};
  AggregateOverWal over(dir, aggregate);
  over.Commit(MaxLongRowsOfGroupA(4));
  store::ReadTransaction read = ValueOrDie(over.store->BeginRead());
  auto snapshot = ValueOrDie(transform::ReadAggregate(read, aggregate));
  ASSERT_EQ(snapshot.groups.size(), 1u);
  EXPECT_EQ(snapshot.groups[0].measures[0], "36893488147419103228");  // 4 × (2^63 − 1)
}

// Group records are written as version 2 (compact); a version 1 record, as earlier skipprd wrote
// it, is still read and carried on exactly.
TEST(AggregateProcessor, AVersionOneGroupRecordIsStillRead) {
  TempDir dir;
  config::AggregateConfig aggregate;
  aggregate.id = "old";
  aggregate.key_fields = {"k"};
  aggregate.measures = {{"total", config::MeasureKind::kSum, "v"},
                        {"rows", config::MeasureKind::kCount, "*"}};
  const Batch batch = MaxLongRowsOfGroupA(3);
  AggregateOverWal over(dir, aggregate);
  store::Store* store = over.store.get();
  over.Commit(batch);

  // The group record rewritten as version 1 says 5 rows: total 5 × (2^63 − 1), rows 5.
  const std::string prefix =
      store::KeyBuilder().Text("aggregate").Text("old").Text("group").key();
  std::vector<std::string> keys;
  {
    store::ReadTransaction read = ValueOrDie(store->BeginRead());
    OkOrDie(read.Scan(store::Family::kStreamState, prefix, [&](std::string_view key, auto) {
      keys.emplace_back(key);
      return true;
    }));
  }
  ASSERT_EQ(keys.size(), 1u);
  std::string v1;
  const auto append = [&v1](const auto& value) {
    v1.append(reinterpret_cast<const char*>(&value), sizeof(value));
  };
  append(uint8_t{1});                                  // version
  append(int64_t{5});                                  // rows
  append(uint32_t{2});                            // measures, as configured: total, rows
  append(static_cast<__int128>(INT64_MAX) * 5);   // total: exact
  append(int32_t{0});                             //        scale
  append(0.0);                                    //        real
  append(uint8_t{0});                             //        has_real
  append(int64_t{5});                             //        non_null
  append(static_cast<__int128>(0));               // rows: exact
  append(int32_t{0});
  append(0.0);
  append(uint8_t{0});
  append(int64_t{5});                             //       non_null: the count
  {
    store::WriteTransaction write = ValueOrDie(store->BeginWrite());
    OkOrDie(write.Put(store::Family::kStreamState, keys[0], v1));
    OkOrDie(write.Commit());
  }
  over.Commit(batch);
  store::ReadTransaction read = ValueOrDie(store->BeginRead());
  auto snapshot = ValueOrDie(transform::ReadAggregate(read, aggregate));
  ASSERT_EQ(snapshot.groups.size(), 1u);
  EXPECT_EQ(snapshot.groups[0].measures, (std::vector<std::optional<std::string>>{
                                             "73786976294838206456", "8"}));  // 8 × (2^63 − 1)
  // Rewritten as version 2: version, rows, measure count, total's parts and exact sum (a 67-bit
  // zigzag number: 10 bytes), rows' parts (its count is the group's rows).
  const std::optional<std::string> rewritten =
      ValueOrDie(read.Get(store::Family::kStreamState, keys[0]));
  ASSERT_TRUE(rewritten.has_value());
  EXPECT_EQ(rewritten->size(), 1u + 1 + 1 + 1 + 10 + 1);
  EXPECT_EQ(static_cast<uint8_t>(rewritten->front()), 2);

  // Damaged version 2 records are refused, naming the aggregate, never read as other numbers.
  const std::string& good = *rewritten;
  for (const std::string& damaged :
       {good.substr(0, good.size() - 1),                   // truncated inside the exact sum
        good + '\x00',                                      // a byte left over
        good.substr(0, 3) + '\x10' + good.substr(4),        // unknown measure parts
        good.substr(0, 4) + std::string(19, '\xff') + '\x01',  // a sum beyond 128 bits
        std::string("\x02\xff\xff\xff\xff\xff\xff\xff\xff\xff\x7f", 11),  // rows beyond 64 bits
        std::string("\x03", 1)}) {                          // a newer version
    store::WriteTransaction write = ValueOrDie(store->BeginWrite());
    OkOrDie(write.Put(store::Family::kStreamState, keys[0], damaged));
    OkOrDie(write.Commit());
    store::ReadTransaction again = ValueOrDie(store->BeginRead());
    const Result<transform::AggregateSnapshot> refused = transform::ReadAggregate(again, aggregate);
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.status().message().find("aggregate old: a group record"), std::string::npos)
        << refused.status().message();
  }
}

// ---------------------------------------------------------------------------------------------
// Crashes: the driver runs the processor in a child process.

constexpr int kKilledExitCode = 128 + SIGKILL;

struct CrashFixture {
  TempDir dir;
  OrdersOracle oracle;

  explicit CrashFixture(uint64_t seed, int batches = 40) {
    auto store = ValueOrDie(store::Store::Open({dir.Sub("store")}));
    oracle = CommitStream(*store, dir.Sub("wal"), seed, batches);
  }

  testing::ProcessResult RunDriver(const std::string& variant, int rows_per_transaction,
                                   const std::string& crash_point = "") {
    testing::ProcessOptions options;
    if (crash_point.empty()) {
      options.unset_env.push_back("SKIPPR_CRASH_POINT");
    } else {
      options.set_env["SKIPPR_CRASH_POINT"] = crash_point;
    }
    return testing::RunProcess(
        AGGREGATES_DRIVER, {dir.path(), variant, std::to_string(rows_per_transaction)}, options);
  }

  std::map<OrdersOracle::Key, OrdersOracle::Measures> Stored(
      const config::AggregateConfig& aggregate) {
    auto store = ValueOrDie(store::Store::Open({dir.Sub("store")}));
    return skippr::Stored(*store, aggregate);
  }
};

TEST(AggregateProcessorCrash, BeforeCommitLeavesTheCursorAndTheStateAsTheyWere) {
  CrashFixture fixture(11);
  EXPECT_EQ(fixture.RunDriver("full", 5, "aggregates.before_commit").exit_code, kKilledExitCode);
  {
    auto store = ValueOrDie(store::Store::Open({fixture.dir.Sub("store")}));
    store::ReadTransaction read = ValueOrDie(store->BeginRead());
    EXPECT_FALSE(ValueOrDie(transform::ReadCursor(read, "order_totals")).has_value());
  }
  EXPECT_EQ(fixture.RunDriver("full", 5).exit_code, 0);
  EXPECT_EQ(fixture.Stored(OrdersAggregate()), fixture.oracle.Recompute());
}

TEST(AggregateProcessorCrash, AfterEveryCommitAReplayResumesAtTheCursor) {
  CrashFixture fixture(12);
  int kills = 0;
  while (true) {
    const testing::ProcessResult run = fixture.RunDriver("full", 7, "aggregates.after_commit");
    if (run.exit_code == 0) break;
    ASSERT_EQ(run.exit_code, kKilledExitCode) << run.err;
    ASSERT_LT(++kills, 10'000);
  }
  EXPECT_GT(kills, 10);  // one kill per chunk commit
  EXPECT_EQ(fixture.Stored(OrdersAggregate()), fixture.oracle.Recompute());
}

TEST(AggregateProcessorCrash, SigkillAtRandomMomentsNeverChangesTheResult) {
  std::mt19937_64 random(20261130);
  int kills_mid_run = 0;
  const int iterations = testing::ScaledRounds(50, 10);
  for (int iteration = 0; iteration < iterations; ++iteration) {
    SCOPED_TRACE(iteration);
    CrashFixture fixture(100 + static_cast<uint64_t>(iteration), 30);
    for (int attempt = 0;; ++attempt) {
      ASSERT_LT(attempt, 1000);
      testing::ProcessOptions options;
      options.unset_env.push_back("SKIPPR_CRASH_POINT");
      testing::RunningProcess driver =
          testing::StartProcess(AGGREGATES_DRIVER, {fixture.dir.path(), "full", "8"}, options);
      // Kills land in the first 40 ms; the window doubles every 5 attempts that all killed the
      // driver, so an iteration also ends where a run takes longer than that (a loaded machine,
      // the sanitizer builds).
      const uint64_t window_us = uint64_t{40'000} << std::min(attempt / 5, 8);
      std::this_thread::sleep_for(std::chrono::microseconds(random() % window_us));
      driver.Kill(SIGKILL);
      const testing::ProcessResult run = driver.Wait();
      if (run.exit_code == 0) break;
      ASSERT_EQ(run.exit_code, kKilledExitCode) << run.err;
      ++kills_mid_run;
    }
    EXPECT_EQ(fixture.Stored(OrdersAggregate()), fixture.oracle.Recompute());
  }
  EXPECT_GE(kills_mid_run, iterations);  // the kills do land while the processor runs
}

// ---------------------------------------------------------------------------------------------
// Config changes

std::map<OrdersOracle::Key, OrdersOracle::Measures> WithoutNoteCount(
    std::map<OrdersOracle::Key, OrdersOracle::Measures> groups) {
  for (auto& [key, measures] : groups) measures.erase(measures.begin() + 1);
  return groups;
}

TEST(AggregateProcessor, ChangingAMeasureRebuildsTheAggregateFromTheWal) {
  CrashFixture fixture(21);
  ASSERT_EQ(fixture.RunDriver("full", 64).exit_code, 0);
  config::AggregateConfig reduced = OrdersAggregate();
  reduced.measures.erase(reduced.measures.begin() + 1);
  // A crash inside the reset leaves the old state whole; the next run resets and rebuilds.
  EXPECT_EQ(fixture.RunDriver("reduced", 64, "aggregates.before_reset_commit").exit_code,
            kKilledExitCode);
  EXPECT_EQ(fixture.Stored(OrdersAggregate()), fixture.oracle.Recompute());
  ASSERT_EQ(fixture.RunDriver("reduced", 64).exit_code, 0);
  EXPECT_EQ(fixture.Stored(reduced), WithoutNoteCount(fixture.oracle.Recompute()));
  // And back: the full aggregate is rebuilt again, equal to the recompute.
  ASSERT_EQ(fixture.RunDriver("full", 64).exit_code, 0);
  EXPECT_EQ(fixture.Stored(OrdersAggregate()), fixture.oracle.Recompute());
}

// A store whose WAL reclaimed a segment: a rebuild can no longer replay the WAL from its start.
std::unique_ptr<store::Store> StoreWhoseWalWasReclaimed(TempDir& dir) {
  auto store = ValueOrDie(store::Store::Open({dir.Sub("store")}));
  store::WriteTransaction write = ValueOrDie(store->BeginWrite());
  OkOrDie(wal::DeleteSegmentEntry(write, 1));  // a reclaim records itself
  OkOrDie(write.Commit());
  return store;
}

TEST(AggregateProcessor, RebuildAfterTheWalWasReclaimedIsRefused) {
  TempDir dir;
  auto store = StoreWhoseWalWasReclaimed(dir);
  Result<std::unique_ptr<transform::AggregateProcessor>> processor =
      transform::AggregateProcessor::Open(*store, dir.Sub("wal"), {OrdersAggregate()});
  ASSERT_FALSE(processor.ok());
  EXPECT_EQ(processor.status().code(), StatusCode::kNotSupported);
  EXPECT_NE(processor.status().message().find("order_totals"), std::string::npos);
}

// Counts the commits of baseline parts (a plain function pointer is all an observer is).
int baseline_parts = 0;
void CountBaselineParts(std::string_view point) {
  if (point == "aggregates.before_baseline_part_commit") ++baseline_parts;
}

// A rebuild after reclaim starts from the landed rows, which the baseline streams: they are
// applied in bounded parts, each its own store transaction, and the result equals the recompute.
// A baseline that fails half way leaves the pending mark, so the next open resets the parts it
// committed and starts over.
TEST(AggregateProcessor, ABaselineIsAppliedInBoundedPartsAndAFailedOneStartsOver) {
  TempDir dir;
  auto store = StoreWhoseWalWasReclaimed(dir);
  OrdersStream stream(31);
  OrdersOracle oracle;
  std::vector<Batch> landed;
  for (int i = 0; i < 60; ++i) landed.push_back(stream.NextBatch(oracle));
  // Hands the batches over, failing at `fail_at` when it is set.
  const auto baseline_failing_at = [&](std::optional<size_t> fail_at) {
    return [&landed, fail_at]() -> Result<transform::LandedBaseline> {
      transform::LandedBaseline baseline;
      baseline.for_each_batch =
          [&landed, fail_at](const transform::LandedBaseline::BatchConsumer& consume) -> Status {
        for (size_t i = 0; i < landed.size(); ++i) {
          if (fail_at && i == *fail_at) return Status::IOError("the lake went away");
          SKIPPR_RETURN_IF_ERROR(consume(landed[i]));
        }
        return Status::OK();
      };
      return baseline;
    };
  };
  const transform::ProcessorOptions small_parts{.rows_per_transaction = 50};
  baseline_parts = 0;
  SetCrashPointObserver(&CountBaselineParts);
  Result<std::unique_ptr<transform::AggregateProcessor>> failed =
      transform::AggregateProcessor::Open(*store, dir.Sub("wal"), {OrdersAggregate()},
                                          small_parts, baseline_failing_at(40));
  EXPECT_FALSE(failed.ok());
  EXPECT_GT(baseline_parts, 3) << "parts were committed before the failure";

  baseline_parts = 0;
  std::unique_ptr<transform::AggregateProcessor> processor =
      ValueOrDie(transform::AggregateProcessor::Open(*store, dir.Sub("wal"), {OrdersAggregate()},
                                                     small_parts, baseline_failing_at({})));
  SetCrashPointObserver(nullptr);
  EXPECT_GT(baseline_parts, 5);
  EXPECT_EQ(Stored(*store, OrdersAggregate()), oracle.Recompute());
}

// Format 2 recorded a reclaim under stream_state's `wal_reclaimed`, which sorts after every
// aggregate's keys: it still counts, and the processor's open moves it to the WAL's catalog.
TEST(AggregateProcessor, AReclaimRecordedByFormat2CountsAndMovesToTheWalCatalog) {
  TempDir dir;
  auto store = ValueOrDie(store::Store::Open({dir.Sub("store")}));
  const std::string format2_key = store::KeyBuilder().Text("wal_reclaimed").key();
  {
    store::WriteTransaction write = ValueOrDie(store->BeginWrite());
    OkOrDie(write.Put(store::Family::kStreamState, format2_key, "1"));
    OkOrDie(write.Commit());
  }
  Result<std::unique_ptr<transform::AggregateProcessor>> refused =
      transform::AggregateProcessor::Open(*store, dir.Sub("wal"), {OrdersAggregate()});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kNotSupported);
  {  // refused: nothing committed
    store::WriteTransaction write = ValueOrDie(store->BeginWrite());
    EXPECT_TRUE(ValueOrDie(write.Get(store::Family::kStreamState, format2_key)).has_value());
  }
  // With no aggregate to reset, the open commits the move alone.
  ValueOrDie(transform::AggregateProcessor::Open(*store, dir.Sub("wal"), {}));
  store::WriteTransaction write = ValueOrDie(store->BeginWrite());
  EXPECT_TRUE(ValueOrDie(wal::HasReclaimedSegments(write)));
  EXPECT_FALSE(ValueOrDie(write.Get(store::Family::kStreamState, format2_key)).has_value());
}

// ---------------------------------------------------------------------------------------------
// Pipeline level: reclaim waits for the processor; ingest does not.

config::Config ParseOrDie(const std::string& yaml) {
  Result<config::Config> config = config::ParseConfig(yaml, "skippr.yml", MapEnvironment());
  if (!config.ok()) throw std::runtime_error(config.status().message());
  return std::move(config).value();
}

std::string InvoicesYaml(const std::string& dir, const std::string& sink) {
  return fmt::format(R"(
data_sources:
  files:
    File:
      path: {0}/input
data_sinks:
  lake:
    SkipprLake:
      warehouse: file://{0}/warehouse
      table_namespace: landed
pipelines:
  invoices:
    data_source: data_sources.files
{1}
    data_dir: {0}/data
    transform:
      aggregates:
        - id: customer_invoice_totals
          key_fields: [customer_id]
          measures:
            invoice_total: {{ sum: amount }}
            invoice_count: {{ count: "*" }}
)",
                     dir, sink);
}

void MarkLanded(store::Store& store, uint64_t segment_id, uint32_t slices) {
  store::WriteTransaction write = ValueOrDie(store.BeginWrite());
  for (uint32_t ordinal = 0; ordinal < slices; ++ordinal) {
    OkOrDie(write.Put(store::Family::kCatalog,
                      store::KeyBuilder().Text("landed").U64(segment_id).U64(ordinal).key(), "l"));
  }
  OkOrDie(write.Commit());
}

std::vector<uint64_t> LiveSegmentIds(store::Store& store) {
  store::ReadTransaction read = ValueOrDie(store.BeginRead());
  std::vector<uint64_t> ids;
  for (const wal::SegmentEntry& entry : ValueOrDie(wal::LiveSegments(read)))
    ids.push_back(entry.segment_id);
  return ids;
}

TEST(AggregateReclaim, ALandedSegmentStaysUntilEveryCursorHasPassedIt) {
  TempDir dir;
  const config::Config config =
      ParseOrDie(InvoicesYaml(dir.path(), "    data_sink: data_sinks.lake"));
  const config::PipelineConfig& pipeline = config.pipelines.at("invoices");
  pipeline::PipelineState state = ValueOrDie(pipeline::PipelineState::OpenForWriting(pipeline));
  auto wal = ValueOrDie(wal::Wal::Open(state.wal_directory(), "invoices", state.store()));
  const auto commit = [&](int64_t customer) {
    Batch batch;
    batch.namespace_name = "invoices";
    batch.fields = {{1, "customer_id", LogicalType::Long(), true},
                    {2, "amount", LogicalType::Long(), true}};
    for (const Field& field : batch.fields) batch.columns.emplace_back(field.type);
    batch.columns[0].Append(Value::Int(customer));
    batch.columns[1].Append(Value::Int(10));
    batch.num_rows = 1;
    return ValueOrDie(
               wal->Commit({batch}, "{}", [](store::WriteTransaction&) { return Status::OK(); }))
        .segment_id;
  };
  auto processor = ValueOrDie(transform::AggregateProcessor::Open(
      state.store(), state.wal_directory(), pipeline.transform.aggregates));
  const uint64_t first = commit(1);
  const uint64_t second = commit(2);
  MarkLanded(state.store(), first, 1);
  MarkLanded(state.store(), second, 1);
  // Landed, but the processor has applied nothing: both stay.
  EXPECT_EQ(ValueOrDie(pipeline::internal::ReclaimLandedSegments(state, pipeline)), 0u);
  EXPECT_EQ(LiveSegmentIds(state.store()), (std::vector<uint64_t>{first, second}));
  ValueOrDie(processor->ProcessCommitted());
  const uint64_t third = commit(3);
  MarkLanded(state.store(), third, 1);
  // The processor has passed the first two, not the third.
  EXPECT_EQ(ValueOrDie(pipeline::internal::ReclaimLandedSegments(state, pipeline)), 2u);
  EXPECT_EQ(LiveSegmentIds(state.store()), (std::vector<uint64_t>{third}));
  EXPECT_TRUE(std::filesystem::exists(fmt::format("{}/{}.seg", state.wal_directory(), third)) ||
              !std::filesystem::is_empty(state.wal_directory()));
  ValueOrDie(processor->ProcessCommitted());
  EXPECT_EQ(ValueOrDie(pipeline::internal::ReclaimLandedSegments(state, pipeline)), 1u);
  EXPECT_TRUE(LiveSegmentIds(state.store()).empty());
  store::ReadTransaction read = ValueOrDie(state.store().BeginRead());
  auto snapshot = ValueOrDie(transform::ReadAggregate(read, pipeline.transform.aggregates[0]));
  EXPECT_EQ(snapshot.groups.size(), 3u);
}

// input/invoices.jsonl: invoice i of customer i mod 7, for amount i.
void WriteInvoicesInput(const TempDir& dir, int64_t rows) {
  std::filesystem::create_directories(dir.Sub("input"));
  std::ofstream out(dir.Sub("input/invoices.jsonl"));
  for (int64_t i = 0; i < rows; ++i) {
    out << fmt::format(R"({{"invoice_id": {}, "customer_id": {}, "amount": {}}})", i, i % 7, i)
        << "\n";
  }
}

// SyncOnce with the aggregate processor held back (SKIPPR_AGGREGATE_HOLD_FILE) until `is_ready`,
// asked every 5 ms on a thread of its own while the pass runs, says to release it.
Result<pipeline::SyncResult> SyncWithTheProcessorHeldUntil(const config::Config& config,
                                                           const config::PipelineConfig& pipeline,
                                                           const std::string& hold_file,
                                                           const std::function<bool()>& is_ready) {
  std::ofstream(hold_file).put('x');
  ::setenv("SKIPPR_AGGREGATE_HOLD_FILE", hold_file.c_str(), 1);
  std::thread watcher([&] {
    while (!is_ready()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::filesystem::remove(hold_file);
  });
  Result<pipeline::SyncResult> result = pipeline::SyncOnce(config, pipeline, nullptr);
  watcher.join();
  ::unsetenv("SKIPPR_AGGREGATE_HOLD_FILE");
  return result;
}

TEST(AggregateSync, IngestCommitsEverythingWhileTheProcessorIsHeldBack) {
  TempDir dir;
  constexpr int64_t kRows = 3000;
  WriteInvoicesInput(dir, kRows);
  const config::Config config = ParseOrDie(InvoicesYaml(dir.path(), ""));
  const config::PipelineConfig& pipeline = config.pipelines.at("invoices");
  bool saw_everything_committed_and_nothing_applied = false;
  // The processor is released once ingest has committed every row without it.
  Result<pipeline::SyncResult> result =
      SyncWithTheProcessorHeldUntil(config, pipeline, dir.Sub("hold"), [&] {
        Result<pipeline::PipelineStatus> status = pipeline::ReadStatus(pipeline);
        if (!status.ok() || status->live_rows != kRows || status->aggregate_lags.size() != 1) {
          return false;
        }
        saw_everything_committed_and_nothing_applied = status->aggregate_lags[0].rows == kRows;
        return true;
      });
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_TRUE(saw_everything_committed_and_nothing_applied);
  EXPECT_EQ(result->rows_aggregated, kRows);
  pipeline::PipelineStatus status = ValueOrDie(pipeline::ReadStatus(pipeline));
  ASSERT_EQ(status.aggregate_lags.size(), 1u);
  EXPECT_EQ(status.aggregate_lags[0].rows, 0);
  // customer c has the invoices i ≡ c (mod 7).
  pipeline::PipelineState state = ValueOrDie(pipeline::PipelineState::OpenForReading(pipeline));
  store::ReadTransaction read = ValueOrDie(state.store().BeginRead());
  auto snapshot = ValueOrDie(transform::ReadAggregate(read, pipeline.transform.aggregates[0]));
  ASSERT_EQ(snapshot.groups.size(), 7u);
  for (const transform::AggregateGroup& group : snapshot.groups) {
    const int64_t customer = std::stoll(*group.keys[0]);
    int64_t total = 0, count = 0;
    for (int64_t i = customer; i < kRows; i += 7) total += i, ++count;
    // measures sorted by name: invoice_count, invoice_total
    EXPECT_EQ(group.measures[0], std::to_string(count));
    EXPECT_EQ(group.measures[1], std::to_string(total));
  }
}

// The rows of live slices the lake holds (all that landed, while a held processor keeps every
// segment live); 0 before the pipeline's store exists.
int64_t LandedLiveRows(const config::PipelineConfig& pipeline) {
  Result<pipeline::PipelineState> state = pipeline::PipelineState::OpenForReading(pipeline);
  if (!state.ok()) return 0;
  store::ReadTransaction read = ValueOrDie(state->store().BeginRead());
  const pipeline::internal::LandingState landing =
      ValueOrDie(pipeline::internal::ReadLandingState(read));
  int64_t rows = 0;
  for (const wal::SegmentEntry& entry : ValueOrDie(wal::LiveSegments(read))) {
    for (const wal::SliceSummary& slice : entry.slices) {
      if (landing.landed.contains({entry.segment_id, slice.ordinal})) rows += slice.rows;
    }
  }
  return rows;
}

// At the end of a pass the lander lands the rest while the processor drains: its last landing
// does not wait for a processor that is behind (held here until everything has landed; waiting,
// the pass would never end, since the sink's commit interval is an hour), and what the processor
// passes after that landing is reclaimed before the pass returns.
TEST(AggregateSync, TheLastLandingDoesNotWaitForTheProcessorAndItsSegmentsAreReclaimedAfter) {
  TempDir dir;
  constexpr int64_t kRows = 3000;
  WriteInvoicesInput(dir, kRows);
  std::string yaml = InvoicesYaml(dir.path(), "    data_sink: data_sinks.lake");
  const std::string table_namespace = "      table_namespace: landed\n";
  yaml.replace(yaml.find(table_namespace), table_namespace.size(),
               table_namespace + "      commit_interval_seconds: 3600\n");
  const config::Config config = ParseOrDie(yaml);
  const config::PipelineConfig& pipeline = config.pipelines.at("invoices");
  bool saw_everything_landed_and_nothing_applied = false;
  Result<pipeline::SyncResult> result =
      SyncWithTheProcessorHeldUntil(config, pipeline, dir.Sub("hold"), [&] {
        if (LandedLiveRows(pipeline) < kRows) return false;
        Result<pipeline::PipelineStatus> status = pipeline::ReadStatus(pipeline);
        saw_everything_landed_and_nothing_applied = status.ok() &&
                                                    status->aggregate_lags.size() == 1 &&
                                                    status->aggregate_lags[0].rows == kRows;
        return true;
      });
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_TRUE(saw_everything_landed_and_nothing_applied);
  EXPECT_EQ(result->rows_landed, kRows);
  EXPECT_EQ(result->rows_aggregated, kRows);
  EXPECT_EQ(result->segments_reclaimed, result->segments_committed);
  const pipeline::PipelineStatus status = ValueOrDie(pipeline::ReadStatus(pipeline));
  EXPECT_EQ(status.live_segments, 0u);
  ASSERT_EQ(status.aggregate_lags.size(), 1u);
  EXPECT_EQ(status.aggregate_lags[0].rows, 0);
}

}  // namespace
}  // namespace skippr
