// Logical types, aligned with Iceberg's (DESIGN.md §5). Every field carries a stable integer id:
// Iceberg needs it, the Parquet files carry it, and schema evolution never reuses one.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.hpp"

namespace skippr {

enum class TypeId : uint8_t {
  kBoolean,
  kInt,   // 32-bit signed
  kLong,  // 64-bit signed
  kFloat,
  kDouble,
  kDecimal,      // precision <= 38
  kDate,         // days since 1970-01-01
  kTime,         // microseconds since midnight
  kTimestamp,    // microseconds since epoch, no zone
  kTimestampTz,  // microseconds since epoch, UTC
  kString,
  kBinary,
  kUuid,
  kStruct,
  kList,
  kMap,
};

struct Field;

class LogicalType {
 public:
  static LogicalType Boolean() { return LogicalType(TypeId::kBoolean); }
  static LogicalType Int() { return LogicalType(TypeId::kInt); }
  static LogicalType Long() { return LogicalType(TypeId::kLong); }
  static LogicalType Float() { return LogicalType(TypeId::kFloat); }
  static LogicalType Double() { return LogicalType(TypeId::kDouble); }
  static LogicalType Date() { return LogicalType(TypeId::kDate); }
  static LogicalType Time() { return LogicalType(TypeId::kTime); }
  static LogicalType Timestamp() { return LogicalType(TypeId::kTimestamp); }
  static LogicalType TimestampTz() { return LogicalType(TypeId::kTimestampTz); }
  static LogicalType String() { return LogicalType(TypeId::kString); }
  static LogicalType Binary() { return LogicalType(TypeId::kBinary); }
  static LogicalType Uuid() { return LogicalType(TypeId::kUuid); }
  static Result<LogicalType> Decimal(int precision, int scale);
  static LogicalType Struct(std::vector<Field> fields);
  static LogicalType List(Field element);
  static LogicalType Map(Field key, Field value);

  TypeId id() const { return id_; }
  bool is_nested() const {
    return id_ == TypeId::kStruct || id_ == TypeId::kList || id_ == TypeId::kMap;
  }
  int decimal_precision() const { return precision_; }
  int decimal_scale() const { return scale_; }
  // Struct: its fields. List: {element}. Map: {key, value}. Primitives: empty.
  const std::vector<Field>& children() const;
  // For evolving a nested type in place: copies the children first when another LogicalType shares
  // them (copy on write), so types handed out earlier (to a Batch, say) never change under it.
  std::vector<Field>& mutable_children();

  // The compact human form used in messages and `schema` output: "long", "decimal(10, 2)",
  // "struct<a: int, b: string>", "list<string>".
  std::string ToString() const;

  friend bool operator==(const LogicalType& a, const LogicalType& b);
  friend bool operator!=(const LogicalType& a, const LogicalType& b) { return !(a == b); }

 private:
  explicit LogicalType(TypeId id) : id_(id) {}
  TypeId id_;
  int precision_ = 0;
  int scale_ = 0;
  std::shared_ptr<std::vector<Field>> children_;
};

struct Field {
  int32_t id = 0;
  std::string name;
  LogicalType type = LogicalType::String();
  bool nullable = true;

  friend bool operator==(const Field& a, const Field& b) {
    return a.id == b.id && a.name == b.name && a.type == b.type && a.nullable == b.nullable;
  }
};

// Parses a primitive type name as users write it in skippr.yml (`cast`) and `metadata apply`:
// boolean|bool, int|integer, long|bigint, float, double, decimal(p,s), date, time, timestamp,
// timestamptz, string|varchar|text, binary, uuid. Nested types are not written by hand.
Result<LogicalType> ParseLogicalType(std::string_view text);

// The names ParseLogicalType accepts, for error messages.
std::string_view PrimitiveTypeNames();

// Iceberg's allowed type promotions: int→long, float→double, decimal(p,s)→decimal(p2,s) with p2>=p.
bool CanPromote(const LogicalType& from, const LogicalType& to);

}  // namespace skippr
