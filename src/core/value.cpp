#include "core/value.hpp"

#include <fmt/format.h>

#include <cmath>

namespace skippr {

const std::string& Value::EmptyText() {
  static const std::string empty;
  return empty;
}

const ValueList& Value::EmptyList() {
  static const ValueList empty;
  return empty;
}

const ValueObject& Value::EmptyObject() {
  static const ValueObject empty;
  return empty;
}

const Value* Value::Find(std::string_view name) const {
  for (const auto& [key, value] : as_object()) {
    if (key == name) return &value;
  }
  return nullptr;
}

namespace {
// The decimal digits of |value|; std::to_string has no 128-bit overload.
std::string DecimalDigits(__int128 value) {
  auto magnitude = value < 0 ? -static_cast<unsigned __int128>(value)
                             : static_cast<unsigned __int128>(value);
  std::string digits;
  do {
    digits.push_back(static_cast<char>('0' + static_cast<int>(magnitude % 10)));
    magnitude /= 10;
  } while (magnitude != 0);
  return std::string(digits.rbegin(), digits.rend());
}

void AppendJsonString(std::string& out, std::string_view text) {
  out.push_back('"');
  for (unsigned char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          out += fmt::format("\\u{:04x}", c);
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  out.push_back('"');
}

void AppendJson(std::string& out, const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kNull:
      out += "null";
      return;
    case Value::Kind::kBool:
      out += value.as_bool() ? "true" : "false";
      return;
    case Value::Kind::kInt:
    case Value::Kind::kDate:
    case Value::Kind::kTimestamp:
    case Value::Kind::kTimestampTz:
      out += std::to_string(value.as_int());
      return;
    case Value::Kind::kDouble:
      out += std::isfinite(value.as_double()) ? fmt::format("{}", value.as_double()) : "null";
      return;
    case Value::Kind::kDecimal: {
      const __int128 unscaled = value.decimal_unscaled();
      std::string digits = DecimalDigits(unscaled);
      const size_t scale = value.decimal_scale();
      if (digits.size() <= scale) digits.insert(0, scale + 1 - digits.size(), '0');
      if (scale > 0) digits.insert(digits.size() - scale, ".");
      if (unscaled < 0) out.push_back('-');
      out += digits;
      return;
    }
    case Value::Kind::kString:
    case Value::Kind::kBinary:
      AppendJsonString(out, value.as_string());
      return;
    case Value::Kind::kList: {
      out.push_back('[');
      for (size_t i = 0; i < value.as_list().size(); ++i) {
        if (i) out.push_back(',');
        AppendJson(out, value.as_list()[i]);
      }
      out.push_back(']');
      return;
    }
    case Value::Kind::kObject: {
      out.push_back('{');
      bool first = true;
      for (const auto& [key, field] : value.as_object()) {
        if (!first) out.push_back(',');
        first = false;
        AppendJsonString(out, key);
        out.push_back(':');
        AppendJson(out, field);
      }
      out.push_back('}');
      return;
    }
  }
}
}  // namespace

std::string Value::ToJson() const {
  std::string out;
  AppendJson(out, *this);
  return out;
}

bool operator==(const Value& a, const Value& b) {
  if (a.kind_ != b.kind_) return false;
  switch (a.kind_) {
    case Value::Kind::kNull:
      return true;
    case Value::Kind::kDouble:
      return a.real_ == b.real_;
    case Value::Kind::kString:
    case Value::Kind::kBinary:
      return a.text_ == b.text_;
    case Value::Kind::kList:
      return a.list_ == b.list_;
    case Value::Kind::kObject:
      return a.object_ == b.object_;
    case Value::Kind::kDecimal:
      return a.decimal_unscaled() == b.decimal_unscaled() && a.precision_ == b.precision_ &&
             a.scale_ == b.scale_;
    default:
      return a.integer_ == b.integer_;
  }
}

std::string_view ValueKindName(Value::Kind kind) {
  switch (kind) {
    case Value::Kind::kNull:
      return "null";
    case Value::Kind::kBool:
      return "boolean";
    case Value::Kind::kInt:
      return "integer";
    case Value::Kind::kDouble:
      return "double";
    case Value::Kind::kString:
      return "string";
    case Value::Kind::kBinary:
      return "binary";
    case Value::Kind::kDate:
      return "date";
    case Value::Kind::kTimestamp:
      return "timestamp";
    case Value::Kind::kTimestampTz:
      return "timestamptz";
    case Value::Kind::kDecimal:
      return "decimal";
    case Value::Kind::kList:
      return "list";
    case Value::Kind::kObject:
      return "object";
  }
  return "unknown";
}

}  // namespace skippr
