// query/: the DuckDB engine — wal_scan over hand-built Batches of every type, projection of older
// batches onto the current schema, table-name rules, errors, and the output formats.
#include "query/query.hpp"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>

#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/batch.hpp"
#include "core/types.hpp"
#include "core/value.hpp"

namespace skippr::query {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Row = std::vector<std::optional<std::string>>;
using Batches = std::vector<std::shared_ptr<const Batch>>;

Field F(int32_t id, std::string name, LogicalType type) { return Field{id, std::move(name), std::move(type), true}; }
LogicalType Dec(int p, int s) { return LogicalType::Decimal(p, s).value(); }
Value Obj(ValueObject fields) { return Value::Object(std::move(fields)); }
Value List(ValueList items) { return Value::List(std::move(items)); }

// A batch of `fields` from rows of Values (one Value per field, Null allowed).
std::shared_ptr<Batch> MakeBatch(std::vector<Field> fields, const std::vector<std::vector<Value>>& rows) {
  auto batch = std::make_shared<Batch>();
  batch->namespace_name = "ns";
  batch->fields = fields;
  for (const Field& field : fields) batch->columns.emplace_back(field.type);
  for (const auto& row : rows) {
    for (size_t c = 0; c < fields.size(); ++c) batch->columns[c].Append(row[c]);
  }
  batch->num_rows = static_cast<int64_t>(rows.size());
  std::string reason;
  EXPECT_TRUE(batch->Validate(&reason)) << reason;
  return batch;
}

TableSource Source(std::string pipeline, std::string ns, std::vector<Field> fields, Batches batches) {
  return TableSource{std::move(pipeline), std::move(ns), std::move(fields),
                     BatchList::InMemory(std::move(batches))};
}

std::unique_ptr<Engine> OpenEngine() {
  Result<std::unique_ptr<Engine>> engine = Engine::Open();
  EXPECT_TRUE(engine.ok()) << engine.status().ToString();
  return std::move(engine).value();
}

QueryResult MustRun(Engine& engine, const std::string& sql) {
  Result<QueryResult> result = engine.Run(sql);
  EXPECT_TRUE(result.ok()) << sql << ": " << result.status().ToString();
  if (!result.ok()) return {};
  return std::move(result).value();
}

std::string Scalar(Engine& engine, const std::string& sql) {
  QueryResult result = MustRun(engine, sql);
  if (result.rows.size() != 1 || result.rows[0].size() != 1 || !result.rows[0][0]) return "<none>";
  return *result.rows[0][0];
}

std::string Bytes(std::initializer_list<int> values) {
  std::string bytes;
  for (int v : values) bytes += static_cast<char>(v);
  return bytes;
}

// ------------------------------------------------------------------------------------------------

TEST(QueryEngineTest, EveryTypeReadsBackWithDuckDbTypesAndTextForms) {
  const LogicalType point = LogicalType::Struct({F(17, "a", LogicalType::Int()), F(18, "b", LogicalType::String())});
  const LogicalType longs = LogicalType::List(F(20, "element", LogicalType::Long()));
  const LogicalType map = LogicalType::Map(F(22, "key", LogicalType::String()), F(23, "value", LogicalType::Double()));
  const LogicalType items =
      LogicalType::List(F(26, "element", LogicalType::Struct({F(25, "x", LogicalType::Int())})));
  const std::vector<Field> fields = {
      F(1, "b", LogicalType::Boolean()),      F(2, "i", LogicalType::Int()),
      F(3, "l", LogicalType::Long()),         F(4, "f", LogicalType::Float()),
      F(5, "d", LogicalType::Double()),       F(6, "dec", Dec(10, 2)),
      F(7, "dsmall", Dec(4, 1)),              F(8, "dbig", Dec(38, 3)),
      F(9, "dt", LogicalType::Date()),        F(10, "tm", LogicalType::Time()),
      F(11, "ts", LogicalType::Timestamp()),  F(12, "tz", LogicalType::TimestampTz()),
      F(13, "s", LogicalType::String()),      F(14, "bin", LogicalType::Binary()),
      F(15, "u", LogicalType::Uuid()),        F(16, "st", point),
      F(19, "li", longs),                     F(21, "m", map),
      F(24, "items", items),
  };
  const std::string uuid1 = Bytes({0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x12, 0x34, 0x56, 0x78,
                                   0x9a, 0xbc, 0xde, 0xf0});
  const std::string uuid2 = Bytes({0xff, 0xee, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01});
  std::vector<std::vector<Value>> rows = {
      {Value::Bool(true), Value::Int(42), Value::Int(-9000000000), Value::Double(1.5), Value::Double(2.25),
       Value::Decimal(12345, 10, 2), Value::Decimal(-15, 4, 1), Value::Decimal(0, 38, 3),
       Value::Date(19723), Value::Int(3723000001), Value::Timestamp(1704067200123456),
       Value::TimestampTz(1704067200000000), Value::String("h\xc3\xa9llo, \"w\""),
       Value::Binary(Bytes({0, 0xff, 'a', 'b'})), Value::Binary(uuid1),
       Obj({{"a", Value::Int(1)}, {"b", Value::String("x")}}),
       List({Value::Int(1), Value::Int(2), Value::Null()}),
       Obj({{"k1", Value::Double(1.5)}, {"k2", Value::Null()}}),
       List({Obj({{"x", Value::Int(1)}}), Value::Null(), Obj({})})},
      std::vector<Value>(fields.size(), Value::Null()),
      {Value::Bool(false), Value::Int(-2147483648), Value::Int(0), Value::Double(-0.25), Value::Double(1e300),
       Value::Decimal(-1, 10, 2), Value::Decimal(9999, 4, 1), Value::Decimal(0, 38, 3), Value::Date(-1),
       Value::Int(0), Value::Timestamp(0), Value::TimestampTz(-1), Value::String(""), Value::Binary(""),
       Value::Binary(uuid2), Obj({{"a", Value::Null()}}), List({}), Obj({}), List({})},
  };
  std::shared_ptr<Batch> batch = MakeBatch(fields, rows);
  // decimal(38,3) needs all 128 bits: 123456789012345678901234 and -123456789012345678901234.
  const __int128 big = static_cast<__int128>(1234567890123456789LL) * 100000 + 1234;
  const __int128 values[2] = {big, -big};
  std::memcpy(batch->columns[7].fixed.data() + 0 * 16, &values[0], 16);
  std::memcpy(batch->columns[7].fixed.data() + 2 * 16, &values[1], 16);

  auto engine = OpenEngine();
  ASSERT_TRUE(engine->RegisterTable(Source("p", "all", fields, {batch})).ok());
  QueryResult result = MustRun(*engine, "SELECT * FROM p.all");
  EXPECT_THAT(result.header, ElementsAre("b", "i", "l", "f", "d", "dec", "dsmall", "dbig", "dt", "tm", "ts",
                                         "tz", "s", "bin", "u", "st", "li", "m", "items"));
  EXPECT_THAT(result.column_types,
              ElementsAre("BOOLEAN", "INTEGER", "BIGINT", "FLOAT", "DOUBLE", "DECIMAL(10,2)", "DECIMAL(4,1)",
                          "DECIMAL(38,3)", "DATE", "TIME", "TIMESTAMP", "TIMESTAMP WITH TIME ZONE", "VARCHAR",
                          "BLOB", "UUID", "STRUCT(a INTEGER, b VARCHAR)", "BIGINT[]", "MAP(VARCHAR, DOUBLE)",
                          "STRUCT(x INTEGER)[]"));
  ASSERT_EQ(result.rows.size(), 3u);
  EXPECT_THAT(result.rows[0],
              ElementsAre("true", "42", "-9000000000", "1.5", "2.25", "123.45", "-1.5", "123456789012345678901.234",
                          "2024-01-01", "01:02:03.000001", "2024-01-01 00:00:00.123456", "2024-01-01 00:00:00+00",
                          "h\xc3\xa9llo, \"w\"", "\\x00\\xFFab", "12345678-9abc-def0-1234-56789abcdef0",
                          "{'a': 1, 'b': x}", "[1, 2, NULL]", "{k1=1.5, k2=NULL}", "[{'x': 1}, NULL, {'x': NULL}]"));
  EXPECT_EQ(result.rows[1], Row(fields.size(), std::nullopt));
  EXPECT_THAT(result.rows[2],
              ElementsAre("false", "-2147483648", "0", "-0.25", "1e+300", "-0.01", "999.9",
                          "-123456789012345678901.234", "1969-12-31", "00:00:00", "1970-01-01 00:00:00",
                          "1969-12-31 23:59:59.999999+00", "", "", "ffee0000-0000-0000-0000-000000000001",
                          "{'a': NULL, 'b': NULL}", "[]", "{}", "[]"));

  // The values are typed in DuckDB, not text: arithmetic, nested access and UUID order work.
  EXPECT_EQ(Scalar(*engine, "SELECT sum(i)::VARCHAR || '/' || sum(l)::VARCHAR FROM p.all"),
            "-2147483606/-9000000000");
  EXPECT_EQ(Scalar(*engine, "SELECT st.b FROM p.all WHERE i = 42"), "x");
  EXPECT_EQ(Scalar(*engine, "SELECT li[2] + items[1].x FROM p.all WHERE b"), "3");
  EXPECT_EQ(Scalar(*engine, "SELECT m['k1'] FROM p.all WHERE b"), "1.5");
  EXPECT_EQ(Scalar(*engine, "SELECT count(*) FROM p.all WHERE u > '80000000-0000-0000-0000-000000000000'"), "1");
  EXPECT_EQ(Scalar(*engine, "SELECT sum(dbig) FROM p.all"), "0.000");
  EXPECT_EQ(Scalar(*engine, "SELECT octet_length(bin) FROM p.all WHERE b"), "4");
  EXPECT_EQ(Scalar(*engine, "SELECT count(*) FROM p.all"), "3");
}

TEST(QueryEngineTest, AggregatesOverManyBatchesCrossingVectorBoundaries) {
  const std::vector<Field> fields = {F(1, "id", LogicalType::Long()), F(2, "v", LogicalType::Int()),
                                     F(3, "s", LogicalType::String()), F(4, "x", LogicalType::Double())};
  Batches batches;
  int64_t next = 0;
  int64_t sum_id = 0, sum_v = 0, count_v = 0, sum_len = 0;
  int64_t sum_x4 = 0;
  for (int64_t size : {70001, 100000, 2047, 1, 127951}) {
    std::vector<std::vector<Value>> rows;
    for (int64_t r = 0; r < size; ++r, ++next) {
      const bool v_null = next % 7 == 3;
      const int64_t v = (next * 37) % 1000 - 500;
      const std::string s = std::string(static_cast<size_t>(next % 13), 'z');
      const double x = static_cast<double>(next % 100) / 4.0;
      rows.push_back({Value::Int(next), v_null ? Value::Null() : Value::Int(v), Value::String(s), Value::Double(x)});
      sum_id += next;
      if (!v_null) sum_v += v, ++count_v;
      sum_len += static_cast<int64_t>(s.size());
      sum_x4 += next % 100;
    }
    batches.push_back(MakeBatch(fields, rows));
  }
  ASSERT_EQ(next, 300000);
  auto engine = OpenEngine();
  ASSERT_TRUE(engine->RegisterTable(Source("p", "big", fields, batches)).ok());
  EXPECT_EQ(Scalar(*engine, "SELECT count(*) FROM p.big"), "300000");
  EXPECT_EQ(Scalar(*engine, "SELECT sum(id) FROM p.big"), std::to_string(sum_id));
  EXPECT_EQ(Scalar(*engine, "SELECT sum(v) FROM p.big"), std::to_string(sum_v));
  EXPECT_EQ(Scalar(*engine, "SELECT count(v) FROM p.big"), std::to_string(count_v));
  EXPECT_EQ(Scalar(*engine, "SELECT sum(length(s)) FROM p.big"), std::to_string(sum_len));
  EXPECT_EQ(Scalar(*engine, "SELECT CAST(sum(x) * 4 AS BIGINT) FROM p.big"), std::to_string(sum_x4));
  EXPECT_EQ(Scalar(*engine, "SELECT count(DISTINCT id) FROM p.big WHERE id BETWEEN 2040 AND 2060"), "21");
  EXPECT_EQ(Scalar(*engine, "SELECT string_agg(id::VARCHAR, ',' ORDER BY id) FROM p.big "
                            "WHERE id IN (0, 70000, 70001, 170000, 172047, 172048, 299999)"),
            "0,70000,70001,170000,172047,172048,299999");

  // Every row, in order, through the text path.
  QueryResult ordered = MustRun(*engine, "SELECT id, v FROM p.big ORDER BY id DESC");
  ASSERT_EQ(ordered.rows.size(), 300000u);
  for (size_t r = 0; r < ordered.rows.size(); ++r) {
    const int64_t id = 299999 - static_cast<int64_t>(r);
    ASSERT_EQ(ordered.rows[r][0], std::to_string(id)) << r;
    const std::optional<std::string> v =
        id % 7 == 3 ? std::nullopt : std::optional<std::string>(std::to_string((id * 37) % 1000 - 500));
    ASSERT_EQ(ordered.rows[r][1], v) << r;
  }
}

TEST(QueryEngineTest, OlderBatchesAreProjectedOntoTheCurrentSchemaById) {
  // Old schema: id long, n int, name string, st struct<a int>, f float, dec decimal(5,2).
  const std::vector<Field> old_fields = {
      F(3, "n", LogicalType::Int()),  // a different order from the target
      F(1, "id", LogicalType::Long()),
      F(2, "name", LogicalType::String()),
      F(5, "st", LogicalType::Struct({F(6, "a", LogicalType::Int())})),
      F(8, "f", LogicalType::Float()),
      F(9, "dec", Dec(5, 2)),
      F(10, "dropped", LogicalType::String()),
  };
  // Current schema: n widened to long, a new column `added`, st gained child c, f double, dec(20,2),
  // `dropped` gone, and `label` renamed from `name` (same id).
  const std::vector<Field> fields = {
      F(1, "id", LogicalType::Long()),
      F(2, "label", LogicalType::String()),
      F(3, "n", LogicalType::Long()),
      F(4, "added", LogicalType::Double()),
      F(5, "st", LogicalType::Struct({F(6, "a", LogicalType::Long()), F(7, "c", LogicalType::String())})),
      F(8, "f", LogicalType::Double()),
      F(9, "dec", Dec(20, 2)),
  };
  auto old_batch = MakeBatch(old_fields, {
      {Value::Int(2147483647), Value::Int(1), Value::String("one"), Obj({{"a", Value::Int(-7)}}),
       Value::Double(0.5), Value::Decimal(-12345, 5, 2), Value::String("gone")},
      {Value::Null(), Value::Int(2), Value::Null(), Value::Null(), Value::Null(), Value::Null(), Value::Null()},
  });
  auto new_batch = MakeBatch(fields, {
      {Value::Int(3), Value::String("three"), Value::Int(5000000000), Value::Double(3.5),
       Obj({{"a", Value::Int(8)}, {"c", Value::String("cc")}}), Value::Double(0.1),
       Value::Decimal(123456789012345678, 20, 2)},
  });
  auto engine = OpenEngine();
  ASSERT_TRUE(engine->RegisterTable(Source("p", "evolved", fields, {old_batch, new_batch})).ok());
  QueryResult result = MustRun(*engine, "SELECT * FROM p.evolved ORDER BY id");
  EXPECT_THAT(result.header, ElementsAre("id", "label", "n", "added", "st", "f", "dec"));
  EXPECT_THAT(result.column_types, ElementsAre("BIGINT", "VARCHAR", "BIGINT", "DOUBLE",
                                               "STRUCT(a BIGINT, c VARCHAR)", "DOUBLE", "DECIMAL(20,2)"));
  ASSERT_EQ(result.rows.size(), 3u);
  EXPECT_THAT(result.rows[0], ElementsAre("1", "one", "2147483647", std::nullopt, "{'a': -7, 'c': NULL}", "0.5",
                                          "-123.45"));
  EXPECT_THAT(result.rows[1], ElementsAre("2", std::nullopt, std::nullopt, std::nullopt, std::nullopt,
                                          std::nullopt, std::nullopt));
  EXPECT_THAT(result.rows[2], ElementsAre("3", "three", "5000000000", "3.5", "{'a': 8, 'c': cc}", "0.1",
                                          "1234567890123456.78"));
  EXPECT_EQ(Scalar(*engine, "SELECT sum(n) FROM p.evolved"), "7147483647");
  EXPECT_EQ(Scalar(*engine, "SELECT count(*) FROM p.evolved WHERE st.c IS NULL"), "2");
  EXPECT_EQ(Scalar(*engine, "SELECT sum(dec) FROM p.evolved"), "1234567890123333.33");

  // A batch whose column cannot be read as the table's type fails the query, naming the column.
  auto bad = MakeBatch({F(1, "id", LogicalType::String())}, {{Value::String("x")}});
  ASSERT_TRUE(engine->RegisterTable(Source("p", "bad", {F(1, "id", LogicalType::Long())}, {bad})).ok());
  Result<QueryResult> failed = engine->Run("SELECT * FROM p.bad");
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(failed.status().message(), HasSubstr("reading p.bad column id: a batch holds string where the table has long"));
}

TEST(QueryEngineTest, EachScanReadsEachBatchOnceWhenItReachesIt) {
  const std::vector<Field> fields = {F(1, "id", LogicalType::Long())};
  const std::shared_ptr<const Batch> batch = MakeBatch(fields, {{Value::Int(1)}, {Value::Int(2)}});
  std::atomic<int> reads = 0;
  BatchList list;
  list.row_counts = {2, 2, 2};
  list.read = [&](size_t, const FieldSelection&) -> Result<std::shared_ptr<const Batch>> {
    ++reads;
    return batch;
  };
  auto engine = OpenEngine();
  ASSERT_TRUE(engine->RegisterTable(TableSource{"p", "live", fields, list}).ok());
  EXPECT_EQ(reads, 0);
  EXPECT_EQ(Scalar(*engine, "SELECT count(*) FROM p.live"), "6");
  EXPECT_EQ(reads, 3);
  // Two scans in one query: each reads every batch.
  EXPECT_EQ(Scalar(*engine, "SELECT count(*) FROM p.live a JOIN p.live b ON a.id = b.id"), "18");
  EXPECT_EQ(reads, 9);

  // A batch that cannot be read fails the query with its status (its code too, not DuckDB's text
  // of it); one with other rows than its list says is corruption, not a silently different count.
  BatchList broken = list;
  broken.read = [&](size_t index, const FieldSelection&) -> Result<std::shared_ptr<const Batch>> {
    if (index == 2) return Status::IOError("segment 7 unreadable");
    return batch;
  };
  ASSERT_TRUE(engine->RegisterTable(TableSource{"p", "broken", fields, broken}).ok());
  Result<QueryResult> failed = engine->Run("SELECT * FROM p.broken");
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), StatusCode::kIOError);
  EXPECT_EQ(failed.status().message(), "table p.broken cannot be read: segment 7 unreadable");
  BatchList miscounted = list;
  miscounted.row_counts = {2, 3, 2};
  ASSERT_TRUE(engine->RegisterTable(TableSource{"p", "miscounted", fields, miscounted}).ok());
  failed = engine->Run("SELECT count(*) FROM p.miscounted");
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), StatusCode::kCorruption);
  EXPECT_THAT(failed.status().message(), HasSubstr("batch 1 has 2 rows where 3 were listed"));
  // The next statement is not blamed for the last one's failure.
  EXPECT_TRUE(engine->Run("SELECT count(*) FROM p.live").ok());
}

