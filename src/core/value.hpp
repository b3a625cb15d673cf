// A dynamically typed value: what sources hand over before a record is shaped by the schema.
// JSON and CSV produce untyped scalars (kInt from any integer literal, kString from text); typed
// sources (the sample generator, Parquet) produce the kinds that match their declared types.
#pragma once

#include <cstdint>
#include <new>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/check.hpp"

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
    kDecimal,      // unscaled 128-bit integer with precision/scale (precision <= 38)
    kList,
    kObject,
  };

  Value() noexcept : integer_(0) {}
  Value(const Value& other) { ConstructFrom(other); }
  Value(Value&& other) noexcept { ConstructFrom(std::move(other)); }
  Value& operator=(const Value& other);
  Value& operator=(Value&& other) noexcept;
  ~Value() { Destroy(); }

  static Value Null() { return Value(); }
  static Value Bool(bool v) { return Value(Kind::kBool, v ? 1 : 0); }
  static Value Int(int64_t v) { return Value(Kind::kInt, v); }
  static Value Double(double v);
  static Value String(std::string v);
  static Value Binary(std::string bytes);
  static Value Date(int32_t days) { return Value(Kind::kDate, days); }
  static Value Timestamp(int64_t micros) { return Value(Kind::kTimestamp, micros); }
  static Value TimestampTz(int64_t micros) { return Value(Kind::kTimestampTz, micros); }
  // Every decimal(p<=38, s) value: 10^38 - 1 needs 127 bits.
  static Value Decimal(__int128 unscaled, uint8_t precision, uint8_t scale);
  static Value List(ValueList items);
  static Value Object(ValueObject fields);

  Kind kind() const { return kind_; }
  bool is_null() const { return kind_ == Kind::kNull; }
  // Each accessor answers 0 / empty for a value of another kind.
  bool as_bool() const { return as_int() != 0; }
  int64_t as_int() const { return HoldsInteger() ? integer_ : 0; }  // kInt, kDate, kTimestamp*, kBool
  // The unscaled value of a kDecimal (0 for other kinds); as_int() does not answer for decimals,
  // whose unscaled values may need more than 64 bits.
  __int128 decimal_unscaled() const {
    if (kind_ != Kind::kDecimal) return 0;
    return static_cast<__int128>(static_cast<unsigned __int128>(decimal_.low) |
                                 static_cast<unsigned __int128>(decimal_.high) << 64);
  }
  double as_double() const { return kind_ == Kind::kDouble ? real_ : 0; }
  const std::string& as_string() const { return HoldsText() ? text_ : EmptyText(); }  // kString, kBinary
  uint8_t decimal_precision() const { return precision_; }
  uint8_t decimal_scale() const { return scale_; }
  const ValueList& as_list() const { return kind_ == Kind::kList ? list_ : EmptyList(); }
  const ValueObject& as_object() const { return kind_ == Kind::kObject ? object_ : EmptyObject(); }
  // Only for a value of that kind.
  ValueList& mutable_list() {
    SKIPPR_CHECK(kind_ == Kind::kList);
    return list_;
  }
  ValueObject& mutable_object() {
    SKIPPR_CHECK(kind_ == Kind::kObject);
    return object_;
  }

  // A field of an object by name, or nullptr.
  const Value* Find(std::string_view name) const;

  // Compact JSON-like text, for messages and deadletter payloads.
  std::string ToJson() const;

  friend bool operator==(const Value& a, const Value& b);

 private:
  Value(Kind kind, int64_t integer) : kind_(kind), integer_(integer) {}
  bool HoldsText() const { return kind_ == Kind::kString || kind_ == Kind::kBinary; }
  bool HoldsInteger() const {
    return kind_ != Kind::kDouble && kind_ != Kind::kDecimal && !HoldsHeap();
  }
  bool HoldsHeap() const { return HoldsText() || kind_ == Kind::kList || kind_ == Kind::kObject; }
  static const std::string& EmptyText();
  static const ValueList& EmptyList();
  static const ValueObject& EmptyObject();
  template <typename Other>  // const Value& or Value&&
  void ConstructFrom(Other&& other);
  void Destroy();

  // One payload per value, chosen by the kind: sources build a Value per field of every record,
  // and a small Value (40 bytes) keeps building, moving and freeing those cheap.
  Kind kind_ = Kind::kNull;
  uint8_t precision_ = 0;
  uint8_t scale_ = 0;
  // Two halves rather than an __int128 member: 8-byte alignment keeps a Value at 40 bytes.
  struct DecimalBits {
    uint64_t low;
    int64_t high;
  };
  union {
    int64_t integer_;  // kNull (0), kBool, kInt, kDate, kTimestamp*
    double real_;
    DecimalBits decimal_;  // kDecimal
    std::string text_;
    ValueList list_;
    ValueObject object_;
  };
};

