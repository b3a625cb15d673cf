// Internal to schema/: reading and writing dates, timestamps and numbers as text.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace skippr::schema::internal {

// "2024-01-15" → days since 1970-01-01 (RFC 3339 full-date, checked calendar).
std::optional<int32_t> ParseDate(std::string_view text);

struct ParsedTimestamp {
  int64_t micros = 0;     // since epoch; UTC when has_zone
  bool has_zone = false;  // Z or ±HH:MM was given
};
// "2024-01-15T10:30:00", "2024-01-15 10:30:00.123456Z", "2024-01-15T10:30+02:00".
std::optional<ParsedTimestamp> ParseTimestamp(std::string_view text);
// "10:30:00[.ffffff]" → microseconds since midnight.
std::optional<int64_t> ParseTime(std::string_view text);

// Integer text as JSON/CSV writes it (optional '-', no leading zeros, no '+'), within int64.
std::optional<int64_t> ParseInteger(std::string_view text);
// Decimal or exponent text ("3.5", "-1e3", ".5" not accepted: needs a digit before the point).
std::optional<double> ParseReal(std::string_view text);
// Exact decimal text with at most `scale` fractional digits → unscaled value; nullopt when it
// needs more than 38 digits (the widest decimal) or more fractional digits than `scale` keeps.
std::optional<__int128> ParseDecimal(std::string_view text, int scale);
// Whether an unscaled decimal has at most `precision` digits.
bool FitsDecimalPrecision(__int128 unscaled, int precision);

// A number literal (JSON's grammar, "1.5e3") as an exact decimal: the unscaled digits and the
// scale; nullopt when that needs more than 38 digits or a scale outside [0, 38].
struct ExactDecimal {
  __int128 unscaled = 0;
  int scale = 0;
};
std::optional<ExactDecimal> ParseExactDecimal(std::string_view literal);
// Whether `text` is a number as JSON writes it: -?(0|[1-9]digits)[.digits][(e|E)[+-]digits].
bool IsNumberLiteral(std::string_view text);
// Whether `value`, the double nearest to the number literal, reads back as the same number: true
// for every literal of at most 15 significant digits, and for longer ones that happen to be what
// the double prints ("0.30000000000000004"); false for "0.1234567890123456789".
bool DoubleHoldsLiteral(std::string_view literal, double value);
// 10^0 to 10^22, each exactly a double: an integer of at most 53 bits multiplied or divided by one
// of them rounds once to the double nearest the exact result, as reading its decimal text does
// (Clinger's fast path).
inline constexpr std::array<double, 23> kExactPowersOfTen = {
    1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
// Integers up to 2^53 in magnitude are exactly doubles; beyond, a double loses digits.
constexpr bool IsExactInDouble(int64_t integer) {
  constexpr int64_t kMaxExactDoubleInteger = int64_t{1} << 53;
  return integer >= -kMaxExactDoubleInteger && integer <= kMaxExactDoubleInteger;
}

int64_t DaysFromCivil(int64_t year, unsigned month, unsigned day);
struct CivilDate {
  int64_t year = 1970;  // astronomical: 0 is 1 BC
  unsigned month = 1;
  unsigned day = 1;
};
CivilDate CivilFromDays(int64_t days);  // days since 1970-01-01
std::string FormatDate(int32_t days);
std::string FormatTimestamp(int64_t micros, bool with_zone);  // "2024-01-15T10:30:00.000000[Z]"

// Unix seconds from 2010 (10–11 digits) or Unix milliseconds 2010–2040 (13 digits) → µs.
std::optional<int64_t> EpochIntegerToMicros(int64_t value);

}  // namespace skippr::schema::internal