// Projection pushdown: a scan asks each batch for the columns the statement uses, by field id, and
// the engine's counters add up what the reads returned. The reader here keeps only the selected
// columns, as a WAL segment does.
TEST(QueryEngineTest, AScanAsksOnlyForTheColumnsTheStatementUses) {
  const std::vector<Field> fields = {F(1, "id", LogicalType::Long()),
                                     F(2, "text", LogicalType::String()),
                                     F(3, "score", LogicalType::Double())};
  const std::shared_ptr<const Batch> whole =
      MakeBatch(fields, {{Value::Int(1), Value::String("a"), Value::Double(0.5)},
                         {Value::Int(2), Value::String("b"), Value::Double(2.0)}});
  std::mutex mutex;
  std::set<std::string> asked;  // the field ids each read selected, as "1,3"
  BatchList list;
  list.row_counts = {2, 2, 2, 2};
  list.read = [&](size_t, const FieldSelection& selection) -> Result<std::shared_ptr<const Batch>> {
    auto projected = std::make_shared<Batch>(*whole);
    projected->fields.clear();
    projected->columns.clear();
    std::string ids;
    for (size_t i = 0; i < whole->fields.size(); ++i) {
      if (!selection.Includes(whole->fields[i])) continue;
      projected->fields.push_back(whole->fields[i]);
      projected->columns.push_back(whole->columns[i]);
      ids += (ids.empty() ? "" : ",") + std::to_string(whole->fields[i].id);
    }
    std::lock_guard lock(mutex);
    asked.insert(ids);
    return std::shared_ptr<const Batch>(std::move(projected));
  };
  auto engine = OpenEngine();
  ASSERT_TRUE(engine->RegisterTable(TableSource{"p", "t", fields, list}).ok());
  const auto run = [&](const std::string& sql, std::string want) {
    asked.clear();
    const ScanCounters before = engine->scan_counters();
    EXPECT_EQ(Scalar(*engine, sql), want) << sql;
    const ScanCounters after = engine->scan_counters();
    EXPECT_EQ(after.batches - before.batches, 4) << sql;
    return after.columns - before.columns;
  };
  EXPECT_EQ(run("SELECT sum(score) FROM p.t", "10.0"), 4);  // one column of each batch
  EXPECT_EQ(asked, std::set<std::string>{"3"});
  EXPECT_EQ(run("SELECT max(text) FROM p.t WHERE score > 1", "b"), 8);
  EXPECT_EQ(asked, std::set<std::string>{"2,3"});
  // count(*) needs no column (DuckDB 1.4 still asks a table function for one).
  EXPECT_LE(run("SELECT count(*) FROM p.t", "8"), 4);
  EXPECT_EQ(run("SELECT max(length(text || id || score)) FROM p.t", "5"), 12);
  EXPECT_EQ(asked, std::set<std::string>{"1,2,3"});
}

