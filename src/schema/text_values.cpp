#include "schema/text_values.hpp"

#include <fmt/format.h>

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

std::optional<int64_t> ParseDecimal(std::string_view text, int scale) {
  bool negative = false;
  size_t at = 0;
  if (!text.empty() && (text[0] == '-' || text[0] == '+')) {
    negative = text[0] == '-';
    at = 1;
  }
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
    unscaled = unscaled * 10 + (c - '0');
    if (unscaled > INT64_MAX) return std::nullopt;
  }
  if (!any_digit) return std::nullopt;
  for (int i = std::max(fraction_digits, 0); i < scale; ++i) {
    unscaled *= 10;
    if (unscaled > INT64_MAX) return std::nullopt;
  }
  return static_cast<int64_t>(negative ? -unscaled : unscaled);
}

std::string FormatDate(int32_t days) {
  // civil_from_days (H. Hinnant)
  int64_t z = days + 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const unsigned doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t y = static_cast<int64_t>(yoe) + era * 400;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  const unsigned d = doy - (153 * mp + 2) / 5 + 1;
  const unsigned m = mp < 10 ? mp + 3 : mp - 9;
  return fmt::format("{:04}-{:02}-{:02}", y + (m <= 2), m, d);
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
