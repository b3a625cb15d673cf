// A dynamically typed value: what sources hand over before a record is shaped by the schema.
// JSON and CSV produce untyped scalars (kInt from any integer literal, kString from text); typed
// sources (the sample generator, Parquet) produce the kinds that match their declared types.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace skippr {

class Value;
using ValueList = std::vector<Value>;
using ValueObject = std::vector<std::pair<std::string, Value>>;  // keeps the source's field order

class Value {
 public:
  enum class Kind : uint8_t {
    kNull,
    kBool,
    kInt,  // int64
    kDouble,
    kString,
    kBinary,       // bytes, in the string payload
    kDate,         // days since 1970-01-01, in the integer payload
    kTimestamp,    // microseconds since epoch, no zone
    kTimestampTz,  // microseconds since epoch, UTC
    kDecimal,      // unscaled int64 with precision/scale (precision <= 18)
    kList,
    kObject,
  };

  Value() = default;
  static Value Null() { return Value(); }
  static Value Bool(bool v) { return Value(Kind::kBool, v ? 1 : 0); }
  static Value Int(int64_t v) { return Value(Kind::kInt, v); }
  static Value Double(double v);
  static Value String(std::string v);
  static Value Binary(std::string bytes);
  static Value Date(int32_t days) { return Value(Kind::kDate, days); }
  static Value Timestamp(int64_t micros) { return Value(Kind::kTimestamp, micros); }
  static Value TimestampTz(int64_t micros) { return Value(Kind::kTimestampTz, micros); }
  static Value Decimal(int64_t unscaled, uint8_t precision, uint8_t scale);
  static Value List(ValueList items);
  static Value Object(ValueObject fields);

  Kind kind() const { return kind_; }
  bool is_null() const { return kind_ == Kind::kNull; }
  bool as_bool() const { return integer_ != 0; }
  int64_t as_int() const { return integer_; }  // kInt, kDate, kTimestamp*, kDecimal (unscaled)
  double as_double() const { return real_; }
  const std::string& as_string() const { return text_; }  // kString, kBinary
  uint8_t decimal_precision() const { return precision_; }
  uint8_t decimal_scale() const { return scale_; }
  const ValueList& as_list() const { return list_; }
  ValueList& mutable_list() { return list_; }
  const ValueObject& as_object() const { return object_; }
  ValueObject& mutable_object() { return object_; }

  // A field of an object by name, or nullptr.
  const Value* Find(std::string_view name) const;

  // Compact JSON-like text, for messages and deadletter payloads.
  std::string ToJson() const;

  friend bool operator==(const Value& a, const Value& b);

 private:
  Value(Kind kind, int64_t integer) : kind_(kind), integer_(integer) {}
  Kind kind_ = Kind::kNull;
  uint8_t precision_ = 0;
  uint8_t scale_ = 0;
  int64_t integer_ = 0;
  double real_ = 0;
  std::string text_;
  ValueList list_;
  ValueObject object_;
};

// Inline: sources build a Value per field of every record.
inline Value Value::Double(double v) {
  Value value(Kind::kDouble, 0);
  value.real_ = v;
  return value;
}

inline Value Value::String(std::string v) {
  Value value(Kind::kString, 0);
  value.text_ = std::move(v);
  return value;
}

inline Value Value::Binary(std::string bytes) {
  Value value(Kind::kBinary, 0);
  value.text_ = std::move(bytes);
  return value;
}

inline Value Value::Decimal(int64_t unscaled, uint8_t precision, uint8_t scale) {
  Value value(Kind::kDecimal, unscaled);
  value.precision_ = precision;
  value.scale_ = scale;
  return value;
}

inline Value Value::List(ValueList items) {
  Value value(Kind::kList, 0);
  value.list_ = std::move(items);
  return value;
}

inline Value Value::Object(ValueObject fields) {
  Value value(Kind::kObject, 0);
  value.object_ = std::move(fields);
  return value;
}

std::string_view ValueKindName(Value::Kind kind);

}  // namespace skippr