// Batch `index` of a table of `rows`-row batches: ids numbered on from the batches before it, then
// "row" in a second field when there is one.
std::shared_ptr<const Batch> NumberedBatch(const std::vector<Field>& fields, size_t index, int rows) {
  std::vector<std::vector<Value>> values;
  for (int r = 0; r < rows; ++r) {
    values.push_back({Value::Int(static_cast<int64_t>(index) * rows + r)});
    if (fields.size() > 1) values.back().push_back(Value::String("row"));
  }
  return MakeBatch(fields, values);
}

// A scan holds the batches its threads are reading, never the table: 500 batches of 2,048 rows
// are read one by one (each freed before long), and a LIMIT stops reading early.
TEST(QueryEngineTest, AScanHoldsOnlyTheBatchesBeingRead) {
  const std::vector<Field> fields = {F(1, "id", LogicalType::Long()),
                                     F(2, "text", LogicalType::String())};
  constexpr int kBatches = 500;
  constexpr int kRows = 2048;
  std::atomic<int> alive = 0;
  std::atomic<int> most_alive = 0;
  std::atomic<int> reads = 0;
  BatchList list;
  list.row_counts.assign(kBatches, kRows);
  list.read = [&](size_t index, const FieldSelection&) -> Result<std::shared_ptr<const Batch>> {
    ++reads;
    std::shared_ptr<const Batch> made = NumberedBatch(fields, index, kRows);
    const int now = ++alive;
    for (int most = most_alive; now > most && !most_alive.compare_exchange_weak(most, now);) {
    }
    // Counted out when the scan lets go of it.
    return std::shared_ptr<const Batch>(made.get(), [made, &alive](const Batch*) { --alive; });
  };
  auto engine = OpenEngine();
  ASSERT_TRUE(engine->RegisterTable(TableSource{"p", "big", fields, list}).ok());
  const int64_t rows = int64_t{kBatches} * kRows;
  EXPECT_EQ(Scalar(*engine, "SELECT sum(id) FROM p.big"), std::to_string(rows * (rows - 1) / 2));
  EXPECT_EQ(reads, kBatches);
  EXPECT_EQ(alive, 0);
  EXPECT_LE(most_alive, 16) << "a scan kept many batches at once";
  reads = 0;
  Result<QueryResult> first = engine->Run("SELECT id FROM p.big LIMIT 3");
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->rows.size(), 3u);
  EXPECT_LT(reads, kBatches / 10) << "a LIMIT read the whole table";
}

