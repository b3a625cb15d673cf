#include "lake/internal/statistics.hpp"

#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <optional>
#include <type_traits>
#include <variant>

#include "core/check.hpp"

// Column statistics of the files SkipprLake writes (Iceberg's value, null and NaN counts and
// bounds), and the manifest's bounds read back for query's file pruning.
namespace skippr::lake::internal {

using query::QuoteIdentifier;
using query::QuoteLiteral;

namespace {

// -0.0 before 0.0, so a bound is never the wrong zero.
bool DoubleBefore(double a, double b) {
  return a < b || (a == b && std::signbit(a) && !std::signbit(b));
}

// A reader of row `row`'s value in a fixed-width column of `T`s, inlined where it is called.
template <typename T>
auto FixedAt(const Column& column) {
  SKIPPR_CHECK(column.fixed.size() == static_cast<size_t>(column.length) * sizeof(T));
  return [data = column.fixed.data()](int64_t row) {
    T value;
    std::memcpy(&value, data + static_cast<size_t>(row) * sizeof(T), sizeof(T));
    return value;
  };
}

}  // namespace

// Value, null and NaN counts and bounds of one top-level primitive field over a landing's rows,
// taken a column at a time: a typed loop per physical kind, with no per-row dispatch.
struct FieldStatistics {
  int64_t values = 0;
  int64_t nulls = 0;
  int64_t nans = 0;
  std::optional<int64_t> min_int, max_int;     // boolean, int, long, date, timestamps
  std::optional<double> min_double, max_double;  // float, double (NaN excluded)
  std::optional<__int128> min_decimal,
      max_decimal;  // decimal: unscaled (a widened precision keeps the scale)
  // string: owned, since a streamed landing lets each batch go once DuckDB has read it
  std::optional<std::string> min_bytes, max_bytes;

  void AddNulls(int64_t count) {
    values += count;
    nulls += count;
  }

  // Every row of `column`, read as a value of `type` (the field's: an int or long column of a
  // field that widened to double reads as doubles).
  void AddColumn(const Column& column, const LogicalType& type) {
    values += column.length;
    const int64_t present = CountPresent(column);
    nulls += column.length - present;
    if (present == 0 || !query::HasColumnBounds(type)) return;
    const bool is_all_present = present == column.length;
    switch (PhysicalKindOf(type.id())) {
      case PhysicalKind::kBool:
        return AddRange(column, is_all_present, min_int, max_int,
                        [&](int64_t row) { return int64_t{column.BoolAt(row)}; });
      case PhysicalKind::kInt64:
        return AddRange(column, is_all_present, min_int, max_int, FixedAt<int64_t>(column));
      case PhysicalKind::kDouble:
        if (PhysicalKindOf(column.type.id()) == PhysicalKind::kInt64) {
          return AddDoubles(column, is_all_present, [at = FixedAt<int64_t>(column)](int64_t row) {
            return static_cast<double>(at(row));
          });
        }
        return AddDoubles(column, is_all_present, FixedAt<double>(column));
      case PhysicalKind::kDecimal128:
        // The 16 bytes are the unscaled value, low half first: an __int128 on this host.
        return AddRange(column, is_all_present, min_decimal, max_decimal,
                        FixedAt<__int128>(column));
      case PhysicalKind::kBytes:
        return AddRange(column, is_all_present, min_bytes, max_bytes,
                        [&](int64_t row) { return column.BytesAt(row); });
      default:
        return;
    }
  }

 private:
  static int64_t CountPresent(const Column& column) {
    const int64_t whole_bytes = column.length / 8;
    int64_t present = 0;
    for (int64_t i = 0; i < whole_bytes; ++i) present += std::popcount(column.validity[i]);
    for (int64_t row = whole_bytes * 8; row < column.length; ++row) present += column.IsValid(row);
    return present;
  }

