// core/batch: the columnar Batch — appending Values of every physical kind, reading them back,
// validating the layout, padding and widening columns, and which Values fit which columns.
#include "core/batch.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "core/types.hpp"
#include "core/value.hpp"

namespace skippr {

// gtest prints these when an expectation fails (found by ADL, so outside the anonymous namespace).
void PrintTo(const Value& value, std::ostream* out) {
  *out << ValueKindName(value.kind()) << " " << value.ToJson();
}
void PrintTo(const LogicalType& type, std::ostream* out) { *out << type.ToString(); }

namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

Field MakeField(int32_t id, std::string name, LogicalType type, bool nullable = true) {
  return Field{id, std::move(name), std::move(type), nullable};
}

LogicalType Decimal(int precision, int scale) {
  return LogicalType::Decimal(precision, scale).value();
}

// Appends `values` to a fresh column of `type`, checks it validates, and returns it.
Column BuildColumn(const LogicalType& type, const std::vector<Value>& values) {
  Column column(type);
  for (const Value& value : values) column.Append(value);
  std::string reason;
  EXPECT_TRUE(column.Validate(&reason)) << type.ToString() << ": " << reason;
  return column;
}

// Every value comes back from ValueAt exactly as appended.
void ExpectRoundTrip(const LogicalType& type, const std::vector<Value>& values) {
  SCOPED_TRACE(type.ToString());
  Column column = BuildColumn(type, values);
  ASSERT_EQ(column.length, static_cast<int64_t>(values.size()));
  for (size_t row = 0; row < values.size(); ++row) {
    EXPECT_EQ(column.ValueAt(static_cast<int64_t>(row)), values[row]) << "row " << row;
    EXPECT_EQ(column.IsValid(static_cast<int64_t>(row)), !values[row].is_null()) << "row " << row;
  }
}

Value Obj(ValueObject fields) { return Value::Object(std::move(fields)); }
Value Lst(ValueList items) { return Value::List(std::move(items)); }
Value Str(const char* text) { return Value::String(text); }

// ----- physical kinds ---------------------------------------------------------------------------

TEST(BatchPhysicalKind, EachLogicalTypeMapsToItsDocumentedLayout) {
  EXPECT_EQ(PhysicalKindOf(TypeId::kBoolean), PhysicalKind::kBool);
  for (TypeId id : {TypeId::kInt, TypeId::kLong, TypeId::kDate, TypeId::kTime, TypeId::kTimestamp,
                    TypeId::kTimestampTz}) {
    EXPECT_EQ(PhysicalKindOf(id), PhysicalKind::kInt64);
  }
  EXPECT_EQ(PhysicalKindOf(TypeId::kFloat), PhysicalKind::kDouble);
  EXPECT_EQ(PhysicalKindOf(TypeId::kDouble), PhysicalKind::kDouble);
  EXPECT_EQ(PhysicalKindOf(TypeId::kDecimal), PhysicalKind::kDecimal128);
  for (TypeId id : {TypeId::kString, TypeId::kBinary, TypeId::kUuid}) {
    EXPECT_EQ(PhysicalKindOf(id), PhysicalKind::kBytes);
  }
  EXPECT_EQ(PhysicalKindOf(TypeId::kStruct), PhysicalKind::kStruct);
  EXPECT_EQ(PhysicalKindOf(TypeId::kList), PhysicalKind::kList);
  EXPECT_EQ(PhysicalKindOf(TypeId::kMap), PhysicalKind::kMap);

  EXPECT_EQ(FixedWidthBytes(PhysicalKind::kBool), 1u);
  EXPECT_EQ(FixedWidthBytes(PhysicalKind::kInt64), 8u);
  EXPECT_EQ(FixedWidthBytes(PhysicalKind::kDouble), 8u);
  EXPECT_EQ(FixedWidthBytes(PhysicalKind::kDecimal128), 16u);
  EXPECT_EQ(FixedWidthBytes(PhysicalKind::kBytes), 0u);
  EXPECT_EQ(FixedWidthBytes(PhysicalKind::kStruct), 0u);
  EXPECT_EQ(FixedWidthBytes(PhysicalKind::kList), 0u);
  EXPECT_EQ(FixedWidthBytes(PhysicalKind::kMap), 0u);
}

// ----- round trips ------------------------------------------------------------------------------

TEST(BatchColumn, BooleansRoundTripWithNulls) {
  ExpectRoundTrip(LogicalType::Boolean(),
                  {Value::Bool(true), Value::Null(), Value::Bool(false), Value::Bool(true)});
  Column column =
      BuildColumn(LogicalType::Boolean(), {Value::Bool(true), Value::Null(), Value::Bool(false)});
  EXPECT_THAT(column.fixed, ElementsAre(1, 0, 0));
  EXPECT_THAT(column.validity, ElementsAre(0b101));
}

TEST(BatchColumn, Int64KindsRoundTripTheirExtremes) {
  ExpectRoundTrip(LogicalType::Int(), {Value::Int(INT32_MIN), Value::Int(0), Value::Null(),
                                       Value::Int(INT32_MAX), Value::Int(-1)});
  ExpectRoundTrip(LogicalType::Long(), {Value::Int(INT64_MIN), Value::Null(), Value::Int(INT64_MAX),
                                        Value::Int(3'000'000'000)});
  ExpectRoundTrip(LogicalType::Time(), {Value::Int(0), Value::Int(86'399'999'999), Value::Null()});
  ExpectRoundTrip(LogicalType::Date(),
                  {Value::Date(19737), Value::Date(-1), Value::Null(), Value::Date(0)});
  ExpectRoundTrip(LogicalType::Timestamp(), {Value::Timestamp(1'705'314'600'000'000),
                                             Value::Timestamp(-500'000), Value::Null()});
  ExpectRoundTrip(
      LogicalType::TimestampTz(),
      {Value::Null(), Value::TimestampTz(1'705'307'400'000'000), Value::TimestampTz(INT64_MAX)});

  Column column = BuildColumn(LogicalType::Long(), {Value::Int(-2), Value::Null(), Value::Int(7)});
  EXPECT_EQ(column.fixed.size(), 24u);
  EXPECT_EQ(column.Int64At(0), -2);
  EXPECT_EQ(column.Int64At(1), 0);  // a null row's slot is zeroed
  EXPECT_EQ(column.Int64At(2), 7);
}

TEST(BatchColumn, DoublesRoundTripBitExactAndIntegersWidenOnAppend) {
  const double denormal = std::numeric_limits<double>::denorm_min();
  ExpectRoundTrip(LogicalType::Double(), {Value::Double(3.5), Value::Double(-1e308), Value::Null(),
                                          Value::Double(denormal), Value::Double(0.1)});
  // A float column holds doubles too (float → double is a metadata-only promotion).
  ExpectRoundTrip(LogicalType::Float(), {Value::Double(1.25), Value::Null()});

  // Integers fit a double column and are stored as their double value.
  Column column = BuildColumn(LogicalType::Double(), {Value::Int(42), Value::Int(-7)});
  EXPECT_EQ(column.ValueAt(0), Value::Double(42.0));
  EXPECT_EQ(column.ValueAt(1), Value::Double(-7.0));

  Column nan_column = BuildColumn(LogicalType::Double(), {Value::Double(std::nan(""))});
  EXPECT_TRUE(std::isnan(nan_column.DoubleAt(0)));
  EXPECT_EQ(nan_column.ValueAt(0).kind(), Value::Kind::kDouble);
}

TEST(BatchColumn, DecimalsRoundTripAsSixteenByteTwosComplement) {
  const LogicalType type = Decimal(18, 2);
  ExpectRoundTrip(type, {Value::Decimal(12345, 18, 2), Value::Decimal(-12345, 18, 2), Value::Null(),
                         Value::Decimal(0, 18, 2), Value::Decimal(INT64_MIN, 18, 2),
                         Value::Decimal(999'999'999'999'999'999, 18, 2)});

  Column column = BuildColumn(
      type, {Value::Decimal(12345, 18, 2), Value::Decimal(-12345, 18, 2), Value::Null()});
  EXPECT_EQ(column.fixed.size(), 48u);
  EXPECT_EQ(column.Decimal128At(0), (std::pair<uint64_t, int64_t>{12345u, 0}));
  EXPECT_EQ(column.Decimal128At(1),
            (std::pair<uint64_t, int64_t>{static_cast<uint64_t>(int64_t{-12345}), -1}));
  EXPECT_EQ(column.Decimal128At(2), (std::pair<uint64_t, int64_t>{0u, 0}));
  // Read back with the column's precision and scale.
  EXPECT_EQ(column.ValueAt(1).ToJson(), "-123.45");
  EXPECT_EQ(column.ValueAt(1).decimal_precision(), 18);
  EXPECT_EQ(column.ValueAt(1).decimal_scale(), 2);
}

TEST(BatchColumn, BytesKindsRoundTripEmptyEmbeddedZerosAndNulls) {
  const std::string with_zero("a\0b", 3);
  ExpectRoundTrip(LogicalType::String(),
                  {Str("hello"), Str(""), Value::Null(), Str("wörld"), Value::String(with_zero)});
  ExpectRoundTrip(LogicalType::Binary(),
                  {Value::Binary(with_zero), Value::Null(), Value::Binary("")});
  ExpectRoundTrip(LogicalType::Uuid(), {Value::Binary(std::string(16, '\x7f')), Value::Null()});

  Column column =
      BuildColumn(LogicalType::String(), {Str("ab"), Value::Null(), Str(""), Str("cde")});
  EXPECT_THAT(column.offsets, ElementsAre(0, 2, 2, 2, 5));
  EXPECT_EQ(column.bytes, "abcde");
  EXPECT_EQ(column.BytesAt(3), "cde");
  // An empty string is present; a null is not.
  EXPECT_TRUE(column.IsValid(2));
  EXPECT_FALSE(column.IsValid(1));
}

TEST(BatchColumn, StructRowsWithMissingChildrenReadBackAsNullChildren) {
  const LogicalType type = LogicalType::Struct({MakeField(1, "a", LogicalType::Int()),
                                                MakeField(2, "b", LogicalType::String()),
                                                MakeField(3, "c", LogicalType::Double())});
  Column column = BuildColumn(
      type, {
                Obj({{"a", Value::Int(1)}, {"b", Str("x")}, {"c", Value::Double(1.5)}}),
                Obj({{"a", Value::Int(2)}}),
                Obj({}),
                Value::Null(),
                // the source's order is not the column's order
                Obj({{"c", Value::Double(2.5)}, {"b", Value::Null()}, {"a", Value::Int(3)}}),
            });
  ASSERT_EQ(column.children.size(), 3u);
  for (const Column& child : column.children) EXPECT_EQ(child.length, 5);

  EXPECT_EQ(column.ValueAt(0),
            Obj({{"a", Value::Int(1)}, {"b", Str("x")}, {"c", Value::Double(1.5)}}));
  EXPECT_EQ(column.ValueAt(1),
            Obj({{"a", Value::Int(2)}, {"b", Value::Null()}, {"c", Value::Null()}}));
  EXPECT_EQ(column.ValueAt(2),
            Obj({{"a", Value::Null()}, {"b", Value::Null()}, {"c", Value::Null()}}));
  EXPECT_TRUE(column.IsValid(2));  // an empty object is a present struct with null children
  EXPECT_EQ(column.ValueAt(3), Value::Null());
  EXPECT_FALSE(column.IsValid(3));
  EXPECT_FALSE(column.children[0].IsValid(3));
  EXPECT_EQ(column.ValueAt(4),
            Obj({{"a", Value::Int(3)}, {"b", Value::Null()}, {"c", Value::Double(2.5)}}));
}

TEST(BatchColumn, ListsRoundTripEmptyNullAndNullElements) {
  const LogicalType type = LogicalType::List(MakeField(2, "element", LogicalType::Long()));
  const std::vector<Value> rows = {Lst({Value::Int(1), Value::Int(2)}), Lst({}), Value::Null(),
                                   Lst({Value::Null(), Value::Int(-3), Value::Null()})};
  ExpectRoundTrip(type, rows);

  Column column = BuildColumn(type, rows);
  EXPECT_THAT(column.offsets, ElementsAre(0, 2, 2, 2, 5));
  ASSERT_EQ(column.children.size(), 1u);
  EXPECT_EQ(column.children[0].length, 5);
  EXPECT_FALSE(column.children[0].IsValid(2));
  EXPECT_EQ(column.children[0].Int64At(3), -3);
  // An empty list is present; a null list is not.
  EXPECT_TRUE(column.IsValid(1));
  EXPECT_FALSE(column.IsValid(2));
}

TEST(BatchColumn, MapsRoundTripKeysInOrderWithNullValues) {
  const LogicalType type = LogicalType::Map(MakeField(3, "key", LogicalType::String()),
                                            MakeField(4, "value", LogicalType::Int()));
  const std::vector<Value> rows = {Obj({{"k1", Value::Int(1)}, {"k2", Value::Null()}}), Obj({}),
                                   Value::Null(),
                                   Obj({{"z", Value::Int(9)}, {"a", Value::Int(8)}})};
  ExpectRoundTrip(type, rows);

  Column column = BuildColumn(type, rows);
  EXPECT_THAT(column.offsets, ElementsAre(0, 2, 2, 2, 4));
  ASSERT_EQ(column.children.size(), 2u);
  EXPECT_EQ(column.children[0].bytes, "k1k2za");
  EXPECT_EQ(column.children[1].length, 4);
  EXPECT_FALSE(column.children[1].IsValid(1));
}

TEST(BatchColumn, ListOfStructOfListOfStructTwoLevelsDeep) {
  // list<struct<name: string, tags: list<struct<k: string, v: long>>>>
  const LogicalType tag = LogicalType::Struct(
      {MakeField(5, "k", LogicalType::String()), MakeField(6, "v", LogicalType::Long())});
  const LogicalType item =
      LogicalType::Struct({MakeField(2, "name", LogicalType::String()),
                           MakeField(3, "tags", LogicalType::List(MakeField(4, "element", tag)))});
  const LogicalType type = LogicalType::List(MakeField(1, "element", item));
  EXPECT_EQ(type.ToString(), "list<struct<name: string, tags: list<struct<k: string, v: long>>>>");

  const Value full_tag = Obj({{"k", Str("color")}, {"v", Value::Int(7)}});
  const Value half_tag = Obj({{"k", Str("size")}, {"v", Value::Null()}});
  const std::vector<Value> rows = {
      Lst({Obj({{"name", Str("first")}, {"tags", Lst({full_tag, half_tag})}}),
           Obj({{"name", Str("second")}, {"tags", Lst({})}})}),
      Value::Null(),
      Lst({}),
      Lst({Value::Null(), Obj({{"name", Value::Null()}, {"tags", Value::Null()}}),
           Obj({{"name", Str("third")}, {"tags", Lst({Value::Null(), full_tag})}})}),
  };
  ExpectRoundTrip(type, rows);

  Column column = BuildColumn(type, rows);
  EXPECT_THAT(column.offsets, ElementsAre(0, 2, 2, 2, 5));
  const Column& items = column.children[0];
  EXPECT_EQ(items.type, item);
  EXPECT_EQ(items.length, 5);
  ASSERT_EQ(items.children.size(), 2u);
  EXPECT_EQ(items.children[0].length, 5);  // name
  const Column& tags = items.children[1];
  EXPECT_EQ(tags.length, 5);
  EXPECT_THAT(tags.offsets, ElementsAre(0, 2, 2, 2, 2, 4));
  const Column& tag_structs = tags.children[0];
  EXPECT_EQ(tag_structs.length, 4);
  EXPECT_EQ(tag_structs.children[0].bytes, "colorsizecolor");
  EXPECT_EQ(tag_structs.children[1].length, 4);
  EXPECT_FALSE(tag_structs.children[1].IsValid(1));
  EXPECT_FALSE(tag_structs.IsValid(2));

  // The expected object with every struct child spelled out.
  EXPECT_EQ(column.ValueAt(3),
            Lst({Value::Null(), Obj({{"name", Value::Null()}, {"tags", Value::Null()}}),
                 Obj({{"name", Str("third")}, {"tags", Lst({Value::Null(), full_tag})}})}));
}

// ----- batches ----------------------------------------------------------------------------------

Batch EveryKindBatch() {
  Batch batch;
  batch.namespace_name = "events";
  batch.schema_id = 3;
  batch.fields = {
      MakeField(1, "flag", LogicalType::Boolean()),
      MakeField(2, "id", LogicalType::Long(), false),
      MakeField(3, "amount", Decimal(10, 2)),
      MakeField(4, "score", LogicalType::Double()),
      MakeField(5, "name", LogicalType::String()),
      MakeField(6, "detail",
                LogicalType::Struct({MakeField(7, "x", LogicalType::Int()),
                                     MakeField(8, "y", LogicalType::Date())})),
      MakeField(9, "tags", LogicalType::List(MakeField(10, "element", LogicalType::String()))),
      MakeField(11, "attrs",
                LogicalType::Map(MakeField(12, "key", LogicalType::String()),
                                 MakeField(13, "value", LogicalType::Double()))),
  };
  for (const Field& field : batch.fields) batch.columns.emplace_back(field.type);
  return batch;
}

void AppendRow(Batch& batch, const Value& row) {
  for (size_t i = 0; i < batch.fields.size(); ++i) {
    const Value* value = row.Find(batch.fields[i].name);
    batch.columns[i].Append(value ? *value : Value::Null());
  }
  ++batch.num_rows;
}

TEST(Batch, RowsOfEveryKindRoundTripThroughRowAt) {
  Batch batch = EveryKindBatch();
  const Value full = Obj({
      {"flag", Value::Bool(true)},
      {"id", Value::Int(INT64_MAX)},
      {"amount", Value::Decimal(-1999, 10, 2)},
      {"score", Value::Double(0.25)},
      {"name", Str("ada")},
      {"detail", Obj({{"x", Value::Int(-5)}, {"y", Value::Date(19737)}})},
      {"tags", Lst({Str("a"), Value::Null(), Str("")})},
      {"attrs", Obj({{"w", Value::Double(1.5)}, {"h", Value::Null()}})},
  });
  const Value nulls = Obj({
      {"flag", Value::Null()},
      {"id", Value::Int(0)},
      {"amount", Value::Null()},
      {"score", Value::Null()},
      {"name", Value::Null()},
      {"detail", Value::Null()},
      {"tags", Value::Null()},
      {"attrs", Value::Null()},
  });
  const Value partial = Obj({
      {"flag", Value::Bool(false)},
      {"id", Value::Int(-1)},
      {"amount", Value::Decimal(5, 10, 2)},
      {"score", Value::Null()},
      {"name", Str("")},
      {"detail", Obj({{"x", Value::Null()}, {"y", Value::Null()}})},
      {"tags", Lst({})},
      {"attrs", Obj({})},
  });
  AppendRow(batch, full);
  AppendRow(batch, nulls);
  AppendRow(batch, partial);

  std::string reason;
  EXPECT_TRUE(batch.Validate(&reason)) << reason;
  EXPECT_EQ(batch.num_rows, 3);
  EXPECT_EQ(batch.RowAt(0), full);
  EXPECT_EQ(batch.RowAt(1), nulls);
  EXPECT_EQ(batch.RowAt(2), partial);
  EXPECT_EQ(batch.RowAt(0).ToJson(),
            R"({"flag":true,"id":9223372036854775807,"amount":-19.99,"score":0.25,"name":"ada",)"
            R"("detail":{"x":-5,"y":19737},"tags":["a",null,""],"attrs":{"w":1.5,"h":null}})");
}

TEST(Batch, EmptyBatchValidates) {
  Batch batch = EveryKindBatch();
  std::string reason;
  EXPECT_TRUE(batch.Validate(&reason)) << reason;
  EXPECT_TRUE(Batch{}.Validate(&reason)) << reason;
  EXPECT_TRUE(batch.Validate(nullptr));
}

// ----- Validate on damaged columns --------------------------------------------------------------

Column ThreeStrings() {
  return BuildColumn(LogicalType::String(), {Str("ab"), Value::Null(), Str("cde")});
}

TEST(BatchValidate, DecreasingOffsetsFailWithAReason) {
  Column column = ThreeStrings();
  column.offsets[1] = 4;  // 0, 4, 2, 5
  std::string reason;
  EXPECT_FALSE(column.Validate(&reason));
  EXPECT_EQ(reason, "string column: offsets decrease");
  EXPECT_FALSE(column.Validate(nullptr));
}

TEST(BatchValidate, WrongOffsetCountOrStartFails) {
  Column missing = ThreeStrings();
  missing.offsets.pop_back();
  std::string reason;
  EXPECT_FALSE(missing.Validate(&reason));
  EXPECT_EQ(reason, "string column: offsets");

  Column shifted = ThreeStrings();
  shifted.offsets[0] = 1;
  reason.clear();
  EXPECT_FALSE(shifted.Validate(&reason));
  EXPECT_EQ(reason, "string column: offsets");
}

TEST(BatchValidate, OffsetsThatDoNotEndAtTheBytesFail) {
  Column column = ThreeStrings();
  column.bytes += "zz";
  std::string reason;
  EXPECT_FALSE(column.Validate(&reason));
  EXPECT_EQ(reason, "string column: bytes");
}

TEST(BatchValidate, WrongValidityOrFixedSizeFails) {
  Column validity = BuildColumn(LogicalType::Long(), {Value::Int(1), Value::Int(2)});
  validity.validity.push_back(0xff);
  std::string reason;
  EXPECT_FALSE(validity.Validate(&reason));
  EXPECT_EQ(reason, "long column: validity size");

  Column fixed = BuildColumn(LogicalType::Long(), {Value::Int(1), Value::Int(2)});
  fixed.fixed.resize(12);
  reason.clear();
  EXPECT_FALSE(fixed.Validate(&reason));
  EXPECT_EQ(reason, "long column: fixed size");
}

TEST(BatchValidate, ListChildLengthMustMatchTheLastOffset) {
  Column column = BuildColumn(LogicalType::List(MakeField(2, "element", LogicalType::Int())),
                              {Lst({Value::Int(1), Value::Int(2)}), Lst({Value::Int(3)})});
  column.children[0].Append(Value::Int(4));  // an element no offset covers
  std::string reason;
  EXPECT_FALSE(column.Validate(&reason));
  EXPECT_EQ(reason, "list<int> column: child length");
}

TEST(BatchValidate, MapKeysAndValuesMustMatchTheLastOffset) {
  Column column = BuildColumn(LogicalType::Map(MakeField(3, "key", LogicalType::String()),
                                               MakeField(4, "value", LogicalType::Long())),
                              {Obj({{"a", Value::Int(1)}})});
  column.children[1].AppendNull();
  std::string reason;
  EXPECT_FALSE(column.Validate(&reason));
  EXPECT_EQ(reason, "map<string, long> column: child length");
}

TEST(BatchValidate, StructChildLengthMustMatchTheStruct) {
  Column column = BuildColumn(LogicalType::Struct({MakeField(1, "a", LogicalType::Int()),
                                                   MakeField(2, "b", LogicalType::String())}),
                              {Obj({{"a", Value::Int(1)}}), Obj({{"b", Str("x")}})});
  column.children[1].AppendNull();
  std::string reason;
  EXPECT_FALSE(column.Validate(&reason));
  EXPECT_EQ(reason, "struct<a: int, b: string> column: struct child length");
}

TEST(BatchValidate, DamageDeepInsideANestedColumnIsFound) {
  Column column = BuildColumn(
      LogicalType::List(
          MakeField(1, "element", LogicalType::Struct({MakeField(2, "s", LogicalType::String())}))),
      {Lst({Obj({{"s", Str("abc")}})})});
  column.children[0].children[0].offsets[1] = 2;  // 3 bytes, but the offsets end at 2
  std::string reason;
  EXPECT_FALSE(column.Validate(&reason));
  EXPECT_EQ(reason, "string column: bytes");
}

TEST(BatchValidate, BatchLevelMismatchesFailWithAReason) {
  Batch batch = EveryKindBatch();
  AppendRow(batch, Obj({{"id", Value::Int(1)}}));
  AppendRow(batch, Obj({{"id", Value::Int(2)}}));
  std::string reason;
  ASSERT_TRUE(batch.Validate(&reason)) << reason;

  Batch short_column = batch;
  short_column.num_rows = 3;
  EXPECT_FALSE(short_column.Validate(&reason));
  EXPECT_EQ(reason, "a column has 2 rows, the batch 3");

  Batch extra_field = batch;
  extra_field.fields.push_back(MakeField(99, "extra", LogicalType::Int()));
  EXPECT_FALSE(extra_field.Validate(&reason));
  EXPECT_EQ(reason, "fields and columns differ in number");

  Batch cdc = batch;
  cdc.cdc = CdcSidecar{};
  cdc.cdc->mutations = {Mutation::kInsert};
  EXPECT_FALSE(cdc.Validate(&reason));
  EXPECT_EQ(reason, "CDC sidecar length differs from the batch");
  cdc.cdc->mutations.push_back(Mutation::kDelete);
  EXPECT_TRUE(cdc.Validate(&reason)) << reason;

  Batch damaged = batch;
  damaged.columns[4].offsets.back() = 1;  // "name": offsets end past the (empty) bytes
  EXPECT_FALSE(damaged.Validate(&reason));
  EXPECT_EQ(reason, "string column: bytes");
}

// ----- PadNullsTo and ConvertInt64ToDouble
// --------------------------------------------------------

TEST(BatchColumn, PadNullsToBringsAColumnAddedMidBatchUpToLength) {
  Column scalar = BuildColumn(LogicalType::Int(), {Value::Int(5)});
  scalar.PadNullsTo(11);
  EXPECT_EQ(scalar.length, 11);
  EXPECT_EQ(scalar.validity.size(), 2u);
  EXPECT_EQ(scalar.ValueAt(0), Value::Int(5));
  for (int64_t row = 1; row < 11; ++row) EXPECT_EQ(scalar.ValueAt(row), Value::Null()) << row;
  std::string reason;
  EXPECT_TRUE(scalar.Validate(&reason)) << reason;

  scalar.PadNullsTo(3);  // already longer: nothing happens
  EXPECT_EQ(scalar.length, 11);

  const LogicalType nested = LogicalType::Struct(
      {MakeField(1, "l", LogicalType::List(MakeField(2, "element", LogicalType::String()))),
       MakeField(3, "m",
                 LogicalType::Map(MakeField(4, "key", LogicalType::String()),
                                  MakeField(5, "value", LogicalType::Int())))});
  Column empty(nested);
  empty.PadNullsTo(3);
  EXPECT_EQ(empty.length, 3);
  EXPECT_TRUE(empty.Validate(&reason)) << reason;
  EXPECT_EQ(empty.children[0].length, 3);
  EXPECT_THAT(empty.children[0].offsets, ElementsAre(0, 0, 0, 0));
  EXPECT_EQ(empty.children[0].children[0].length, 0);
  for (int64_t row = 0; row < 3; ++row) EXPECT_EQ(empty.ValueAt(row), Value::Null());

  // Appending after the padding lands on the right row.
  empty.Append(Obj({{"l", Lst({Str("x")})}, {"m", Obj({{"k", Value::Int(1)}})}}));
  EXPECT_TRUE(empty.Validate(&reason)) << reason;
  EXPECT_EQ(empty.ValueAt(3), Obj({{"l", Lst({Str("x")})}, {"m", Obj({{"k", Value::Int(1)}})}}));
}

// A run filled in place reads as the same rows appended one by one; the rows taken back leave
// nothing behind.
TEST(BatchColumn, ARunFilledInPlaceEqualsTheSameRowsAppended) {
  Column appended = BuildColumn(LogicalType::Long(), {Value::Int(7)});
  Column filled = appended;
  const std::vector<std::optional<int64_t>> run = {3, std::nullopt, -9, INT64_MIN, std::nullopt,
                                                   42, 0, 8, 1};
  for (const std::optional<int64_t>& value : run) {
    appended.Append(value ? Value::Int(*value) : Value::Null());
  }
  uint8_t* out = filled.AppendNullFixedRows(static_cast<int64_t>(run.size()) + 6);
  EXPECT_EQ(filled.length, 1 + static_cast<int64_t>(run.size()) + 6);
  for (size_t i = 0; i < run.size(); ++i) {
    if (!run[i]) continue;
    std::memcpy(out + i * 8, &*run[i], 8);
    filled.SetPresent(1 + static_cast<int64_t>(i));
  }
  filled.SetPresent(filled.length - 1);  // a row past the run, taken back below
  filled.TruncateTo(1 + static_cast<int64_t>(run.size()));
  std::string reason;
  ASSERT_TRUE(filled.Validate(&reason)) << reason;
  EXPECT_EQ(filled.validity, appended.validity);
  EXPECT_EQ(filled.fixed, appended.fixed);
  for (int64_t row = 0; row < filled.length; ++row) {
    EXPECT_EQ(filled.ValueAt(row), appended.ValueAt(row)) << row;
  }
  // Appending after the run lands on the right row.
  filled.AppendInt64(5);
  EXPECT_EQ(filled.ValueAt(filled.length - 1), Value::Int(5));
  EXPECT_TRUE(filled.Validate(&reason)) << reason;
}

TEST(BatchColumn, ConvertInt64ToDoubleRewritesValuesAndKeepsNulls) {
  Column column = BuildColumn(
      LogicalType::Int(), {Value::Int(1), Value::Null(), Value::Int(-3), Value::Int(INT32_MAX)});
  column.ConvertInt64ToDouble();
  EXPECT_EQ(column.type.ToString(), "double");
  EXPECT_EQ(column.DoubleAt(0), 1.0);
  EXPECT_EQ(column.DoubleAt(2), -3.0);
  EXPECT_EQ(column.DoubleAt(3), 2147483647.0);
  EXPECT_EQ(column.ValueAt(0), Value::Double(1.0));
  EXPECT_EQ(column.ValueAt(1), Value::Null());
  EXPECT_EQ(column.ValueAt(2), Value::Double(-3.0));
  std::string reason;
  EXPECT_TRUE(column.Validate(&reason)) << reason;

  // The widened column keeps taking doubles.
  column.Append(Value::Double(2.5));
  EXPECT_EQ(column.ValueAt(4), Value::Double(2.5));
}

// ----- ValueFitsColumn --------------------------------------------------------------------------

TEST(BatchValueFitsColumn, NullFitsEveryColumn) {
  for (const LogicalType& type :
       {LogicalType::Boolean(), LogicalType::Int(), Decimal(10, 2), LogicalType::String(),
        LogicalType::Struct({MakeField(1, "a", LogicalType::Int())}),
        LogicalType::List(MakeField(1, "element", LogicalType::Int()))}) {
    EXPECT_TRUE(ValueFitsColumn(Value::Null(), type)) << type.ToString();
  }
}

TEST(BatchValueFitsColumn, ScalarsFitOnlyTheirExactKind) {
  EXPECT_TRUE(ValueFitsColumn(Value::Bool(true), LogicalType::Boolean()));
  EXPECT_FALSE(ValueFitsColumn(Value::Int(1), LogicalType::Boolean()));

  EXPECT_TRUE(ValueFitsColumn(Value::Int(INT32_MAX), LogicalType::Int()));
  EXPECT_TRUE(ValueFitsColumn(Value::Int(INT32_MIN), LogicalType::Int()));
  EXPECT_FALSE(ValueFitsColumn(Value::Int(int64_t{INT32_MAX} + 1), LogicalType::Int()));
  EXPECT_FALSE(ValueFitsColumn(Value::Int(int64_t{INT32_MIN} - 1), LogicalType::Int()));
  EXPECT_TRUE(ValueFitsColumn(Value::Int(3'000'000'000), LogicalType::Long()));
  EXPECT_FALSE(ValueFitsColumn(Value::Double(1.0), LogicalType::Long()));
  EXPECT_FALSE(ValueFitsColumn(Str("1"), LogicalType::Long()));
  EXPECT_TRUE(ValueFitsColumn(Value::Int(5), LogicalType::Time()));

  EXPECT_TRUE(ValueFitsColumn(Value::Double(1.5), LogicalType::Double()));
  EXPECT_TRUE(ValueFitsColumn(Value::Int(2), LogicalType::Double()));
  EXPECT_TRUE(ValueFitsColumn(Value::Double(1.5), LogicalType::Float()));
  EXPECT_FALSE(ValueFitsColumn(Str("1.5"), LogicalType::Double()));

  EXPECT_TRUE(ValueFitsColumn(Value::Decimal(123, 10, 2), Decimal(10, 2)));
  EXPECT_FALSE(ValueFitsColumn(Value::Decimal(123, 10, 3), Decimal(10, 2)));
  EXPECT_FALSE(ValueFitsColumn(Value::Int(123), Decimal(10, 2)));

  EXPECT_TRUE(ValueFitsColumn(Value::Date(1), LogicalType::Date()));
  EXPECT_FALSE(ValueFitsColumn(Value::Date(1), LogicalType::Timestamp()));
  EXPECT_TRUE(ValueFitsColumn(Value::Timestamp(1), LogicalType::Timestamp()));
  EXPECT_FALSE(ValueFitsColumn(Value::Timestamp(1), LogicalType::TimestampTz()));
  EXPECT_TRUE(ValueFitsColumn(Value::TimestampTz(1), LogicalType::TimestampTz()));
  EXPECT_FALSE(ValueFitsColumn(Value::Int(1), LogicalType::Timestamp()));

  EXPECT_TRUE(ValueFitsColumn(Str("x"), LogicalType::String()));
  EXPECT_FALSE(ValueFitsColumn(Value::Binary("x"), LogicalType::String()));
  EXPECT_FALSE(ValueFitsColumn(Value::Int(1), LogicalType::String()));
  EXPECT_TRUE(ValueFitsColumn(Value::Binary("x"), LogicalType::Binary()));
  EXPECT_TRUE(ValueFitsColumn(Value::Binary("x"), LogicalType::Uuid()));
  EXPECT_FALSE(ValueFitsColumn(Str("x"), LogicalType::Binary()));
}

TEST(BatchValueFitsColumn, NestedValuesFitWhenEveryPartFits) {
  const LogicalType point = LogicalType::Struct(
      {MakeField(1, "x", LogicalType::Int()), MakeField(2, "label", LogicalType::String())});
  EXPECT_TRUE(ValueFitsColumn(Obj({{"x", Value::Int(1)}, {"label", Str("a")}}), point));
  EXPECT_TRUE(
      ValueFitsColumn(Obj({{"x", Value::Int(1)}}), point));  // a missing child reads as null
  EXPECT_TRUE(ValueFitsColumn(Obj({{"label", Value::Null()}}), point));
  EXPECT_FALSE(ValueFitsColumn(Obj({{"x", Str("1")}}), point));
  EXPECT_FALSE(ValueFitsColumn(Obj({{"x", Value::Int(3'000'000'000)}}), point));
  EXPECT_FALSE(ValueFitsColumn(Value::Int(1), point));
  EXPECT_FALSE(ValueFitsColumn(Lst({}), point));

  const LogicalType longs = LogicalType::List(MakeField(3, "element", LogicalType::Long()));
  EXPECT_TRUE(ValueFitsColumn(Lst({}), longs));
  EXPECT_TRUE(ValueFitsColumn(Lst({Value::Int(1), Value::Null()}), longs));
  EXPECT_FALSE(ValueFitsColumn(Lst({Value::Int(1), Str("2")}), longs));
  EXPECT_FALSE(ValueFitsColumn(Obj({}), longs));

  const LogicalType points = LogicalType::List(MakeField(4, "element", point));
  EXPECT_TRUE(ValueFitsColumn(Lst({Obj({{"x", Value::Int(1)}}), Value::Null()}), points));
  EXPECT_FALSE(ValueFitsColumn(Lst({Obj({{"x", Value::Double(1.5)}})}), points));

  const LogicalType map = LogicalType::Map(MakeField(5, "key", LogicalType::String()),
                                           MakeField(6, "value", LogicalType::Double()));
  EXPECT_TRUE(ValueFitsColumn(
      Obj({{"a", Value::Double(1)}, {"b", Value::Int(2)}, {"c", Value::Null()}}), map));
  EXPECT_FALSE(ValueFitsColumn(Obj({{"a", Str("1")}}), map));
  EXPECT_FALSE(ValueFitsColumn(Lst({}), map));
}

// Appending a column equals appending its values one by one, at any bit offset, for every layout
// (nested ones included), and an int column appends to a long one.
TEST(BatchColumn, AppendingAColumnEqualsAppendingItsValues) {
  const LogicalType list = LogicalType::List(Field{1, "element", LogicalType::String(), true});
  const LogicalType record = LogicalType::Struct({Field{2, "a", LogicalType::Long(), true},
                                                  Field{3, "b", list, true}});
  const std::vector<std::pair<LogicalType, std::vector<Value>>> cases = {
      {LogicalType::Long(), {Value::Int(1), Value::Null(), Value::Int(-5), Value::Int(7)}},
      {LogicalType::Boolean(), {Value::Bool(true), Value::Null(), Value::Bool(false)}},
      {LogicalType::Decimal(12, 2).value(), {Value::Decimal(-12345, 12, 2), Value::Null()}},
      {LogicalType::String(), {Value::String(""), Value::String("ab"), Value::Null()}},
      {list, {Value::List({Value::String("x"), Value::Null()}), Value::Null(), Value::List({})}},
      {record,
       {Value::Object({{"a", Value::Int(3)}, {"b", Value::List({Value::String("y")})}}),
        Value::Null(), Value::Object({{"a", Value::Null()}})}},
  };
  for (const auto& [type, values] : cases) {
    for (size_t already = 0; already < 11; ++already) {
      Column appended(type);
      Column expected(type);
      for (size_t i = 0; i < already; ++i) {
        appended.Append(values[i % values.size()]);
        expected.Append(values[i % values.size()]);
      }
      Column other(type);
      for (size_t i = 0; i < 13; ++i) {
        other.Append(values[(i * 7) % values.size()]);
        expected.Append(values[(i * 7) % values.size()]);
      }
      appended.AppendColumn(other);
      std::string reason;
      ASSERT_TRUE(appended.Validate(&reason)) << type.ToString() << ": " << reason;
      ASSERT_EQ(appended.length, expected.length);
      for (int64_t row = 0; row < expected.length; ++row) {
        EXPECT_EQ(appended.ValueAt(row), expected.ValueAt(row))
            << type.ToString() << " after " << already << " rows, row " << row;
      }
      EXPECT_EQ(appended.validity, expected.validity) << type.ToString() << " after " << already;
    }
  }
  Column longs(LogicalType::Long());
  longs.AppendInt64(int64_t{1} << 40);
  Column ints(LogicalType::Int());
  ints.AppendInt64(-3);
  ints.AppendNull();
  longs.AppendColumn(ints);
  EXPECT_EQ(longs.type, LogicalType::Long());
  EXPECT_EQ(longs.ValueAt(1), Value::Int(-3));
  EXPECT_TRUE(longs.ValueAt(2).is_null());
}

TEST(BatchPackedStrings, HoldStringsEndToEndAndAppendOthers) {
  PackedStrings strings = {"", "ab", std::string_view("\0c", 2)};
  strings.bytes() += "de";
  strings.bytes() += "f";
  strings.EndString();
  ASSERT_EQ(strings.size(), 4u);
  EXPECT_EQ(strings[0], "");
  EXPECT_EQ(strings[2], std::string_view("\0c", 2));
  EXPECT_EQ(strings[3], "def");
  PackedStrings more = {"g", ""};
  strings.Append(more);
  ASSERT_EQ(strings.size(), 6u);
  EXPECT_EQ(strings[4], "g");
  EXPECT_EQ(strings[5], "");
  EXPECT_EQ(strings.offsets().back(), static_cast<int64_t>(strings.text().size()));
  EXPECT_EQ(strings, (PackedStrings{"", "ab", std::string_view("\0c", 2), "def", "g", ""}));
}

}  // namespace
}  // namespace skippr
