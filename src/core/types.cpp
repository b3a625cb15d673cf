#include "core/types.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <string>

namespace skippr {

namespace {

const std::vector<Field>& EmptyFields() {
  static const std::vector<Field> kEmpty;
  return kEmpty;
}

std::string Lowercase(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string_view Trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front())))
    text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())))
    text.remove_suffix(1);
  return text;
}

bool ParseSmallInt(std::string_view text, int* out) {
  text = Trim(text);
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return error == std::errc() && end == text.data() + text.size();
}

}  // namespace

Result<LogicalType> LogicalType::Decimal(int precision, int scale) {
  if (precision < 1 || precision > 38 || scale < 0 || scale > precision) {
    return Status::InvalidArgument("decimal(" + std::to_string(precision) + ", " +
                                   std::to_string(scale) +
                                   ") is not a valid decimal: precision must be 1..38 and scale "
                                   "0..precision");
  }
  LogicalType type(TypeId::kDecimal);
  type.precision_ = precision;
  type.scale_ = scale;
  return type;
}

LogicalType LogicalType::Struct(std::vector<Field> fields) {
  LogicalType type(TypeId::kStruct);
  type.children_ = std::make_shared<std::vector<Field>>(std::move(fields));
  return type;
}

LogicalType LogicalType::List(Field element) {
  LogicalType type(TypeId::kList);
  type.children_ =
      std::make_shared<std::vector<Field>>(std::vector<Field>{std::move(element)});
  return type;
}

LogicalType LogicalType::Map(Field key, Field value) {
  LogicalType type(TypeId::kMap);
  key.nullable = false;  // Iceberg map keys are required
  type.children_ = std::make_shared<std::vector<Field>>(
      std::vector<Field>{std::move(key), std::move(value)});
  return type;
}

const std::vector<Field>& LogicalType::children() const {
  return children_ ? *children_ : EmptyFields();
}

std::vector<Field>& LogicalType::mutable_children() {
  if (!children_) children_ = std::make_shared<std::vector<Field>>();
  if (children_.use_count() > 1) children_ = std::make_shared<std::vector<Field>>(*children_);
  return *children_;
}

std::string LogicalType::ToString() const {
  switch (id_) {
    case TypeId::kBoolean:
      return "boolean";
    case TypeId::kInt:
      return "int";
    case TypeId::kLong:
      return "long";
    case TypeId::kFloat:
      return "float";
    case TypeId::kDouble:
      return "double";
    case TypeId::kDecimal:
      return "decimal(" + std::to_string(precision_) + ", " + std::to_string(scale_) + ")";
    case TypeId::kDate:
      return "date";
    case TypeId::kTime:
      return "time";
    case TypeId::kTimestamp:
      return "timestamp";
    case TypeId::kTimestampTz:
      return "timestamptz";
    case TypeId::kString:
      return "string";
    case TypeId::kBinary:
      return "binary";
    case TypeId::kUuid:
      return "uuid";
    case TypeId::kStruct: {
      std::string text = "struct<";
      for (size_t i = 0; i < children().size(); ++i) {
        if (i) text += ", ";
        text += children()[i].name + ": " + children()[i].type.ToString();
      }
      return text + ">";
    }
    case TypeId::kList:
      return "list<" + children()[0].type.ToString() + ">";
    case TypeId::kMap:
      return "map<" + children()[0].type.ToString() + ", " + children()[1].type.ToString() + ">";
  }
  return "unknown";
}

bool operator==(const LogicalType& a, const LogicalType& b) {
  if (a.id_ != b.id_ || a.precision_ != b.precision_ || a.scale_ != b.scale_) return false;
  return a.children() == b.children();
}

std::string_view PrimitiveTypeNames() {
  return "boolean, int, long, float, double, decimal(p,s), date, time, timestamp, timestamptz, "
         "string, binary, uuid";
}

Result<LogicalType> ParseLogicalType(std::string_view text) {
  const std::string name = Lowercase(Trim(text));
  if (name == "boolean" || name == "bool") return LogicalType::Boolean();
  if (name == "int" || name == "integer" || name == "int32") return LogicalType::Int();
  if (name == "long" || name == "bigint" || name == "int64") return LogicalType::Long();
  if (name == "float" || name == "real" || name == "float32") return LogicalType::Float();
  if (name == "double" || name == "float64") return LogicalType::Double();
  if (name == "date") return LogicalType::Date();
  if (name == "time") return LogicalType::Time();
  if (name == "timestamp") return LogicalType::Timestamp();
  if (name == "timestamptz") return LogicalType::TimestampTz();
  if (name == "string" || name == "varchar" || name == "text") return LogicalType::String();
  if (name == "binary" || name == "blob") return LogicalType::Binary();
  if (name == "uuid") return LogicalType::Uuid();
  if (name.rfind("decimal(", 0) == 0 && name.back() == ')') {
    std::string_view args(name);
    args = args.substr(8, args.size() - 9);
    const size_t comma = args.find(',');
    int precision = 0;
    int scale = 0;
    if (comma != std::string_view::npos && ParseSmallInt(args.substr(0, comma), &precision) &&
        ParseSmallInt(args.substr(comma + 1), &scale)) {
      return LogicalType::Decimal(precision, scale);
    }
  }
  return Status::InvalidArgument("unknown type '" + std::string(Trim(text)) +
                                 "'; types are: " + std::string(PrimitiveTypeNames()));
}

bool CanPromote(const LogicalType& from, const LogicalType& to) {
  if (from == to) return true;
  if (from.id() == TypeId::kInt && to.id() == TypeId::kLong) return true;
  if (from.id() == TypeId::kFloat && to.id() == TypeId::kDouble) return true;
  return from.id() == TypeId::kDecimal && to.id() == TypeId::kDecimal &&
         from.decimal_scale() == to.decimal_scale() &&
         to.decimal_precision() >= from.decimal_precision();
}

}  // namespace skippr