// A streamed SELECT hands its rows over chunk by chunk while the scan reads batches; a writer's
// error stops the statement, and the scan with it.
TEST(QueryEngineTest, StreamHandsOverChunksAndAWriterErrorStopsTheScan) {
  const std::vector<Field> fields = {F(1, "id", LogicalType::Long())};
  constexpr int kBatches = 200;
  constexpr int kRows = 2048;
  std::atomic<int> reads = 0;
  BatchList list;
  list.row_counts.assign(kBatches, kRows);
  list.read = [&](size_t index, const FieldSelection&) -> Result<std::shared_ptr<const Batch>> {
    ++reads;
    return NumberedBatch(fields, index, kRows);
  };
  auto engine = OpenEngine();
  ASSERT_TRUE(engine->RegisterTable(TableSource{"p", "big", fields, list}).ok());

  class Counting final : public ResultWriter {
   public:
    explicit Counting(std::optional<int> fail_at_chunk) : fail_at_chunk_(fail_at_chunk) {}
    Status Begin(const std::vector<std::string>& header, const std::vector<std::string>&) override {
      EXPECT_EQ(header, std::vector<std::string>{"id"});
      return Status::OK();
    }
    Status Write(const ResultRows& rows) override {
      if (fail_at_chunk_ && chunks == *fail_at_chunk_) return Status::IOError("pipe closed");
      ++chunks;
      for (size_t r = 0; r < rows.size(); ++r) {
        EXPECT_EQ(rows.Value(r, 0), std::to_string(next_id)) << "rows keep batch order";
        ++next_id;
      }
      return Status::OK();
    }
    Status End() override {
      ended = true;
      return Status::OK();
    }
    std::optional<int> fail_at_chunk_;
    int chunks = 0;
    int64_t next_id = 0;
    bool ended = false;
  };
  Counting all(std::nullopt);
  ASSERT_TRUE(engine->Stream("SELECT id FROM p.big", all).ok());
  EXPECT_EQ(all.next_id, int64_t{kBatches} * kRows);
  EXPECT_GT(all.chunks, 10);
  EXPECT_TRUE(all.ended);

  reads = 0;
  Counting failing(2);
  Status stopped = engine->Stream("SELECT id FROM p.big", failing);
  EXPECT_EQ(stopped.code(), StatusCode::kIOError);
  EXPECT_THAT(stopped.message(), HasSubstr("pipe closed"));
  EXPECT_FALSE(failing.ended);
  EXPECT_LT(reads, kBatches / 2) << "the scan went on after the writer failed";
}

// write_policy merge_by_key's view of live batches: per key the last row in batch order (wal_scan
// numbers the rows for that), no row once a key's last change is a CDC delete, NULL one key.
TEST(QueryEngineTest, KeyedTablesKeepTheLastRowPerKeyAndDropDeletedKeys) {
  const std::vector<Field> fields = {F(1, "id", LogicalType::Long()),
                                     F(2, "v", LogicalType::String())};
  auto first = MakeBatch(fields, {{Value::Int(1), Value::String("a")},
                                  {Value::Int(2), Value::String("b")},
                                  {Value::Null(), Value::String("n1")},
                                  {Value::Int(1), Value::String("a2")}});
  auto second = MakeBatch(fields, {{Value::Int(2), Value::Null()},
                                   {Value::Int(3), Value::String("c")},
                                   {Value::Null(), Value::String("n2")}});
  second->cdc.emplace();
  second->cdc->mutations = {Mutation::kDelete, Mutation::kInsert, Mutation::kUpdate};
  second->cdc->event_ids = second->cdc->order_tokens = second->cdc->business_keys = {"", "", ""};
  TableSource source = Source("p", "keyed", fields, {first, second});
  source.key_columns = {"id"};
  auto engine = OpenEngine();
  ASSERT_TRUE(engine->RegisterTable(source).ok());
  QueryResult result = MustRun(*engine, "SELECT * FROM p.keyed ORDER BY id NULLS FIRST");
  EXPECT_THAT(result.header, ElementsAre("id", "v"));
  ASSERT_EQ(result.rows.size(), 3u);
  EXPECT_THAT(result.rows[0], ElementsAre(std::nullopt, "n2"));
  EXPECT_THAT(result.rows[1], ElementsAre("1", "a2"));
  EXPECT_THAT(result.rows[2], ElementsAre("3", "c"));

  QueryResult changes =
      MustRun(*engine,
              "SELECT __skippr_ordinal, __skippr_deleted, v FROM wal_scan('p', 'keyed', "
              "with_change_columns := true) ORDER BY __skippr_ordinal");
  ASSERT_EQ(changes.rows.size(), 7u);
  for (size_t row = 0; row < 7; ++row) EXPECT_EQ(changes.rows[row][0], std::to_string(row));
  EXPECT_THAT(changes.rows[4], ElementsAre("4", "true", std::nullopt));
  EXPECT_THAT(changes.rows[5], ElementsAre("5", "false", "c"));

  source.key_columns = {"missing"};
  EXPECT_THAT(engine->RegisterTable(source).message(),
              HasSubstr("key column 'missing' is not a column"));
  TableSource reserved =
      Source("p", "reserved", {F(1, "__skippr_ordinal", LogicalType::Long())}, {});
  EXPECT_THAT(engine->RegisterTable(reserved).message(), HasSubstr("query reserves"));
}

// A keyed change stream's view leaves out the live changes its landing will leave out: one at or
// before its key's landed order token (an older change a newer snapshot read holds), or at or
// before the landed truncate — a stale update neither replaces the landed row nor, as a delete,
// removes it.
TEST(QueryEngineTest, ALiveChangeTheLandedTableHoldsAlreadyIsLeftOut) {
  const std::string dir = ::testing::TempDir() + "/query_landed_tokens";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::unique_ptr<Engine> writer = OpenEngine();
  MustRun(*writer, fmt::format("COPY (SELECT * FROM (VALUES (1::BIGINT, 'landed1'), "
                               "(2, 'landed2'), (4, 'landed4')) t(id, v)) TO '{}/d.parquet' "
                               "(FORMAT parquet)",
                               dir));
  const std::vector<Field> fields = {F(1, "id", LogicalType::Long()),
                                     F(2, "v", LogicalType::String())};
  auto live = MakeBatch(fields, {{Value::Int(1), Value::String("stale")},
                                 {Value::Int(2), Value::String("fresh")},
                                 {Value::Int(3), Value::String("before the truncate")},
                                 {Value::Int(4), Value::Null()}});
  live->cdc.emplace();
  live->cdc->mutations = {Mutation::kUpdate, Mutation::kUpdate, Mutation::kInsert,
                          Mutation::kDelete};
  live->cdc->event_ids = {"", "", "", ""};
  live->cdc->order_tokens = {"05", "09", "02", "06"};
  live->cdc->business_keys = {"[1]", "[2]", "[3]", "[4]"};
  TableSource source = Source("p", "keyed", fields, {live});
  source.key_columns = {"id"};
  source.landed.data_files.push_back({dir + "/d.parquet", 1, {}, ""});
  const std::map<std::string, std::string> landed_tokens = {{"[1]", "07"}, {"[2]", "04"},
                                                            {"[4]", "08"}};
  source.landed_token = [landed_tokens](std::string_view key) -> Result<std::string> {
    auto token = landed_tokens.find(std::string(key));
    return token == landed_tokens.end() ? std::string() : token->second;
  };
  source.landed_truncate_token = "03";
  auto engine = OpenEngine();
  ASSERT_TRUE(engine->RegisterTable(source).ok());
  EXPECT_EQ(MustRun(*engine, "SELECT id, v FROM p.keyed ORDER BY id").rows,
            (std::vector<Row>{{"1", "landed1"}, {"2", "fresh"}, {"4", "landed4"}}));

  source.landed_token = [](std::string_view) -> Result<std::string> {
    return Status::IOError("the store went away");
  };
  ASSERT_TRUE(engine->RegisterTable(source).ok());
  Result<QueryResult> failed = engine->Run("SELECT id, v FROM p.keyed");
  ASSERT_FALSE(failed.ok());
  EXPECT_THAT(failed.status().message(), HasSubstr("the store went away"));
  std::filesystem::remove_all(dir);
}

