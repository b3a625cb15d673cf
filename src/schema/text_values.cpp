#include "schema/text_values.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>

namespace skippr::schema::internal {

namespace {
bool Digits(std::string_view text, size_t at, size_t count, int* out) {
  if (at + count > text.size()) return false;
  int value = 0;
  for (size_t i = at; i < at + count; ++i) {
    if (text[i] < '0' || text[i] > '9') return false;
    value = value * 10 + (text[i] - '0');
  }
  *out = value;
  return true;
}

bool IsLeap(int year) { return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0; }

bool ValidDate(int year, int month, int day) {
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (month < 1 || month > 12 || day < 1) return false;
  return day <= kDays[month - 1] + (month == 2 && IsLeap(year) ? 1 : 0);
}

// "HH:MM[:SS[.frac]]" starting at `at`; returns the index after it.
std::optional<size_t> ParseClock(std::string_view text, size_t at, int64_t* micros) {
  int hour = 0;
  int minute = 0;
  int second = 0;
  if (!Digits(text, at, 2, &hour) || at + 2 >= text.size() || text[at + 2] != ':' ||
      !Digits(text, at + 3, 2, &minute)) {
    return std::nullopt;
  }
  size_t next = at + 5;
  int64_t fraction_micros = 0;
  if (next < text.size() && text[next] == ':') {
    if (!Digits(text, next + 1, 2, &second)) return std::nullopt;
    next += 3;
    if (next < text.size() && text[next] == '.') {
      ++next;
      int64_t scale = 100000;
      size_t digits = 0;
      while (next < text.size() && text[next] >= '0' && text[next] <= '9') {
        if (scale > 0) fraction_micros += (text[next] - '0') * scale;  // beyond µs is truncated
        scale /= 10;
        ++next;
        ++digits;
      }
      if (digits == 0) return std::nullopt;
    }
  }
  if (hour > 23 || minute > 59 || second > 60) return std::nullopt;  // 60: a leap second
  *micros = ((hour * 60LL + minute) * 60 + second) * 1'000'000 + fraction_micros;
  return next;
}
}  // namespace

int64_t DaysFromCivil(int64_t year, unsigned month, unsigned day) {
  year -= month <= 2;
  const int64_t era = (year >= 0 ? year : year - 399) / 400;
  const unsigned year_of_era = static_cast<unsigned>(year - era * 400);
  const unsigned day_of_year = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1;
  const unsigned day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
  return era * 146097 + static_cast<int64_t>(day_of_era) - 719468;
}

std::optional<int32_t> ParseDate(std::string_view text) {
  int year = 0;
  int month = 0;
  int day = 0;
  if (text.size() != 10 || text[4] != '-' || text[7] != '-' || !Digits(text, 0, 4, &year) ||
      !Digits(text, 5, 2, &month) || !Digits(text, 8, 2, &day) || !ValidDate(year, month, day)) {
    return std::nullopt;
  }
  return static_cast<int32_t>(DaysFromCivil(year, month, day));
}

std::optional<ParsedTimestamp> ParseTimestamp(std::string_view text) {
  if (text.size() < 16 || (text[10] != 'T' && text[10] != 't' && text[10] != ' ')) return std::nullopt;
  const std::optional<int32_t> days = ParseDate(text.substr(0, 10));
  if (!days) return std::nullopt;
  int64_t clock_micros = 0;
  const std::optional<size_t> end = ParseClock(text, 11, &clock_micros);
  if (!end) return std::nullopt;
  ParsedTimestamp parsed;
  parsed.micros = *days * 86'400'000'000LL + clock_micros;
  size_t at = *end;
  if (at == text.size()) return parsed;
  if ((text[at] == 'Z' || text[at] == 'z') && at + 1 == text.size()) {
    parsed.has_zone = true;
    return parsed;
  }
  if (text[at] != '+' && text[at] != '-') return std::nullopt;
  const int sign = text[at] == '+' ? 1 : -1;
  int offset_hours = 0;
  int offset_minutes = 0;
  if (!Digits(text, at + 1, 2, &offset_hours)) return std::nullopt;
  at += 3;
  if (at < text.size() && text[at] == ':') ++at;
  if (at < text.size() && !Digits(text, at, 2, &offset_minutes)) return std::nullopt;
  if (at < text.size()) at += 2;
  if (at != text.size() || offset_hours > 23 || offset_minutes > 59) return std::nullopt;
  parsed.micros -= sign * (offset_hours * 60LL + offset_minutes) * 60'000'000LL;
  parsed.has_zone = true;
  return parsed;
}

std::optional<int64_t> ParseTime(std::string_view text) {
  int64_t micros = 0;
  const std::optional<size_t> end = ParseClock(text, 0, &micros);
  if (!end || *end != text.size()) return std::nullopt;
  return micros;
}

std::optional<int64_t> ParseInteger(std::string_view text) {
  size_t at = text.size() > 1 && text[0] == '-' ? 1 : 0;
  if (at >= text.size()) return std::nullopt;
  if (text[at] == '0' && text.size() > at + 1) return std::nullopt;  // "007" is an identifier
  int64_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::optional<double> ParseReal(std::string_view text) {
  if (text.empty()) return std::nullopt;
  size_t at = text[0] == '-' ? 1 : 0;
  if (at >= text.size() || text[at] < '0' || text[at] > '9') return std::nullopt;
  if (text[at] == '0' && at + 1 < text.size() && text[at + 1] >= '0' && text[at + 1] <= '9') {
    return std::nullopt;  // leading zeros: an identifier, not a number
  }
  double value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || !std::isfinite(value)) {
    return std::nullopt;
  }
  return value;
}

namespace {
constexpr int kMaxDecimalDigits = 38;

__int128 PowerOfTen(int exponent) {
  __int128 power = 1;
  for (int i = 0; i < exponent; ++i) power *= 10;
  return power;
}

// A number literal's significant digits (no sign, point, leading or trailing zeros; empty for
// zero) and the power of ten that places them: value = 0.<digits> × 10^exponent.
struct Significand {
  std::string digits;
  int64_t exponent = 0;
};

// nullopt unless `literal` is -?digits[.digits][(e|E)[+-]digits] (leading zeros are the caller's
// rule: this only reads numbers).
std::optional<Significand> SignificandOf(std::string_view literal) {
  size_t at = !literal.empty() && literal[0] == '-' ? 1 : 0;
  Significand significand;
  int64_t integer_digits = 0;
  int64_t leading_zeros = 0;  // each one moves the point: 0.0012 = 0.12 × 10^-2
  bool is_in_fraction = false;
  const size_t digits_begin = at;
  for (; at < literal.size(); ++at) {
    const char c = literal[at];
    if (c == '.' && !is_in_fraction && at > digits_begin) {
      is_in_fraction = true;
      continue;
    }
    if (c < '0' || c > '9') break;
    if (!is_in_fraction) ++integer_digits;
    if (c == '0' && significand.digits.empty()) {
      ++leading_zeros;
    } else {
      significand.digits.push_back(c);
    }
  }
  if (at == digits_begin || literal[at - 1] == '.') return std::nullopt;
  int64_t written_exponent = 0;
  if (at < literal.size()) {
    if (literal[at] != 'e' && literal[at] != 'E') return std::nullopt;
    ++at;
    const bool is_negative = at < literal.size() && literal[at] == '-';
    if (at < literal.size() && (literal[at] == '-' || literal[at] == '+')) ++at;
    if (at == literal.size()) return std::nullopt;
    for (; at < literal.size(); ++at) {
      if (literal[at] < '0' || literal[at] > '9') return std::nullopt;
      // Saturates far beyond any double or decimal, so absurd exponents cannot overflow.
      written_exponent = std::min<int64_t>(written_exponent * 10 + (literal[at] - '0'), 1 << 30);
    }
    if (is_negative) written_exponent = -written_exponent;
  }
  while (!significand.digits.empty() && significand.digits.back() == '0') {
    significand.digits.pop_back();
  }
  if (significand.digits.empty()) return Significand{};  // zero, however it is written
  significand.exponent = integer_digits - leading_zeros + written_exponent;
  return significand;
}
}  // namespace

std::optional<__int128> ParseDecimal(std::string_view text, int scale) {
  bool negative = false;
  size_t at = 0;
  if (!text.empty() && (text[0] == '-' || text[0] == '+')) {
    negative = text[0] == '-';
    at = 1;
  }
  const __int128 limit = PowerOfTen(kMaxDecimalDigits);
  __int128 unscaled = 0;
  int fraction_digits = -1;
  bool any_digit = false;
  for (; at < text.size(); ++at) {
    const char c = text[at];
    if (c == '.' && fraction_digits < 0) {
      fraction_digits = 0;
      continue;
    }
    if (c < '0' || c > '9') return std::nullopt;
    any_digit = true;
    if (fraction_digits >= 0 && ++fraction_digits > scale) {
      if (c != '0') return std::nullopt;  // more precision than the column keeps
      continue;
    }
    // Checked before multiplying: 39 digits would overflow 128 bits.
    if (unscaled >= limit / 10) return std::nullopt;
    unscaled = unscaled * 10 + (c - '0');
  }
  if (!any_digit) return std::nullopt;
  for (int i = std::max(fraction_digits, 0); i < scale; ++i) {
    if (unscaled >= limit / 10) return std::nullopt;
    unscaled *= 10;
  }
  return negative ? -unscaled : unscaled;
}

bool FitsDecimalPrecision(__int128 unscaled, int precision) {
  const __int128 limit = PowerOfTen(std::min(precision, kMaxDecimalDigits));
  return unscaled > -limit && unscaled < limit;
}

std::optional<ExactDecimal> ParseExactDecimal(std::string_view literal) {
  const std::optional<Significand> significand = SignificandOf(literal);
  if (!significand) return std::nullopt;
  const int64_t digit_count = static_cast<int64_t>(significand->digits.size());
  int64_t scale = digit_count - significand->exponent;
  const int64_t padding_zeros = scale < 0 ? -scale : 0;  // 12e3: 12 → 12000
  if (scale < 0) scale = 0;
  if (digit_count + padding_zeros > kMaxDecimalDigits || scale > kMaxDecimalDigits) {
    return std::nullopt;
  }
  __int128 unscaled = 0;
  for (char digit : significand->digits) unscaled = unscaled * 10 + (digit - '0');
  unscaled *= PowerOfTen(static_cast<int>(padding_zeros));
  if (literal[0] == '-') unscaled = -unscaled;
  return ExactDecimal{unscaled, static_cast<int>(scale)};
}

bool IsNumberLiteral(std::string_view text) {
  const size_t first_digit = !text.empty() && text[0] == '-' ? 1 : 0;
  const bool has_leading_zero = text.size() > first_digit + 1 && text[first_digit] == '0' &&
                                text[first_digit + 1] >= '0' && text[first_digit + 1] <= '9';
  return !has_leading_zero && SignificandOf(text).has_value();
}

bool DoubleHoldsLiteral(std::string_view literal, double value) {
  // Any literal of at most 15 significant digits reads back from its nearest double (DBL_DIG).
  size_t significant_digits = 0;
  bool has_leading_digit = false;
  for (char c : literal) {
    if (c == 'e' || c == 'E') break;
    if (c < '0' || c > '9') continue;
    has_leading_digit |= c != '0';
    if (has_leading_digit) ++significant_digits;
  }
  // Only normal doubles carry those digits: an underflow reads as 0, a denormal keeps fewer.
  const bool is_normal_or_zero =
      std::fpclassify(value) == FP_NORMAL || (value == 0 && significant_digits == 0);
  if (significant_digits <= 15 && is_normal_or_zero) return true;
  // Longer: the same number only if the double's shortest text has the same significant digits.
  char shortest[32];
  const auto printed = std::to_chars(shortest, shortest + sizeof(shortest), value);
  const std::optional<Significand> written = SignificandOf(literal);
  const std::optional<Significand> held =
      SignificandOf(std::string_view(shortest, static_cast<size_t>(printed.ptr - shortest)));
  return written && held && written->digits == held->digits &&
         written->exponent == held->exponent;
}

CivilDate CivilFromDays(int64_t days) {
  // civil_from_days (H. Hinnant)
  const int64_t z = days + 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const unsigned doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t y = static_cast<int64_t>(yoe) + era * 400;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  const unsigned d = doy - (153 * mp + 2) / 5 + 1;
  const unsigned m = mp < 10 ? mp + 3 : mp - 9;
  return {y + (m <= 2), m, d};
}

std::string FormatDate(int32_t days) {
  const CivilDate date = CivilFromDays(days);
  return fmt::format("{:04}-{:02}-{:02}", date.year, date.month, date.day);
}

std::string FormatTimestamp(int64_t micros, bool with_zone) {
  int64_t days = micros / 86'400'000'000LL;
  int64_t rest = micros % 86'400'000'000LL;
  if (rest < 0) {
    rest += 86'400'000'000LL;
    --days;
  }
  const int64_t seconds = rest / 1'000'000;
  return fmt::format("{}T{:02}:{:02}:{:02}.{:06}{}", FormatDate(static_cast<int32_t>(days)),
                     seconds / 3600, seconds / 60 % 60, seconds % 60, rest % 1'000'000,
                     with_zone ? "Z" : "");
}

std::optional<int64_t> EpochIntegerToMicros(int64_t value) {
  constexpr int64_t kFrom2010Seconds = 1'262'304'000;
  constexpr int64_t kElevenDigits = 99'999'999'999;
  constexpr int64_t kFrom2010Millis = 1'262'304'000'000;
  constexpr int64_t kUntil2040Millis = 2'208'988'800'000;
  if (value >= kFrom2010Seconds && value <= kElevenDigits) return value * 1'000'000;
  if (value >= kFrom2010Millis && value < kUntil2040Millis) return value * 1'000;
  return std::nullopt;
}

}  // namespace skippr::schema::internal