// Inline: sources build, move and free a Value per field of every record.
template <typename Other>
void Value::ConstructFrom(Other&& other) {
  kind_ = other.kind_;
  precision_ = other.precision_;
  scale_ = other.scale_;
  switch (kind_) {
    case Kind::kString:
    case Kind::kBinary:
      new (&text_) std::string(std::forward<Other>(other).text_);
      break;
    case Kind::kList:
      new (&list_) ValueList(std::forward<Other>(other).list_);
      break;
    case Kind::kObject:
      new (&object_) ValueObject(std::forward<Other>(other).object_);
      break;
    case Kind::kDouble:
      real_ = other.real_;
      break;
    case Kind::kDecimal:
      decimal_ = other.decimal_;
      break;
    default:
      integer_ = other.integer_;
  }
}

inline void Value::Destroy() {
  switch (kind_) {
    case Kind::kString:
    case Kind::kBinary:
      text_.~basic_string();
      break;
    case Kind::kList:
      list_.~vector();
      break;
    case Kind::kObject:
      object_.~vector();
      break;
    default:
      break;
  }
}

inline Value& Value::operator=(const Value& other) {
  if (this != &other) {
    Value copy(other);  // first: `other` may live inside this value
    *this = std::move(copy);
  }
  return *this;
}

inline Value& Value::operator=(Value&& other) noexcept {
  if (!HoldsHeap() && !other.HoldsHeap()) {
    ConstructFrom(other);  // nothing to free
  } else if (this != &other) {
    Value moved;
    moved.ConstructFrom(std::move(other));  // first: `other` may live inside this value
    Destroy();
    ConstructFrom(std::move(moved));
  }
  return *this;
}

inline Value Value::Double(double v) {
  Value value;
  value.kind_ = Kind::kDouble;
  value.real_ = v;
  return value;
}

inline Value Value::String(std::string v) {
  Value value;
  value.kind_ = Kind::kString;
  new (&value.text_) std::string(std::move(v));
  return value;
}

inline Value Value::Binary(std::string bytes) {
  Value value = String(std::move(bytes));
  value.kind_ = Kind::kBinary;
  return value;
}

inline Value Value::Decimal(__int128 unscaled, uint8_t precision, uint8_t scale) {
  Value value;
  value.kind_ = Kind::kDecimal;
  const auto bits = static_cast<unsigned __int128>(unscaled);
  value.decimal_ = DecimalBits{static_cast<uint64_t>(bits), static_cast<int64_t>(bits >> 64)};
  value.precision_ = precision;
  value.scale_ = scale;
  return value;
}

inline Value Value::List(ValueList items) {
  Value value;
  value.kind_ = Kind::kList;
  new (&value.list_) ValueList(std::move(items));
  return value;
}

inline Value Value::Object(ValueObject fields) {
  Value value;
  value.kind_ = Kind::kObject;
  new (&value.object_) ValueObject(std::move(fields));
  return value;
}

static_assert(sizeof(Value) <= 40, "a Value per field of every record: keep it small");

std::string_view ValueKindName(Value::Kind kind);

// An entity's business key as change-data-capture sources encode it (CdcSidecar::business_keys):
// its key values' JSON in an array, "[7,\"eu\"]"; `key_value(i)` is the i-th of `key_count`. The
// aggregates find an entity by these bytes, so every writer of a key goes through here.
template <typename KeyValue>
std::string BusinessKeyOf(size_t key_count, KeyValue&& key_value) {
  std::string key = "[";
  for (size_t i = 0; i < key_count; ++i) {
    if (i > 0) key += ',';
    key += key_value(i).ToJson();
  }
  key += ']';
  return key;
}

}  // namespace skippr