// A table of Iceberg data files with both kinds of deletes, as a table merged by equality deletes
// and then by position deletes has them: an equality delete removes its keys from files of smaller
// sequence numbers only, a position delete the rows it names, and a file newer than every position
// delete is read as it is. LandedRowPositionsQuery finds the live rows of given keys, and only those.
TEST(QueryEngineTest, PositionAndEqualityDeletesApplyTogether) {
  const std::string dir = ::testing::TempDir() + "/query_deletes";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const auto path = [&](const std::string& name) { return dir + "/" + name; };
  const auto uri = [&](const std::string& name) { return "file://" + path(name); };
  std::unique_ptr<Engine> writer = OpenEngine();
  const auto write = [&](const std::string& name, const std::string& select) {
    MustRun(*writer, fmt::format("COPY ({}) TO '{}' (FORMAT parquet)", select, path(name)));
  };
  write("d1.parquet", "SELECT i::BIGINT AS id, 'a' || i AS name FROM range(1, 6) t(i)");
  write("d2.parquet", "SELECT i::BIGINT AS id, 'b' || i AS name FROM range(6, 9) t(i)");
  write("eq.parquet", "SELECT * FROM (VALUES (2::BIGINT), (7)) t(id)");
  write("d3.parquet", "SELECT 2::BIGINT AS id, 'new2' AS name");
  write("pos.parquet", fmt::format("SELECT * FROM (VALUES ('{}', 0::BIGINT), ('{}', 0)) "
                                   "t(file_path, pos)",
                                   uri("d1.parquet"), uri("d3.parquet")));
  write("d4.parquet", "SELECT 9::BIGINT AS id, 'c9' AS name");

  LandedRows landed;
  int64_t sequence_number = 1;
  for (const std::string name : {"d1.parquet", "d2.parquet", "d3.parquet"}) {
    landed.data_files.push_back({path(name), sequence_number++, {}, uri(name)});
  }
  landed.data_files[2].sequence_number = 3;  // d3 shares the equality delete's commit
  landed.data_files.push_back({path("d4.parquet"), 5, {}, uri("d4.parquet")});
  landed.equality_delete_files.push_back({path("eq.parquet"), 3, {"id"}});
  landed.position_delete_files.push_back({path("pos.parquet"), 4});

  std::unique_ptr<Engine> engine = OpenEngine();
  const std::vector<Field> fields = {{1, "id", LogicalType::Long(), false},
                                     {2, "name", LogicalType::String(), false}};
  TableSource table = Source("p", "t", fields, {});
  table.landed = landed;
  ASSERT_TRUE(engine->RegisterTable(std::move(table)).ok());
  EXPECT_EQ(MustRun(*engine, "SELECT id, name FROM p.t ORDER BY id").rows,
            (std::vector<Row>{{"3", "a3"}, {"4", "a4"}, {"5", "a5"}, {"6", "b6"}, {"8", "b8"},
                              {"9", "c9"}}));

  const std::string positions = LandedRowPositionsQuery(
      landed, {"id"}, "SELECT * FROM (VALUES (3::BIGINT), (7), (2), (6), (1)) k(id)");
  EXPECT_EQ(MustRun(*engine, fmt::format("SELECT __skippr_file, __skippr_position FROM ({}) "
                                         "ORDER BY ALL",
                                         positions))
                .rows,
            (std::vector<Row>{{uri("d1.parquet"), "2"}, {uri("d2.parquet"), "0"}}))
      << "ids 1, 2 and 7 have no live row; 3 and 6 one each";
  std::filesystem::remove_all(dir);
}

TEST(QueryEngineTest, TablesMustBeNamedPipelineDotNamespace) {
  const std::vector<Field> fields = {F(1, "id", LogicalType::Long())};
  auto batch = MakeBatch(fields, {{Value::Int(1)}});
  auto engine = OpenEngine();
  ASSERT_TRUE(engine->RegisterTable(Source("p", "b", fields, {batch})).ok());
  ASSERT_TRUE(engine->RegisterTable(Source("p", "a", fields, {batch})).ok());
  ASSERT_TRUE(engine->RegisterTable(Source("main", "orders", fields, {batch})).ok());
  EXPECT_THAT(engine->TableNames(), ElementsAre("main.orders", "p.a", "p.b"));

  const auto expect_unknown = [&](const std::string& sql, const std::string& name) {
    Result<QueryResult> result = engine->Run(sql);
    ASSERT_FALSE(result.ok()) << sql;
    EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument) << sql;
    EXPECT_EQ(result.status().message(),
              "unknown table '" + name +
                  "'; tables are referenced as <pipeline>.<namespace>: main.orders, p.a, p.b")
        << sql;
  };
  expect_unknown("SELECT * FROM a", "a");
  expect_unknown("SELECT * FROM q.a", "q.a");
  expect_unknown("SELECT * FROM p.c", "p.c");
  expect_unknown("SELECT * FROM p.a JOIN nowhere USING (id)", "nowhere");
  expect_unknown("SELECT * FROM p.a WHERE id IN (SELECT id FROM b)", "b");
  // Unqualified names that DuckDB would resolve in its default schema are refused too.
  expect_unknown("SELECT * FROM orders", "orders");
  MustRun(*engine, "CREATE TABLE main.t AS SELECT 1 AS id");
  expect_unknown("SELECT * FROM t", "t");
  // Found through DuckDB's catalog error for statements the check does not parse.
  expect_unknown("INSERT INTO main.t SELECT * FROM nowhere", "nowhere");

  EXPECT_EQ(Scalar(*engine, "SELECT count(*) FROM main.orders"), "1");
  EXPECT_EQ(Scalar(*engine, "SELECT count(*) FROM \"P\".\"A\""), "1");
  EXPECT_EQ(Scalar(*engine, "WITH a AS (SELECT * FROM p.a) SELECT count(*) FROM a, p.b"), "1");
  QueryResult described = MustRun(*engine, "DESCRIBE p.a");
  ASSERT_FALSE(described.rows.empty());
  EXPECT_EQ(described.rows[0][0], "id");
  EXPECT_EQ(described.rows[0][1], "BIGINT");
}