  // Min and max of the present rows' `value_at(row)`, merged into `min` and `max`. A bound may
  // own what a value only views (strings: views into a batch, copied only when they are a bound).
  template <typename Bound, typename ValueAt>
  static void AddRange(const Column& column, bool is_all_present, std::optional<Bound>& min,
                       std::optional<Bound>& max, ValueAt value_at) {
    using T = decltype(value_at(int64_t{0}));
    int64_t row = 0;
    if (!is_all_present) {
      while (!column.IsValid(row)) ++row;  // a present row exists
    }
    T low = value_at(row);
    T high = low;
    for (++row; row < column.length; ++row) {
      if (!is_all_present && !column.IsValid(row)) continue;
      const T value = value_at(row);
      if (value < low) low = value;
      if (high < value) high = value;
    }
    if (!min || low < *min) min = low;
    if (!max || *max < high) max = high;
  }

  // As AddRange, for doubles: NaN is counted and never a bound; -0.0 sorts before 0.0.
  template <typename ValueAt>
  void AddDoubles(const Column& column, bool is_all_present, ValueAt value_at) {
    std::optional<double> low, high;
    for (int64_t row = 0; row < column.length; ++row) {
      if (!is_all_present && !column.IsValid(row)) continue;
      const double value = value_at(row);
      if (std::isnan(value)) {
        ++nans;
      } else if (!low) {
        low = high = value;
      } else {
        if (DoubleBefore(value, *low)) low = value;
        if (DoubleBefore(*high, value)) high = value;
      }
    }
    if (low && (!min_double || DoubleBefore(*low, *min_double))) min_double = low;
    if (high && (!max_double || DoubleBefore(*max_double, *high))) max_double = high;
  }
};

namespace {


iceberg::Decimal128 ToDecimal128(__int128 unscaled) {
  const auto bits = static_cast<unsigned __int128>(unscaled);
  return {static_cast<uint64_t>(bits), static_cast<int64_t>(static_cast<uint64_t>(bits >> 64))};
}

std::optional<iceberg::PrimitiveValue> AsPrimitive(const LogicalType& type,
                                                   const FieldStatistics& stats, bool is_min) {
  const auto& int_bound = is_min ? stats.min_int : stats.max_int;
  const auto& double_bound = is_min ? stats.min_double : stats.max_double;
  const auto& bytes_bound = is_min ? stats.min_bytes : stats.max_bytes;
  switch (type.id()) {
    case TypeId::kBoolean:
      if (int_bound) return iceberg::PrimitiveValue(*int_bound != 0);
      break;
    case TypeId::kInt:
    case TypeId::kDate:
      if (int_bound) return iceberg::PrimitiveValue(static_cast<int32_t>(*int_bound));
      break;
    case TypeId::kLong:
    case TypeId::kTimestamp:
    case TypeId::kTimestampTz:
      if (int_bound) return iceberg::PrimitiveValue(*int_bound);
      break;
    case TypeId::kFloat:
      if (double_bound) return iceberg::PrimitiveValue(static_cast<float>(*double_bound));
      break;
    case TypeId::kDouble:
      if (double_bound) return iceberg::PrimitiveValue(*double_bound);
      break;
    case TypeId::kDecimal:
      if (const auto& bound = is_min ? stats.min_decimal : stats.max_decimal) {
        return iceberg::PrimitiveValue(ToDecimal128(*bound));
      }
      break;
    case TypeId::kString:
      if (bytes_bound) return iceberg::PrimitiveValue(std::string(*bytes_bound));
      break;
    default:
      break;
  }
  return std::nullopt;
}

bool HasStatistics(const Field& field) {
  const TypeId id = field.type.id();
  return id != TypeId::kStruct && id != TypeId::kList && id != TypeId::kMap;
}

}  // namespace

FileStatistics::FileStatistics(std::vector<Field> fields)
    : fields_(std::move(fields)), statistics_(fields_.size()) {}

FileStatistics::~FileStatistics() = default;

void FileStatistics::Add(const Batch& batch) {
  for (size_t f = 0; f < fields_.size(); ++f) {
    const Field& field = fields_[f];
    if (!HasStatistics(field)) continue;
    FieldStatistics& stats = statistics_[f];
    const Column* column = nullptr;
    for (size_t c = 0; c < batch.fields.size(); ++c) {
      if (batch.fields[c].id == field.id) column = &batch.columns[c];
    }
    if (column == nullptr) {
      stats.AddNulls(batch.num_rows);
      continue;
    }
    SKIPPR_CHECK_MSG(column->length == batch.num_rows, "a batch column has another row count");
    stats.AddColumn(*column, field.type);
  }
}

Status FileStatistics::WriteTo(iceberg::DataFile& file) const {
  for (size_t f = 0; f < fields_.size(); ++f) {
    const Field& field = fields_[f];
    if (!HasStatistics(field)) continue;
    const FieldStatistics& stats = statistics_[f];
    const TypeId id = field.type.id();
    SKIPPR_CHECK_MSG(stats.values == file.record_count, "statistics cover another row count");
    file.value_counts[field.id] = stats.values;
    file.null_value_counts[field.id] = stats.nulls;
    if (id == TypeId::kFloat || id == TypeId::kDouble) file.nan_value_counts[field.id] = stats.nans;
    if (auto min = AsPrimitive(field.type, stats, /*is_min=*/true)) {
      SKIPPR_ASSIGN_OR_RETURN(std::string encoded, iceberg::EncodeSingleValue(field.type, *min));
      file.lower_bounds[field.id] = iceberg::TruncateLowerBound(field.type, std::move(encoded));
    }
    if (auto max = AsPrimitive(field.type, stats, /*is_min=*/false)) {
      SKIPPR_ASSIGN_OR_RETURN(std::string encoded, iceberg::EncodeSingleValue(field.type, *max));
      if (auto upper = iceberg::TruncateUpperBound(field.type, std::move(encoded))) {
        file.upper_bounds[field.id] = std::move(*upper);
      }
    }
  }
  return Status::OK();
}

Status AddColumnStatisticsFromBatches(const std::vector<Field>& fields,
                                      const std::vector<std::shared_ptr<const Batch>>& batches,
                                      iceberg::DataFile& file) {
  FileStatistics statistics(fields);
  for (const auto& batch : batches) statistics.Add(*batch);
  return statistics.WriteTo(file);
}

Result<int64_t> RowCountOf(query::Engine& engine, const std::string& path) {
  SKIPPR_ASSIGN_OR_RETURN(
      query::QueryResult result,
      engine.Run(fmt::format("SELECT num_rows FROM parquet_file_metadata({})", QuoteLiteral(path))));
  SKIPPR_CHECK(result.rows.size() == 1 && result.rows[0].size() == 1 && result.rows[0][0]);
  return std::stoll(*result.rows[0][0]);
}

Status CheckRowCount(query::Engine& engine, const std::string& path, int64_t expected_rows) {
  SKIPPR_ASSIGN_OR_RETURN(const int64_t rows, RowCountOf(engine, path));
  SKIPPR_CHECK_MSG(rows == expected_rows, "the data file holds another row count");
  return Status::OK();
}

namespace {

// A SQL expression whose text DuckDB prints in a form ParseBound reads, for min or max of a
// top-level column; nullopt for types that get no bounds (binary, uuid, time, nested).
std::optional<std::string> BoundExpression(const Field& field, std::string_view aggregate) {
  const std::string column = QuoteIdentifier(field.name);
  switch (field.type.id()) {
    case TypeId::kBoolean:
      return fmt::format("{}({}::INTEGER)", aggregate, column);
    case TypeId::kInt:
    case TypeId::kLong:
    case TypeId::kDecimal:  // printed with exactly the type's scale digits
    case TypeId::kString:
      return fmt::format("{}({})", aggregate, column);
    case TypeId::kFloat:
    case TypeId::kDouble:  // NaN is never a bound
      return fmt::format("{}({}) FILTER (WHERE NOT isnan({}))", aggregate, column, column);
    case TypeId::kDate:
      return fmt::format("date_diff('day', DATE '1970-01-01', {}({}))", aggregate, column);
    case TypeId::kTimestamp:
    case TypeId::kTimestampTz:
      return fmt::format("epoch_us({}({}))", aggregate, column);
    default:
      return std::nullopt;
  }
}

// DuckDB's text of a decimal ("-12.50") as its unscaled value at `scale`; nullopt when the text
// has another number of fraction digits or is not a number.
std::optional<__int128> UnscaledDecimal(std::string_view text, int scale) {
  const bool is_negative = text.starts_with('-');
  if (is_negative) text.remove_prefix(1);
  const size_t point = text.find('.');
  const size_t fraction = point == std::string_view::npos ? 0 : text.size() - point - 1;
  if (static_cast<int>(fraction) != scale || text.empty()) return std::nullopt;
  __int128 unscaled = 0;
  for (char c : text) {
    if (c == '.') continue;
    if (c < '0' || c > '9') return std::nullopt;
    unscaled = unscaled * 10 + (c - '0');
  }
  return is_negative ? -unscaled : unscaled;
}

std::optional<iceberg::PrimitiveValue> ParseBound(const LogicalType& type, const std::string& text) {
  switch (type.id()) {
    case TypeId::kBoolean:
      return iceberg::PrimitiveValue(text != "0");
    case TypeId::kInt:
    case TypeId::kDate:
      return iceberg::PrimitiveValue(static_cast<int32_t>(std::stol(text)));
    case TypeId::kLong:
    case TypeId::kTimestamp:
    case TypeId::kTimestampTz:
      return iceberg::PrimitiveValue(static_cast<int64_t>(std::stoll(text)));
    case TypeId::kFloat:
      return iceberg::PrimitiveValue(std::strtof(text.c_str(), nullptr));
    case TypeId::kDouble:
      return iceberg::PrimitiveValue(std::strtod(text.c_str(), nullptr));
    case TypeId::kDecimal:
      if (std::optional<__int128> unscaled = UnscaledDecimal(text, type.decimal_scale())) {
        return iceberg::PrimitiveValue(ToDecimal128(*unscaled));
      }
      return std::nullopt;
    case TypeId::kString:
      return iceberg::PrimitiveValue(text);
    default:
      return std::nullopt;
  }
}

// A manifest bound as the Value of the field's kind; Null when it cannot be decoded (a file written
// under an older type that no promotion explains) or the type has no ordered Value.
Value BoundValue(const LogicalType& type, const std::string& bytes) {
  Result<iceberg::PrimitiveValue> decoded = iceberg::DecodeSingleValue(type, bytes);
  if (!decoded.ok()) return Value::Null();
  return std::visit(
      [&](const auto& value) -> Value {
        using T = std::decay_t<decltype(value)>;
        if constexpr (std::is_same_v<T, bool>) {
          return Value::Bool(value);
        } else if constexpr (std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t>) {
          switch (type.id()) {
            case TypeId::kInt:
            case TypeId::kLong:
              return Value::Int(value);
            case TypeId::kDate:
              return Value::Date(static_cast<int32_t>(value));
            case TypeId::kTimestamp:
              return Value::Timestamp(value);
            case TypeId::kTimestampTz:
              return Value::TimestampTz(value);
            default:
              return Value::Null();  // time
          }
        } else if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
          return Value::Double(static_cast<double>(value));
        } else if constexpr (std::is_same_v<T, iceberg::Decimal128>) {
          const __int128 unscaled = static_cast<__int128>(
              static_cast<unsigned __int128>(static_cast<uint64_t>(value.high)) << 64 | value.low);
          return Value::Decimal(unscaled, static_cast<uint8_t>(type.decimal_precision()),
                                static_cast<uint8_t>(type.decimal_scale()));
        } else {
          return type.id() == TypeId::kString ? Value::String(value) : Value::Null();
        }
      },
      *decoded);
}

}  // namespace

