#include "sources/postgres_types.hpp"

#include <fmt/format.h>

#include <bit>
#include <charconv>
#include <cmath>
#include <limits>
#include <vector>

#include "core/check.hpp"
#include "schema/text_values.hpp"

namespace skippr::sources::postgres {

namespace {

// Built-in type oids (pg_type.dat; fixed across PostgreSQL versions).
enum Oid : uint32_t {
  kBoolOid = 16,
  kByteaOid = 17,
  kTextOid = 25,
  kBpcharOid = 1042,
  kVarcharOid = 1043,
  kInt8Oid = 20,
  kInt2Oid = 21,
  kInt4Oid = 23,
  kOidOid = 26,
  kFloat4Oid = 700,
  kFloat8Oid = 701,
  kDateOid = 1082,
  kTimeOid = 1083,
  kTimestampOid = 1114,
  kTimestampTzOid = 1184,
  kNumericOid = 1700,
  kUuidOid = 2950,
};

// A numeric column without a usable precision (unconstrained, over 38 digits, or a scale outside
// [0, precision]) is decimal(38, 10): 28 integer and 10 fractional digits. A value needing more
// goes to the sibling string column, exactly as PostgreSQL wrote it.
constexpr int kUnconstrainedNumericScale = 10;
constexpr int kMaxDecimalPrecision = 38;
constexpr int64_t kMicrosPerDay = 86'400'000'000LL;

bool ReadNumber(std::string_view text, size_t& at, size_t min_digits, int64_t* out) {
  const size_t start = at;
  int64_t value = 0;
  while (at < text.size() && text[at] >= '0' && text[at] <= '9' && at - start < 18) {
    value = value * 10 + (text[at] - '0');
    ++at;
  }
  *out = value;
  return at - start >= min_digits;
}

bool Expect(std::string_view text, size_t& at, char c) {
  if (at >= text.size() || text[at] != c) return false;
  ++at;
  return true;
}

// " BC" at the end of a date or timestamp: the year counts backwards from 1 BC = year 0.
bool TakeEra(std::string_view& text) {
  constexpr std::string_view kBc = " BC";
  if (text.size() > kBc.size() && text.substr(text.size() - kBc.size()) == kBc) {
    text.remove_suffix(kBc.size());
    return true;
  }
  return false;
}

// "YYYY-MM-DD" (four or more year digits) at `at`, in days since 1970-01-01.
std::optional<int64_t> ReadDate(std::string_view text, size_t& at, bool is_bc) {
  int64_t year = 0;
  int64_t month = 0;
  int64_t day = 0;
  if (!ReadNumber(text, at, 4, &year) || !Expect(text, at, '-') ||
      !ReadNumber(text, at, 2, &month) || !Expect(text, at, '-') ||
      !ReadNumber(text, at, 2, &day) || month < 1 || month > 12 || day < 1 || day > 31) {
    return std::nullopt;
  }
  if (is_bc) year = 1 - year;
  return schema::internal::DaysFromCivil(year, static_cast<unsigned>(month),
                                         static_cast<unsigned>(day));
}

// "HH:MM:SS[.ffffff]" at `at` in microseconds since midnight (24:00:00 is PostgreSQL's end of day).
std::optional<int64_t> ReadClock(std::string_view text, size_t& at) {
  int64_t hour = 0;
  int64_t minute = 0;
  int64_t second = 0;
  if (!ReadNumber(text, at, 2, &hour) || !Expect(text, at, ':') ||
      !ReadNumber(text, at, 2, &minute) || !Expect(text, at, ':') ||
      !ReadNumber(text, at, 2, &second) || hour > 24 || minute > 59 || second > 60) {
    return std::nullopt;
  }
  int64_t micros = ((hour * 60 + minute) * 60 + second) * 1'000'000;
  if (at < text.size() && text[at] == '.') {
    ++at;
    int64_t scale = 100'000;
    const size_t start = at;
    while (at < text.size() && text[at] >= '0' && text[at] <= '9') {
      micros += (text[at] - '0') * scale;
      scale /= 10;
      ++at;
    }
    if (at == start || at - start > 6) return std::nullopt;
  }
  return micros;
}

// "+HH[:MM[:SS]]" or "-..." at `at`, in microseconds east of UTC.
std::optional<int64_t> ReadOffset(std::string_view text, size_t& at) {
  if (at >= text.size() || (text[at] != '+' && text[at] != '-')) return std::nullopt;
  const int64_t sign = text[at] == '+' ? 1 : -1;
  ++at;
  int64_t parts[3] = {0, 0, 0};
  for (int part = 0; part < 3; ++part) {
    if (part > 0 && !Expect(text, at, ':')) {
      break;
    }
    if (!ReadNumber(text, at, 2, &parts[part])) return std::nullopt;
  }
  return sign * ((parts[0] * 60 + parts[1]) * 60 + parts[2]) * 1'000'000;
}

std::optional<int64_t> ParseTimestampText(std::string_view text, bool with_zone) {
  const bool is_bc = TakeEra(text);
  size_t at = 0;
  const std::optional<int64_t> days = ReadDate(text, at, is_bc);
  if (!days || !Expect(text, at, ' ')) return std::nullopt;
  const std::optional<int64_t> clock = ReadClock(text, at);
  if (!clock) return std::nullopt;
  int64_t offset = 0;
  if (with_zone) {
    const std::optional<int64_t> parsed = ReadOffset(text, at);
    if (!parsed) return std::nullopt;
    offset = *parsed;
  }
  if (at != text.size()) return std::nullopt;
  // PostgreSQL's range runs to 294276 AD; int64 microseconds from 1970 only to 294247 AD: a later
  // time is no timestamp here (its text goes to the sibling column).
  int64_t micros = 0;
  if (__builtin_mul_overflow(*days, kMicrosPerDay, &micros) ||
      __builtin_add_overflow(micros, *clock - offset, &micros)) {
    return std::nullopt;
  }
  return micros;
}

std::optional<std::string> DecodeHex(std::string_view hex) {
  const auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  if (hex.size() % 2 != 0) return std::nullopt;
  std::string bytes(hex.size() / 2, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) {
    const int high = nibble(hex[2 * i]);
    const int low = nibble(hex[2 * i + 1]);
    if (high < 0 || low < 0) return std::nullopt;
    bytes[i] = static_cast<char>(high << 4 | low);
  }
  return bytes;
}

std::optional<std::string> DecodeUuid(std::string_view text) {
  std::string hex;
  hex.reserve(32);
  for (char c : text) {
    if (c != '-') hex.push_back(c);
  }
  if (hex.size() != 32) return std::nullopt;
  return DecodeHex(hex);
}

template <typename Integer>
std::optional<Integer> ParseInteger(std::string_view text) {
  Integer value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::optional<double> ParseFloat(std::string_view text) {
  if (text == "NaN") return std::numeric_limits<double>::quiet_NaN();
  if (text == "Infinity") return std::numeric_limits<double>::infinity();
  if (text == "-Infinity") return -std::numeric_limits<double>::infinity();
  double value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// ----- binary send forms ----------------------------------------------------------------------

template <typename Unsigned>
Unsigned LoadBigEndian(const char* at) {
  Unsigned value = 0;
  for (size_t i = 0; i < sizeof(Unsigned); ++i) {
    value = static_cast<Unsigned>(value << 8 | static_cast<uint8_t>(at[i]));
  }
  return value;
}

// Days and microseconds from PostgreSQL's epoch (2000-01-01) to the Unix epoch.
constexpr int64_t kPostgresEpochDays = 10'957;
constexpr int64_t kPostgresEpochMicros = kPostgresEpochDays * kMicrosPerDay;

// numeric's send form, read in place: a header of four 16-bit fields, then `digit_count`
// base-10000 digits (checked by ReadNumericParts).
struct NumericParts {
  int16_t weight = 0;    // the first digit's power of 10000
  uint16_t sign = 0;     // kNumericPositive, kNumericNegative or a special value
  int16_t dscale = 0;    // digits after the decimal point in the text form
  size_t digit_count = 0;
  const char* digits = nullptr;

  int digit(size_t i) const { return LoadBigEndian<uint16_t>(digits + 2 * i); }
};
constexpr uint16_t kNumericPositive = 0x0000;
constexpr uint16_t kNumericNegative = 0x4000;
constexpr uint16_t kNumericNaN = 0xC000;
constexpr uint16_t kNumericPlusInfinity = 0xD000;
constexpr uint16_t kNumericMinusInfinity = 0xF000;

std::optional<NumericParts> ReadNumericParts(std::string_view bytes) {
  if (bytes.size() < 8) return std::nullopt;
  const auto digit_count = static_cast<int16_t>(LoadBigEndian<uint16_t>(bytes.data()));
  NumericParts parts;
  parts.weight = static_cast<int16_t>(LoadBigEndian<uint16_t>(bytes.data() + 2));
  parts.sign = LoadBigEndian<uint16_t>(bytes.data() + 4);
  parts.dscale = static_cast<int16_t>(LoadBigEndian<uint16_t>(bytes.data() + 6));
  if (digit_count < 0 || parts.dscale < 0 ||
      bytes.size() != 8 + 2 * static_cast<size_t>(digit_count)) {
    return std::nullopt;
  }
  if (parts.sign != kNumericPositive && parts.sign != kNumericNegative &&
      parts.sign != kNumericNaN && parts.sign != kNumericPlusInfinity &&
      parts.sign != kNumericMinusInfinity) {
    return std::nullopt;
  }
  parts.digit_count = static_cast<size_t>(digit_count);
  parts.digits = bytes.data() + 8;
  for (size_t i = 0; i < parts.digit_count; ++i) {
    if (parts.digit(i) > 9999) return std::nullopt;
  }
  return parts;
}

// The value times 10^scale, as ParseDecimal reads its text: nullopt when a digit beyond `scale`
// is not zero or the result reaches 10^38.
std::optional<__int128> NumericUnscaled(const NumericParts& parts, int scale) {
  constexpr int kMaxDigits = 38;
  unsigned __int128 limit = 1;
  for (int i = 0; i < kMaxDigits; ++i) limit *= 10;
  unsigned __int128 sum = 0;
  for (size_t i = 0; i < parts.digit_count; ++i) {
    const int64_t digit = parts.digit(i);
    if (digit == 0) continue;
    const int exponent = 4 * (parts.weight - static_cast<int>(i)) + scale;
    if (exponent >= kMaxDigits) return std::nullopt;
    unsigned __int128 contribution = static_cast<unsigned __int128>(digit);
    if (exponent >= 0) {
      for (int e = 0; e < exponent; ++e) {
        if (contribution >= limit / 10) return std::nullopt;  // checked before it can wrap
        contribution *= 10;
      }
    } else {
      int64_t divisor = 1;
      for (int e = 0; e < -exponent && divisor <= 10'000; ++e) divisor *= 10;
      if (digit % divisor != 0) return std::nullopt;  // more precision than the column keeps
      contribution = static_cast<unsigned __int128>(digit / divisor);
    }
    sum += contribution;
    if (sum >= limit) return std::nullopt;
  }
  const auto value = static_cast<__int128>(sum);
  return parts.sign == kNumericNegative ? -value : value;
}

// numeric_out's text of `parts`.
std::string NumericText(const NumericParts& parts) {
  if (parts.sign == kNumericNaN) return "NaN";
  if (parts.sign == kNumericPlusInfinity) return "Infinity";
  if (parts.sign == kNumericMinusInfinity) return "-Infinity";
  const auto digit_at = [&](int position) -> int {
    return position >= 0 && position < static_cast<int>(parts.digit_count)
               ? parts.digit(static_cast<size_t>(position))
               : 0;
  };
  std::string text = parts.sign == kNumericNegative ? "-" : "";
  if (parts.weight < 0) {
    text += '0';
  } else {
    for (int position = 0; position <= parts.weight; ++position) {
      text += position == 0 ? fmt::format("{}", digit_at(position))
                            : fmt::format("{:04}", digit_at(position));
    }
  }
  if (parts.dscale > 0) {
    std::string fraction;
    for (int position = parts.weight + 1; static_cast<int>(fraction.size()) < parts.dscale;
         ++position) {
      fraction += fmt::format("{:04}", digit_at(position));
    }
    text += '.';
    text += fraction.substr(0, static_cast<size_t>(parts.dscale));
  }
  return text;
}

// timestamp_out's text of `micros` (since 2000-01-01) under DateStyle=ISO and TimeZone=UTC:
// "294276-12-31 23:59:59.5+00"; years before 1 as "0044-03-15 BC".
std::string TimestampText(int64_t micros, bool with_zone) {
  int64_t days = micros / kMicrosPerDay;
  int64_t rest = micros % kMicrosPerDay;
  if (rest < 0) {
    rest += kMicrosPerDay;
    --days;
  }
  const schema::internal::CivilDate date = schema::internal::CivilFromDays(days + kPostgresEpochDays);
  const bool is_bc = date.year <= 0;
  const int64_t seconds = rest / 1'000'000;
  std::string text = fmt::format("{:04}-{:02}-{:02} {:02}:{:02}:{:02}",
                                 is_bc ? 1 - date.year : date.year, date.month, date.day,
                                 seconds / 3600, seconds / 60 % 60, seconds % 60);
  if (const int64_t fraction = rest % 1'000'000; fraction != 0) {
    std::string digits = fmt::format(".{:06}", fraction);
    digits.erase(digits.find_last_not_of('0') + 1);
    text += digits;
  }
  if (with_zone) text += "+00";
  if (is_bc) text += " BC";
  return text;
}

}  // namespace

PgColumnDecoder::Form PgColumnDecoder::FormOf(uint32_t oid, int32_t modifier, LogicalType* type) {
  switch (oid) {
    case kBoolOid: *type = LogicalType::Boolean(); return Form::kBool;
    case kInt2Oid:
    case kInt4Oid: *type = LogicalType::Int(); return Form::kInt;
    case kInt8Oid:
    case kOidOid: *type = LogicalType::Long(); return Form::kLong;
    case kFloat4Oid: *type = LogicalType::Float(); return Form::kFloat;
    case kFloat8Oid: *type = LogicalType::Double(); return Form::kDouble;
    case kByteaOid: *type = LogicalType::Binary(); return Form::kBytea;
    case kUuidOid: *type = LogicalType::Uuid(); return Form::kUuid;
    case kDateOid: *type = LogicalType::Date(); return Form::kDate;
    case kTimeOid: *type = LogicalType::Time(); return Form::kTime;
    case kTimestampOid: *type = LogicalType::Timestamp(); return Form::kTimestamp;
    case kTimestampTzOid: *type = LogicalType::TimestampTz(); return Form::kTimestampTz;
    case kNumericOid: {
      int precision = kMaxDecimalPrecision;
      int scale = kUnconstrainedNumericScale;
      if (modifier >= 4) {
        const int32_t packed = modifier - 4;
        const int declared_precision = (packed >> 16) & 0xffff;
        const int declared_scale = ((packed & 0x7ff) ^ 1024) - 1024;  // 11-bit signed (PG 15)
        if (declared_precision >= 1 && declared_precision <= kMaxDecimalPrecision &&
            declared_scale >= 0 && declared_scale <= declared_precision) {
          precision = declared_precision;
          scale = declared_scale;
        }
      }
      *type = *LogicalType::Decimal(precision, scale);
      return Form::kDecimal;
    }
    default:
      // text, varchar, char, name, citext, enums, json, jsonb, interval (ISO 8601), timetz,
      // inet, cidr, macaddr, money, xml, ranges, ...: their text output, as PostgreSQL writes it.
      *type = LogicalType::String();
      return Form::kText;
  }
}

PgColumnDecoder::PgColumnDecoder(const PgType& type) {
  if (type.category == 'A' && type.element_oid != 0) {
    form_ = Form::kArray;
    element_form_ = FormOf(type.element_oid, type.modifier, &element_type_);
    logical_type_ = LogicalType::List(Field{0, "element", element_type_, true});
    return;
  }
  form_ = FormOf(type.oid, type.modifier, &logical_type_);
  oid_ = type.oid;
  reads_binary_ = form_ != Form::kText || oid_ == kTextOid || oid_ == kVarcharOid ||
                  oid_ == kBpcharOid;
}

namespace {
// Where DecodeScalar puts a value: one Value (change rows, array elements) or the end of a
// column (snapshot rows), so that both read text the same way.
struct ValueOut {
  Value value;
  void Bool(bool v) { value = Value::Bool(v); }
  void Int(int64_t v) { value = Value::Int(v); }
  void Double(double v) { value = Value::Double(v); }
  void Decimal(__int128 v, const LogicalType& type) {
    value = Value::Decimal(v, static_cast<uint8_t>(type.decimal_precision()),
                           static_cast<uint8_t>(type.decimal_scale()));
  }
  void Binary(std::string v) { value = Value::Binary(std::move(v)); }
  void Text(std::string_view v) { value = Value::String(std::string(v)); }
  void Date(int32_t days) { value = Value::Date(days); }
  void Timestamp(int64_t micros, bool with_zone) {
    value = with_zone ? Value::TimestampTz(micros) : Value::Timestamp(micros);
  }
};

struct ColumnOut {
  Column& column;
  void Bool(bool v) { column.AppendBool(v); }
  void Int(int64_t v) { column.AppendInt64(v); }
  void Double(double v) { column.AppendDouble(v); }
  void Decimal(__int128 v, const LogicalType&) { column.AppendDecimal(v); }
  void Binary(const std::string& v) { column.AppendBytes(v); }
  void Text(std::string_view v) { column.AppendBytes(v); }
  void Date(int32_t days) { column.AppendInt64(days); }
  void Timestamp(int64_t micros, bool) { column.AppendInt64(micros); }
};
}  // namespace

Value PgColumnDecoder::Decode(std::string_view text) const {
  if (form_ == Form::kArray) return DecodeArray(text);
  ValueOut out;
  if (!DecodeScalar(form_, text, out)) return Value::String(std::string(text));
  return std::move(out.value);
}

bool PgColumnDecoder::AppendTo(std::string_view text, Column& column) const {
  if (form_ == Form::kArray) {
    Value list = DecodeArray(text);
    if (list.kind() == Value::Kind::kString) return false;
    column.Append(list);
    return true;
  }
  ColumnOut out{column};
  return DecodeScalar(form_, text, out);
}

Result<bool> PgColumnDecoder::AppendBinaryTo(std::string_view bytes, Column& column,
                                             std::string* text) const {
  SKIPPR_CHECK(reads_binary_);
  const auto malformed = [&] {
    return Status::Corruption(fmt::format("a {}-byte binary value is not one of type {}",
                                          bytes.size(), logical_type_.ToString()));
  };
  const auto width_is = [&](size_t width) { return bytes.size() == width; };
  switch (form_) {
    case Form::kBool:
      if (!width_is(1)) return malformed();
      column.AppendBool(bytes[0] != 0);
      return true;
    case Form::kInt:
    case Form::kLong:
      if (width_is(2)) {
        column.AppendInt64(static_cast<int16_t>(LoadBigEndian<uint16_t>(bytes.data())));
      } else if (width_is(4)) {
        const uint32_t raw = LoadBigEndian<uint32_t>(bytes.data());
        // oid is unsigned; int4 signed.
        column.AppendInt64(oid_ == kOidOid ? static_cast<int64_t>(raw)
                                           : static_cast<int64_t>(static_cast<int32_t>(raw)));
      } else if (width_is(8)) {
        column.AppendInt64(static_cast<int64_t>(LoadBigEndian<uint64_t>(bytes.data())));
      } else {
        return malformed();
      }
      return true;
    case Form::kFloat: {
      if (!width_is(4)) return malformed();
      const float value = std::bit_cast<float>(LoadBigEndian<uint32_t>(bytes.data()));
      if (!std::isfinite(value)) {
        column.AppendDouble(static_cast<double>(value));
        return true;
      }
      // As the text path reads float4out's shortest exact digits: 1.1f is 1.1, not 1.100000024.
      char digits[32];
      const auto written = std::to_chars(digits, digits + sizeof(digits), value);
      double widened = 0;
      std::from_chars(digits, written.ptr, widened);
      column.AppendDouble(widened);
      return true;
    }
    case Form::kDouble:
      if (!width_is(8)) return malformed();
      column.AppendDouble(std::bit_cast<double>(LoadBigEndian<uint64_t>(bytes.data())));
      return true;
    case Form::kDecimal: {
      const std::optional<NumericParts> parts = ReadNumericParts(bytes);
      if (!parts) return malformed();
      std::optional<__int128> unscaled;
      if (parts->sign == kNumericPositive || parts->sign == kNumericNegative) {
        unscaled = NumericUnscaled(*parts, logical_type_.decimal_scale());
      }
      if (!unscaled || !schema::internal::FitsDecimalPrecision(
                           *unscaled, logical_type_.decimal_precision())) {
        *text = NumericText(*parts);  // NaN, ±Infinity, or more digits than the decimal holds
        return false;
      }
      column.AppendDecimal(*unscaled);
      return true;
    }
    case Form::kBytea:
    case Form::kText:
      column.AppendBytes(bytes);
      return true;
    case Form::kUuid:
      if (!width_is(16)) return malformed();
      column.AppendBytes(bytes);
      return true;
    case Form::kDate: {
      if (!width_is(4)) return malformed();
      const auto days = static_cast<int32_t>(LoadBigEndian<uint32_t>(bytes.data()));
      if (days == std::numeric_limits<int32_t>::max() ||
          days == std::numeric_limits<int32_t>::min()) {
        *text = days > 0 ? "infinity" : "-infinity";
        return false;
      }
      const int64_t unix_days = static_cast<int64_t>(days) + kPostgresEpochDays;
      if (unix_days > std::numeric_limits<int32_t>::max()) return malformed();  // past PostgreSQL's
      column.AppendInt64(unix_days);
      return true;
    }
    case Form::kTime:
      if (!width_is(8)) return malformed();
      column.AppendInt64(static_cast<int64_t>(LoadBigEndian<uint64_t>(bytes.data())));
      return true;
    case Form::kTimestamp:
    case Form::kTimestampTz: {
      if (!width_is(8)) return malformed();
      const auto micros = static_cast<int64_t>(LoadBigEndian<uint64_t>(bytes.data()));
      if (micros == std::numeric_limits<int64_t>::max() ||
          micros == std::numeric_limits<int64_t>::min()) {
        *text = micros > 0 ? "infinity" : "-infinity";
        return false;
      }
      // Beyond 294247 AD, where int64 microseconds from 1970 end: its text, as the text path.
      int64_t unix_micros = 0;
      if (__builtin_add_overflow(micros, kPostgresEpochMicros, &unix_micros)) {
        *text = TimestampText(micros, form_ == Form::kTimestampTz);
        return false;
      }
      column.AppendInt64(unix_micros);
      return true;
    }
    case Form::kArray:
      break;
  }
  return malformed();
}

std::optional<std::string> NumericBinaryText(std::string_view bytes) {
  const std::optional<NumericParts> parts = ReadNumericParts(bytes);
  if (!parts) return std::nullopt;
  return NumericText(*parts);
}

template <typename Out>
bool PgColumnDecoder::DecodeScalar(Form form, std::string_view text, Out& out) const {
  switch (form) {
    case Form::kBool:
      if (text == "t" || text == "f") {
        out.Bool(text == "t");
        return true;
      }
      return false;
    case Form::kInt:
    case Form::kLong: {
      const std::optional<int64_t> value = ParseInteger<int64_t>(text);
      if (value) out.Int(*value);
      return value.has_value();
    }
    case Form::kFloat:
    case Form::kDouble: {
      const std::optional<double> value = ParseFloat(text);
      if (value) out.Double(*value);
      return value.has_value();
    }
    case Form::kDecimal: {
      const LogicalType& type = form_ == Form::kArray ? element_type_ : logical_type_;
      const std::optional<__int128> unscaled =
          schema::internal::ParseDecimal(text, type.decimal_scale());
      if (!unscaled || !schema::internal::FitsDecimalPrecision(*unscaled,
                                                               type.decimal_precision())) {
        return false;  // NaN, ±Infinity, or more digits than the decimal holds
      }
      out.Decimal(*unscaled, type);
      return true;
    }
    case Form::kBytea: {
      std::optional<std::string> bytes;
      if (text.size() >= 2 && text[0] == '\\' && text[1] == 'x') bytes = DecodeHex(text.substr(2));
      if (bytes) out.Binary(std::move(*bytes));
      return bytes.has_value();
    }
    case Form::kUuid: {
      std::optional<std::string> bytes = DecodeUuid(text);
      if (bytes) out.Binary(std::move(*bytes));
      return bytes.has_value();
    }
    case Form::kDate: {
      std::string_view date = text;
      const bool is_bc = TakeEra(date);
      size_t at = 0;
      const std::optional<int64_t> days = ReadDate(date, at, is_bc);
      if (!days || at != date.size() || *days < std::numeric_limits<int32_t>::min() ||
          *days > std::numeric_limits<int32_t>::max()) {
        return false;  // infinity, -infinity
      }
      out.Date(static_cast<int32_t>(*days));
      return true;
    }
    case Form::kTime: {
      size_t at = 0;
      const std::optional<int64_t> micros = ReadClock(text, at);
      if (!micros || at != text.size()) return false;
      out.Int(*micros);
      return true;
    }
    case Form::kTimestamp:
    case Form::kTimestampTz: {
      const bool with_zone = form == Form::kTimestampTz;
      const std::optional<int64_t> micros = ParseTimestampText(text, with_zone);
      if (!micros) return false;  // infinity, -infinity
      out.Timestamp(*micros, with_zone);
      return true;
    }
    case Form::kText:
      out.Text(text);
      return true;
    case Form::kArray:
      break;
  }
  return false;
}

Value PgColumnDecoder::DecodeArray(std::string_view text) const {
  std::optional<std::vector<std::optional<std::string>>> elements = SplitArrayLiteral(text);
  if (!elements) return Value::String(std::string(text));  // more than one dimension
  ValueList items;
  items.reserve(elements->size());
  for (const std::optional<std::string>& element : *elements) {
    if (!element) {
      items.push_back(Value::Null());
      continue;
    }
    ValueOut item;
    // An element the list's type cannot hold sends the whole array to the sibling column.
    if (!DecodeScalar(element_form_, *element, item)) return Value::String(std::string(text));
    items.push_back(std::move(item.value));
  }
  return Value::List(std::move(items));
}

std::optional<std::vector<std::optional<std::string>>> SplitArrayLiteral(std::string_view text) {
  if (text.size() < 2 || text.front() != '{' || text.back() != '}') return std::nullopt;
  std::vector<std::optional<std::string>> elements;
  const std::string_view body = text.substr(1, text.size() - 2);
  if (body.empty()) return elements;
  size_t at = 0;
  while (true) {
    std::string element;
    bool quoted = false;
    bool escaped_any = false;
    if (at < body.size() && body[at] == '"') {
      quoted = true;
      ++at;
      while (at < body.size() && body[at] != '"') {
        if (body[at] == '\\' && at + 1 < body.size()) ++at;
        element.push_back(body[at++]);
      }
      if (!Expect(body, at, '"')) return std::nullopt;
    } else {
      while (at < body.size() && body[at] != ',') {
        if (body[at] == '{' || body[at] == '}' || body[at] == '"') return std::nullopt;
        if (body[at] == '\\' && at + 1 < body.size()) {
          ++at;
          escaped_any = true;
        }
        element.push_back(body[at++]);
      }
    }
    const bool is_null = !quoted && !escaped_any && element.size() == 4 &&
                         (element == "NULL" || element == "null" || element == "Null");
    if (is_null) {
      elements.emplace_back(std::nullopt);
    } else {
      elements.emplace_back(std::move(element));
    }
    if (at == body.size()) break;
    if (!Expect(body, at, ',')) return std::nullopt;
  }
  return elements;
}

}  // namespace skippr::sources::postgres