TEST(QueryEngineTest, OtherDuckDbErrorsCarryDuckDbsMessage) {
  auto engine = OpenEngine();
  ASSERT_TRUE(engine->RegisterTable(Source("p", "a", {F(1, "id", LogicalType::Long())}, {})).ok());
  Result<QueryResult> syntax = engine->Run("SELEC id FROM p.a");
  ASSERT_FALSE(syntax.ok());
  EXPECT_EQ(syntax.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(syntax.status().message(), HasSubstr("Parser Error: syntax error at or near \"SELEC\""));

  Result<QueryResult> column = engine->Run("SELECT nope FROM p.a");
  ASSERT_FALSE(column.ok());
  EXPECT_EQ(column.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(column.status().message(), HasSubstr("Binder Error: Referenced column \"nope\" not found"));

  // An empty table is fine.
  QueryResult empty = MustRun(*engine, "SELECT * FROM p.a");
  EXPECT_THAT(empty.header, ElementsAre("id"));
  EXPECT_TRUE(empty.rows.empty());
  // Several statements: the last one's rows.
  QueryResult last = MustRun(*engine, "SELECT 1; SELECT 2 AS two, 'x' AS s");
  EXPECT_THAT(last.header, ElementsAre("two", "s"));
  ASSERT_EQ(last.rows.size(), 1u);
  EXPECT_THAT(last.rows[0], ElementsAre("2", "x"));
}

// ------------------------------------------------------------------------------------------------

QueryResult SmallResult() {
  QueryResult result;
  result.header = {"id", "name", "score", "ok"};
  result.column_types = {"INTEGER", "VARCHAR", "DOUBLE", "BOOLEAN"};
  result.rows = {
      {"1", "alice", "1.5", "true"},
      {"20", "b,\"q\"", std::nullopt, "false"},
      {std::nullopt, "", "inf", std::nullopt},
  };
  return result;
}

TEST(QueryFormatTest, Table) {
  EXPECT_EQ(FormatTable(SmallResult()),
            "id   | name  | score | ok\n"
            "-----+-------+-------+------\n"
            "   1 | alice |   1.5 | true\n"
            "  20 | b,\"q\" |  NULL | false\n"
            "NULL |       |   inf | NULL\n"
            "(3 rows)\n");
  QueryResult one;
  one.header = {"x"};
  one.column_types = {"VARCHAR"};
  one.rows = {{"line1\nline2"}};
  EXPECT_EQ(FormatTable(one), "x\n------------\nline1\\nline2\n(1 row)\n");
  EXPECT_EQ(FormatTable(QueryResult{}), "(0 rows)\n");
}

// Streaming writers: the table shows at most its limit of rows (written once the limit is
// passed) and counts the rest; the other formats write every row, in pieces, as chunks come.
class ChunkOf final : public ResultRows {
 public:
  explicit ChunkOf(const QueryResult& result, size_t first, size_t count)
      : result_(result), first_(first), count_(count) {}
  size_t size() const override { return count_; }
  std::optional<std::string_view> Value(size_t row, size_t column) const override {
    const auto& value = result_.rows[first_ + row][column];
    if (!value) return std::nullopt;
    return std::string_view(*value);
  }

 private:
  const QueryResult& result_;
  size_t first_;
  size_t count_;
};

TEST(QueryFormatTest, TheTableShowsItsLimitOfRowsAndCountsTheRest) {
  QueryResult result;
  result.header = {"n"};
  result.column_types = {"BIGINT"};
  for (int i = 1; i <= 5; ++i) result.rows.push_back({std::to_string(i * 100)});
  std::string text;
  std::vector<std::string> pieces_when_third_chunk_arrives;
  auto writer = MakeFormatWriter(
      OutputFormat::kTable,
      [&](std::string_view piece) {
        text += piece;
        return Status::OK();
      },
      3);
  ASSERT_TRUE(writer->Begin(result.header, result.column_types).ok());
  ASSERT_TRUE(writer->Write(ChunkOf(result, 0, 2)).ok());
  EXPECT_EQ(text, "") << "the table waits for its rows to align them";
  ASSERT_TRUE(writer->Write(ChunkOf(result, 2, 2)).ok());
  EXPECT_EQ(text, "n\n---\n100\n200\n300\n") << "past the limit, the rows shown are written";
  ASSERT_TRUE(writer->Write(ChunkOf(result, 4, 1)).ok());
  ASSERT_TRUE(writer->End().ok());
  EXPECT_EQ(text, "n\n---\n100\n200\n300\n"
                  "(5 rows, the first 3 shown; --output csv or json writes every row)\n");
}

TEST(QueryFormatTest, CsvJsonAndPlainWriteAsChunksComeAndStopOnAWriteError) {
  QueryResult result;
  result.header = {"id", "text"};
  result.column_types = {"BIGINT", "VARCHAR"};
  const std::string long_text(1000, 'x');
  for (int i = 0; i < 500; ++i) result.rows.push_back({std::to_string(i), long_text});
  for (const OutputFormat format : {OutputFormat::kCsv, OutputFormat::kJson, OutputFormat::kPlain}) {
    std::string text;
    int pieces = 0;
    auto writer = MakeFormatWriter(format, [&](std::string_view piece) {
      text += piece;
      ++pieces;
      return Status::OK();
    });
    ASSERT_TRUE(writer->Begin(result.header, result.column_types).ok());
    ASSERT_TRUE(writer->Write(ChunkOf(result, 0, 250)).ok());
    EXPECT_GT(text.size(), 100000u) << "rows are written while the result streams";
    ASSERT_TRUE(writer->Write(ChunkOf(result, 250, 250)).ok());
    ASSERT_TRUE(writer->End().ok());
    EXPECT_GT(pieces, 4);
    const std::string whole = format == OutputFormat::kCsv    ? FormatCsv(result)
                              : format == OutputFormat::kJson ? FormatJson(result)
                                                              : FormatPlain(result);
    EXPECT_EQ(text, whole) << "streamed and whole output are the same bytes";

    auto failing = MakeFormatWriter(format, [](std::string_view) {
      return Status::IOError("disk full");
    });
    ASSERT_TRUE(failing->Begin(result.header, result.column_types).ok());
    EXPECT_EQ(failing->Write(ChunkOf(result, 0, 250)).code(), StatusCode::kIOError);
  }
}

TEST(QueryFormatTest, Csv) {
  EXPECT_EQ(FormatCsv(SmallResult()),
            "id,name,score,ok\n"
            "1,alice,1.5,true\n"
            "20,\"b,\"\"q\"\"\",,false\n"
            ",\"\",inf,\n");
}

TEST(QueryFormatTest, Json) {
  EXPECT_EQ(FormatJson(SmallResult()),
            "[{\"id\":1,\"name\":\"alice\",\"score\":1.5,\"ok\":true},"
            "{\"id\":20,\"name\":\"b,\\\"q\\\"\",\"score\":null,\"ok\":false},"
            "{\"id\":null,\"name\":\"\",\"score\":\"inf\",\"ok\":null}]\n");
  EXPECT_EQ(FormatJson(QueryResult{}), "[]\n");
}

TEST(QueryFormatTest, Plain) {
  EXPECT_EQ(FormatPlain(SmallResult()),
            "{\"header\":[\"id\",\"name\",\"score\",\"ok\"],\"rows\":[[\"1\",\"alice\",\"1.5\",\"true\"],"
            "[\"20\",\"b,\\\"q\\\"\",null,\"false\"],[null,\"\",\"inf\",null]]}\n");
  EXPECT_EQ(FormatPlain(QueryResult{}), "{\"header\":[],\"rows\":[]}\n");
}

TEST(QueryFormatTest, RealResultThroughJson) {
  auto engine = OpenEngine();
  QueryResult result =
      MustRun(*engine, "SELECT 12.50::DECIMAL(6,2) AS d, 3::HUGEINT AS h, true AS t, [1, 2] AS l, NULL::INT AS n");
  EXPECT_EQ(FormatJson(result), "[{\"d\":12.50,\"h\":3,\"t\":true,\"l\":\"[1, 2]\",\"n\":null}]\n");
}

// ----- tables bound on demand ---------------------------------------------------------------------

// A binder of two tables, a.a (healthy) and b.b (its source cannot be built), that counts binds.
class CountingBinder final : public TableBinder {
 public:
  explicit CountingBinder(std::map<TableName, int>* binds) : binds_(binds) {}
  std::vector<TableName> Names() const override { return {{"a", "a"}, {"b", "b"}}; }
  std::vector<Result<TableSource>> Bind(const std::vector<TableName>& tables) override {
    std::vector<Result<TableSource>> sources;
    for (const TableName& table : tables) {
      ++(*binds_)[table];
      if (table.pipeline == "b") {
        sources.push_back(Status::Corruption("segment 7 fails its checksum"));
      } else {
        sources.push_back(Source("a", "a", {F(1, "id", LogicalType::Long())},
                                 {MakeBatch({F(1, "id", LogicalType::Long())}, {{Value::Int(1)}, {Value::Int(2)}})}));
      }
    }
    return sources;
  }
  Status SchemaProblem(const std::string& schema) const override {
    if (schema == "c") return Status::IOError("store unreadable");
    return Status::OK();
  }

 private:
  std::map<TableName, int>* binds_;
};

TEST(QueryBinding, ABrokenTableFailsOnlyStatementsThatReadItAndIsBoundOnlyWhenRead) {
  std::map<TableName, int> binds;
  std::unique_ptr<Engine> engine = OpenEngine();
  engine->SetBinder(std::make_unique<CountingBinder>(&binds));
  EXPECT_THAT(engine->TableNames(), ElementsAre("a.a", "b.b"));
  EXPECT_TRUE(binds.empty()) << "listing binds nothing";

  EXPECT_EQ(Scalar(*engine, "SELECT count(*) FROM a.a"), "2");
  EXPECT_EQ((binds[{"a", "a"}]), 1);
  EXPECT_EQ((binds.count({"b", "b"})), 0u) << "a statement pays only for the tables it reads";

  Result<QueryResult> broken = engine->Run("SELECT * FROM b.b");
  ASSERT_FALSE(broken.ok());
  EXPECT_EQ(broken.status().code(), StatusCode::kCorruption);
  EXPECT_EQ(broken.status().message(), "table b.b cannot be read: segment 7 fails its checksum");
  Result<QueryResult> joined = engine->Run("WITH x AS (SELECT * FROM B.b) SELECT * FROM a.a, x");
  ASSERT_FALSE(joined.ok());
  EXPECT_THAT(joined.status().message(), HasSubstr("table b.b cannot be read"));
  EXPECT_EQ(Scalar(*engine, "SELECT sum(id) FROM a.a"), "3");
  EXPECT_EQ((binds[{"a", "a"}]), 1) << "bound once, then registered";
  EXPECT_EQ((binds[{"b", "b"}]), 1) << "a failure is remembered, not retried per statement";

  // A pipeline the binder could not open names its problem; an unknown one lists the tables.
  Result<QueryResult> unreadable = engine->Run("SELECT * FROM c.c");
  ASSERT_FALSE(unreadable.ok());
  EXPECT_EQ(unreadable.status().message(), "store unreadable");
  Result<QueryResult> unknown = engine->Run("SELECT * FROM d.d");
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(unknown.status().message(), HasSubstr("unknown table 'd.d'"));
  EXPECT_THAT(unknown.status().message(), HasSubstr("a.a, b.b"));
}

TEST(QueryBinding, StatementsDuckdbCannotSerializeBindEveryTableButFailOnlyOnABrokenOne) {
  std::map<TableName, int> binds;
  std::unique_ptr<Engine> engine = OpenEngine();
  engine->SetBinder(std::make_unique<CountingBinder>(&binds));
  const QueryResult described = MustRun(*engine, "DESCRIBE a.a");
  ASSERT_EQ(described.rows.size(), 1u);
  EXPECT_EQ(described.rows[0][0], "id");
  Result<QueryResult> broken = engine->Run("DESCRIBE b.b");
  ASSERT_FALSE(broken.ok());
  EXPECT_THAT(broken.status().message(), HasSubstr("table b.b cannot be read"));
}

// A table whose view DuckDB refuses — columns `v` and `V`, as a store written before the name rules
// (docs/schema.md, "Names") may hold — fails only the statements that read it.
TEST(QueryBinding, ATableWhoseViewDuckdbRefusesFailsOnlyWhereRead) {
  class CaseTwinBinder final : public TableBinder {
   public:
    std::vector<TableName> Names() const override { return {{"a", "a"}, {"b", "b"}}; }
    std::vector<Result<TableSource>> Bind(const std::vector<TableName>& tables) override {
      std::vector<Result<TableSource>> sources;
      for (const TableName& table : tables) {
        std::vector<Field> fields = {F(1, "v", LogicalType::Long())};
        if (table.pipeline == "b") fields.push_back(F(2, "V", LogicalType::Long()));
        std::vector<Value> row(fields.size(), Value::Int(1));
        sources.push_back(Source(table.pipeline, table.namespace_name, fields,
                                 {MakeBatch(fields, {row})}));
      }
      return sources;
    }
    Status SchemaProblem(const std::string&) const override { return Status::OK(); }
  };
  std::unique_ptr<Engine> engine = OpenEngine();
  engine->SetBinder(std::make_unique<CaseTwinBinder>());
  Result<QueryResult> broken = engine->Run("SELECT * FROM b.b");
  ASSERT_FALSE(broken.ok());
  EXPECT_THAT(broken.status().message(),
              HasSubstr("table b.b cannot be read: DuckDB refuses its view: "));
  EXPECT_THAT(broken.status().message(), HasSubstr("duplicate column name"));
  EXPECT_EQ(Scalar(*engine, "SELECT count(*) FROM a.a"), "1");
}

// ----- file access off ----------------------------------------------------------------------------

TEST(QueryFileAccess, OffReadsOnlyTheReadableDirectoriesAndRefusesWritesAndSettings) {
  const std::string root = ::testing::TempDir() + "/query_file_access";
  std::filesystem::remove_all(root);
  std::filesystem::create_directories(root + "/readable");
  {
    std::unique_ptr<Engine> writer = OpenEngine();
    MustRun(*writer, "COPY (SELECT 42 AS answer) TO '" + root + "/readable/t.parquet' (FORMAT parquet)");
    MustRun(*writer, "COPY (SELECT 7 AS secret) TO '" + root + "/other.parquet' (FORMAT parquet)");
  }
  Result<std::unique_ptr<Engine>> opened =
      Engine::Open(EngineOptions{false, {root + "/readable"}});
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  Engine& engine = **opened;
  EXPECT_EQ(Scalar(engine, "SELECT answer FROM read_parquet('" + root + "/readable/t.parquet')"), "42");
  for (const std::string& sql : std::vector<std::string>{
           "SELECT * FROM read_parquet('" + root + "/other.parquet')",
        "COPY (SELECT 1) TO '" + root + "/readable/x.csv'", "SET enable_external_access = true",
        "SET VARIABLE v = 1; SET enable_external_access = true", "RESET enable_external_access",
        "ATTACH '" + root + "/x.db'", "LOAD parquet",
        "EXPLAIN ANALYZE COPY (SELECT 1) TO '" + root + "/readable/y.csv'"}) {
    Result<QueryResult> result = engine.Run(sql);
    ASSERT_FALSE(result.ok()) << sql;
    EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument) << sql;
    EXPECT_THAT(result.status().message(), HasSubstr(std::string(kAllowFileAccessFlag))) << sql;
  }
  EXPECT_TRUE(engine.Run("EXPLAIN SELECT 1 AS analysis").ok()) << "a plain EXPLAIN runs nothing";
  EXPECT_EQ(Scalar(engine, "SET VARIABLE n = 5; SELECT getvariable('n')"), "5");
  EXPECT_FALSE(std::filesystem::exists(root + "/readable/x.csv"));
  EXPECT_FALSE(std::filesystem::exists(root + "/readable/y.csv"));
  EXPECT_FALSE(std::filesystem::exists(root + "/x.db"));
  std::filesystem::remove_all(root);
}


// ----- results streamed as Batches (OpenBatchStream) ----------------------------------------------

std::unique_ptr<BatchStream> MustOpenBatchStream(Engine& engine, const std::string& sql) {
  Result<std::unique_ptr<BatchStream>> stream = engine.OpenBatchStream(sql);
  EXPECT_TRUE(stream.ok()) << sql << ": " << stream.status().ToString();
  if (!stream.ok()) return nullptr;
  return std::move(stream).value();
}

// Every Batch the stream hands over, in order, until nullopt (or the first error, which fails the test).
std::vector<Batch> ReadAllBatches(BatchStream& stream, int64_t max_rows) {
  std::vector<Batch> batches;
  while (true) {
    Result<std::optional<Batch>> next = stream.Next(max_rows);
    EXPECT_TRUE(next.ok()) << next.status().ToString();
    if (!next.ok() || !next->has_value()) break;
    std::string reason;
    EXPECT_TRUE((*next)->Validate(&reason)) << reason;
    batches.push_back(std::move(**next));
  }
  return batches;
}

std::vector<std::string> FieldNames(const std::vector<Field>& fields) {
  std::vector<std::string> names;
  for (const Field& field : fields) names.push_back(field.name);
  return names;
}

std::vector<std::string> FieldTypes(const std::vector<Field>& fields) {
  std::vector<std::string> types;
  for (const Field& field : fields) types.push_back(field.type.ToString());
  return types;
}

TEST(QueryBatchStream, EveryRowOnceInWholeChunksOfAboutMaxRowsWithTypedValues) {
  const LogicalType point =
      LogicalType::Struct({F(7, "a", LogicalType::Int()), F(8, "b", LogicalType::String())});
  const LogicalType longs = LogicalType::List(F(10, "element", LogicalType::Long()));
  const std::vector<Field> fields = {
      F(1, "id", LogicalType::Long()),   F(2, "i", LogicalType::Int()),
      F(3, "d", LogicalType::Double()),  F(4, "dec", Dec(10, 2)),
      F(5, "s", LogicalType::String()),  F(6, "ts", LogicalType::Timestamp()),
      F(9, "st", point),                 F(11, "li", longs),
  };
  // Row `id` as registered: every 7th row NULL but for its id.
  const auto row_of = [](int64_t id) -> std::vector<Value> {
    if (id % 7 == 3) {
      std::vector<Value> row(8, Value::Null());
      row[0] = Value::Int(id);
      return row;
    }
    return {Value::Int(id),
            Value::Int(id % 1000 - 500),
            Value::Double(static_cast<double>(id) / 4.0),
            Value::Decimal(id * 101 - 5000, 10, 2),
            Value::String("row " + std::to_string(id)),
            Value::Timestamp(1704067200000000 + id * 1000001),
            Obj({{"a", Value::Int(id % 5)}, {"b", id % 2 ? Value::String("odd") : Value::Null()}}),
            List({Value::Int(id), Value::Null(), Value::Int(-id)})};
  };
  constexpr int64_t kRows = 10000;
  Batches registered;
  int64_t next_id = 0;
  for (int64_t size : {3001, 2048, 4000, 951}) {
    std::vector<std::vector<Value>> rows;
    for (int64_t r = 0; r < size; ++r) rows.push_back(row_of(next_id++));
    registered.push_back(MakeBatch(fields, rows));
  }
  ASSERT_EQ(next_id, kRows);
  auto engine = OpenEngine();
  ASSERT_TRUE(engine->RegisterTable(Source("p", "t", fields, registered)).ok());

  std::unique_ptr<BatchStream> stream = MustOpenBatchStream(*engine, "SELECT * FROM p.t");
  ASSERT_NE(stream, nullptr);
  EXPECT_THAT(stream->header(), ElementsAre("id", "i", "d", "dec", "s", "ts", "st", "li"));
  EXPECT_THAT(stream->column_types(),
              ElementsAre("BIGINT", "INTEGER", "DOUBLE", "DECIMAL(10,2)", "VARCHAR", "TIMESTAMP",
                          "STRUCT(a INTEGER, b VARCHAR)", "BIGINT[]"));
  EXPECT_THAT(FieldNames(stream->fields()), ElementsAre("id", "i", "d", "dec", "s", "ts", "st", "li"));
  EXPECT_THAT(FieldTypes(stream->fields()),
              ElementsAre("long", "int", "double", "decimal(10, 2)", "string", "timestamp",
                          "struct<a: int, b: string>", "list<long>"));

  constexpr int64_t kMaxRows = 3000;
  const std::vector<Batch> batches = ReadAllBatches(*stream, kMaxRows);
  EXPECT_GE(batches.size(), 3u) << "10,000 rows came in too few batches for max_rows 3000";
  std::vector<int> seen(kRows, 0);
  for (const Batch& batch : batches) {
    EXPECT_GT(batch.num_rows, 0);
    EXPECT_LE(batch.num_rows, kMaxRows + 2047) << "a batch is whole chunks up to about max_rows";
    EXPECT_EQ(batch.fields, stream->fields());
    for (int64_t r = 0; r < batch.num_rows; ++r) {
      const Value row = batch.RowAt(r);
      const int64_t id = row.Find("id")->as_int();
      ASSERT_TRUE(id >= 0 && id < kRows) << row.ToJson();
      ++seen[id];
      const std::vector<Value> want = row_of(id);
      for (size_t c = 0; c < fields.size(); ++c) {
        ASSERT_EQ(*row.Find(fields[c].name), want[c])
            << "row " << id << " column " << fields[c].name << ": " << row.ToJson();
      }
    }
  }
  for (int64_t id = 0; id < kRows; ++id) ASSERT_EQ(seen[id], 1) << "row " << id;
  Result<std::optional<Batch>> after = stream->Next(kMaxRows);
  ASSERT_TRUE(after.ok());
  EXPECT_FALSE(after->has_value()) << "the end stays the end";
}

TEST(QueryBatchStream, TypesWithoutAColumnArriveAsDuckDbTextInOneStatement) {
  auto engine = OpenEngine();
  {
    std::unique_ptr<BatchStream> stream =
        MustOpenBatchStream(*engine, "SELECT 1::HUGEINT AS h, INTERVAL 2 DAY AS i, 3 AS n");
    ASSERT_NE(stream, nullptr);
    EXPECT_THAT(stream->header(), ElementsAre("h", "i", "n"));
    EXPECT_THAT(FieldNames(stream->fields()), ElementsAre("h", "i", "n"));
    EXPECT_THAT(FieldTypes(stream->fields()), ElementsAre("string", "string", "int"));
    const std::vector<Batch> batches = ReadAllBatches(*stream, 100);
    ASSERT_EQ(batches.size(), 1u);
    ASSERT_EQ(batches[0].num_rows, 1);
    EXPECT_THAT(FieldNames(batches[0].fields), ElementsAre("h", "i", "n"));
    EXPECT_EQ(batches[0].columns[0].ValueAt(0), Value::String("1"));
    EXPECT_EQ(batches[0].columns[1].ValueAt(0), Value::String("2 days"));
    EXPECT_EQ(batches[0].columns[2].ValueAt(0), Value::Int(3));
  }
  // Cast by position: two columns of one name stay two columns, each with its own value.
  std::unique_ptr<BatchStream> twins =
      MustOpenBatchStream(*engine, "SELECT 1::HUGEINT AS a, 2::HUGEINT AS a");
  ASSERT_NE(twins, nullptr);
  EXPECT_THAT(twins->header(), ElementsAre("a", "a"));
  EXPECT_THAT(FieldNames(twins->fields()), ElementsAre("a", "a"));
  const std::vector<Batch> batches = ReadAllBatches(*twins, 100);
  ASSERT_EQ(batches.size(), 1u);
  ASSERT_EQ(batches[0].num_rows, 1);
  EXPECT_THAT(FieldNames(batches[0].fields), ElementsAre("a", "a"));
  EXPECT_EQ(batches[0].columns[0].ValueAt(0), Value::String("1"));
  EXPECT_EQ(batches[0].columns[1].ValueAt(0), Value::String("2"));
}

TEST(QueryBatchStream, SeveralStatementsStreamTheLastOnesResult) {
  auto engine = OpenEngine();
  std::unique_ptr<BatchStream> stream =
      MustOpenBatchStream(*engine, "SET VARIABLE x = 5; SELECT getvariable('x') AS v");
  ASSERT_NE(stream, nullptr);
  EXPECT_THAT(stream->header(), ElementsAre("v"));
  const std::vector<Batch> batches = ReadAllBatches(*stream, 100);
  ASSERT_EQ(batches.size(), 1u);
  ASSERT_EQ(batches[0].num_rows, 1);
  EXPECT_EQ(batches[0].fields[0].type, LogicalType::Int());
  EXPECT_EQ(batches[0].columns[0].ValueAt(0), Value::Int(5));
}

TEST(QueryBatchStream, AnUnsupportedTypeAfterOtherStatementsIsRefusedNamingTheColumn) {
  auto engine = OpenEngine();
  Result<std::unique_ptr<BatchStream>> stream =
      engine->OpenBatchStream("SET VARIABLE x = 5; SELECT getvariable('x') AS v, 1::HUGEINT AS big");
  ASSERT_FALSE(stream.ok());
  EXPECT_EQ(stream.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(stream.status().message(), HasSubstr("column 'big' has DuckDB type HUGEINT"));
}

TEST(QueryBatchStream, AnUnknownTableFailsAsRunFailsAndARunTimeErrorFailsNext) {
  const std::vector<Field> fields = {F(1, "id", LogicalType::Long())};
  auto engine = OpenEngine();
  ASSERT_TRUE(engine->RegisterTable(Source("p", "a", fields, {MakeBatch(fields, {{Value::Int(1)}})})).ok());
  Result<QueryResult> run = engine->Run("SELECT * FROM p.nowhere");
  ASSERT_FALSE(run.ok());
  Result<std::unique_ptr<BatchStream>> unknown = engine->OpenBatchStream("SELECT * FROM p.nowhere");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(unknown.status().message(), run.status().message());
  EXPECT_THAT(unknown.status().message(), HasSubstr("unknown table 'p.nowhere'"));

  // A statement failing at run time: rows before `first_bad` convert, the first 'x' fails it.
  // Its error comes from Next, after the batches before it; a failure DuckDB meets while it
  // fills its streaming buffer, before the first fetch, comes from OpenBatchStream, with the
  // same code and message.
  const auto read_until_failure = [&](int64_t first_bad, int64_t rows) {
    SCOPED_TRACE(rows);
    const std::string sql = fmt::format(
        "SELECT CAST(CASE WHEN range < {} THEN '1' ELSE 'x' END AS INTEGER) AS v FROM range({})",
        first_bad, rows);
    Result<std::unique_ptr<BatchStream>> stream = engine->OpenBatchStream(sql);
    int64_t rows_before_failure = 0;
    Status failure = stream.status();
    while (failure.ok()) {
      Result<std::optional<Batch>> next = (*stream)->Next(2048);
      failure = next.status();
      if (!failure.ok()) break;
      if (!next->has_value()) {
        ADD_FAILURE() << "the stream ended without the conversion error";
        break;
      }
      int64_t ones = 0;
      for (int64_t r = 0; r < (*next)->num_rows; ++r) ones += (*next)->columns[0].ValueAt(r) == Value::Int(1);
      EXPECT_EQ(ones, (*next)->num_rows) << "rows before the failure convert to 1";
      rows_before_failure += (*next)->num_rows;
    }
    EXPECT_EQ(failure.code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(failure.message(), HasSubstr("Could not convert string 'x' to INT32"));
    EXPECT_LE(rows_before_failure, first_bad);
    return std::pair(stream.ok(), rows_before_failure);
  };
  read_until_failure(5000, 10000);
  const auto [opened, rows_before_failure] = read_until_failure(1'000'000, 2'000'000);
  EXPECT_TRUE(opened) << "a failure a million rows in stopped OpenBatchStream";
  EXPECT_GT(rows_before_failure, 0) << "the batches before the failure were not returned";
  // The next statement is not blamed for the last one's failure.
  EXPECT_EQ(Scalar(*engine, "SELECT count(*) FROM p.a"), "1");
}

TEST(QueryBatchStream, WithFileAccessOffCopyIsRefusedAsStreamRefusesIt) {
  const std::string root = ::testing::TempDir() + "/query_batch_stream_access";
  std::filesystem::remove_all(root);
  std::filesystem::create_directories(root);
  Result<std::unique_ptr<Engine>> opened = Engine::Open(EngineOptions{.allows_file_access = false});
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  Engine& engine = **opened;
  const std::string sql = "COPY (SELECT 1 AS one) TO '" + root + "/x.csv'";
  Result<QueryResult> run = engine.Run(sql);
  ASSERT_FALSE(run.ok());
  Result<std::unique_ptr<BatchStream>> stream = engine.OpenBatchStream(sql);
  ASSERT_FALSE(stream.ok());
  EXPECT_EQ(stream.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(stream.status().message(), run.status().message());
  EXPECT_THAT(stream.status().message(), HasSubstr(std::string(kAllowFileAccessFlag)));
  EXPECT_FALSE(std::filesystem::exists(root + "/x.csv"));
  std::filesystem::remove_all(root);
}

TEST(QueryBatchStream, AnEmptyResultEndsAtOnceAndStillDescribesItsColumns) {
  const std::vector<Field> fields = {F(1, "id", LogicalType::Long()), F(2, "s", LogicalType::String())};
  auto engine = OpenEngine();
  ASSERT_TRUE(engine->RegisterTable(Source("p", "empty", fields, {})).ok());
  std::unique_ptr<BatchStream> stream = MustOpenBatchStream(*engine, "SELECT id, s, 1.5 AS x FROM p.empty");
  ASSERT_NE(stream, nullptr);
  EXPECT_THAT(stream->header(), ElementsAre("id", "s", "x"));
  EXPECT_THAT(stream->column_types(), ElementsAre("BIGINT", "VARCHAR", "DECIMAL(2,1)"));
  EXPECT_THAT(FieldNames(stream->fields()), ElementsAre("id", "s", "x"));
  EXPECT_THAT(FieldTypes(stream->fields()), ElementsAre("long", "string", "decimal(2, 1)"));
  Result<std::optional<Batch>> next = stream->Next(1000);
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_FALSE(next->has_value());
}

}  // namespace
}  // namespace skippr::query