Status AddColumnStatisticsFromFile(query::Engine& engine, const std::vector<Field>& fields,
                                   const std::string& path, iceberg::DataFile& file) {
  struct Probe {
    const Field* field;
    size_t non_null, nan, min, max;  // result columns; SIZE_MAX when absent
  };
  std::vector<std::string> expressions = {"count(*)"};
  std::vector<Probe> probes;
  const auto add = [&](std::string expression) {
    expressions.push_back(std::move(expression));
    return expressions.size() - 1;
  };
  for (const Field& field : fields) {
    const TypeId id = field.type.id();
    if (id == TypeId::kStruct || id == TypeId::kList || id == TypeId::kMap) continue;
    Probe probe{&field, add(fmt::format("count({})", QuoteIdentifier(field.name))), SIZE_MAX,
                SIZE_MAX, SIZE_MAX};
    if (id == TypeId::kFloat || id == TypeId::kDouble) {
      probe.nan = add(fmt::format("count(*) FILTER (WHERE isnan({}))", QuoteIdentifier(field.name)));
    }
    if (auto min = BoundExpression(field, "min")) probe.min = add(*min);
    if (auto max = BoundExpression(field, "max")) probe.max = add(*max);
    probes.push_back(probe);
  }
  SKIPPR_ASSIGN_OR_RETURN(
      query::QueryResult result,
      engine.Run(fmt::format("SELECT {} FROM read_parquet({})", fmt::join(expressions, ", "),
                             QuoteLiteral(path))));
  SKIPPR_CHECK(result.rows.size() == 1 && result.rows[0].size() == expressions.size());
  const auto& row = result.rows[0];
  const int64_t rows = std::stoll(*row[0]);
  SKIPPR_CHECK_MSG(rows == file.record_count, "the data file holds another row count");
  for (const Probe& probe : probes) {
    const int32_t id = probe.field->id;
    const int64_t non_null = std::stoll(*row[probe.non_null]);
    file.value_counts[id] = rows;
    file.null_value_counts[id] = rows - non_null;
    if (probe.nan != SIZE_MAX) file.nan_value_counts[id] = std::stoll(*row[probe.nan]);
    const LogicalType& type = probe.field->type;
    if (probe.min != SIZE_MAX && row[probe.min]) {
      if (auto value = ParseBound(type, *row[probe.min])) {
        SKIPPR_ASSIGN_OR_RETURN(std::string encoded, iceberg::EncodeSingleValue(type, *value));
        file.lower_bounds[id] = iceberg::TruncateLowerBound(type, std::move(encoded));
      }
    }
    if (probe.max != SIZE_MAX && row[probe.max]) {
      if (auto value = ParseBound(type, *row[probe.max])) {
        SKIPPR_ASSIGN_OR_RETURN(std::string encoded, iceberg::EncodeSingleValue(type, *value));
        if (auto upper = iceberg::TruncateUpperBound(type, std::move(encoded))) {
          file.upper_bounds[id] = std::move(*upper);
        }
      }
    }
  }
  return Status::OK();
}

