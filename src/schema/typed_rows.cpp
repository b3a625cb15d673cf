// Typed reading (docs/schema.md, "Typed reading"): scalars appended straight to columns by the
// same rules Shaper::Absorb applies to Values, and the layouts sources decode records into.
#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "core/check.hpp"
#include "schema/schema.hpp"
#include "schema/text_values.hpp"

namespace skippr::schema {

namespace {

bool IsBoolWord(std::string_view text) {
  return (text.size() == 4 || text.size() == 5) &&
         (text == "true" || text == "false" || text == "TRUE" || text == "FALSE" ||
          text == "True" || text == "False");
}

// Whether NumberFromText may read `text` as a number: one scan, so that dates and identifiers skip
// both parsers.
bool LooksNumeric(std::string_view text) {
  const char first = text[0];
  if (!((first >= '0' && first <= '9') || first == '-')) return false;
  for (size_t i = 1; i < text.size(); ++i) {
    const char c = text[i];
    const bool is_digit = c >= '0' && c <= '9';
    if (!(is_digit || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-')) return false;
  }
  return true;
}

// NumberFromText's value of `literal` as a token: a string it returns is the literal itself.
ScalarToken TokenOfNumber(const Value& number, std::string_view literal) {
  switch (number.kind()) {
    case Value::Kind::kInt:
      return {ScalarToken::Kind::kInt, false, number.as_int(), 0, literal};
    case Value::Kind::kDouble:
      return {ScalarToken::Kind::kDouble, false, 0, number.as_double(), literal};
    case Value::Kind::kString:
      return ScalarToken::OfString(literal);
    default:
      return {ScalarToken::Kind::kOther, false, 0, 0, literal};
  }
}

constexpr int64_t kMicrosPerDay = 86'400'000'000LL;

// What the shaper's TextOf gives for a scalar placed in a string column.
void AppendAsText(Column& column, const ScalarToken& token) {
  switch (token.kind) {
    case ScalarToken::Kind::kBool:
      column.AppendBytes(token.boolean ? "true" : "false");
      break;
    case ScalarToken::Kind::kInt:
      column.AppendBytes(std::to_string(token.integer));
      break;
    case ScalarToken::Kind::kDouble:
      column.AppendBytes(fmt::format("{}", token.real));
      break;
    default:
      column.AppendBytes(token.text);
      break;
  }
}

bool AppendInteger(Column& column, const ScalarToken& token, bool is_int32) {
  std::optional<int64_t> integer;
  if (token.kind == ScalarToken::Kind::kInt) integer = token.integer;
  if (token.kind == ScalarToken::Kind::kString) integer = internal::ParseInteger(token.text);
  // Beyond int32 the shaper promotes the field to long: a schema change it must make.
  if (!integer || (is_int32 && (*integer < INT32_MIN || *integer > INT32_MAX))) return false;
  column.AppendInt64(*integer);
  return true;
}

bool AppendReal(Column& column, const ScalarToken& token) {
  switch (token.kind) {
    case ScalarToken::Kind::kDouble:
      column.AppendDouble(token.real);
      return true;
    case ScalarToken::Kind::kInt:
      if (!internal::IsExactInDouble(token.integer)) return false;
      column.AppendDouble(static_cast<double>(token.integer));
      return true;
    case ScalarToken::Kind::kString:
      if (auto real = internal::ParseReal(token.text);
          real && internal::DoubleHoldsLiteral(token.text, *real)) {
        column.AppendDouble(*real);
        return true;
      }
      return false;
    default:
      return false;
  }
}

bool AppendDecimal(Column& column, const LogicalType& type, const ScalarToken& token) {
  std::optional<__int128> unscaled;
  if (token.kind == ScalarToken::Kind::kInt) {
    unscaled = internal::ParseDecimal(std::to_string(token.integer), type.decimal_scale());
  } else if (token.kind == ScalarToken::Kind::kDouble) {
    unscaled = internal::ParseDecimal(fmt::format("{}", token.real), type.decimal_scale());
  } else if (token.kind == ScalarToken::Kind::kString) {
    unscaled = internal::ParseDecimal(token.text, type.decimal_scale());
  }
  if (!unscaled || !internal::FitsDecimalPrecision(*unscaled, type.decimal_precision())) {
    return false;
  }
  column.AppendDecimal(*unscaled);
  return true;
}

bool AppendTimestamp(Column& column, const ScalarToken& token) {
  std::optional<int64_t> micros;
  if (token.kind == ScalarToken::Kind::kInt) {
    micros = internal::EpochIntegerToMicros(token.integer);
  } else if (token.kind == ScalarToken::Kind::kString) {
    if (auto parsed = internal::ParseTimestamp(token.text)) {
      micros = parsed->micros;
    } else if (auto days = internal::ParseDate(token.text)) {
      micros = *days * kMicrosPerDay;
    }
  }
  if (!micros) return false;
  column.AppendInt64(*micros);
  return true;
}

}  // namespace

ScalarToken ScalarToken::OfText(std::string_view text) {
  if (text.empty()) return Null();
  if (IsBoolWord(text)) return OfBool(text[0] == 't' || text[0] == 'T');
  if (LooksNumeric(text)) {
    // Most numeric cells are JSON numbers, which OfJsonNumber reads as NumberFromText does without
    // building a Value. Beyond JSON's grammar NumberFromText reads only forms with a point ("1.",
    // "1.e5", "00.5" it refuses): cells without one ("2024-03-25", "007", "1-2") are text without
    // asking it.
    if (std::optional<ScalarToken> number = OfJsonNumber(text)) return *number;
    if (text.find('.') != std::string_view::npos) {
      if (std::optional<Value> number = NumberFromText(text)) return TokenOfNumber(*number, text);
    }
  }
  return OfString(text);
}

namespace {
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Up to 18 digits always fit an int64.
constexpr size_t kDigitsThatFitInt64 = 18;
// Clinger's fast path: a decimal of at most 15 significant digits is an integer below 2^53 (exact
// as a double), and every power of ten up to 10^22 is exact too, so one multiplication or
// division by it rounds once, as a correct reader (std::from_chars) does. Such a literal also reads
// back from its double (DBL_DIG is 15), which is what DoubleHoldsLiteral would check.
using internal::kExactPowersOfTen;
constexpr int kFastPathDigits = 15;
constexpr int kFastPathMaxPowerOfTen = static_cast<int>(kExactPowersOfTen.size()) - 1;
// An exponent's digits beyond this many cannot move the value into the fast path's range.
constexpr int64_t kExponentCap = 1'000'000;

// A literal read by JSON's number grammar, -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?, in one
// pass: whether it is an integer (no fraction, no exponent) and its int64 value when it has at most
// 18 digits; otherwise its double when Clinger's fast path reads it exactly.
struct JsonNumber {
  bool is_integer = false;
  std::optional<int64_t> integer;  // is_integer with at most 18 digits
  std::optional<double> real;      // not is_integer, and within the fast path
};

std::optional<JsonNumber> ScanJsonNumber(std::string_view text) {
  const bool is_negative = !text.empty() && text[0] == '-';
  size_t at = is_negative ? 1 : 0;
  const size_t first_digit = at;
  uint64_t mantissa = 0;       // every digit but leading zeros, while there are few enough
  int significant_digits = 0;  // digits from the first non-zero one on
  while (at < text.size() && IsDigit(text[at])) {
    mantissa = mantissa * 10 + static_cast<uint64_t>(text[at] - '0');  // wraps past 19 digits
    significant_digits += significant_digits > 0 || text[at] != '0';
    ++at;
  }
  if (at == first_digit || (text[first_digit] == '0' && at > first_digit + 1)) return std::nullopt;
  JsonNumber number;
  number.is_integer = at == text.size();
  if (number.is_integer) {
    if (at - first_digit <= kDigitsThatFitInt64) {
      const auto magnitude = static_cast<int64_t>(mantissa);
      number.integer = is_negative ? -magnitude : magnitude;
    }
    return number;
  }
  int64_t exponent = 0;  // of ten, applied to the mantissa
  if (text[at] == '.') {
    const size_t fraction = ++at;
    for (; at < text.size() && IsDigit(text[at]); ++at) {
      if (significant_digits <= kFastPathDigits) {
        mantissa = mantissa * 10 + static_cast<uint64_t>(text[at] - '0');
      }
      significant_digits += significant_digits > 0 || text[at] != '0';
      --exponent;
    }
    if (at == fraction) return std::nullopt;
  }
  if (at < text.size() && (text[at] == 'e' || text[at] == 'E')) {
    ++at;
    const bool is_negative_exponent = at < text.size() && text[at] == '-';
    if (at < text.size() && (text[at] == '+' || text[at] == '-')) ++at;
    const size_t exponent_digits = at;
    int64_t written = 0;
    for (; at < text.size() && IsDigit(text[at]); ++at) {
      written = std::min(kExponentCap, written * 10 + (text[at] - '0'));
    }
    if (at == exponent_digits) return std::nullopt;
    exponent += is_negative_exponent ? -written : written;
  }
  if (at != text.size()) return std::nullopt;
  if (significant_digits <= kFastPathDigits && exponent >= -kFastPathMaxPowerOfTen &&
      exponent <= kFastPathMaxPowerOfTen) {
    double magnitude = static_cast<double>(mantissa);
    magnitude = exponent < 0 ? magnitude / kExactPowersOfTen[static_cast<size_t>(-exponent)]
                             : magnitude * kExactPowersOfTen[static_cast<size_t>(exponent)];
    number.real = is_negative ? -magnitude : magnitude;
  }
  return number;
}
}  // namespace

std::optional<ScalarToken> ScalarToken::OfJsonNumber(std::string_view literal) {
  const std::optional<JsonNumber> number = ScanJsonNumber(literal);
  if (!number) return std::nullopt;
  // The common cases as NumberFromText decides them, without building a Value.
  if (number->integer) return ScalarToken{Kind::kInt, false, *number->integer, 0, literal};
  if (number->real) return ScalarToken{Kind::kDouble, false, 0, *number->real, literal};
  if (number->is_integer) {
    if (auto integer = internal::ParseInteger(literal)) {
      return ScalarToken{Kind::kInt, false, *integer, 0, literal};
    }
  } else if (auto real = internal::ParseReal(literal);
             real && internal::DoubleHoldsLiteral(literal, *real)) {
    return ScalarToken{Kind::kDouble, false, 0, *real, literal};
  }
  std::optional<Value> value = NumberFromText(literal);
  if (!value) return std::nullopt;
  return TokenOfNumber(*value, literal);
}

Value ValueFromText(std::string_view text) {
  const ScalarToken token = ScalarToken::OfText(text);
  switch (token.kind) {
    case ScalarToken::Kind::kNull:
      return Value::Null();
    case ScalarToken::Kind::kBool:
      return Value::Bool(token.boolean);
    case ScalarToken::Kind::kInt:
      return Value::Int(token.integer);
    case ScalarToken::Kind::kDouble:
      return Value::Double(token.real);
    case ScalarToken::Kind::kString:
      return Value::String(std::string(text));
    case ScalarToken::Kind::kOther:
      return *NumberFromText(text);
  }
  return Value::Null();
}

// Mirrors the shaper's ConvertScalar (and PlaceScalar's int → long rule) for the kinds a token
// has; tests/schema_typed_rows_test.cpp holds the two to the same answers.
bool AppendScalarToken(Column& column, const LogicalType& type, const ScalarToken& token) {
  using K = ScalarToken::Kind;
  if (token.kind == K::kNull) {
    column.AppendNull();
    return true;
  }
  switch (type.id()) {
    case TypeId::kBoolean:
      if (token.kind == K::kBool) {
        column.AppendBool(token.boolean);
        return true;
      }
      if (token.kind == K::kString && (token.text == "true" || token.text == "false")) {
        column.AppendBool(token.text == "true");
        return true;
      }
      return false;
    case TypeId::kInt:
      return AppendInteger(column, token, /*is_int32=*/true);
    case TypeId::kLong:
      return AppendInteger(column, token, /*is_int32=*/false);
    case TypeId::kFloat:
    case TypeId::kDouble:
      return AppendReal(column, token);
    case TypeId::kDecimal:
      return AppendDecimal(column, type, token);
    case TypeId::kDate:
      if (token.kind != K::kString) return false;
      if (auto days = internal::ParseDate(token.text)) {
        column.AppendInt64(*days);
        return true;
      }
      return false;
    case TypeId::kTime:
      if (token.kind == K::kInt) {
        column.AppendInt64(token.integer);
        return true;
      }
      if (token.kind != K::kString) return false;
      if (auto micros = internal::ParseTime(token.text)) {
        column.AppendInt64(*micros);
        return true;
      }
      return false;
    case TypeId::kTimestamp:
    case TypeId::kTimestampTz:
      return AppendTimestamp(column, token);
    case TypeId::kString:
      if (token.kind == K::kOther) return false;
      AppendAsText(column, token);
      return true;
    case TypeId::kBinary:
      if (token.kind != K::kString) return false;
      column.AppendBytes(token.text);
      return true;
    default:
      return false;  // uuid (no text form reads as one), nested types
  }
}

// ----- RecordLayout -----------------------------------------------------------------------------

RecordLayout::RecordLayout(std::string namespace_name, int32_t schema_id, std::vector<Slot> fields)
    : namespace_name_(std::move(namespace_name)),
      schema_id_(schema_id),
      fields_(std::move(fields)) {}

size_t RecordLayout::Find(const std::vector<Slot>& slots, std::string_view key, size_t guess) {
  if (guess < slots.size() && slots[guess].key == key) return guess;
  for (size_t i = 0; i < slots.size(); ++i) {
    if (slots[i].key == key) return i;
  }
  return SIZE_MAX;
}

}  // namespace skippr::schema
