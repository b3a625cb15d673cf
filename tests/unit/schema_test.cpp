// schema/: inference (reference §7.1, docs/schema.md), evolution, Seal and TakeBatches,
// deadletters, namespaces, the Iceberg JSON form, persistence in the store, and the text readers
// behind them.
#include "schema/schema.hpp"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <bit>
#include <charconv>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <random>
#include <string>
#include <system_error>
#include <vector>

#include "core/batch.hpp"
#include "core/hash.hpp"
#include "core/types.hpp"
#include "core/value.hpp"
#include "schema/text_values.hpp"
#include "store/store.hpp"
#include "support/temp_dir.hpp"

namespace skippr {

// gtest prints these when an expectation fails (found by ADL, so outside the anonymous namespace).
void PrintTo(const Value& value, std::ostream* out) {
  *out << ValueKindName(value.kind()) << " " << value.ToJson();
}
void PrintTo(const LogicalType& type, std::ostream* out) { *out << type.ToString(); }
void PrintTo(const Field& field, std::ostream* out) {
  *out << "{id " << field.id << ", " << field.name << ": " << field.type.ToString()
       << (field.nullable ? "" : " required") << "}";
}

namespace schema {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using Json = nlohmann::json;

// ----- helpers ----------------------------------------------------------------------------------

Value Obj(ValueObject fields) { return Value::Object(std::move(fields)); }
Value Lst(ValueList items) { return Value::List(std::move(items)); }
Value Str(const char* text) { return Value::String(text); }
Value Int(int64_t v) { return Value::Int(v); }
Value Dbl(double v) { return Value::Double(v); }
Value Null() { return Value::Null(); }

ShaperOptions Options() {
  ShaperOptions options;
  options.default_namespace = "p";
  options.build_columns = true;
  return options;
}

RecordOrigin Origin(uint64_t row = 1) { return RecordOrigin{"input/events.jsonl", row + 1, row}; }

const RecordContext kContext{};

void AbsorbOk(Shaper& shaper, Value record, const RecordContext& context = kContext) {
  const std::string text = record.ToJson();
  std::optional<Deadletter> dead = shaper.Absorb(std::move(record), Origin(), context);
  EXPECT_FALSE(dead.has_value()) << text << " → deadletter: " << (dead ? dead->reason : "");
}

const NamespaceSchema& Ns(const Shaper& shaper, const std::string& name = "p") {
  static const NamespaceSchema kMissing{"<missing>"};
  auto it = shaper.schema().namespaces.find(name);
  EXPECT_NE(it, shaper.schema().namespaces.end()) << "no namespace " << name;
  return it == shaper.schema().namespaces.end() ? kMissing : it->second;
}

// "<missing>" when the namespace has no such top-level field.
std::string TypeOf(const Shaper& shaper, const std::string& field, const std::string& ns = "p") {
  const Field* found = Ns(shaper, ns).FindField(field);
  return found ? found->type.ToString() : "<missing>";
}

int32_t IdOf(const Shaper& shaper, const std::string& field, const std::string& ns = "p") {
  const Field* found = Ns(shaper, ns).FindField(field);
  return found ? found->id : -1;
}

std::vector<std::string> FieldNames(const NamespaceSchema& ns) {
  std::vector<std::string> names;
  for (const Field& field : ns.fields) names.push_back(field.name);
  return names;
}

// Everything a PipelineSchema holds, as text, so two schemas compare exactly.
std::string Dump(const PipelineSchema& schema) {
  Json out = Json::object();
  for (const auto& [name, ns] : schema.namespaces) {
    Json history = Json::array();
    for (const SchemaVersion& version : ns.history) {
      history.push_back({{"schema_id", version.schema_id}, {"changes", version.changes}});
    }
    out[name] = {{"name", ns.name},
                 {"schema_id", ns.schema_id},
                 {"last_field_id", ns.last_field_id},
                 {"fields", FieldsToIcebergJson(ns.fields, ns.schema_id)},
                 {"history", std::move(history)}};
  }
  return out.dump();
}

// The one batch TakeBatches returns for namespace "p".
Batch OnlyBatch(Shaper& shaper) {
  std::vector<Batch> batches = shaper.TakeBatches();
  EXPECT_EQ(batches.size(), 1u);
  if (batches.empty()) return Batch{};
  std::string reason;
  EXPECT_TRUE(batches[0].Validate(&reason)) << reason;
  return std::move(batches[0]);
}

// ----- rows handed over as columns ---------------------------------------------------------------

// `rows` (objects with the same names) as the ColumnRows a typed source builds: a column of each
// declared type, then a String column for the values the type cannot hold (strings), when any.
ColumnRows RowsAsColumns(const std::vector<std::pair<std::string, LogicalType>>& columns,
                         const std::vector<Value>& rows, uint64_t first_row) {
  ColumnRows out;
  out.num_rows = static_cast<int64_t>(rows.size());
  out.first_row = first_row;
  out.cdc.emplace();
  for (const auto& [name, type] : columns) {
    Column typed(type);
    Column text(LogicalType::String());
    bool has_text = false;
    for (const Value& row : rows) {
      const Value* value = row.Find(name);
      if (value != nullptr && !value->is_null() && !ValueFitsColumn(*value, type)) {
        typed.AppendNull();
        text.Append(*value);
        has_text = true;
      } else {
        typed.Append(value == nullptr ? Value::Null() : *value);
        text.AppendNull();
      }
    }
    out.names.push_back(name);
    out.columns.push_back(std::move(typed));
    if (has_text) {
      out.names.push_back(name);
      out.columns.push_back(std::move(text));
    }
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    out.cdc->Append(RowChange{Mutation::kSnapshot, fmt::format("e{}", first_row + i), "t",
                              fmt::format("[{}]", first_row + i)});
  }
  return out;
}

// A source's rows shape the same namespace, the same batches and the same deadletters whether it
// hands them over as columns or one record at a time — through a new namespace, a column added
// halfway, values only a sibling holds, a promotion and a missing key.
TEST(ShaperColumns, ColumnsShapeExactlyAsTheirRowsWould) {
  const LogicalType amount = LogicalType::Decimal(10, 2).value();
  const LogicalType tags = LogicalType::List(Field{0, "element", LogicalType::Int(), true});
  std::map<std::string, LogicalType> declared = {
      {"id", LogicalType::Long()}, {"amount", amount}, {"tags", tags},
      {"name", LogicalType::String()}, {"qty", LogicalType::Int()}};
  const std::vector<std::string> key = {"id"};
  RecordContext context;
  context.declared_types = &declared;
  context.source_namespace = "orders";
  context.key_fields = &key;
  context.records_are_flat = true;
  context.keys_may_repeat = false;
  context.infer_epoch_timestamps = false;
  ShaperOptions options = Options();
  options.key_fields = {"id"};
  options.keep_origins = true;
  Shaper by_columns({}, options);
  Shaper by_rows({}, options);
  std::vector<Deadletter> column_deadletters;
  std::vector<Deadletter> row_deadletters;
  std::vector<std::pair<std::string, LogicalType>> columns = {
      {"id", LogicalType::Long()}, {"amount", amount}, {"tags", tags}, {"name", LogicalType::String()}};
  uint64_t next_row = 1;
  const auto row = [&](int64_t id, std::optional<int64_t> qty = std::nullopt) {
    ValueObject object = {{"id", id % 7 == 6 ? Null() : Int(id)},
                          {"amount", id % 5 == 4 ? Str("NaN") : Value::Decimal(id * 101, 10, 2)},
                          {"tags", id % 3 == 0 ? Null() : Lst({Int(id), Null(), Int(-id)})},
                          {"name", Str(fmt::format("name {}", id).c_str())}};
    if (qty) object.emplace_back("qty", Int(*qty));
    return Obj(std::move(object));
  };
  const auto absorb_both = [&](const std::vector<Value>& rows, bool seal) {
    ASSERT_TRUE(by_columns.ApplyDeclaredTypes(context).ok());
    ASSERT_TRUE(by_rows.ApplyDeclaredTypes(context).ok());
    for (Deadletter& deadletter :
         by_columns.AbsorbColumns(RowsAsColumns(columns, rows, next_row), {"t"}, context)) {
      column_deadletters.push_back(std::move(deadletter));
    }
    for (size_t i = 0; i < rows.size(); ++i) {
      RowChange change{Mutation::kSnapshot, fmt::format("e{}", next_row + i), "t",
                       fmt::format("[{}]", next_row + i)};
      if (auto deadletter = by_rows.Absorb(rows[i], {"t", 0, next_row + i}, context, &change)) {
        row_deadletters.push_back(std::move(*deadletter));
      }
    }
    next_row += rows.size();
    if (seal) EXPECT_EQ(by_columns.Seal().size(), by_rows.Seal().size());
  };
  std::vector<Value> batch;
  for (int64_t id = 1; id <= 6; ++id) batch.push_back(row(id));  // new namespace: the row path
  absorb_both(batch, true);
  batch.clear();
  for (int64_t id = 8; id <= 13; id += 1) {
    if (id % 7 != 6 && id % 5 != 4) batch.push_back(row(id));  // every column fits: appended
  }
  absorb_both(batch, false);
  batch.clear();
  for (int64_t id = 14; id <= 19; ++id) batch.push_back(row(id));  // NaN: to a new sibling
  absorb_both(batch, false);
  batch.clear();
  for (int64_t id = 20; id <= 30; ++id) batch.push_back(row(id));  // a null key, NaN amounts
  absorb_both(batch, false);
  columns.emplace_back("qty", LogicalType::Int());
  batch.clear();
  for (int64_t id = 40; id <= 43; ++id) batch.push_back(row(id, id));  // a new column
  absorb_both(batch, false);
  batch.clear();
  for (int64_t id = 50; id <= 53; ++id) batch.push_back(row(id, id * 2));  // appended again
  absorb_both(batch, false);
  declared.insert_or_assign("qty", LogicalType::Long());  // promoted: int columns append to a long field
  columns.back().second = LogicalType::Long();
  batch.clear();
  for (int64_t id = 60; id <= 62; ++id) batch.push_back(row(id, int64_t{1} << 40));
  absorb_both(batch, true);
  batch.clear();
  for (int64_t id = 70; id <= 75; ++id) batch.push_back(row(id, id));  // NaN: to the sibling
  absorb_both(batch, false);
  batch.clear();
  for (int64_t id = 80; id <= 83; ++id) batch.push_back(row(id, id));  // a null key alone
  absorb_both(batch, false);
  EXPECT_EQ(by_columns.records_absorbed(), by_rows.records_absorbed());
  EXPECT_EQ(Ns(by_columns, "orders").fields, Ns(by_rows, "orders").fields);
  EXPECT_THAT(FieldNames(Ns(by_columns, "orders")),
              ElementsAre("id", "amount", "tags", "name", "amount_string", "qty"));
  ASSERT_EQ(column_deadletters.size(), row_deadletters.size());
  for (size_t i = 0; i < row_deadletters.size(); ++i) {
    EXPECT_EQ(column_deadletters[i].reason, row_deadletters[i].reason);
    EXPECT_EQ(column_deadletters[i].origin.row, row_deadletters[i].origin.row);
  }
  std::vector<std::vector<RecordOrigin>> column_origins;
  std::vector<std::vector<RecordOrigin>> row_origins;
  const std::vector<Batch> column_batches = by_columns.TakeBatches(&column_origins);
  const std::vector<Batch> row_batches = by_rows.TakeBatches(&row_origins);
  ASSERT_EQ(row_batches.size(), 1u);
  EXPECT_GT(column_batches.size(), 1u);  // appended rows come as batches of their own
  std::vector<Value> column_rows;
  std::vector<std::string> column_keys;
  std::vector<uint64_t> column_origin_rows;
  for (size_t b = 0; b < column_batches.size(); ++b) {
    const Batch& got = column_batches[b];
    std::string reason;
    ASSERT_TRUE(got.Validate(&reason)) << reason;
    EXPECT_EQ(got.fields, row_batches[0].fields);
    EXPECT_EQ(got.schema_id, row_batches[0].schema_id);
    ASSERT_TRUE(got.cdc.has_value());
    ASSERT_EQ(column_origins[b].size(), static_cast<size_t>(got.num_rows));
    for (int64_t r = 0; r < got.num_rows; ++r) {
      column_rows.push_back(got.RowAt(r));
      column_keys.emplace_back(got.cdc->business_keys[static_cast<size_t>(r)]);
      column_origin_rows.push_back(column_origins[b][static_cast<size_t>(r)].row);
    }
  }
  ASSERT_EQ(column_rows.size(), static_cast<size_t>(row_batches[0].num_rows));
  for (int64_t r = 0; r < row_batches[0].num_rows; ++r) {
    const auto at = static_cast<size_t>(r);
    EXPECT_EQ(column_rows[at], row_batches[0].RowAt(r)) << "row " << r;
    EXPECT_EQ(column_keys[at], row_batches[0].cdc->business_keys[at]);
    EXPECT_EQ(column_origin_rows[at], row_origins[0][at].row);
  }
}

// ----- inference ---------------------------------------------------------------------------------

struct InferenceCase {
  std::string label;
  Value value;
  bool infer_epoch_timestamps;
  std::string type;
  Value stored;  // how the value reads back from the batch
};

TEST(SchemaInference, ScalarsGetTheReferenceTypes) {
  const std::vector<InferenceCase> cases = {
      {"true", Value::Bool(true), true, "boolean", Value::Bool(true)},
      {"false", Value::Bool(false), true, "boolean", Value::Bool(false)},
      {"42", Int(42), true, "int", Int(42)},
      {"-42", Int(-42), true, "int", Int(-42)},
      {"3000000000, epochs not inferred", Int(3'000'000'000), false, "long", Int(3'000'000'000)},
      // 10 digits from 2010 on read as Unix seconds (2065-01-24 here): the seconds rule has no 2040
      // cap.
      {"3000000000, epochs inferred", Int(3'000'000'000), true, "timestamp",
       Value::Timestamp(3'000'000'000'000'000)},
      {"12 digits", Int(300'000'000'000), true, "long", Int(300'000'000'000)},
      {"-3000000000", Int(-3'000'000'000), true, "long", Int(-3'000'000'000)},
      {"3.5", Dbl(3.5), true, "double", Dbl(3.5)},
      {"date", Str("2024-01-15"), true, "date", Value::Date(19737)},
      {"timestamptz Z", Str("2024-01-15T10:30:00Z"), true, "timestamptz",
       Value::TimestampTz(1'705'314'600'000'000)},
      {"timestamptz offset", Str("2024-01-15T10:30:00+02:00"), true, "timestamptz",
       Value::TimestampTz(1'705'307'400'000'000)},
      {"timestamp space", Str("2024-01-15 10:30:00"), true, "timestamp",
       Value::Timestamp(1'705'314'600'000'000)},
      {"timestamp fraction", Str("2024-01-15T10:30:00.123456"), true, "timestamp",
       Value::Timestamp(1'705'314'600'123'456)},
      {"epoch seconds", Int(1'700'000'000), true, "timestamp",
       Value::Timestamp(1'700'000'000'000'000)},
      {"epoch seconds, not inferred", Int(1'700'000'000), false, "int", Int(1'700'000'000)},
      {"epoch 2010-01-01", Int(1'262'304'000), true, "timestamp",
       Value::Timestamp(1'262'304'000'000'000)},
      {"just before 2010", Int(1'262'303'999), true, "int", Int(1'262'303'999)},
      {"epoch millis", Int(1'700'000'000'000), true, "timestamp",
       Value::Timestamp(1'700'000'000'000'000)},
      {"epoch millis, not inferred", Int(1'700'000'000'000), false, "long", Int(1'700'000'000'000)},
      {"nine digits", Int(999'999'999), true, "int", Int(999'999'999)},
      {"hello", Str("hello"), true, "string", Str("hello")},
      {"not a date", Str("2023-02-29"), true, "string", Str("2023-02-29")},
      {"digits as text", Str("42"), true, "string", Str("42")},
      {"binary", Value::Binary("\x01\x02"), true, "binary", Value::Binary("\x01\x02")},
      {"decimal", Value::Decimal(1250, 10, 2), true, "decimal(38, 2)", Value::Decimal(1250, 38, 2)},
  };
  for (const InferenceCase& c : cases) {
    SCOPED_TRACE(c.label);
    Shaper shaper({}, Options());
    RecordContext context;
    context.infer_epoch_timestamps = c.infer_epoch_timestamps;
    AbsorbOk(shaper, Obj({{"f", c.value}}), context);
    shaper.Seal();
    EXPECT_EQ(TypeOf(shaper, "f"), c.type);
    EXPECT_EQ(IdOf(shaper, "f"), 1);
    Batch batch = OnlyBatch(shaper);
    ASSERT_EQ(batch.num_rows, 1);
    EXPECT_EQ(batch.RowAt(0), Obj({{"f", c.stored}}));
  }
}

TEST(SchemaInference, NullOnlyFieldBecomesAStringAtSeal) {
  Shaper shaper({}, Options());
  AbsorbOk(shaper, Obj({{"id", Int(1)}, {"note", Null()}}));
  AbsorbOk(shaper, Obj({{"id", Int(2)}, {"note", Null()}}));
  EXPECT_EQ(TypeOf(shaper, "note"), "<missing>");  // not before the unit of work ends
  std::vector<NamespaceChange> changes = shaper.Seal();
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_THAT(changes[0].changes,
              ElementsAre("added id (int)", "added note (string; only nulls seen so far)"));
  EXPECT_EQ(TypeOf(shaper, "note"), "string");
  EXPECT_EQ(IdOf(shaper, "note"), 2);

  Batch batch = OnlyBatch(shaper);
  EXPECT_EQ(batch.RowAt(0), Obj({{"id", Int(1)}, {"note", Null()}}));
  EXPECT_EQ(batch.RowAt(1), Obj({{"id", Int(2)}, {"note", Null()}}));
}

TEST(SchemaInference, NullOnlyFieldTakesTheTypeOfALaterValueInTheSameUnit) {
  Shaper shaper({}, Options());
  AbsorbOk(shaper, Obj({{"n", Null()}}));
  AbsorbOk(shaper, Obj({{"n", Int(5)}}));
  std::vector<NamespaceChange> changes = shaper.Seal();
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_THAT(changes[0].changes, ElementsAre("added n (int)"));
  EXPECT_EQ(TypeOf(shaper, "n"), "int");
  EXPECT_EQ(Ns(shaper).last_field_id, 1);
}

TEST(SchemaInference, EmptyListOnlyFieldBecomesAListOfStrings) {
  Shaper shaper({}, Options());
  AbsorbOk(shaper, Obj({{"tags", Lst({})}}));
  std::vector<NamespaceChange> changes = shaper.Seal();
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_THAT(changes[0].changes,
              ElementsAre("added tags (list<string>; only empty lists seen so far)"));
  const Field* tags = Ns(shaper).FindField("tags");
  ASSERT_NE(tags, nullptr);
  EXPECT_EQ(tags->type.ToString(), "list<string>");
  EXPECT_EQ(tags->id, 1);
  EXPECT_EQ(tags->type.children()[0].id, 2);
  EXPECT_EQ(Ns(shaper).last_field_id, 2);
}

TEST(SchemaInference, NullOnlyFieldInsideAListOfObjectsIsCreatedToo) {
  Shaper shaper({}, Options());
  AbsorbOk(shaper, Obj({{"items", Lst({Obj({{"sku", Str("a")}, {"note", Null()}})})}}));
  std::vector<NamespaceChange> changes = shaper.Seal();
  EXPECT_EQ(TypeOf(shaper, "items"), "list<struct<sku: string, note: string>>");
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_THAT(changes[0].changes,
              ElementsAre("added items (list<struct>)", "added items.element.sku (string)",
                          "added items.element.note (string; only nulls seen so far)"));
  const Field& element = Ns(shaper).FindField("items")->type.children()[0];
  EXPECT_EQ(element.type.children()[1].id, 4);

  Batch batch = OnlyBatch(shaper);
  EXPECT_EQ(batch.RowAt(0), Obj({{"items", Lst({Obj({{"sku", Str("a")}, {"note", Null()}})})}}));
}

TEST(SchemaInference, NestedObjectsBecomeStructsAtFullDepth) {
  Shaper shaper({}, Options());
  AbsorbOk(shaper,
           Obj({{"a", Obj({{"b", Obj({{"c", Int(1)}, {"d", Str("x")}})}, {"e", Dbl(0.5)}})}}));
  std::vector<NamespaceChange> changes = shaper.Seal();
  EXPECT_EQ(TypeOf(shaper, "a"), "struct<b: struct<c: int, d: string>, e: double>");
  // A struct's id comes before its fields' ids, in the order they appear.
  const Field& a = *Ns(shaper).FindField("a");
  EXPECT_EQ(a.id, 1);
  const Field& b = a.type.children()[0];
  EXPECT_EQ(b.id, 2);
  EXPECT_EQ(b.type.children()[0].id, 3);
  EXPECT_EQ(b.type.children()[1].id, 4);
  EXPECT_EQ(a.type.children()[1].id, 5);
  EXPECT_EQ(Ns(shaper).last_field_id, 5);
  EXPECT_EQ(Ns(shaper).CountFields(), 5u);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_THAT(changes[0].changes,
              ElementsAre("added a (struct)", "added a.b (struct)", "added a.b.c (int)",
                          "added a.b.d (string)", "added a.e (double)"));

  Batch batch = OnlyBatch(shaper);
  EXPECT_EQ(batch.RowAt(0),
            Obj({{"a", Obj({{"b", Obj({{"c", Int(1)}, {"d", Str("x")}})}, {"e", Dbl(0.5)}})}}));
}

TEST(SchemaInference, ArraysBecomeListsOfTheMergedElementType) {
  Shaper shaper({}, Options());
  AbsorbOk(shaper, Obj({
                       {"ints", Lst({Int(1), Int(2)})},
                       {"numbers", Lst({Int(1), Dbl(2.5)})},
                       {"wide", Lst({Int(1), Int(300'000'000'000)})},
                       {"texts", Lst({Str("a"), Null(), Int(3)})},
                       {"days", Lst({Str("2024-01-15"), Str("2024-01-15T10:30:00")})},
                       {"objects", Lst({Obj({{"x", Int(1)}}), Obj({{"y", Str("s")}})})},
                       {"nested", Lst({Lst({Int(1)}), Lst({Int(2), Int(3)})})},
                   }));
  shaper.Seal();
  EXPECT_EQ(TypeOf(shaper, "ints"), "list<int>");
  EXPECT_EQ(TypeOf(shaper, "numbers"), "list<double>");
  EXPECT_EQ(TypeOf(shaper, "wide"), "list<long>");
  EXPECT_EQ(TypeOf(shaper, "texts"), "list<string>");
  EXPECT_EQ(TypeOf(shaper, "days"), "list<timestamp>");
  EXPECT_EQ(TypeOf(shaper, "objects"), "list<struct<x: int, y: string>>");
  EXPECT_EQ(TypeOf(shaper, "nested"), "list<list<int>>");

  // A list's id comes before its element's.
  const Field& ints = *Ns(shaper).FindField("ints");
  EXPECT_EQ(ints.id, 1);
  EXPECT_EQ(ints.type.children()[0].id, 2);
  EXPECT_EQ(ints.type.children()[0].name, "element");
  const Field& objects = *Ns(shaper).FindField("objects");
  EXPECT_EQ(objects.id, 11);
  EXPECT_EQ(objects.type.children()[0].id, 12);
  EXPECT_EQ(objects.type.children()[0].type.children()[0].id, 13);
  EXPECT_EQ(objects.type.children()[0].type.children()[1].id, 14);

  Batch batch = OnlyBatch(shaper);
  const Value row = batch.RowAt(0);
  EXPECT_EQ(*row.Find("ints"), Lst({Int(1), Int(2)}));
  EXPECT_EQ(*row.Find("numbers"), Lst({Dbl(1), Dbl(2.5)}));
  EXPECT_EQ(*row.Find("wide"), Lst({Int(1), Int(300'000'000'000)}));
  EXPECT_EQ(*row.Find("texts"), Lst({Str("a"), Null(), Str("3")}));
  EXPECT_EQ(*row.Find("days"), Lst({Value::Timestamp(1'705'276'800'000'000),
                                    Value::Timestamp(1'705'314'600'000'000)}));
  EXPECT_EQ(*row.Find("objects"),
            Lst({Obj({{"x", Int(1)}, {"y", Null()}}), Obj({{"x", Null()}, {"y", Str("s")}})}));
  EXPECT_EQ(*row.Find("nested"), Lst({Lst({Int(1)}), Lst({Int(2), Int(3)})}));
}

TEST(SchemaInference, DeclaredTypesWinWhenAFieldIsFirstSeen) {
  const std::map<std::string, LogicalType> declared = {
      {"amount", LogicalType::Decimal(10, 2).value()}, {"code", LogicalType::String()}};
  RecordContext context;
  context.declared_types = &declared;
  Shaper shaper({}, Options());
  AbsorbOk(shaper, Obj({{"amount", Dbl(12.5)}, {"code", Int(7)}, {"other", Int(7)}}), context);
  shaper.Seal();
  EXPECT_EQ(TypeOf(shaper, "amount"), "decimal(10, 2)");
  EXPECT_EQ(TypeOf(shaper, "code"), "string");
  EXPECT_EQ(TypeOf(shaper, "other"), "int");
  Batch batch = OnlyBatch(shaper);
  EXPECT_EQ(batch.RowAt(0),
            Obj({{"amount", Value::Decimal(1250, 10, 2)}, {"code", Str("7")}, {"other", Int(7)}}));
}

// A database table's declared types bind its namespace: a narrower type is held, an Iceberg
// promotion widens the column (even halfway through a batch), anything else is refused naming the
// table — never a silent sibling column.
TEST(SchemaInference, BindingDeclaredTypesWidenOrStopNeverGoToASibling) {
  std::map<std::string, LogicalType> declared = {
      {"amount", LogicalType::Decimal(10, 2).value()}, {"qty", LogicalType::Int()},
      {"ratio", LogicalType::Float()}, {"label", LogicalType::String()},
      {"note", LogicalType::Int()}};
  RecordContext context;
  context.declared_types = &declared;
  context.source_namespace = "orders";
  context.declared_types_are_binding = true;
  context.source_object = "PostgreSQL table public.orders";
  context.on_type_change = "Do this.";
  Shaper shaper({}, Options());
  ASSERT_TRUE(shaper.ApplyDeclaredTypes(context).ok());  // a namespace not seen yet
  AbsorbOk(shaper, Obj({{"amount", Value::Decimal(1250, 10, 2)}, {"qty", Int(1)},
                        {"ratio", Dbl(0.5)}, {"label", Str("a")}, {"note", Null()}}),
           context);
  shaper.Seal();
  EXPECT_EQ(TypeOf(shaper, "note", "orders"), "int") << "only nulls so far: its declared type";

  declared.insert_or_assign("amount", LogicalType::Decimal(14, 2).value());
  declared.insert_or_assign("qty", LogicalType::Long());
  declared.insert_or_assign("ratio", LogicalType::Double());
  ASSERT_TRUE(shaper.ApplyDeclaredTypes(context).ok());
  AbsorbOk(shaper, Obj({{"amount", Value::Decimal(123456789012, 14, 2)},
                        {"qty", Int(1LL << 40)}, {"ratio", Dbl(1)}, {"label", Str("b")}}),
           context);
  const std::vector<NamespaceChange> changes = shaper.Seal();
  EXPECT_EQ(TypeOf(shaper, "amount", "orders"), "decimal(14, 2)");
  EXPECT_EQ(TypeOf(shaper, "qty", "orders"), "long");
  EXPECT_EQ(TypeOf(shaper, "ratio", "orders"), "double");
  Batch batch = OnlyBatch(shaper);
  EXPECT_EQ(*batch.RowAt(0).Find("amount"), Value::Decimal(1250, 14, 2));
  EXPECT_EQ(*batch.RowAt(1).Find("qty"), Int(1LL << 40));
  EXPECT_EQ(batch.columns.size(), 5u) << "no sibling column";

  declared.insert_or_assign("qty", LogicalType::Int());  // narrower again: held by the long column
  EXPECT_TRUE(shaper.ApplyDeclaredTypes(context).ok());
  for (const auto& [name, type] : std::vector<std::pair<std::string, LogicalType>>{
           {"qty", LogicalType::Double()},
           {"label", LogicalType::Int()},
           {"amount", LogicalType::Decimal(14, 3).value()}}) {
    std::map<std::string, LogicalType> changed = declared;
    changed.insert_or_assign(name, type);
    RecordContext changed_context = context;
    changed_context.declared_types = &changed;
    const Status refused = shaper.ApplyDeclaredTypes(changed_context);
    EXPECT_EQ(refused.code(), StatusCode::kConflict) << name;
    EXPECT_THAT(refused.message(),
                ::testing::HasSubstr(fmt::format("PostgreSQL table public.orders: column '{}' is now {}",
                                                 name, type.ToString())));
    EXPECT_THAT(refused.message(), ::testing::EndsWith("Do this."));
    changed_context.declared_types_are_binding = false;  // a file's Parquet schema: not binding
    EXPECT_TRUE(shaper.ApplyDeclaredTypes(changed_context).ok());
  }
}

// ----- evolution ---------------------------------------------------------------------------------

TEST(SchemaEvolution, IntWidensToDoubleWithinOneUnit) {
  Shaper shaper({}, Options());
  AbsorbOk(shaper, Obj({{"x", Int(1)}}));
  AbsorbOk(shaper, Obj({{"x", Dbl(3.5)}}));
  AbsorbOk(shaper, Obj({{"x", Int(2)}}));
  AbsorbOk(shaper, Obj({{"x", Str("4")}}));
  EXPECT_EQ(TypeOf(shaper, "x"), "double");
  shaper.Seal();
  EXPECT_EQ(TypeOf(shaper, "x"), "double");
  EXPECT_EQ(IdOf(shaper, "x"), 1);
  EXPECT_THAT(FieldNames(Ns(shaper)), ElementsAre("x"));

  Batch batch = OnlyBatch(shaper);
  ASSERT_EQ(batch.num_rows, 4);
  EXPECT_EQ(batch.fields[0].type.ToString(), "double");
  EXPECT_EQ(batch.RowAt(0), Obj({{"x", Dbl(1)}}));
  EXPECT_EQ(batch.RowAt(1), Obj({{"x", Dbl(3.5)}}));
  EXPECT_EQ(batch.RowAt(2), Obj({{"x", Dbl(2)}}));
  EXPECT_EQ(batch.RowAt(3), Obj({{"x", Dbl(4)}}));
}

TEST(SchemaEvolution, ListElementWidensToDoubleWithinOneUnit) {
  Shaper shaper({}, Options());
  AbsorbOk(shaper, Obj({{"l", Lst({Int(1), Int(2)})}}));
  AbsorbOk(shaper, Obj({{"l", Lst({Dbl(0.5)})}}));
  shaper.Seal();
  EXPECT_EQ(TypeOf(shaper, "l"), "list<double>");
  Batch batch = OnlyBatch(shaper);
  EXPECT_EQ(batch.RowAt(0), Obj({{"l", Lst({Dbl(1), Dbl(2)})}}));
  EXPECT_EQ(batch.RowAt(1), Obj({{"l", Lst({Dbl(0.5)})}}));
}

TEST(SchemaEvolution, AfterSealADoubleInAnIntFieldGoesToASibling) {
  Shaper shaper({}, Options());
  AbsorbOk(shaper, Obj({{"x", Int(1)}}));
  shaper.Seal();
  AbsorbOk(shaper, Obj({{"x", Dbl(3.5)}}));
  std::vector<NamespaceChange> changes = shaper.Seal();
  EXPECT_EQ(TypeOf(shaper, "x"), "int");
  EXPECT_EQ(TypeOf(shaper, "x_double"), "double");
  EXPECT_EQ(IdOf(shaper, "x"), 1);
  EXPECT_EQ(IdOf(shaper, "x_double"), 2);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_FALSE(changes[0].is_new_namespace);
  EXPECT_THAT(changes[0].changes,
              ElementsAre("added x_double (double) for values of x that are not int"));

  Batch batch = OnlyBatch(shaper);
  EXPECT_EQ(batch.RowAt(0), Obj({{"x", Int(1)}, {"x_double", Null()}}));
  EXPECT_EQ(batch.RowAt(1), Obj({{"x", Null()}, {"x_double", Dbl(3.5)}}));
}

TEST(SchemaEvolution, AfterSealALargeIntegerPromotesIntToLong) {
  Shaper shaper({}, Options());
  AbsorbOk(shaper, Obj({{"x", Int(1)}}));
  shaper.Seal();
  AbsorbOk(shaper, Obj({{"x", Int(3'000'000'000)}}));
  std::vector<NamespaceChange> changes = shaper.Seal();
  EXPECT_EQ(TypeOf(shaper, "x"), "long");
  EXPECT_EQ(IdOf(shaper, "x"), 1);
  EXPECT_THAT(FieldNames(Ns(shaper)), ElementsAre("x"));
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_THAT(changes[0].changes, ElementsAre("promoted x int → long"));
  EXPECT_EQ(Ns(shaper).schema_id, 2);

  Batch batch = OnlyBatch(shaper);
  EXPECT_EQ(batch.RowAt(0), Obj({{"x", Int(1)}}));
  EXPECT_EQ(batch.RowAt(1), Obj({{"x", Int(3'000'000'000)}}));
}

TEST(SchemaEvolution, TextThatIsNotADoubleGoesToPriceString) {
  Shaper shaper({}, Options());
  AbsorbOk(shaper, Obj({{"price", Dbl(9.99)}}));
  shaper.Seal();
  AbsorbOk(shaper, Obj({{"price", Str("N/A")}}));
  AbsorbOk(shaper, Obj({{"price", Str("12.5")}}));  // numeric text fits the double
  AbsorbOk(shaper, Obj({{"price", Int(3)}}));
  std::vector<NamespaceChange> changes = shaper.Seal();
  EXPECT_EQ(TypeOf(shaper, "price"), "double");
  EXPECT_EQ(TypeOf(shaper, "price_string"), "string");
  EXPECT_EQ(IdOf(shaper, "price_string"), 2);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_THAT(changes[0].changes,
              ElementsAre("added price_string (string) for values of price that are not double"));

  Batch batch = OnlyBatch(shaper);
  ASSERT_EQ(batch.num_rows, 4);
  EXPECT_EQ(batch.RowAt(0), Obj({{"price", Dbl(9.99)}, {"price_string", Null()}}));
  EXPECT_EQ(batch.RowAt(1), Obj({{"price", Null()}, {"price_string", Str("N/A")}}));
  EXPECT_EQ(batch.RowAt(2), Obj({{"price", Dbl(12.5)}, {"price_string", Null()}}));
  EXPECT_EQ(batch.RowAt(3), Obj({{"price", Dbl(3)}, {"price_string", Null()}}));
}

TEST(SchemaEvolution, AnyScalarFitsAStringField) {
  Shaper shaper({}, Options());
  AbsorbOk(shaper, Obj({{"code", Str("A1")}}));
  shaper.Seal();
  AbsorbOk(shaper, Obj({{"code", Int(42)}}));
  AbsorbOk(shaper, Obj({{"code", Value::Bool(true)}}));
  AbsorbOk(shaper, Obj({{"code", Dbl(2.5)}}));
  EXPECT_THAT(shaper.Seal(), IsEmpty());
  EXPECT_EQ(TypeOf(shaper, "code"), "string");
  EXPECT_THAT(FieldNames(Ns(shaper)), ElementsAre("code"));

  Batch batch = OnlyBatch(shaper);
  EXPECT_EQ(batch.RowAt(1), Obj({{"code", Str("42")}}));
  EXPECT_EQ(batch.RowAt(2), Obj({{"code", Str("true")}}));
  EXPECT_EQ(batch.RowAt(3), Obj({{"code", Str("2.5")}}));
}

TEST(SchemaEvolution, AScalarInAStructFieldGoesToASibling) {
  Shaper shaper({}, Options());
  AbsorbOk(shaper, Obj({{"meta", Obj({{"k", Str("v")}})}}));
  shaper.Seal();
  AbsorbOk(shaper, Obj({{"meta", Str("plain")}}));
  AbsorbOk(shaper, Obj({{"meta", Int(7)}}));
  std::vector<NamespaceChange> changes = shaper.Seal();
  EXPECT_EQ(TypeOf(shaper, "meta"), "struct<k: string>");
  EXPECT_EQ(TypeOf(shaper, "meta_string"), "string");
  EXPECT_EQ(TypeOf(shaper, "meta_int"), "int");
  EXPECT_EQ(IdOf(shaper, "meta_string"), 3);
  EXPECT_EQ(IdOf(shaper, "meta_int"), 4);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_THAT(changes[0].changes,
              ElementsAre("added meta_string (string) for values of meta that are not struct",
                          "added meta_int (int) for values of meta that are not struct"));

  Batch batch = OnlyBatch(shaper);
  EXPECT_EQ(batch.RowAt(1),
            Obj({{"meta", Null()}, {"meta_string", Str("plain")}, {"meta_int", Null()}}));
  EXPECT_EQ(batch.RowAt(2), Obj({{"meta", Null()}, {"meta_string", Null()}, {"meta_int", Int(7)}}));
}

TEST(SchemaEvolution, AnObjectInAScalarFieldGoesToAStructSibling) {
  Shaper shaper({}, Options());
  AbsorbOk(shaper, Obj({{"f", Int(1)}}));
  shaper.Seal();
  AbsorbOk(shaper, Obj({{"f", Obj({{"a", Int(2)}})}}));
  std::vector<NamespaceChange> changes = shaper.Seal();
  EXPECT_EQ(TypeOf(shaper, "f"), "int");
  EXPECT_EQ(TypeOf(shaper, "f_struct"), "struct<a: int>");
  EXPECT_EQ(IdOf(shaper, "f_struct"), 2);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_THAT(changes[0].changes,
              ElementsAre("added f_struct (struct) for values of f that are not int",
                          "added f_struct.a (int)"));

  Batch batch = OnlyBatch(shaper);
  EXPECT_EQ(batch.RowAt(1), Obj({{"f", Null()}, {"f_struct", Obj({{"a", Int(2)}})}}));
}

TEST(SchemaEvolution, AListThatFitsNeitherFieldNorSiblingIsKeptAsJsonText) {
  Shaper shaper({}, Options());
  AbsorbOk(shaper, Obj({{"tags", Lst({Int(1)})}}));
  shaper.Seal();
  AbsorbOk(shaper, Obj({{"tags", Lst({Str("a")})}}));
  shaper.Seal();
  AbsorbOk(shaper, Obj({{"tags", Lst({Obj({{"x", Int(1)}})})}}));
  std::vector<NamespaceChange> changes = shaper.Seal();
  EXPECT_EQ(TypeOf(shaper, "tags"), "list<int>");
  EXPECT_EQ(TypeOf(shaper, "tags_list"), "list<string>");
  EXPECT_EQ(TypeOf(shaper, "tags_json"), "string");
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_THAT(changes[0].changes,
              ElementsAre("added tags_json (string) for values of tags as JSON text"));

  Batch batch = OnlyBatch(shaper);
  EXPECT_EQ(batch.RowAt(0),
            Obj({{"tags", Lst({Int(1)})}, {"tags_list", Null()}, {"tags_json", Null()}}));
  EXPECT_EQ(batch.RowAt(1),
            Obj({{"tags", Null()}, {"tags_list", Lst({Str("a")})}, {"tags_json", Null()}}));
  EXPECT_EQ(batch.RowAt(2),
            Obj({{"tags", Null()}, {"tags_list", Null()}, {"tags_json", Str(R"([{"x":1}])")}}));
}

TEST(SchemaEvolution, ANestedScalarOfAnotherTypeGetsASiblingInsideItsStruct) {
  Shaper shaper({}, Options());
  AbsorbOk(shaper, Obj({{"s", Obj({{"a", Int(1)}})}}));
  shaper.Seal();
  AbsorbOk(shaper, Obj({{"s", Obj({{"a", Str("text")}})}}));
  std::vector<NamespaceChange> changes = shaper.Seal();
  EXPECT_EQ(TypeOf(shaper, "s"), "struct<a: int, a_string: string>");
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_THAT(changes[0].changes,
              ElementsAre("added s.a_string (string) for values of s.a that are not int"));
  Batch batch = OnlyBatch(shaper);
  EXPECT_EQ(batch.RowAt(1), Obj({{"s", Obj({{"a", Null()}, {"a_string", Str("text")}})}}));
}

TEST(SchemaEvolution, ALateFieldGetsTheNextId) {
  Shaper shaper({}, Options());
  AbsorbOk(shaper, Obj({{"a", Int(1)}, {"b", Str("x")}}));
  shaper.Seal();
  AbsorbOk(shaper, Obj({{"a", Int(2)}, {"c", Str("late")}}));
  std::vector<NamespaceChange> changes = shaper.Seal();
  EXPECT_EQ(IdOf(shaper, "a"), 1);
  EXPECT_EQ(IdOf(shaper, "b"), 2);
  EXPECT_EQ(IdOf(shaper, "c"), 3);
  EXPECT_EQ(TypeOf(shaper, "c"), "string");
  EXPECT_EQ(Ns(shaper).last_field_id, 3);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_THAT(changes[0].changes, ElementsAre("added c (string)"));
}

TEST(SchemaEvolution, FieldIdsAreStableAcrossShapersAndNeverReused) {
  PipelineSchema saved;
  {
    Shaper first({}, Options());
    AbsorbOk(first, Obj({{"a", Int(1)}, {"b", Str("x")}, {"s", Obj({{"c", Value::Bool(true)}})}}));
    first.Seal();
    saved = first.schema();
  }
  ASSERT_EQ(saved.namespaces.at("p").last_field_id, 4);

  Shaper second(saved, Options());
  // Fields come in another order; names decide the ids.
  AbsorbOk(second, Obj({{"s", Obj({{"e", Dbl(1.5)}, {"c", Value::Bool(false)}})},
                        {"b", Str("y")},
                        {"d", Lst({Int(1)})},
                        {"a", Int(2)}}));
  std::vector<NamespaceChange> changes = second.Seal();
  EXPECT_EQ(IdOf(second, "a"), 1);
  EXPECT_EQ(IdOf(second, "b"), 2);
  EXPECT_EQ(IdOf(second, "s"), 3);
  const Field& s = *Ns(second).FindField("s");
  EXPECT_EQ(s.type.ToString(), "struct<c: boolean, e: double>");
  EXPECT_EQ(s.type.children()[0].id, 4);
  EXPECT_EQ(s.type.children()[1].id, 5);
  EXPECT_EQ(IdOf(second, "d"), 6);
  EXPECT_EQ(Ns(second).FindField("d")->type.children()[0].id, 7);
  EXPECT_EQ(Ns(second).last_field_id, 7);
  EXPECT_EQ(Ns(second).schema_id, 2);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_FALSE(changes[0].is_new_namespace);
  EXPECT_THAT(changes[0].changes, ElementsAre("added s.e (double)", "added d (list<int>)"));

  // Loaded fields are frozen: a double in the int field goes to a sibling.
  AbsorbOk(second, Obj({{"a", Dbl(2.5)}}));
  second.Seal();
  EXPECT_EQ(TypeOf(second, "a"), "int");
  EXPECT_EQ(IdOf(second, "a_double"), 8);

  // A dropped field that comes back gets a new id, never its old one.
  PipelineSchema dropped = second.schema();
  auto& fields = dropped.namespaces.at("p").fields;
  fields.erase(fields.begin() + 1);  // "b", id 2
  Shaper third(dropped, Options());
  AbsorbOk(third, Obj({{"b", Str("back")}}));
  third.Seal();
  EXPECT_EQ(IdOf(third, "b"), 9);
  EXPECT_EQ(Ns(third).last_field_id, 9);
}

// ----- Seal --------------------------------------------------------------------------------------

TEST(SchemaSeal, SchemaIdsMoveOnlyForChangedNamespaces) {
  Shaper shaper({}, Options());
  RecordContext orders;
  orders.source_namespace = "orders";
  RecordContext users;
  users.source_namespace = "users";
  AbsorbOk(shaper, Obj({{"id", Int(1)}}), orders);
  AbsorbOk(shaper, Obj({{"name", Str("ada")}}), users);
  std::vector<NamespaceChange> first = shaper.Seal();
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[0].namespace_name, "orders");
  EXPECT_TRUE(first[0].is_new_namespace);
  EXPECT_THAT(first[0].changes, ElementsAre("added id (int)"));
  EXPECT_EQ(first[1].namespace_name, "users");
  EXPECT_TRUE(first[1].is_new_namespace);
  EXPECT_EQ(Ns(shaper, "orders").schema_id, 1);
  EXPECT_EQ(Ns(shaper, "users").schema_id, 1);

  AbsorbOk(shaper, Obj({{"id", Int(2)}, {"total", Dbl(9.5)}}), orders);
  AbsorbOk(shaper, Obj({{"name", Str("bob")}}), users);
  std::vector<NamespaceChange> second = shaper.Seal();
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].namespace_name, "orders");
  EXPECT_FALSE(second[0].is_new_namespace);
  EXPECT_THAT(second[0].changes, ElementsAre("added total (double)"));
  EXPECT_EQ(Ns(shaper, "orders").schema_id, 2);
  EXPECT_EQ(Ns(shaper, "users").schema_id, 1);

  const std::vector<SchemaVersion>& history = Ns(shaper, "orders").history;
  ASSERT_EQ(history.size(), 2u);
  EXPECT_EQ(history[0].schema_id, 1);
  EXPECT_THAT(history[0].changes, ElementsAre("added id (int)"));
  EXPECT_EQ(history[1].schema_id, 2);
  EXPECT_THAT(history[1].changes, ElementsAre("added total (double)"));
  ASSERT_EQ(Ns(shaper, "users").history.size(), 1u);
  EXPECT_THAT(Ns(shaper, "users").history[0].changes, ElementsAre("added name (string)"));

  const std::string before = Dump(shaper.schema());
  EXPECT_THAT(shaper.Seal(), IsEmpty());
  AbsorbOk(shaper, Obj({{"id", Int(3)}}), orders);
  EXPECT_THAT(shaper.Seal(), IsEmpty());
  EXPECT_EQ(Dump(shaper.schema()), before);
  EXPECT_EQ(shaper.records_absorbed(), 5u);

  // Each namespace's batch carries its own sealed id.
  std::vector<Batch> batches = shaper.TakeBatches();
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_EQ(batches[0].namespace_name, "orders");
  EXPECT_EQ(batches[0].schema_id, 2);
  EXPECT_EQ(batches[0].num_rows, 3);
  EXPECT_EQ(batches[1].namespace_name, "users");
  EXPECT_EQ(batches[1].schema_id, 1);
  EXPECT_EQ(batches[1].num_rows, 2);
}

TEST(SchemaSeal, ANamespaceLoadedFromTheStoreIsNotNew) {
  Shaper first({}, Options());
  AbsorbOk(first, Obj({{"a", Int(1)}}));
  first.Seal();
  Shaper second(first.schema(), Options());
  AbsorbOk(second, Obj({{"a", Int(2)}}));
  EXPECT_THAT(second.Seal(), IsEmpty());
  EXPECT_EQ(Ns(second).schema_id, 1);
}

// ----- deadletters -------------------------------------------------------------------------------

class SchemaDeadletter : public ::testing::Test {
 protected:
  // A schema with a sealed version and one pending (unsealed) change.
  void SetUp() override {
    AbsorbOk(shaper_, Obj({{"id", Int(1)}, {"s", Obj({{"k", Str("v")}})}}));
    shaper_.Seal();
    AbsorbOk(shaper_, Obj({{"id", Int(2)}, {"pending", Value::Bool(true)}}));
    before_ = Dump(shaper_.schema());
  }

  // Absorbs `record`, expects a deadletter with `reason` and the origin passed in, then checks the
  // schema, the pending changes and the kept rows are as if the record was never seen.
  void ExpectDeadletter(Value record, const std::string& reason, const std::string& payload) {
    const RecordOrigin origin{"input/bad.jsonl", 12, 11};
    std::optional<Deadletter> dead = shaper_.Absorb(std::move(record), origin, kContext);
    ASSERT_TRUE(dead.has_value());
    EXPECT_EQ(dead->origin.source, "input/bad.jsonl");
    EXPECT_EQ(dead->origin.line, 12u);
    EXPECT_EQ(dead->origin.row, 11u);
    EXPECT_EQ(dead->reason, reason);
    EXPECT_EQ(dead->payload, payload);
    EXPECT_EQ(DescribeDeadletter(*dead), "input/bad.jsonl:12 (record 11): " + reason);

    EXPECT_EQ(Dump(shaper_.schema()), before_);
    EXPECT_EQ(shaper_.records_absorbed(), 2u);
    std::vector<NamespaceChange> changes = shaper_.Seal();
    ASSERT_EQ(changes.size(), 1u);
    EXPECT_THAT(changes[0].changes, ElementsAre("added pending (boolean)"));
    EXPECT_EQ(Ns(shaper_).schema_id, 2);
    EXPECT_THAT(FieldNames(Ns(shaper_)), ElementsAre("id", "s", "pending"));
    Batch batch = OnlyBatch(shaper_);
    EXPECT_EQ(batch.num_rows, 2);
  }

  Shaper shaper_{{}, Options()};
  std::string before_;
};

TEST_F(SchemaDeadletter, ARecordThatIsNotAnObject) {
  ExpectDeadletter(Lst({Int(1), Int(2)}), "a record must be an object, found list", "[1,2]");
}

TEST_F(SchemaDeadletter, AScalarRecord) {
  ExpectDeadletter(Str("hello"), "a record must be an object, found string", R"("hello")");
}

TEST_F(SchemaDeadletter, ADuplicateKeyAtTheTop) {
  ExpectDeadletter(Obj({{"id", Int(3)}, {"new", Int(1)}, {"id", Int(4)}}),
                   "field 'id' appears twice in one object", R"({"id":3,"new":1,"id":4})");
}

TEST_F(SchemaDeadletter, ADuplicateKeyInsideAStruct) {
  ExpectDeadletter(Obj({{"new", Int(1)}, {"s", Obj({{"k", Str("a")}, {"k", Str("b")}})}}),
                   "field 'k' appears twice in one object at 's'",
                   R"({"new":1,"s":{"k":"a","k":"b"}})");
}

// {"d": {"d": ... 1}} with the innermost value at `depth` (the record's own fields are depth 1).
Value Nest(int depth) {
  Value value = Int(1);
  for (int i = 0; i < depth; ++i) value = Obj({{"d", std::move(value)}});
  return value;
}

std::string NestPath(int depth) {
  std::string path = "d";
  for (int i = 1; i < depth; ++i) path += ".d";
  return path;
}

TEST_F(SchemaDeadletter, NestingDeeperThanSixtyFourLevels) {
  const Value record = Nest(65);
  ExpectDeadletter(record, "nested deeper than 64 levels at '" + NestPath(65) + "'",
                   record.ToJson());
}

TEST(SchemaDeadletterLimits, SixtyFourLevelsAreAccepted) {
  Shaper shaper({}, Options());
  AbsorbOk(shaper, Nest(64));
  shaper.Seal();
  std::string expected = "int";
  for (int i = 0; i < 63; ++i) expected = "struct<d: " + expected + ">";
  EXPECT_EQ(TypeOf(shaper, "d"), expected);
  EXPECT_EQ(Ns(shaper).last_field_id, 64);
}

TEST_F(SchemaDeadletter, AListMixingObjectsAndScalars) {
  ExpectDeadletter(Obj({{"new", Int(1)}, {"l", Lst({Obj({{"a", Int(1)}}), Int(2)})}}),
                   "list 'l' mixes objects, lists and single values; a column holds one kind",
                   R"({"new":1,"l":[{"a":1},2]})");
}

TEST_F(SchemaDeadletter, AListMixingListsAndScalarsInsideAStruct) {
  ExpectDeadletter(Obj({{"s", Obj({{"l", Lst({Lst({}), Null(), Str("x")})}})}}),
                   "list 's.l' mixes objects, lists and single values; a column holds one kind",
                   R"({"s":{"l":[[],null,"x"]}})");
}

TEST(SchemaDeadletterLimits, APayloadIsCutAtOneMebibyteAndSaysSo) {
  Shaper shaper({}, Options());
  std::optional<Deadletter> dead =
      shaper.Absorb(Value::String(std::string(kDeadletterRecordMaxBytes + 5000, 'x')), Origin(),
                    kContext);
  ASSERT_TRUE(dead.has_value());
  EXPECT_EQ(dead->payload.size(), kDeadletterRecordMaxBytes);
  EXPECT_EQ(dead->payload, "\"" + std::string(kDeadletterRecordMaxBytes - 1, 'x'));
  EXPECT_TRUE(dead->is_payload_truncated);
  EXPECT_TRUE(shaper.schema().namespaces.empty());

  dead = shaper.Absorb(Value::String("short"), Origin(), kContext);
  ASSERT_TRUE(dead.has_value());
  EXPECT_EQ(dead->payload, "\"short\"");
  EXPECT_FALSE(dead->is_payload_truncated);
}

TEST(SchemaDeadletterLimits, ACutNeverSplitsACharacter) {
  // 'é' is two bytes; one byte in front puts a character across the limit.
  std::string raw = "a";
  while (raw.size() < kDeadletterRecordMaxBytes + 10) raw += "\xc3\xa9";
  const Deadletter dead = MakeDeadletter({"f", 1, 1}, FailureCode::kRecordTooLarge, "big", raw);
  EXPECT_EQ(dead.payload.size(), kDeadletterRecordMaxBytes - 1);
  EXPECT_EQ(dead.payload, raw.substr(0, kDeadletterRecordMaxBytes - 1));
  EXPECT_TRUE(dead.is_payload_truncated);
  EXPECT_EQ(dead.failure_code, FailureCode::kRecordTooLarge);
}

// Every way the shaper rejects a record names its failure code and the namespace it was headed for.
TEST(SchemaDeadletterCodes, EachRejectionHasItsCode) {
  ValueList deep = {Int(1)};
  Value nested = Lst(deep);
  for (int i = 0; i < 70; ++i) nested = Obj({{"n", std::move(nested)}});
  std::vector<std::pair<Value, FailureCode>> cases;
  cases.emplace_back(Lst({Int(1)}), FailureCode::kNotAnObject);
  cases.emplace_back(Obj({{"a", Int(1)}, {"a", Int(2)}}), FailureCode::kDuplicateField);
  cases.emplace_back(std::move(nested), FailureCode::kNestingTooDeep);
  cases.emplace_back(Obj({{"l", Lst({Obj({{"a", Int(1)}}), Int(2)})}}), FailureCode::kMixedList);
  for (auto& [record, code] : cases) {
    Shaper shaper({}, Options());
    std::optional<Deadletter> dead = shaper.Absorb(std::move(record), Origin(), kContext);
    ASSERT_TRUE(dead.has_value()) << FailureCodeName(code);
    EXPECT_EQ(FailureCodeName(dead->failure_code), FailureCodeName(code));
    EXPECT_EQ(dead->namespace_name, "p");
  }
  ShaperOptions options = Options();
  options.namespace_fields = {"kind"};
  Shaper by_kind({}, options);
  std::optional<Deadletter> dead = by_kind.Absorb(Obj({{"x", Int(1)}}), Origin(), kContext);
  ASSERT_TRUE(dead.has_value());
  EXPECT_EQ(dead->failure_code, FailureCode::kMissingNamespaceField);
  EXPECT_EQ(dead->namespace_name, "") << "the namespace is what the record did not say";
}

// ----- deadletter rows (docs/formats/deadletters.md) ---------------------------------------------

TEST(SchemaDeadletterRows, TheSchemaIsFixedWithStableFieldIds) {
  const NamespaceSchema& schema = DeadletterSchema();
  EXPECT_EQ(schema.name, "deadletters");
  EXPECT_EQ(schema.name, kDeadlettersNamespace);
  EXPECT_EQ(schema.schema_id, 1);
  EXPECT_EQ(schema.last_field_id, 13);
  std::vector<std::string> fields;
  for (const Field& field : schema.fields) {
    fields.push_back(fmt::format("{}:{}:{}{}", field.id, field.name, field.type.ToString(),
                                 field.nullable ? "" : ":required"));
  }
  EXPECT_THAT(fields,
              ElementsAre("1:id:string:required", "2:namespace:string", "3:record:string",
                          "4:record_truncated:boolean:required", "5:error:string:required",
                          "6:failure_code:string:required", "7:event_time:timestamptz",
                          "8:processed_time:timestamptz:required", "9:source_uri:string:required",
                          "10:offset_key:string:required", "11:offset_pos:long", "12:line:long",
                          "13:byte_offset:long"));
}

TEST(SchemaDeadletterRows, IdsFollowTheDocumentedFormulaAndIgnoreEverythingButThePlace) {
  Deadletter dead = MakeDeadletter({"input/a.jsonl", 12, 11}, FailureCode::kInvalidJson, "bad", "{");
  const std::string id = DeadletterId(dead);
  EXPECT_EQ(id, Sha256Hex("skippr-deadletter-v1\n13:input/a.jsonl\n11\n12\n").substr(0, 32));
  dead.reason = "another reason";
  dead.payload = "{\"other\"";
  dead.namespace_name = "elsewhere";
  EXPECT_EQ(DeadletterId(dead), id) << "a re-read of the same record has the same id";
  EXPECT_NE(DeadletterId(MakeDeadletter({"input/a.jsonl", 13, 12}, FailureCode::kInvalidJson,
                                        "bad", "{")),
            id);
  EXPECT_NE(DeadletterId(MakeDeadletter({"input/b.jsonl", 12, 11}, FailureCode::kInvalidJson,
                                        "bad", "{")),
            id);
}

TEST(SchemaDeadletterRows, RowsCarryEachColumnAndOnlyValidUtf8) {
  std::vector<Deadletter> deadletters;
  deadletters.push_back(
      MakeDeadletter({"in/a.jsonl", 2, 2}, FailureCode::kInvalidUtf8, "bad \xff text", "x\xffy\xc3\x28"));
  deadletters.back().namespace_name = "shop";
  deadletters.back().byte_offset = 20;
  deadletters.push_back(MakeDeadletter({"in/b.bin", 0, 0}, FailureCode::kUnreadableFile, "binary", ""));
  DeadletterRows rows;
  rows.Append(deadletters, 1'700'000'000'000'000);
  EXPECT_EQ(rows.rows(), 2);
  const Batch batch = rows.Take();
  EXPECT_EQ(rows.rows(), 0) << "Take starts again";
  std::string reason;
  ASSERT_TRUE(batch.Validate(&reason)) << reason;
  EXPECT_EQ(batch.namespace_name, "deadletters");
  EXPECT_EQ(batch.schema_id, 1);
  const Value first = batch.RowAt(0);
  const auto text = [](const Value& row, const char* column) { return row.Find(column)->as_string(); };
  EXPECT_EQ(text(first, "id"), DeadletterId(deadletters[0]));
  EXPECT_EQ(text(first, "namespace"), "shop");
  EXPECT_EQ(text(first, "record"), "x\xef\xbf\xbdy\xef\xbf\xbd(") << "U+FFFD for each bad byte";
  EXPECT_EQ(text(first, "error"), "bad \xef\xbf\xbd text");
  EXPECT_EQ(text(first, "failure_code"), "invalid_utf8");
  EXPECT_EQ(text(first, "source_uri"), "in/a.jsonl");
  EXPECT_EQ(text(first, "offset_key"), "in/a.jsonl");
  EXPECT_FALSE(first.Find("record_truncated")->as_bool());
  EXPECT_TRUE(first.Find("event_time")->is_null());
  EXPECT_EQ(first.Find("processed_time")->kind(), Value::Kind::kTimestampTz);
  EXPECT_EQ(first.Find("processed_time")->as_int(), 1'700'000'000'000'000);
  EXPECT_EQ(first.Find("offset_pos")->as_int(), 2);
  EXPECT_EQ(first.Find("line")->as_int(), 2);
  EXPECT_EQ(first.Find("byte_offset")->as_int(), 20);
  const Value second = batch.RowAt(1);
  EXPECT_TRUE(second.Find("namespace")->is_null());
  EXPECT_TRUE(second.Find("record")->is_null()) << "no raw text kept: NULL, not ''";
  EXPECT_TRUE(second.Find("offset_pos")->is_null());
  EXPECT_TRUE(second.Find("line")->is_null());
  EXPECT_TRUE(second.Find("byte_offset")->is_null());
  EXPECT_EQ(second.Find("failure_code")->as_string(), "unreadable_file");
}

TEST(SchemaDeadletterLimits, AMissingOrNullNamespaceFieldLeavesTheSchemaUnchanged) {
  ShaperOptions options = Options();
  options.namespace_fields = {"kind"};
  Shaper shaper({}, options);
  AbsorbOk(shaper, Obj({{"kind", Str("a")}, {"x", Int(1)}}));
  shaper.Seal();
  AbsorbOk(shaper, Obj({{"kind", Str("a")}, {"pending", Int(1)}}));
  const std::string before = Dump(shaper.schema());
  const std::string reason =
      "namespace field 'kind' is missing or null; with transform.namespace_fields every record "
      "needs it";

  for (const Value& record :
       {Obj({{"x", Int(2)}, {"other", Int(1)}}), Obj({{"kind", Null()}, {"y", Int(1)}})}) {
    SCOPED_TRACE(record.ToJson());
    const RecordOrigin origin{"input/bad.jsonl", 7, 6};
    std::optional<Deadletter> dead = shaper.Absorb(record, origin, kContext);
    ASSERT_TRUE(dead.has_value());
    EXPECT_EQ(dead->reason, reason);
    EXPECT_EQ(dead->origin.source, "input/bad.jsonl");
    EXPECT_EQ(dead->origin.line, 7u);
    EXPECT_EQ(dead->origin.row, 6u);
    EXPECT_EQ(dead->payload, record.ToJson());
    EXPECT_EQ(Dump(shaper.schema()), before);
  }
  EXPECT_EQ(shaper.records_absorbed(), 2u);
  std::vector<NamespaceChange> changes = shaper.Seal();
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].namespace_name, "a");
  EXPECT_THAT(changes[0].changes, ElementsAre("added pending (int)"));
  EXPECT_EQ(shaper.schema().namespaces.size(), 1u);
}

// ----- namespaces and flattening -----------------------------------------------------------------

TEST(SchemaNamespaces, RecordsAreRoutedByACleanedFieldValue) {
  ShaperOptions options = Options();
  options.namespace_fields = {"event"};
  Shaper shaper({}, options);
  AbsorbOk(shaper, Obj({{"event", Str("Web Events")}, {"x", Int(1)}}));
  AbsorbOk(shaper, Obj({{"event", Str("Page-View")}, {"y", Str("a")}}));
  AbsorbOk(shaper, Obj({{"event", Str("web events")}, {"x", Int(2)}}));
  AbsorbOk(shaper, Obj({{"event", Int(42)}, {"z", Value::Bool(true)}}));
  std::vector<NamespaceChange> changes = shaper.Seal();
  ASSERT_EQ(changes.size(), 3u);
  EXPECT_EQ(changes[0].namespace_name, "42");
  EXPECT_EQ(changes[1].namespace_name, "page_view");
  EXPECT_EQ(changes[2].namespace_name, "web_events");
  EXPECT_THAT(FieldNames(Ns(shaper, "web_events")), ElementsAre("event", "x"));
  EXPECT_THAT(FieldNames(Ns(shaper, "page_view")), ElementsAre("event", "y"));
  EXPECT_THAT(FieldNames(Ns(shaper, "42")), ElementsAre("event", "z"));
  EXPECT_EQ(Ns(shaper, "web_events").name, "web_events");
  // Each namespace numbers its own fields.
  EXPECT_EQ(IdOf(shaper, "y", "page_view"), 2);

  std::vector<Batch> batches = shaper.TakeBatches();
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[2].namespace_name, "web_events");
  ASSERT_EQ(batches[2].num_rows, 2);
  EXPECT_EQ(batches[2].RowAt(0), Obj({{"event", Str("Web Events")}, {"x", Int(1)}}));
  EXPECT_EQ(batches[2].RowAt(1), Obj({{"event", Str("web events")}, {"x", Int(2)}}));
}

TEST(SchemaNamespaces, CompositeNamespaceFieldsAreJoinedWithUnderscores) {
  ShaperOptions options = Options();
  options.namespace_fields = {"source", "kind"};
  Shaper shaper({}, options);
  AbsorbOk(shaper, Obj({{"kind", Str("Click")}, {"source", Str("App")}, {"x", Int(1)}}));
  AbsorbOk(shaper, Obj({{"source", Str("web")}, {"kind", Int(2)}}));
  shaper.Seal();
  ASSERT_EQ(shaper.schema().namespaces.size(), 2u);
  EXPECT_EQ(Ns(shaper, "app_click").name, "app_click");
  EXPECT_EQ(Ns(shaper, "web_2").name, "web_2");
  EXPECT_THAT(FieldNames(Ns(shaper, "app_click")), ElementsAre("kind", "source", "x"));
}

TEST(SchemaNamespaces, SourceNamespaceIsUsedWithoutNamespaceFieldsAndCleaned) {
  Shaper shaper({}, Options());
  RecordContext context;
  context.source_namespace = "Public.Orders";
  AbsorbOk(shaper, Obj({{"id", Int(1)}}), context);
  AbsorbOk(shaper, Obj({{"id", Int(2)}}));
  shaper.Seal();
  ASSERT_EQ(shaper.schema().namespaces.size(), 2u);
  EXPECT_EQ(TypeOf(shaper, "id", "public_orders"), "int");
  EXPECT_EQ(TypeOf(shaper, "id", "p"), "int");
}

TEST(SchemaNamespaces, FlattenEventsTurnsNestedObjectsIntoDottedFields) {
  ShaperOptions options = Options();
  options.flatten_events = true;
  Shaper shaper({}, options);
  AbsorbOk(shaper, Obj({{"a", Obj({{"b", Int(1)}, {"c", Obj({{"d", Str("x")}})}})},
                        {"l", Lst({Obj({{"e", Int(1)}})})},
                        {"top", Value::Bool(true)}}));
  shaper.Seal();
  EXPECT_THAT(FieldNames(Ns(shaper)), ElementsAre("a.b", "a.c.d", "l", "top"));
  EXPECT_EQ(TypeOf(shaper, "a.b"), "int");
  EXPECT_EQ(TypeOf(shaper, "a.c.d"), "string");
  EXPECT_EQ(TypeOf(shaper, "l"), "list<struct<e: int>>");  // lists stay lists
  Batch batch = OnlyBatch(shaper);
  EXPECT_EQ(batch.RowAt(0), Obj({{"a.b", Int(1)},
                                 {"a.c.d", Str("x")},
                                 {"l", Lst({Obj({{"e", Int(1)}})})},
                                 {"top", Value::Bool(true)}}));
}

TEST(SchemaNamespaces, FlatteningIntoAnExistingDottedNameIsADeadletter) {
  ShaperOptions options = Options();
  options.flatten_events = true;
  Shaper shaper({}, options);
  std::optional<Deadletter> dead =
      shaper.Absorb(Obj({{"a.b", Int(1)}, {"a", Obj({{"b", Int(2)}})}}), Origin(), kContext);
  ASSERT_TRUE(dead.has_value());
  EXPECT_EQ(dead->reason, "field 'a.b' appears twice in one object after flattening");
  EXPECT_TRUE(shaper.schema().namespaces.empty());
}

// ----- names (docs/schema.md, "Names") -----------------------------------------------------------

// The schema and its batch after a Seal; the batch's rows must validate.
std::vector<std::string> ChangesOfSeal(Shaper& shaper) {
  std::vector<NamespaceChange> changes = shaper.Seal();
  return changes.empty() ? std::vector<std::string>{} : changes[0].changes;
}

using skippr::testing::TempDir;
std::unique_ptr<store::Store> OpenStore(const std::string& directory);
PipelineSchema ThroughTheStore(const PipelineSchema& schema, const std::string& directory);

TEST(SchemaNames, NamesThatDifferOnlyByCaseGetNumberedAndKeepTheirColumnAcrossRuns) {
  TempDir dir;
  Shaper first({}, Options());
  AbsorbOk(first, Obj({{"v", Int(1)}, {"V", Int(2)}}));
  AbsorbOk(first, Obj({{"V", Int(3)}}));
  EXPECT_THAT(ChangesOfSeal(first),
              ElementsAre("added v (int)",
                          "added V_2 (int), named so for records' 'V': 'v' is already a field "
                          "(names are compared ignoring case)"));
  EXPECT_THAT(FieldNames(Ns(first)), ElementsAre("v", "V_2"));
  Batch batch = OnlyBatch(first);
  ASSERT_EQ(batch.num_rows, 2);
  EXPECT_EQ(batch.RowAt(0), Obj({{"v", Int(1)}, {"V_2", Int(2)}}));
  EXPECT_EQ(batch.RowAt(1), Obj({{"v", Null()}, {"V_2", Int(3)}}));

  // Another run, from the store: `V` still means V_2, and a record's own `V_2` is another field.
  Shaper second(ThroughTheStore(first.schema(), dir.path()), Options());
  AbsorbOk(second, Obj({{"V", Int(4)}, {"v", Int(5)}, {"V_2", Str("x")}, {"v_2", Str("y")}}));
  EXPECT_THAT(ChangesOfSeal(second),
              ElementsAre("added V_2_2 (string), named so for records' 'V_2': 'V_2' is already a "
                          "field (names are compared ignoring case)",
                          "added v_2_3 (string), named so for records' 'v_2': 'V_2' is already a "
                          "field (names are compared ignoring case)"));
  EXPECT_THAT(FieldNames(Ns(second)), ElementsAre("v", "V_2", "V_2_2", "v_2_3"));
  batch = OnlyBatch(second);
  EXPECT_EQ(batch.RowAt(0),
            Obj({{"v", Int(5)}, {"V_2", Int(4)}, {"V_2_2", Str("x")}, {"v_2_3", Str("y")}}));
}

TEST(SchemaNames, NestedStructAndListOfObjectFieldsFollowTheSameRules) {
  Shaper shaper({}, Options());
  AbsorbOk(shaper, Obj({{"s", Obj({{"a", Int(1)}, {"A", Int(2)}, {"", Int(3)}})},
                        {"l", Lst({Obj({{"k", Int(1)}, {"K", Null()}})})}}));
  shaper.Seal();
  EXPECT_EQ(TypeOf(shaper, "s"), "struct<a: int, A_2: int, column_3: int>");
  EXPECT_EQ(TypeOf(shaper, "l"), "list<struct<k: int, K_2: string>>");
  Batch batch = OnlyBatch(shaper);
  EXPECT_EQ(batch.RowAt(0),
            Obj({{"s", Obj({{"a", Int(1)}, {"A_2", Int(2)}, {"column_3", Int(3)}})},
                 {"l", Lst({Obj({{"k", Int(1)}, {"K_2", Null()}})})}}));
}

TEST(SchemaNames, AnEmptyNameBecomesColumnNAndKeepsIt) {
  TempDir dir;
  Shaper first({}, Options());
  AbsorbOk(first, Obj({{"a", Int(1)}, {"", Int(2)}}));
  EXPECT_THAT(ChangesOfSeal(first),
              ElementsAre("added a (int)",
                          "added column_2 (int), named so for records' '': records give it an "
                          "empty name"));
  Shaper second(ThroughTheStore(first.schema(), dir.path()), Options());
  AbsorbOk(second, Obj({{"", Int(3)}, {"column_2", Int(4)}}));
  second.Seal();
  EXPECT_THAT(FieldNames(Ns(second)), ElementsAre("a", "column_2", "column_2_2"));
  EXPECT_EQ(OnlyBatch(second).RowAt(0),
            Obj({{"a", Null()}, {"column_2", Int(3)}, {"column_2_2", Int(4)}}));
}

TEST(SchemaNames, LongNamesAreCutAtACharacterWithAHashAndStayDistinct) {
  // 2-byte characters, so that a cut at byte 246 would split one.
  std::string common;
  while (common.size() < 300) common += "é";
  const std::string first_name = common + "_first";
  const std::string second_name = common + "_second";
  Shaper shaper({}, Options());
  AbsorbOk(shaper, Obj({{first_name, Int(1)}, {second_name, Int(2)}}));
  shaper.Seal();
  const std::vector<std::string> names = FieldNames(Ns(shaper));
  ASSERT_EQ(names.size(), 2u);
  EXPECT_NE(names[0], names[1]);
  for (const std::string& name : names) {
    EXPECT_LE(name.size(), kMaxFieldNameBytes);
    EXPECT_GE(name.size(), kMaxFieldNameBytes - 1);  // 9 bytes of suffix after whole characters
    EXPECT_EQ(name.substr(0, name.size() - 9), common.substr(0, name.size() - 9));
    EXPECT_EQ(name[name.size() - 9], '_');
  }
  // The suffix is the start of the SHA-256 of the whole name: the same name, the same field.
  AbsorbOk(shaper, Obj({{second_name, Int(3)}}));
  EXPECT_THAT(ChangesOfSeal(shaper), IsEmpty());
  EXPECT_EQ(OnlyBatch(shaper).RowAt(1), Obj({{names[0], Null()}, {names[1], Int(3)}}));
}

TEST(SchemaNames, ReservedPrefixesAndControlCharactersAreRenamed) {
  Shaper shaper({}, Options());
  AbsorbOk(shaper, Obj({{"__skippr_ordinal", Int(1)},
                        {std::string("a\0b", 3), Int(2)},
                        {"tab\there", Int(3)},
                        {"skippr_ordinal", Int(4)}}));
  shaper.Seal();
  EXPECT_THAT(FieldNames(Ns(shaper)),
              ElementsAre("skippr_ordinal", "a_b", "tab_here", "skippr_ordinal_2"));
  AbsorbOk(shaper, Obj({{std::string("a\0b", 3), Int(5)}, {"__skippr_ordinal", Int(6)}}));
  shaper.Seal();
  EXPECT_EQ(Ns(shaper).fields.size(), 4u);
  EXPECT_EQ(OnlyBatch(shaper).RowAt(1), Obj({{"skippr_ordinal", Int(6)},
                                             {"a_b", Int(5)},
                                             {"tab_here", Null()},
                                             {"skippr_ordinal_2", Null()}}));
}

// A value sent to its sibling `<field>_<type>` and an entry of that very name in one object: one
// column cannot hold both; neither value is lost and the batch stays valid.
TEST(SchemaNames, ASiblingColumnAnotherEntryFillsTakesNoSecondValue) {
  Shaper shaper({}, Options());
  AbsorbOk(shaper, Obj({{"price", Dbl(1.5)}}));
  shaper.Seal();
  AbsorbOk(shaper, Obj({{"price", Str("n/a")}, {"price_string", Str("x")}}));
  AbsorbOk(shaper, Obj({{"price_string", Str("y")}, {"price", Str("none")}}));
  shaper.Seal();
  EXPECT_THAT(FieldNames(Ns(shaper)),
              ElementsAre("price", "price_string", "price_string_string", "price_json"));
  Batch batch = OnlyBatch(shaper);
  ASSERT_EQ(batch.num_rows, 3);
  EXPECT_EQ(batch.RowAt(1), Obj({{"price", Null()},
                                 {"price_string", Str("n/a")},
                                 {"price_string_string", Str("x")},
                                 {"price_json", Null()}}));
  EXPECT_EQ(batch.RowAt(2), Obj({{"price", Null()},
                                 {"price_string", Str("y")},
                                 {"price_string_string", Null()},
                                 {"price_json", Str("\"none\"")}}));
}

// The JSON fallback `<field>_json` exists with another type (a record's own field): the value goes
// to `<field>_json_2` instead (this used to fail an internal check and abort).
TEST(SchemaNames, AJsonFallbackColumnOfAnotherTypeIsSkipped) {
  Shaper shaper({}, Options());
  AbsorbOk(shaper, Obj({{"tags", Lst({Int(1)})}, {"tags_json", Int(5)}}));
  AbsorbOk(shaper, Obj({{"tags", Lst({Str("x")})}}));
  shaper.Seal();
  EXPECT_EQ(TypeOf(shaper, "tags_list"), "list<string>");
  AbsorbOk(shaper, Obj({{"tags", Lst({Obj({{"a", Int(1)}})})}}));
  EXPECT_THAT(ChangesOfSeal(shaper),
              ElementsAre("added tags_json_2 (string) for values of tags as JSON text"));
  Batch batch = OnlyBatch(shaper);
  ASSERT_EQ(batch.num_rows, 3);
  EXPECT_EQ(batch.RowAt(2), Obj({{"tags", Null()},
                                 {"tags_json", Null()},
                                 {"tags_list", Null()},
                                 {"tags_json_2", Str(R"([{"a":1}])")}}));
}

TEST(SchemaNames, NamespaceNamesFollowTheirRules) {
  ShaperOptions options = Options();
  options.namespace_fields = {"kind"};
  Shaper shaper({}, options);
  const std::string long_value(300, 'x');
  for (const std::string& kind : {std::string(""), std::string("deadletters"),
                                  std::string("DeadLetters"), std::string("__skippr_x"),
                                  std::string("../etc/passwd"), std::string("a\0b", 3),
                                  long_value}) {
    AbsorbOk(shaper, Obj({{"kind", Value::String(kind)}}));
  }
  shaper.Seal();
  std::vector<std::string> names;
  for (const auto& [name, ns] : shaper.schema().namespaces) names.push_back(name);
  const std::string cut = std::string(119, 'x') + "_" + Sha256Hex(long_value).substr(0, 8);
  EXPECT_EQ(cut.size(), kMaxNamespaceNameBytes);
  EXPECT_THAT(names, ElementsAre("___etc_passwd", "a_b", "deadletters_data", "skippr_x",
                                 "unnamed", cut));
  EXPECT_EQ(Ns(shaper, "deadletters_data").name, "deadletters_data");
}

TEST(SchemaNames, RenamesSurviveTheStoreAndOnlyThenWriteFormatVersionTwo) {
  TempDir dir;
  auto store = OpenStore(dir.path() + "/store");
  Shaper shaper({}, Options());
  AbsorbOk(shaper, Obj({{"a", Int(1)}}));
  shaper.Seal();
  const auto saved_document = [&]() {
    Result<store::WriteTransaction> write = store->BeginWrite();
    EXPECT_TRUE(write.ok());
    EXPECT_TRUE(SaveNamespace(*write, Ns(shaper)).ok());
    EXPECT_TRUE(write->Commit().ok());
    Result<store::ReadTransaction> read = store->BeginRead();
    Result<std::optional<std::string>> value = read->Get(
        store::Family::kSchema, store::KeyBuilder().Text("namespace").Text("p").key());
    EXPECT_TRUE(value.ok() && value->has_value());
    return Json::parse(value->value_or("{}"));
  };
  Json document = saved_document();
  EXPECT_EQ(document["format_version"], 1) << "no rename: older skipprd still read it";
  EXPECT_FALSE(document.contains("source_names"));

  AbsorbOk(shaper, Obj({{"A", Int(2)}}));
  shaper.Seal();
  document = saved_document();
  EXPECT_EQ(document["format_version"], 2);
  EXPECT_EQ(document["source_names"], Json::parse(R"([{"field_id": 2, "name": "A"}])"));
  Result<store::ReadTransaction> read = store->BeginRead();
  Result<PipelineSchema> loaded = LoadSchema(*read);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->namespaces.at("p").source_names, (std::map<int32_t, std::string>{{2, "A"}}));
}

// ----- primary keys ------------------------------------------------------------------------------

ShaperOptions KeyedOptions() {
  ShaperOptions options = Options();
  options.key_fields = {"id"};
  options.key_fields_setting = "data_sources.source.File.primary_key";
  return options;
}

std::string KeyDeadletter(Shaper& shaper, Value record) {
  std::optional<Deadletter> dead = shaper.Absorb(std::move(record), Origin(3), kContext);
  return dead ? dead->reason : "<absorbed>";
}

TEST(SchemaPrimaryKey, RecordsWithoutAKeyOfTheKeyColumnsTypeAreDeadletters) {
  Shaper shaper({}, KeyedOptions());
  AbsorbOk(shaper, Obj({{"id", Int(1)}, {"name", Str("a")}}));
  AbsorbOk(shaper, Obj({{"id", Int(2)}}));
  const std::string before = Dump(shaper.schema());
  const std::string key = "primary key field 'id' (data_sources.source.File.primary_key)";
  EXPECT_EQ(KeyDeadletter(shaper, Obj({{"id", Str("A-3")}})),
            key + " holds the string \"A-3\", which the key column (int) cannot take; every key "
                  "must be of the key column's type");
  EXPECT_EQ(KeyDeadletter(shaper, Obj({{"name", Str("no id")}})),
            key + " is missing; every record needs its key");
  EXPECT_EQ(KeyDeadletter(shaper, Obj({{"id", Null()}})),
            key + " is null; every record needs its key");
  EXPECT_EQ(KeyDeadletter(shaper, Obj({{"id", Dbl(2.5)}})),
            key + " holds the double 2.5, which the key column (int) cannot take; every key "
                  "must be of the key column's type");
  EXPECT_EQ(KeyDeadletter(shaper, Obj({{"id", Obj({{"a", Int(1)}})}})),
            key + " holds the object {\"a\":1}, which the key column (int) cannot take; every key "
                  "must be of the key column's type");
  EXPECT_EQ(Dump(shaper.schema()), before) << "a deadletter leaves the schema as it was";
  // What the key column takes: a promotion (int → long) and numeric text.
  AbsorbOk(shaper, Obj({{"id", Int(3'000'000'000)}}));
  AbsorbOk(shaper, Obj({{"id", Str("7")}}));
  shaper.Seal();
  EXPECT_THAT(FieldNames(Ns(shaper)), ElementsAre("id", "name")) << "no id_string sibling";
  EXPECT_EQ(TypeOf(shaper, "id"), "long");
  EXPECT_EQ(OnlyBatch(shaper).num_rows, 4);
}

TEST(SchemaPrimaryKey, AFirstKeyValueThatWouldMakeAFloatKeyIsADeadletter) {
  Shaper shaper({}, KeyedOptions());
  EXPECT_EQ(KeyDeadletter(shaper, Obj({{"id", Dbl(1.5)}})),
            "primary key field 'id' (data_sources.source.File.primary_key) holds the double 1.5; "
            "a key is a single value, not a float or double");
  EXPECT_EQ(KeyDeadletter(shaper, Obj({{"id", Lst({Int(1)})}})),
            "primary key field 'id' (data_sources.source.File.primary_key) holds the list [1]; "
            "a key is a single value, not a float or double");
  EXPECT_TRUE(shaper.schema().namespaces.empty() || Ns(shaper).fields.empty());
  AbsorbOk(shaper, Obj({{"id", Str("A-3")}}));
  AbsorbOk(shaper, Obj({{"id", Int(4)}}));  // any scalar fits a string key
  shaper.Seal();
  EXPECT_EQ(TypeOf(shaper, "id"), "string");
}

// Discover: only a value of another type than the key column's is a deadletter (it would make a
// sibling); the rest shapes the schema, so that a pass can refuse a key the data lacks.
// Key deadletters are typed (docs/formats/deadletters.md) and name the namespace they were headed
// for: a new one and a known one (the shaper's cached state), and one the name rules renamed.
TEST(SchemaPrimaryKey, KeyDeadlettersCarryTheirFailureCodeAndNamespace) {
  ShaperOptions options = KeyedOptions();
  options.default_namespace = std::string(kDeadlettersNamespace);
  Shaper shaper({}, options);
  std::optional<Deadletter> dead = shaper.Absorb(Obj({{"id", Null()}}), Origin(), kContext);
  ASSERT_TRUE(dead.has_value());
  EXPECT_EQ(dead->failure_code, FailureCode::kMissingKey);
  EXPECT_EQ(dead->namespace_name, "deadletters_data");
  AbsorbOk(shaper, Obj({{"id", Int(1)}}));
  dead = shaper.Absorb(Obj({{"id", Str("A-3")}}), Origin(), kContext);
  ASSERT_TRUE(dead.has_value());
  EXPECT_EQ(dead->failure_code, FailureCode::kTypeConflict);
  EXPECT_EQ(dead->namespace_name, "deadletters_data");
  dead = shaper.Absorb(Obj({{"name", Str("no id")}}), Origin(), kContext);
  ASSERT_TRUE(dead.has_value());
  EXPECT_EQ(dead->failure_code, FailureCode::kMissingKey);
  EXPECT_EQ(shaper.NamespaceOf(kContext), "deadletters_data");
}

TEST(SchemaPrimaryKey, DiscoverOnlyKeepsOtherTypesOutOfTheKeyColumn) {
  ShaperOptions options = KeyedOptions();
  options.key_checks_types_only = true;
  Shaper shaper({}, options);
  AbsorbOk(shaper, Obj({{"name", Str("no id yet")}}));
  AbsorbOk(shaper, Obj({{"id", Null()}}));
  AbsorbOk(shaper, Obj({{"id", Int(1)}}));
  EXPECT_THAT(KeyDeadletter(shaper, Obj({{"id", Str("A-3")}})),
              ::testing::StartsWith("primary key field 'id' (data_sources.source.File.primary_key) "
                                  "holds the string \"A-3\""));
  AbsorbOk(shaper, Obj({{"id", Null()}, {"name", Str("null id")}}));
  shaper.Seal();
  EXPECT_THAT(FieldNames(Ns(shaper)), ElementsAre("name", "id"));

  Shaper nested({}, options);
  AbsorbOk(nested, Obj({{"id", Obj({{"a", Int(1)}})}}));  // refused later as a struct key
  nested.Seal();
  EXPECT_EQ(TypeOf(nested, "id"), "struct<a: int>");
}

// ----- TakeBatches -------------------------------------------------------------------------------

TEST(SchemaTakeBatches, RowsFromBeforeAndAfterEvolutionReadBackExactly) {
  Shaper shaper({}, Options());
  AbsorbOk(shaper, Obj({{"id", Int(1)}, {"price", Dbl(2.5)}, {"tags", Lst({Str("a")})}}));
  AbsorbOk(shaper, Obj({{"id", Int(2)}, {"price", Int(3)}, {"meta", Obj({{"k", Str("v")}})}}));
  shaper.Seal();
  AbsorbOk(shaper, Obj({{"id", Int(3'000'000'000)}, {"price", Str("N/A")}}));
  AbsorbOk(shaper, Obj({{"price", Str("12.5")},
                        {"id", Int(4)},
                        {"meta", Obj({{"n", Int(7)}, {"k", Str("w")}})}}));
  AbsorbOk(shaper, Obj({{"extra", Value::Bool(true)}}));
  std::vector<NamespaceChange> changes = shaper.Seal();
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_THAT(changes[0].changes,
              ElementsAre("promoted id int → long",
                          "added price_string (string) for values of price that are not double",
                          "added meta.n (int)", "added extra (boolean)"));

  Batch batch = OnlyBatch(shaper);
  EXPECT_EQ(batch.namespace_name, "p");
  EXPECT_EQ(batch.schema_id, 2);
  EXPECT_EQ(batch.schema_id, Ns(shaper).schema_id);
  ASSERT_EQ(batch.num_rows, 5);
  ASSERT_EQ(batch.fields.size(), 6u);
  std::vector<std::string> described;
  for (const Field& field : batch.fields) {
    described.push_back(std::to_string(field.id) + " " + field.name + ": " + field.type.ToString());
  }
  EXPECT_THAT(described, ElementsAre("1 id: long", "2 price: double", "3 tags: list<string>",
                                     "5 meta: struct<k: string, n: int>", "7 price_string: string",
                                     "9 extra: boolean"));
  for (const Column& column : batch.columns) EXPECT_EQ(column.length, 5);

  EXPECT_EQ(batch.RowAt(0), Obj({{"id", Int(1)},
                                 {"price", Dbl(2.5)},
                                 {"tags", Lst({Str("a")})},
                                 {"meta", Null()},
                                 {"price_string", Null()},
                                 {"extra", Null()}}));
  EXPECT_EQ(batch.RowAt(1), Obj({{"id", Int(2)},
                                 {"price", Dbl(3)},
                                 {"tags", Null()},
                                 {"meta", Obj({{"k", Str("v")}, {"n", Null()}})},
                                 {"price_string", Null()},
                                 {"extra", Null()}}));
  EXPECT_EQ(batch.RowAt(2), Obj({{"id", Int(3'000'000'000)},
                                 {"price", Null()},
                                 {"tags", Null()},
                                 {"meta", Null()},
                                 {"price_string", Str("N/A")},
                                 {"extra", Null()}}));
  EXPECT_EQ(batch.RowAt(3), Obj({{"id", Int(4)},
                                 {"price", Dbl(12.5)},
                                 {"tags", Null()},
                                 {"meta", Obj({{"k", Str("w")}, {"n", Int(7)}})},
                                 {"price_string", Null()},
                                 {"extra", Null()}}));
  EXPECT_EQ(batch.RowAt(4), Obj({{"id", Null()},
                                 {"price", Null()},
                                 {"tags", Null()},
                                 {"meta", Null()},
                                 {"price_string", Null()},
                                 {"extra", Value::Bool(true)}}));

  // The rows were handed over: the next call has nothing.
  EXPECT_THAT(shaper.TakeBatches(), IsEmpty());
}

// Rows become columns as they are absorbed; columns built before the schema changed are conformed:
// an int field still new in this unit widens to double (values rewritten), a struct gains a field
// (earlier rows null), a list element widens, a field seen only as null appears at Seal().
TEST(SchemaTakeBatches, ColumnsBuiltBeforeTheSchemaChangedAreConformed) {
  Shaper shaper({}, Options());
  AbsorbOk(shaper, Obj({{"n", Int(1)}, {"s", Obj({{"a", Int(1)}})}, {"l", Lst({Int(1), Int(2)})}}));
  AbsorbOk(shaper, Obj({{"n", Int(2)}, {"s", Obj({{"a", Int(2)}})}, {"l", Lst({Int(3)})}}));
  AbsorbOk(shaper, Obj({{"n", Dbl(2.5)},
                        {"s", Obj({{"a", Dbl(0.5)}, {"b", Str("x")}})},
                        {"l", Lst({Dbl(4.5)})},
                        {"z", Null()}}));
  shaper.Seal();
  EXPECT_EQ(TypeOf(shaper, "n"), "double");
  EXPECT_EQ(TypeOf(shaper, "s"), "struct<a: double, b: string>");
  EXPECT_EQ(TypeOf(shaper, "l"), "list<double>");
  EXPECT_EQ(TypeOf(shaper, "z"), "string");

  Batch batch = OnlyBatch(shaper);
  ASSERT_EQ(batch.num_rows, 3);
  EXPECT_EQ(batch.RowAt(0), Obj({{"n", Dbl(1)},
                                 {"s", Obj({{"a", Dbl(1)}, {"b", Null()}})},
                                 {"l", Lst({Dbl(1), Dbl(2)})},
                                 {"z", Null()}}));
  EXPECT_EQ(batch.RowAt(1), Obj({{"n", Dbl(2)},
                                 {"s", Obj({{"a", Dbl(2)}, {"b", Null()}})},
                                 {"l", Lst({Dbl(3)})},
                                 {"z", Null()}}));
  EXPECT_EQ(batch.RowAt(2), Obj({{"n", Dbl(2.5)},
                                 {"s", Obj({{"a", Dbl(0.5)}, {"b", Str("x")}})},
                                 {"l", Lst({Dbl(4.5)})},
                                 {"z", Null()}}));
}

TEST(SchemaTakeBatches, EachUnitsBatchCarriesItsSealedSchemaId) {
  Shaper shaper({}, Options());
  AbsorbOk(shaper, Obj({{"a", Int(1)}}));
  shaper.Seal();
  Batch first = OnlyBatch(shaper);
  EXPECT_EQ(first.schema_id, 1);
  EXPECT_EQ(first.num_rows, 1);

  AbsorbOk(shaper, Obj({{"a", Int(2)}, {"b", Str("x")}}));
  shaper.Seal();
  Batch second = OnlyBatch(shaper);
  EXPECT_EQ(second.schema_id, 2);
  ASSERT_EQ(second.num_rows, 1);
  EXPECT_EQ(second.RowAt(0), Obj({{"a", Int(2)}, {"b", Str("x")}}));
  // The first batch kept the fields it was built with.
  EXPECT_EQ(first.fields.size(), 1u);
}

TEST(SchemaTakeBatches, NothingIsKeptWithoutBuildColumns) {
  ShaperOptions options = Options();
  options.build_columns = false;
  Shaper shaper({}, options);
  AbsorbOk(shaper, Obj({{"a", Int(1)}}));
  shaper.Seal();
  EXPECT_THAT(shaper.TakeBatches(), IsEmpty());
  EXPECT_EQ(TypeOf(shaper, "a"), "int");
  EXPECT_EQ(shaper.records_absorbed(), 1u);
}

// ----- Iceberg JSON ------------------------------------------------------------------------------

std::vector<Field> RichFields() {
  const LogicalType item = LogicalType::Struct(
      {Field{10, "sku", LogicalType::String(), false}, Field{11, "qty", LogicalType::Int(), true}});
  return {
      Field{1, "id", LogicalType::Long(), false},
      Field{2, "amount", LogicalType::Decimal(10, 2).value(), true},
      Field{3, "tags", LogicalType::List(Field{4, "element", LogicalType::String(), true}), true},
      Field{5, "attrs",
            LogicalType::Map(Field{6, "key", LogicalType::String(), false},
                             Field{7, "value", LogicalType::Double(), false}),
            true},
      Field{8, "items", LogicalType::List(Field{9, "element", item, false}), true},
      Field{12, "when", LogicalType::TimestampTz(), true},
      Field{13, "ts", LogicalType::Timestamp(), true},
      Field{14, "day", LogicalType::Date(), true},
      Field{15, "at", LogicalType::Time(), true},
      Field{16, "raw", LogicalType::Binary(), true},
      Field{17, "uid", LogicalType::Uuid(), false},
      Field{18, "ratio", LogicalType::Float(), true},
      Field{19, "flag", LogicalType::Boolean(), true},
      Field{20, "n", LogicalType::Int(), true},
      Field{
          21, "deep",
          LogicalType::Struct({Field{
              22, "inner",
              LogicalType::Map(Field{23, "key", LogicalType::String(), false},
                               Field{24, "value",
                                     LogicalType::List(Field{
                                         25, "element", LogicalType::Decimal(38, 9).value(), true}),
                                     true}),
              true}}),
          true},
  };
}

TEST(SchemaIcebergJson, FieldsFollowTheIcebergSpecShape) {
  const Json json = FieldsToIcebergJson(RichFields(), 4);
  EXPECT_EQ(json["type"], "struct");
  EXPECT_EQ(json["schema-id"], 4);
  ASSERT_EQ(json["fields"].size(), 15u);
  EXPECT_EQ(json["fields"][0],
            Json::parse(R"({"id":1,"name":"id","required":true,"type":"long"})"));
  EXPECT_EQ(json["fields"][1],
            Json::parse(R"j({"id":2,"name":"amount","required":false,"type":"decimal(10,2)"})j"));
  EXPECT_EQ(
      json["fields"][2]["type"],
      Json::parse(R"({"type":"list","element-id":4,"element":"string","element-required":false})"));
  EXPECT_EQ(json["fields"][3]["type"], Json::parse(R"({"type":"map","key-id":6,"key":"string",
                                                       "value-id":7,"value":"double","value-required":true})"));
  EXPECT_EQ(json["fields"][4]["type"],
            Json::parse(R"({"type":"list","element-id":9,"element-required":true,
      "element":{"type":"struct","fields":[{"id":10,"name":"sku","required":true,"type":"string"},
                                            {"id":11,"name":"qty","required":false,"type":"int"}]}})"));
  std::vector<std::string> primitive_names;
  for (size_t i = 5; i < 14; ++i)
    primitive_names.push_back(json["fields"][i]["type"].get<std::string>());
  EXPECT_THAT(primitive_names, ElementsAre("timestamptz", "timestamp", "date", "time", "binary",
                                           "uuid", "float", "boolean", "int"));
  EXPECT_EQ(json["fields"][10]["required"], true);
  EXPECT_EQ(json["fields"][14]["type"]["fields"][0]["type"]["value"]["element"], "decimal(38,9)");
}

TEST(SchemaIcebergJson, FieldsRoundTripWithIdsAndRequiredFlags) {
  const std::vector<Field> fields = RichFields();
  const Json json = FieldsToIcebergJson(fields, 4);
  Result<std::vector<Field>> parsed = FieldsFromIcebergJson(json);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(*parsed, fields);
  // And through text, as the store keeps it.
  Result<std::vector<Field>> reparsed = FieldsFromIcebergJson(Json::parse(json.dump()));
  ASSERT_TRUE(reparsed.ok()) << reparsed.status().ToString();
  EXPECT_EQ(*reparsed, fields);
  EXPECT_EQ((*reparsed)[4].type.ToString(), "list<struct<sku: string, qty: int>>");
  EXPECT_FALSE((*reparsed)[4].type.children()[0].nullable);
  EXPECT_FALSE((*reparsed)[3].type.children()[1].nullable);
  EXPECT_EQ((*reparsed)[14].type.ToString(), "struct<inner: map<string, list<decimal(38, 9)>>>");
}

TEST(SchemaIcebergJson, EmptySchemaRoundTrips) {
  const Json json = FieldsToIcebergJson({}, 1);
  EXPECT_EQ(json, Json::parse(R"({"type":"struct","fields":[],"schema-id":1})"));
  Result<std::vector<Field>> parsed = FieldsFromIcebergJson(json);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_THAT(*parsed, IsEmpty());
}

TEST(SchemaIcebergJson, MalformedSchemasAreCorruptionNotCrashes) {
  const std::vector<std::string> broken = {
      R"({"type":"struct","fields":[{"id":1,"name":"l","required":false,
          "type":{"type":"list","element":"string","element-required":false}}]})",  // no element-id
      R"({"type":"struct","fields":[{"id":1,"name":"l","required":false,
          "type":{"type":"list","element-id":2}}]})",                               // no element
      R"({"type":"struct","fields":[{"id":1,"name":"m","required":false,
          "type":{"type":"map","key-id":2,"key":"string","value":"int"}}]})",       // no value-id
      R"({"type":"struct","fields":[{"name":"x","type":"int"}]})",                  // no id
      R"({"type":"struct","fields":[{"id":"one","name":"x","type":"int"}]})",  // id not a number
      R"({"type":"list","element-id":1,"element":"int"})",                     // not a struct
      R"({"type":"struct","fields":[{"id":1,"name":"x","type":{"type":"variant"}}]})",
      R"({"type":"struct","fields":[{"id":1,"name":"x","type":7}]})",
  };
  for (const std::string& text : broken) {
    SCOPED_TRACE(text);
    Result<std::vector<Field>> parsed = FieldsFromIcebergJson(Json::parse(text));
    ASSERT_FALSE(parsed.ok());
    EXPECT_EQ(parsed.status().code(), StatusCode::kCorruption) << parsed.status().ToString();
  }
}

// ----- persistence -------------------------------------------------------------------------------

using skippr::testing::TempDir;

std::unique_ptr<store::Store> OpenStore(const std::string& directory) {
  store::StoreOptions options;
  options.directory = directory;
  Result<std::unique_ptr<store::Store>> opened = store::Store::Open(options);
  EXPECT_TRUE(opened.ok()) << opened.status().ToString();
  if (!opened.ok()) std::abort();
  return std::move(opened).value();
}

PipelineSchema ThroughTheStore(const PipelineSchema& schema, const std::string& directory) {
  auto store = OpenStore(directory);
  Result<store::WriteTransaction> write = store->BeginWrite();
  EXPECT_TRUE(write.ok());
  for (const auto& [name, ns] : schema.namespaces) EXPECT_TRUE(SaveNamespace(*write, ns).ok());
  EXPECT_TRUE(write->Commit().ok());
  Result<store::ReadTransaction> read = store->BeginRead();
  EXPECT_TRUE(read.ok());
  Result<PipelineSchema> loaded = LoadSchema(*read);
  EXPECT_TRUE(loaded.ok()) << loaded.status().ToString();
  return loaded.ok() ? std::move(loaded).value() : PipelineSchema{};
}

NamespaceSchema RichNamespace() {
  NamespaceSchema ns;
  ns.name = "web_events";
  ns.schema_id = 3;
  ns.last_field_id = 30;  // higher than any field: ids of dropped fields are not reused
  ns.fields = RichFields();
  ns.history = {{1, {"added id (long)", "added tags (list<string>)"}},
                {2, {}},
                {3, {"promoted n int → long", "added note (string; only nulls seen so far)"}}};
  return ns;
}

void ExpectSameNamespace(const NamespaceSchema& actual, const NamespaceSchema& expected) {
  EXPECT_EQ(actual.name, expected.name);
  EXPECT_EQ(actual.schema_id, expected.schema_id);
  EXPECT_EQ(actual.last_field_id, expected.last_field_id);
  EXPECT_EQ(actual.fields, expected.fields);
  ASSERT_EQ(actual.history.size(), expected.history.size());
  for (size_t i = 0; i < expected.history.size(); ++i) {
    EXPECT_EQ(actual.history[i].schema_id, expected.history[i].schema_id);
    EXPECT_EQ(actual.history[i].changes, expected.history[i].changes);
  }
}

TEST(SchemaPersistence, SaveAndLoadRoundTripANamespace) {
  TempDir dir;
  const NamespaceSchema expected = RichNamespace();
  {
    auto store = OpenStore(dir.path());
    Result<store::WriteTransaction> write = store->BeginWrite();
    ASSERT_TRUE(write.ok()) << write.status().ToString();
    Status saved = SaveNamespace(*write, expected);
    ASSERT_TRUE(saved.ok()) << saved.ToString();
    // The transaction sees its own write before it commits.
    Result<PipelineSchema> inside = LoadSchema(*write);
    ASSERT_TRUE(inside.ok()) << inside.status().ToString();
    ASSERT_EQ(inside->namespaces.size(), 1u);
    ExpectSameNamespace(inside->namespaces.at("web_events"), expected);
    Status committed = write->Commit();
    ASSERT_TRUE(committed.ok()) << committed.ToString();
  }
  // A fresh Store on the same directory reads it back.
  auto store = OpenStore(dir.path());
  Result<store::ReadTransaction> read = store->BeginRead();
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  Result<PipelineSchema> loaded = LoadSchema(*read);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ASSERT_EQ(loaded->namespaces.size(), 1u);
  ExpectSameNamespace(loaded->namespaces.at("web_events"), expected);
}

TEST(SchemaPersistence, AShapersSchemaSurvivesTheStoreAndKeepsEvolvingFromIt) {
  TempDir dir;
  auto store = OpenStore(dir.path());
  ShaperOptions options = Options();
  options.namespace_fields = {"kind"};
  Shaper first({}, options);
  AbsorbOk(first, Obj({{"kind", Str("a")}, {"x", Int(1)}, {"s", Obj({{"y", Lst({Dbl(1)})}})}}));
  AbsorbOk(first, Obj({{"kind", Str("b")}, {"z", Str("2024-01-15")}}));
  first.Seal();
  AbsorbOk(first, Obj({{"kind", Str("a")}, {"x", Int(3'000'000'000)}}));
  first.Seal();
  {
    Result<store::WriteTransaction> write = store->BeginWrite();
    ASSERT_TRUE(write.ok());
    for (const auto& [name, ns] : first.schema().namespaces)
      ASSERT_TRUE(SaveNamespace(*write, ns).ok());
    ASSERT_TRUE(write->Commit().ok());
  }
  Result<store::ReadTransaction> read = store->BeginRead();
  ASSERT_TRUE(read.ok());
  Result<PipelineSchema> loaded = LoadSchema(*read);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(Dump(*loaded), Dump(first.schema()));
  EXPECT_EQ(loaded->namespaces.at("a").schema_id, 2);
  EXPECT_EQ(loaded->namespaces.at("b").schema_id, 1);

  Shaper second(std::move(loaded).value(), options);
  AbsorbOk(second, Obj({{"kind", Str("a")}, {"w", Int(1)}}));
  std::vector<NamespaceChange> changes = second.Seal();
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].namespace_name, "a");
  EXPECT_FALSE(changes[0].is_new_namespace);
  EXPECT_EQ(IdOf(second, "w", "a"), 6);  // kind 1, x 2, s 3, s.y 4, s.y.element 5
  EXPECT_EQ(Ns(second, "a").schema_id, 3);
}

TEST(SchemaPersistence, DeleteNamespaceRemovesOnlyThatNamespace) {
  TempDir dir;
  auto store = OpenStore(dir.path());
  NamespaceSchema other = RichNamespace();
  other.name = "other";
  {
    Result<store::WriteTransaction> write = store->BeginWrite();
    ASSERT_TRUE(write.ok());
    ASSERT_TRUE(SaveNamespace(*write, RichNamespace()).ok());
    ASSERT_TRUE(SaveNamespace(*write, other).ok());
    ASSERT_TRUE(DeleteNamespace(*write, "web_events").ok());
    ASSERT_TRUE(write->Commit().ok());
  }
  Result<store::ReadTransaction> read = store->BeginRead();
  ASSERT_TRUE(read.ok());
  Result<PipelineSchema> loaded = LoadSchema(*read);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ASSERT_EQ(loaded->namespaces.size(), 1u);
  ExpectSameNamespace(loaded->namespaces.at("other"), other);
}

// ----- ValueFromText -----------------------------------------------------------------------------

TEST(SchemaValueFromText, CellsReadAsTheDocumentedValues) {
  EXPECT_EQ(ValueFromText(""), Null());
  EXPECT_EQ(ValueFromText("true"), Value::Bool(true));
  EXPECT_EQ(ValueFromText("false"), Value::Bool(false));
  EXPECT_EQ(ValueFromText("TRUE"), Value::Bool(true));
  EXPECT_EQ(ValueFromText("False"), Value::Bool(false));
  EXPECT_EQ(ValueFromText("tRuE"), Str("tRuE"));
  EXPECT_EQ(ValueFromText("007"), Str("007"));  // leading zeros: an identifier
  EXPECT_EQ(ValueFromText("0"), Int(0));
  EXPECT_EQ(ValueFromText("-12"), Int(-12));
  EXPECT_EQ(ValueFromText("42"), Int(42));
  EXPECT_EQ(ValueFromText("9223372036854775807"), Int(INT64_MAX));
  EXPECT_EQ(ValueFromText("1e3"), Dbl(1000));
  EXPECT_EQ(ValueFromText("3.50"), Dbl(3.5));
  EXPECT_EQ(ValueFromText("-0.25"), Dbl(-0.25));
  EXPECT_EQ(ValueFromText("0.5"), Dbl(0.5));
  EXPECT_EQ(ValueFromText("00.5"), Str("00.5"));
  EXPECT_EQ(ValueFromText(".5"), Str(".5"));
  EXPECT_EQ(ValueFromText("+5"), Str("+5"));
  EXPECT_EQ(ValueFromText("-"), Str("-"));
  EXPECT_EQ(ValueFromText(" 5"), Str(" 5"));
  EXPECT_EQ(ValueFromText("12abc"), Str("12abc"));
  EXPECT_EQ(ValueFromText("abc"), Str("abc"));
  EXPECT_EQ(ValueFromText("2024-01-15"), Str("2024-01-15"));  // dates are recognised later
  EXPECT_EQ(ValueFromText("inf"), Str("inf"));
  EXPECT_EQ(ValueFromText("1e999"), Str("1e999"));
}

// A cell that looks numeric reads as NumberFromText reads it, or as its text when that is no
// number: whatever path the reading takes (JSON numbers have a faster one).
TEST(SchemaValueFromText, NumericLookingCellsReadAsNumberFromTextReadsThem) {
  std::mt19937_64 random(20261203);
  std::vector<std::string> texts = {"0", "-0", "-0.0", "0e0", "1E+2", "1e-2", "12.5e3", "1.",
                                    "00", "-", "--1", "1-2", "1e", "1e+", "9007199254740993",
                                    "123456789012345678", "1234567890123456789",
                                    "0.1000000000000000055511151231257827"};
  constexpr std::string_view kAlphabet = "0123456789012345678901234567890123456789.-+eE";
  for (int i = 0; i < 20000; ++i) {
    std::string text;
    const size_t length = 1 + random() % 24;
    for (size_t at = 0; at < length; ++at) text += kAlphabet[random() % kAlphabet.size()];
    texts.push_back(std::move(text));
    texts.push_back(fmt::format("{}", static_cast<double>(random()) / (1 + random() % 100000)));
    texts.push_back(fmt::format("{:.{}f}", static_cast<double>(random() % 1000000) / 1000,
                                random() % 8));
    texts.push_back(std::to_string(static_cast<int64_t>(random())));
    // Around the edges of the fast path: 14 to 17 significant digits, leading and trailing
    // zeros, exponents of ten from -26 to 26.
    const std::string digits = std::to_string(random() % 100'000'000'000'000'000ULL);
    const std::string mantissa = digits.substr(0, 1 + random() % digits.size());
    const size_t point = random() % (mantissa.size() + 1);
    std::string literal = std::string(random() % 2 ? "-" : "") +
                          (point == 0 ? "0" : mantissa.substr(0, point)) + "." +
                          std::string(random() % 4, '0') +
                          (point == mantissa.size() ? "0" : mantissa.substr(point)) +
                          std::string(random() % 3, '0');
    if (random() % 2) literal += fmt::format("e{}", static_cast<int>(random() % 53) - 26);
    texts.push_back(std::move(literal));
  }
  for (const std::string& text : texts) {
    SCOPED_TRACE(text);
    const std::optional<Value> number = NumberFromText(text);
    if (text[0] == '-' || (text[0] >= '0' && text[0] <= '9')) {
      const Value read = ValueFromText(text);
      EXPECT_EQ(read, number.value_or(Value::String(text)));
      // To the bit: a double read without from_chars (Clinger's fast path) is the same double.
      double correct = 0;
      if (read.kind() == Value::Kind::kDouble &&
          std::from_chars(text.data(), text.data() + text.size(), correct).ec == std::errc()) {
        EXPECT_EQ(std::bit_cast<uint64_t>(read.as_double()), std::bit_cast<uint64_t>(correct));
      }
    }
  }
}

// ----- numbers keep every digit ------------------------------------------------------------------

// A field of a row, or the text "<missing>" (so a missing field fails the test, not the binary).
Value FieldOf(const Value& row, const std::string& name) {
  const Value* field = row.Find(name);
  return field != nullptr ? *field : Value::String("<missing>");
}

// The decimal(38, 0) value of an integer literal.
Value Wide(const std::string& digits) {
  return Value::Decimal(*internal::ParseDecimal(digits, 0), 38, 0);
}

TEST(SchemaNumbers, IntegersBeyondLongAreDecimalsAndBeyondThirtyEightDigitsText) {
  for (const std::string& text : std::vector<std::string>{
           "9223372036854775808", "18446744073709551615", "-9223372036854775809",
           "123456789012345678901234567890", std::string(38, '9')}) {
    SCOPED_TRACE(text);
    const Value value = ValueFromText(text);
    EXPECT_EQ(value, Wide(text));
    EXPECT_EQ(value.ToJson(), text);  // every digit
  }
  EXPECT_EQ(ValueFromText(std::string(39, '9')), Value::String(std::string(39, '9')));
  EXPECT_EQ(ValueFromText("-" + std::string(39, '1')), Value::String("-" + std::string(39, '1')));
  EXPECT_EQ(ValueFromText("9223372036854775807"), Int(INT64_MAX));
  EXPECT_EQ(ValueFromText("-9223372036854775808"), Int(INT64_MIN));
}

TEST(SchemaNumbers, DecimalsADoubleCannotHoldStayExact) {
  EXPECT_EQ(ValueFromText("0.1234567890123456789"),
            Value::Decimal(1234567890123456789, 38, 19));
  EXPECT_EQ(ValueFromText("0.1234567890123456789").ToJson(), "0.1234567890123456789");
  EXPECT_EQ(ValueFromText("-123456789012345678.25").ToJson(), "-123456789012345678.25");
  EXPECT_EQ(ValueFromText("1.234567890123456789e5").ToJson(), "123456.7890123456789");
  EXPECT_EQ(ValueFromText("1.234567890123456789e25"), Wide("12345678901234567890000000"));
  // What a double prints back exactly stays a double, however long.
  EXPECT_EQ(ValueFromText("0.30000000000000004"), Dbl(0.30000000000000004));
  EXPECT_EQ(ValueFromText("3.141592653589793"), Dbl(3.141592653589793));
  EXPECT_EQ(ValueFromText("1.50"), Dbl(1.5));
  EXPECT_EQ(ValueFromText("1e-300"), Dbl(1e-300));
  // No number type holds these exactly: they keep their text.
  const std::string long_fraction = "1." + std::string(40, '0') + "1";
  EXPECT_EQ(ValueFromText(long_fraction), Value::String(long_fraction));
  EXPECT_EQ(ValueFromText("1.00000000000000000001e-300"),
            Value::String("1.00000000000000000001e-300"));
}

TEST(SchemaNumbers, NumberFromTextReadsOnlyNumberLiterals) {
  EXPECT_EQ(NumberFromText("42"), Int(42));
  EXPECT_EQ(NumberFromText("-0"), Int(0));
  EXPECT_EQ(NumberFromText("2.5", 2.5), Dbl(2.5));
  EXPECT_EQ(NumberFromText("1e999"), Str("1e999"));  // beyond a double: its text
  // Below a double's range a literal reads as 0 (simdjson) or a denormal with fewer digits: only
  // a literal the double reads back as is a double.
  EXPECT_EQ(NumberFromText("1e-400", 0.0), Str("1e-400"));
  EXPECT_EQ(NumberFromText("1e-400"), Str("1e-400"));
  EXPECT_EQ(NumberFromText("0.000e5", 0.0), Dbl(0.0));
  EXPECT_EQ(NumberFromText("2.5e-320", 2.5e-320), Dbl(2.5e-320));
  EXPECT_EQ(NumberFromText("2.123456789e-320", 2.123456789e-320), Str("2.123456789e-320"));
  EXPECT_EQ(NumberFromText("-1E+999"), Str("-1E+999"));
  for (const char* text : {"007", "abc", "", "-", ".5", "1e", "1.2.3", "+5", "0x10"}) {
    EXPECT_EQ(NumberFromText(text), std::nullopt) << text;
  }
}

// Symptom: 9223372036854775807 read back as ...808 once a bigger integer widened the column to
// double. Now the long column keeps its value and the bigger one is a decimal in a sibling.
TEST(SchemaNumbers, ALongFieldKeepsEveryDigitWhenABiggerIntegerArrives) {
  Shaper shaper({}, Options());
  AbsorbOk(shaper, Obj({{"id", ValueFromText("9223372036854775807")}}));
  AbsorbOk(shaper, Obj({{"id", ValueFromText("9223372036854775808")}}));
  AbsorbOk(shaper, Obj({{"id", ValueFromText("123456789012345678901234567890123456789")}}));
  shaper.Seal();
  EXPECT_EQ(TypeOf(shaper, "id"), "long");
  EXPECT_EQ(TypeOf(shaper, "id_decimal"), "decimal(38, 0)");
  EXPECT_EQ(TypeOf(shaper, "id_string"), "string");
  Batch batch = OnlyBatch(shaper);
  ASSERT_EQ(batch.num_rows, 3);
  EXPECT_EQ(FieldOf(batch.RowAt(0), "id").as_int(), INT64_MAX);
  EXPECT_EQ(FieldOf(batch.RowAt(1), "id_decimal").ToJson(), "9223372036854775808");
  EXPECT_EQ(FieldOf(batch.RowAt(2), "id_string").as_string(),
            "123456789012345678901234567890123456789");
}

TEST(SchemaNumbers, AFieldFirstSeenBeyondLongIsADecimal) {
  Shaper shaper({}, Options());
  AbsorbOk(shaper, Obj({{"n", ValueFromText("18446744073709551615")}}));
  AbsorbOk(shaper, Obj({{"n", Int(5)}}));
  AbsorbOk(shaper, Obj({{"n", ValueFromText("-123456789012345678901234567890")}}));
  AbsorbOk(shaper, Obj({{"l", Lst({Int(1), ValueFromText("99999999999999999999")})}}));
  AbsorbOk(shaper, Obj({{"m", Lst({Dbl(1.5), ValueFromText("0.1234567890123456789")})}}));
  shaper.Seal();
  EXPECT_EQ(TypeOf(shaper, "n"), "decimal(38, 0)");
  EXPECT_EQ(TypeOf(shaper, "l"), "list<decimal(38, 0)>");
  EXPECT_EQ(TypeOf(shaper, "m"), "list<decimal(38, 19)>");
  EXPECT_THAT(FieldNames(Ns(shaper)), ElementsAre("n", "l", "m"));
  Batch batch = OnlyBatch(shaper);
  EXPECT_EQ(FieldOf(batch.RowAt(0), "n").ToJson(), "18446744073709551615");
  EXPECT_EQ(FieldOf(batch.RowAt(1), "n").ToJson(), "5");
  EXPECT_EQ(FieldOf(batch.RowAt(2), "n").ToJson(), "-123456789012345678901234567890");
  EXPECT_EQ(FieldOf(batch.RowAt(3), "l").ToJson(), "[1,99999999999999999999]");
  EXPECT_EQ(FieldOf(batch.RowAt(4), "m").ToJson(),
            "[1.5000000000000000000,0.1234567890123456789]");
}

// A field created in this unit widens from long to double only while that loses nothing.
TEST(SchemaNumbers, ALongBeyondTwoToTheFiftyThreeIsNotWidenedToDouble) {
  Shaper shaper({}, Options());
  AbsorbOk(shaper, Obj({{"x", Int(9'007'199'254'740'993)}}));
  AbsorbOk(shaper, Obj({{"x", Dbl(1.5)}}));
  AbsorbOk(shaper, Obj({{"y", Int(3)}}));
  AbsorbOk(shaper, Obj({{"y", Dbl(0.5)}}));
  AbsorbOk(shaper, Obj({{"y", Int(9'007'199'254'740'993)}}));
  shaper.Seal();
  EXPECT_EQ(TypeOf(shaper, "x"), "long");
  EXPECT_EQ(TypeOf(shaper, "x_double"), "double");
  EXPECT_EQ(TypeOf(shaper, "y"), "double");
  EXPECT_EQ(TypeOf(shaper, "y_long"), "long");  // a double would round it to ...992
  Batch batch = OnlyBatch(shaper);
  EXPECT_EQ(FieldOf(batch.RowAt(0), "x").as_int(), 9'007'199'254'740'993);
  EXPECT_EQ(FieldOf(batch.RowAt(4), "y_long").as_int(), 9'007'199'254'740'993);
}

// A decimal column takes a long decimal exactly, and a double that does not hold a decimal exactly
// goes to a sibling instead of rounding.
TEST(SchemaNumbers, DecimalAndDoubleColumnsTakeOnlyWhatTheyHoldExactly) {
  const std::map<std::string, LogicalType> declared = {
      {"amount", LogicalType::Decimal(38, 20).value()}, {"ratio", LogicalType::Double()}};
  RecordContext context;
  context.declared_types = &declared;
  Shaper shaper({}, Options());
  AbsorbOk(shaper, Obj({{"amount", ValueFromText("0.12345678901234567890")},
                        {"ratio", ValueFromText("0.1234567890123456789")}}),
           context);
  AbsorbOk(shaper, Obj({{"amount", Dbl(0.5)}, {"ratio", Dbl(0.25)}}), context);
  shaper.Seal();
  EXPECT_EQ(TypeOf(shaper, "amount"), "decimal(38, 20)");
  EXPECT_EQ(TypeOf(shaper, "ratio"), "double");
  EXPECT_EQ(TypeOf(shaper, "ratio_decimal"), "decimal(38, 19)");
  Batch batch = OnlyBatch(shaper);
  EXPECT_EQ(FieldOf(batch.RowAt(0), "amount").ToJson(), "0.12345678901234567890");
  EXPECT_EQ(FieldOf(batch.RowAt(0), "ratio_decimal").ToJson(), "0.1234567890123456789");
  EXPECT_EQ(FieldOf(batch.RowAt(1), "amount").ToJson(), "0.50000000000000000000");
  EXPECT_EQ(FieldOf(batch.RowAt(1), "ratio").as_double(), 0.25);
}

// ----- text_values -------------------------------------------------------------------------------

TEST(SchemaTextValues, ParseDateChecksTheCalendar) {
  using internal::ParseDate;
  EXPECT_EQ(ParseDate("1970-01-01"), 0);
  EXPECT_EQ(ParseDate("2024-01-15"), 19737);
  EXPECT_EQ(ParseDate("2024-02-29"), 19782);
  EXPECT_EQ(ParseDate("2000-02-29"), 11016);
  EXPECT_EQ(ParseDate("1969-12-31"), -1);
  EXPECT_EQ(ParseDate("2023-02-29"), std::nullopt);
  EXPECT_EQ(ParseDate("1900-02-29"), std::nullopt);
  EXPECT_EQ(ParseDate("2024-04-31"), std::nullopt);
  EXPECT_EQ(ParseDate("2024-13-01"), std::nullopt);
  EXPECT_EQ(ParseDate("2024-00-10"), std::nullopt);
  EXPECT_EQ(ParseDate("2024-01-00"), std::nullopt);
  EXPECT_EQ(ParseDate("2024-1-15"), std::nullopt);
  EXPECT_EQ(ParseDate("2024/01/15"), std::nullopt);
  EXPECT_EQ(ParseDate("2024-01-15T"), std::nullopt);
  EXPECT_EQ(ParseDate(""), std::nullopt);
}

TEST(SchemaTextValues, ParseTimestampConvertsOffsetsToUtc) {
  using internal::ParseTimestamp;
  constexpr int64_t k0830Z = 1'705'307'400'000'000;  // 2024-01-15T08:30:00Z
  constexpr int64_t k1030 = 1'705'314'600'000'000;   // 2024-01-15T10:30:00

  auto plus_two = ParseTimestamp("2024-01-15T10:30:00+02:00");
  ASSERT_TRUE(plus_two.has_value());
  EXPECT_EQ(plus_two->micros, k0830Z);
  EXPECT_TRUE(plus_two->has_zone);

  auto minus = ParseTimestamp("2024-01-15T03:00:00-05:30");
  ASSERT_TRUE(minus.has_value());
  EXPECT_EQ(minus->micros, k0830Z);

  auto compact = ParseTimestamp("2024-01-15T10:30+0200");
  ASSERT_TRUE(compact.has_value());
  EXPECT_EQ(compact->micros, k0830Z);

  auto zulu = ParseTimestamp("2024-01-15 10:30:00.123456Z");
  ASSERT_TRUE(zulu.has_value());
  EXPECT_EQ(zulu->micros, k1030 + 123'456);
  EXPECT_TRUE(zulu->has_zone);

  auto local = ParseTimestamp("2024-01-15T10:30:00");
  ASSERT_TRUE(local.has_value());
  EXPECT_EQ(local->micros, k1030);
  EXPECT_FALSE(local->has_zone);

  auto truncated = ParseTimestamp("2024-01-15T10:30:00.1234567");  // beyond µs is truncated
  ASSERT_TRUE(truncated.has_value());
  EXPECT_EQ(truncated->micros, k1030 + 123'456);

  auto across_midnight = ParseTimestamp("2024-01-01T01:00:00+02:00");
  ASSERT_TRUE(across_midnight.has_value());
  EXPECT_EQ(internal::FormatTimestamp(across_midnight->micros, true),
            "2023-12-31T23:00:00.000000Z");

  EXPECT_EQ(ParseTimestamp("2024-01-15T24:00:00"), std::nullopt);
  EXPECT_EQ(ParseTimestamp("2024-01-15T10:60:00"), std::nullopt);
  EXPECT_EQ(ParseTimestamp("2024-02-30T10:00:00"), std::nullopt);
  EXPECT_EQ(ParseTimestamp("2024-01-15T10:30:00+24:00"), std::nullopt);
  EXPECT_EQ(ParseTimestamp("2024-01-15T10:30:00+02:0"), std::nullopt);
  EXPECT_EQ(ParseTimestamp("2024-01-15T10:30:00Zx"), std::nullopt);
  EXPECT_EQ(ParseTimestamp("2024-01-15T10:30:00."), std::nullopt);
  EXPECT_EQ(ParseTimestamp("2024-01-15X10:30:00"), std::nullopt);
  EXPECT_EQ(ParseTimestamp("2024-01-15"), std::nullopt);
}

TEST(SchemaTextValues, FormatAndParseRoundTrip) {
  using internal::FormatDate;
  using internal::FormatTimestamp;
  using internal::ParseDate;
  using internal::ParseTimestamp;
  for (int32_t days : {-719468, -1, 0, 11016, 19737, 19782, 2'932'896}) {
    const std::string text = FormatDate(days);
    EXPECT_EQ(ParseDate(text), days) << text;
  }
  EXPECT_EQ(FormatDate(19782), "2024-02-29");
  EXPECT_EQ(FormatDate(-1), "1969-12-31");

  EXPECT_EQ(FormatTimestamp(1'705'307'400'000'000, true), "2024-01-15T08:30:00.000000Z");
  EXPECT_EQ(FormatTimestamp(1'705'314'600'123'456, false), "2024-01-15T10:30:00.123456");
  EXPECT_EQ(FormatTimestamp(-500'000, false), "1969-12-31T23:59:59.500000");
  for (int64_t micros : {int64_t{0}, int64_t{-500'000}, int64_t{-86'400'000'000},
                         int64_t{1'705'314'600'123'456}, int64_t{951'782'400'000'001}}) {
    for (bool with_zone : {false, true}) {
      const std::string text = FormatTimestamp(micros, with_zone);
      auto parsed = ParseTimestamp(text);
      ASSERT_TRUE(parsed.has_value()) << text;
      EXPECT_EQ(parsed->micros, micros) << text;
      EXPECT_EQ(parsed->has_zone, with_zone) << text;
    }
  }
}

TEST(SchemaTextValues, ParseDecimalKeepsExactlyTheScale) {
  using internal::ParseDecimal;
  EXPECT_EQ(ParseDecimal("12.345", 2), std::nullopt);  // more precise than the column
  EXPECT_EQ(ParseDecimal("12.3", 2), 1230);
  EXPECT_EQ(ParseDecimal("12.30", 2), 1230);
  EXPECT_EQ(ParseDecimal("12.300", 2), 1230);  // trailing zeros lose nothing
  EXPECT_EQ(ParseDecimal("12", 2), 1200);
  EXPECT_EQ(ParseDecimal("-0.05", 2), -5);
  EXPECT_EQ(ParseDecimal("+7.1", 1), 71);
  EXPECT_EQ(ParseDecimal("5", 0), 5);
  EXPECT_EQ(ParseDecimal("5.0", 0), 5);
  EXPECT_EQ(ParseDecimal("5.5", 0), std::nullopt);
  EXPECT_EQ(ParseDecimal("9223372036854775807", 0), INT64_MAX);
  // 128 bits: every decimal(38, s) value, and no more digits than 38.
  EXPECT_EQ(ParseDecimal("9223372036854775808", 0), static_cast<__int128>(INT64_MAX) + 1);
  EXPECT_EQ(ParseDecimal("-92233720368547758.08", 2), -(static_cast<__int128>(INT64_MAX) + 1));
  EXPECT_TRUE(ParseDecimal(std::string(38, '9'), 0).has_value());
  EXPECT_EQ(ParseDecimal(std::string(39, '9'), 0), std::nullopt);
  EXPECT_EQ(ParseDecimal("1" + std::string(37, '0'), 1), std::nullopt);  // 39 digits at scale 1
  EXPECT_EQ(ParseDecimal("", 2), std::nullopt);
  EXPECT_EQ(ParseDecimal(".", 2), std::nullopt);
  EXPECT_EQ(ParseDecimal("-", 2), std::nullopt);
  EXPECT_EQ(ParseDecimal("1.2.3", 2), std::nullopt);
  EXPECT_EQ(ParseDecimal("1e3", 2), std::nullopt);
  EXPECT_EQ(ParseDecimal("abc", 2), std::nullopt);
}

TEST(SchemaTextValues, IntegersRealsAndEpochs) {
  using internal::EpochIntegerToMicros;
  using internal::ParseInteger;
  using internal::ParseReal;
  EXPECT_EQ(ParseInteger("0"), 0);
  EXPECT_EQ(ParseInteger("-0"), 0);
  EXPECT_EQ(ParseInteger("-12"), -12);
  EXPECT_EQ(ParseInteger("007"), std::nullopt);
  EXPECT_EQ(ParseInteger("-07"), std::nullopt);
  EXPECT_EQ(ParseInteger("+7"), std::nullopt);
  EXPECT_EQ(ParseInteger("9223372036854775808"), std::nullopt);
  EXPECT_EQ(ParseInteger("-"), std::nullopt);
  EXPECT_EQ(ParseInteger(""), std::nullopt);
  EXPECT_EQ(ParseReal("3.5"), 3.5);
  EXPECT_EQ(ParseReal("-1e3"), -1000.0);
  EXPECT_EQ(ParseReal("0.5"), 0.5);
  EXPECT_EQ(ParseReal(".5"), std::nullopt);
  EXPECT_EQ(ParseReal("01.5"), std::nullopt);
  EXPECT_EQ(ParseReal("nan"), std::nullopt);
  EXPECT_EQ(ParseReal("1e400"), std::nullopt);

  EXPECT_EQ(EpochIntegerToMicros(1'262'304'000), 1'262'304'000'000'000);  // 2010-01-01 in seconds
  EXPECT_EQ(EpochIntegerToMicros(1'262'303'999), std::nullopt);
  EXPECT_EQ(EpochIntegerToMicros(99'999'999'999), 99'999'999'999'000'000);  // 11 digits
  EXPECT_EQ(EpochIntegerToMicros(100'000'000'000), std::nullopt);           // 12 digits
  EXPECT_EQ(EpochIntegerToMicros(1'700'000'000'000), 1'700'000'000'000'000);
  EXPECT_EQ(EpochIntegerToMicros(2'208'988'800'000), std::nullopt);  // 2040-01-01 in ms
  EXPECT_EQ(EpochIntegerToMicros(999'999'999), std::nullopt);
  EXPECT_EQ(EpochIntegerToMicros(-1'700'000'000), std::nullopt);
}

}  // namespace
}  // namespace schema
}  // namespace skippr