std::map<int32_t, query::ColumnStatistics> ColumnStatisticsOf(const iceberg::DataFile& file,
                                                              const iceberg::TableSchema& schema) {
  const auto count = [](const std::map<int32_t, int64_t>& counts,
                        int32_t id) -> std::optional<int64_t> {
    auto it = counts.find(id);
    return it == counts.end() ? std::nullopt : std::optional<int64_t>(it->second);
  };
  std::map<int32_t, query::ColumnStatistics> statistics;
  for (const Field& field : schema.fields) {
    if (field.type.is_nested()) continue;
    query::ColumnStatistics column;
    if (auto lower = file.lower_bounds.find(field.id); lower != file.lower_bounds.end()) {
      column.lower = BoundValue(field.type, lower->second);
    }
    if (auto upper = file.upper_bounds.find(field.id); upper != file.upper_bounds.end()) {
      column.upper = BoundValue(field.type, upper->second);
    }
    column.value_count = count(file.value_counts, field.id);
    column.null_count = count(file.null_value_counts, field.id);
    column.nan_count = count(file.nan_value_counts, field.id);
    const bool knows_something = !column.lower.is_null() || !column.upper.is_null() ||
                                 column.value_count || column.null_count || column.nan_count;
    if (knows_something) statistics.emplace(field.id, std::move(column));
  }
  return statistics;
}

}  // namespace skippr::lake::internal
