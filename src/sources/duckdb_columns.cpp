#include "sources/duckdb_columns.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <type_traits>
#include <utility>

#include "core/check.hpp"
#include "schema/text_values.hpp"

namespace skippr::sources::internal {

namespace {

using Copy = DuckdbColumnsPlan::Copy;
using Slot = schema::RecordLayout::Slot;
using ScalarToken = schema::ScalarToken;

bool IsIntegerType(duckdb_type type) {
  switch (type) {
    case DUCKDB_TYPE_TINYINT:
    case DUCKDB_TYPE_SMALLINT:
    case DUCKDB_TYPE_INTEGER:
    case DUCKDB_TYPE_BIGINT:
    case DUCKDB_TYPE_UTINYINT:
    case DUCKDB_TYPE_USMALLINT:
    case DUCKDB_TYPE_UINTEGER:
    case DUCKDB_TYPE_UBIGINT:
      return true;
    default:
      return false;
  }
}

// An integer of at most 53 bits divided by one of them is the double nearest the quotient (one
// rounding), as reading the decimal's text gives.
using schema::internal::kExactPowersOfTen;
// Decimals of up to 14 digits: to_json's text of one (a ".0" added) has at most 15 significant
// digits, which the JSON path reads as a double; longer ones it may read as decimals.
constexpr int64_t kMaxDecimalAsDouble = 99'999'999'999'999;

bool IsTimestampField(TypeId id) { return id == TypeId::kTimestamp || id == TypeId::kTimestampTz; }

// Which copy takes values of `source` into a field of type `field`, when the JSON path would read
// every such value (as to_json writes it) into that field the same way; nullopt otherwise.
std::optional<Copy::Kind> CopyKindFor(duckdb_type source, const LogicalType& field) {
  const TypeId id = field.id();
  if (field.is_nested()) return std::nullopt;
  if (IsIntegerType(source)) {
    // A JSON integer: every scalar field but boolean, date, binary and uuid may take one.
    const bool takes = id != TypeId::kBoolean && id != TypeId::kDate && id != TypeId::kBinary &&
                       id != TypeId::kUuid;
    return takes ? std::optional(Copy::Kind::kInteger) : std::nullopt;
  }
  switch (source) {
    case DUCKDB_TYPE_BOOLEAN:
      if (id == TypeId::kBoolean || id == TypeId::kString) return Copy::Kind::kBool;
      return std::nullopt;
    case DUCKDB_TYPE_FLOAT:
    case DUCKDB_TYPE_DOUBLE:
      // to_json writes the shortest text that reads back as the double; the JSON path reads that
      // text into a float or double field as the same double.
      if (id == TypeId::kFloat || id == TypeId::kDouble) return Copy::Kind::kReal;
      return std::nullopt;
    case DUCKDB_TYPE_DECIMAL:
      // A struct field holding decimals was inferred from their text: a double field.
      if (id == TypeId::kDecimal || id == TypeId::kFloat || id == TypeId::kDouble) {
        return Copy::Kind::kDecimal;
      }
      return std::nullopt;
    case DUCKDB_TYPE_DATE:
      if (id == TypeId::kDate || IsTimestampField(id)) return Copy::Kind::kDate;
      return std::nullopt;
    case DUCKDB_TYPE_TIME:
      if (id == TypeId::kTime) return Copy::Kind::kTime;
      return std::nullopt;
    case DUCKDB_TYPE_TIMESTAMP:
    case DUCKDB_TYPE_TIMESTAMP_TZ:
      if (IsTimestampField(id)) return Copy::Kind::kTimestamp;
      return std::nullopt;
    case DUCKDB_TYPE_VARCHAR:
      return Copy::Kind::kText;  // as a JSON string: schema::AppendScalarToken decides
    default:
      return std::nullopt;
  }
}

std::optional<Copy> PlanCopy(duckdb_logical_type type, const std::vector<Slot>& slots,
                             const std::string& name, size_t source_index);

// The struct fields of `type` into `slot`'s children: every source field must have one.
bool PlanStruct(duckdb_logical_type type, const Slot& slot, Copy& copy) {
  const idx_t count = duckdb_struct_type_child_count(type);
  std::vector<bool> is_present(slot.children.size(), false);
  for (idx_t i = 0; i < count; ++i) {
    char* child_name = duckdb_struct_type_child_name(type, i);
    const std::string name = child_name != nullptr ? child_name : "";
    duckdb_free(child_name);
    duckdb_logical_type child_type = duckdb_struct_type_child_type(type, i);
    std::optional<Copy> child = PlanCopy(child_type, slot.children, name, i);
    duckdb_destroy_logical_type(&child_type);
    if (!child) return false;
    is_present[child->field] = true;
    copy.children.push_back(std::move(*child));
  }
  for (size_t field = 0; field < slot.children.size(); ++field) {
    // Key fields are top-level only.
    if (!is_present[field]) copy.absent_fields.push_back(field);
  }
  return true;
}

std::optional<Copy> PlanCopy(duckdb_logical_type type, const std::vector<Slot>& slots,
                             const std::string& name, size_t source_index) {
  const size_t field = schema::RecordLayout::Find(slots, name, source_index);
  if (field == SIZE_MAX) return std::nullopt;  // a new field: the shaper adds it
  const Slot& slot = slots[field];
  Copy copy;
  copy.slot = &slot;
  copy.field = field;
  copy.source_index = source_index;
  copy.source = duckdb_get_type_id(type);
  if (copy.source == DUCKDB_TYPE_STRUCT) {
    if (slot.type.id() != TypeId::kStruct || !PlanStruct(type, slot, copy)) return std::nullopt;
    copy.kind = Copy::Kind::kStruct;
    return copy;
  }
  const std::optional<Copy::Kind> kind = CopyKindFor(copy.source, slot.type);
  if (!kind) return std::nullopt;
  copy.kind = *kind;
  if (copy.kind == Copy::Kind::kDecimal) {
    // The JSON path reads a decimal's text at the field's scale; only the same scale is a copy.
    copy.decimal_scale = duckdb_decimal_scale(type);
    const bool is_copied =
        slot.type.id() == TypeId::kDecimal
            ? copy.decimal_scale == slot.type.decimal_scale()
            : copy.decimal_scale < static_cast<int>(kExactPowersOfTen.size());
    if (!is_copied) return std::nullopt;
    copy.source = duckdb_decimal_internal_type(type);
  }
  return copy;
}

// ----- appending --------------------------------------------------------------------------------

// A vector of a chunk, with its struct fields' vectors.
struct VectorView {
  const void* data = nullptr;
  const uint64_t* validity = nullptr;  // null: every row valid
  std::vector<VectorView> children;

  bool IsValid(uint64_t row) const {
    return validity == nullptr ||
           duckdb_validity_row_is_valid(const_cast<uint64_t*>(validity), row);
  }
  template <typename T>
  T At(uint64_t row) const {
    return static_cast<const T*>(data)[row];
  }
  // A VARCHAR vector's string at `row`, valid while the chunk is.
  // duckdb.h's layout of duckdb_string_t, read in place: duckdb_string_t_data and _length are
  // two calls into the library per string. Up to 12 bytes are inlined, longer ones pointed to.
  std::string_view TextAt(uint64_t row) const {
    const duckdb_string_t& cell = static_cast<const duckdb_string_t*>(data)[row];
    const uint32_t length = cell.value.inlined.length;
    constexpr uint32_t kInlinedBytes = sizeof(cell.value.inlined.inlined);
    return {length <= kInlinedBytes ? cell.value.inlined.inlined : cell.value.pointer.ptr, length};
  }
};

VectorView ViewOf(duckdb_vector vector, const Copy& copy) {
  VectorView view;
  view.data = duckdb_vector_get_data(vector);
  view.validity = duckdb_vector_get_validity(vector);
  for (const Copy& child : copy.children) {
    view.children.push_back(
        ViewOf(duckdb_struct_vector_get_child(vector, child.source_index), child));
  }
  return view;
}

// Calls `visit` with a value of the C type of the integer vector type `type`.
template <typename Visit>
auto VisitIntegerType(duckdb_type type, Visit visit) -> decltype(visit(int64_t{})) {
  switch (type) {
    case DUCKDB_TYPE_TINYINT:
      return visit(int8_t{});
    case DUCKDB_TYPE_SMALLINT:
      return visit(int16_t{});
    case DUCKDB_TYPE_INTEGER:
      return visit(int32_t{});
    case DUCKDB_TYPE_BIGINT:
      return visit(int64_t{});
    case DUCKDB_TYPE_UTINYINT:
      return visit(uint8_t{});
    case DUCKDB_TYPE_USMALLINT:
      return visit(uint16_t{});
    case DUCKDB_TYPE_UINTEGER:
      return visit(uint32_t{});
    case DUCKDB_TYPE_UBIGINT:
      return visit(uint64_t{});
    default:
      SKIPPR_CHECK_MSG(false, "not an integer vector");
      return {};
  }
}

// The integer at `row` of an integer vector; nullopt beyond int64 (a UBIGINT's top half).
std::optional<int64_t> IntegerAt(const VectorView& view, duckdb_type type, uint64_t row) {
  return VisitIntegerType(type, [&](auto source_type) -> std::optional<int64_t> {
    const auto value = view.At<decltype(source_type)>(row);
    if (std::cmp_greater(value, INT64_MAX)) return std::nullopt;
    return static_cast<int64_t>(value);
  });
}

__int128 DecimalAt(const VectorView& view, duckdb_type internal_type, uint64_t row) {
  if (internal_type != DUCKDB_TYPE_HUGEINT) return *IntegerAt(view, internal_type, row);
  const auto value = view.At<duckdb_hugeint>(row);
  return static_cast<__int128>(static_cast<unsigned __int128>(value.lower) |
                               (static_cast<unsigned __int128>(value.upper) << 64));
}

constexpr int64_t kMicrosPerDay = 86'400'000'000LL;
// Years 0001 to 9999: what to_json writes as an RFC 3339 date the JSON path reads back. Beyond
// (DuckDB's BC dates, year 10000, infinity) the JSON path decides.
const int64_t kFirstDay = schema::internal::DaysFromCivil(1, 1, 1);
const int64_t kEndDay = schema::internal::DaysFromCivil(10000, 1, 1);

bool IsWrittenAsDate(int64_t days) { return days >= kFirstDay && days < kEndDay; }

bool IsWrittenAsTimestamp(int64_t micros) {
  // Floor division: a day before 1970 starts at a negative multiple of a day.
  const int64_t days = micros / kMicrosPerDay - (micros % kMicrosPerDay < 0 ? 1 : 0);
  return IsWrittenAsDate(days);
}

bool AppendCell(const Copy& copy, const VectorView& view, uint64_t row, Column& column);

bool AppendStructCell(const Copy& copy, const VectorView& view, uint64_t row, Column& column) {
  for (size_t i = 0; i < copy.children.size(); ++i) {
    const Copy& child = copy.children[i];
    if (!AppendCell(child, view.children[i], row, column.children[child.field])) return false;
  }
  for (size_t field : copy.absent_fields) column.children[field].AppendNull();
  column.AppendStructRow();
  return true;
}

// Appends the value at `row` as the JSON path appends its to_json text; false, perhaps having
// appended part of a struct (the caller truncates), when that path would not take it as is.
bool AppendCell(const Copy& copy, const VectorView& view, uint64_t row, Column& column) {
  if (!view.IsValid(row)) {
    if (copy.slot->is_required) return false;
    column.AppendNull();
    return true;
  }
  const LogicalType& type = copy.slot->type;
  switch (copy.kind) {
    case Copy::Kind::kBool:
      return schema::AppendScalarToken(column, type, ScalarToken::OfBool(view.At<bool>(row)));
    case Copy::Kind::kInteger: {
      const std::optional<int64_t> integer = IntegerAt(view, copy.source, row);
      return integer && schema::AppendScalarToken(
                            column, type, {ScalarToken::Kind::kInt, false, *integer, 0, {}});
    }
    case Copy::Kind::kReal: {
      const double real =
          copy.source == DUCKDB_TYPE_FLOAT ? view.At<float>(row) : view.At<double>(row);
      // NaN and infinities are not JSON; a subnormal's text may not read back exactly.
      const int kind = std::fpclassify(real);
      if (kind != FP_NORMAL && kind != FP_ZERO) return false;
      column.AppendDouble(real);
      return true;
    }
    case Copy::Kind::kDecimal: {
      const __int128 unscaled = DecimalAt(view, copy.source, row);
      if (type.id() != TypeId::kDecimal) {
        if (unscaled > kMaxDecimalAsDouble || unscaled < -kMaxDecimalAsDouble) return false;
        column.AppendDouble(static_cast<double>(static_cast<int64_t>(unscaled)) /
                            kExactPowersOfTen[static_cast<size_t>(copy.decimal_scale)]);
        return true;
      }
      if (!schema::internal::FitsDecimalPrecision(unscaled, type.decimal_precision())) return false;
      column.AppendDecimal(unscaled);
      return true;
    }
    case Copy::Kind::kDate: {
      const int32_t days = view.At<int32_t>(row);
      if (!IsWrittenAsDate(days)) return false;
      column.AppendInt64(type.id() == TypeId::kDate ? days : days * kMicrosPerDay);
      return true;
    }
    case Copy::Kind::kTime: {
      const int64_t micros = view.At<int64_t>(row);
      if (micros < 0 || micros >= kMicrosPerDay) return false;  // 24:00:00 is DuckDB's alone
      column.AppendInt64(micros);
      return true;
    }
    case Copy::Kind::kTimestamp: {
      const int64_t micros = view.At<int64_t>(row);
      if (!IsWrittenAsTimestamp(micros)) return false;
      column.AppendInt64(micros);
      return true;
    }
    case Copy::Kind::kText:
      return schema::AppendScalarToken(column, type, ScalarToken::OfString(view.TextAt(row)));
    case Copy::Kind::kStruct:
      return AppendStructCell(copy, view, row, column);
  }
  return false;
}

// ----- runs: a column's rows copied in one loop -------------------------------------------------
// The common pairs of source and field type skip AppendCell's per-value dispatch; each takes
// exactly the values AppendCell takes, as AppendCell appends them.

// Copies rows [begin, end) of `view`, of `Source`s, into the fixed-width `column` as `Target`s:
// `convert(value, target)` false, or a null in a required field, ends the run there (the JSON
// path reads that row). Returns how many rows it copied.
template <typename Target, typename Source, typename Convert>
uint64_t CopyFixedRun(const Copy& copy, const VectorView& view, uint64_t begin, uint64_t end,
                      Column& column, Convert convert) {
  static_assert(std::is_trivially_copyable_v<Target>);
  const int64_t first = column.length;
  uint8_t* out = column.AppendNullFixedRows(static_cast<int64_t>(end - begin));
  SKIPPR_CHECK(column.fixed.size() == static_cast<size_t>(column.length) * sizeof(Target));
  const auto* values = static_cast<const Source*>(view.data);
  uint64_t row = begin;
  for (; row < end; ++row) {
    const uint64_t index = row - begin;
    if (!view.IsValid(row)) {
      if (copy.slot->is_required) break;
      continue;  // null: its value stays zero
    }
    Target target;
    if (!convert(values[row], target)) break;
    std::memcpy(out + index * sizeof(Target), &target, sizeof(Target));
    column.SetPresent(first + static_cast<int64_t>(index));
  }
  column.TruncateTo(first + static_cast<int64_t>(row - begin));
  return row - begin;
}

// Integers into an int or long field (AppendScalarToken's AppendInteger): beyond int64, or
// beyond int32 for an int field, the shaper decides.
uint64_t CopyIntegerRun(const Copy& copy, const VectorView& view, uint64_t begin, uint64_t end,
                        Column& column) {
  const bool is_int32 = copy.slot->type.id() == TypeId::kInt;
  return VisitIntegerType(copy.source, [&](auto source_type) {
    using Source = decltype(source_type);
    return CopyFixedRun<int64_t, Source>(
        copy, view, begin, end, column, [is_int32](Source value, int64_t& target) {
          if (std::cmp_greater(value, INT64_MAX)) return false;
          target = static_cast<int64_t>(value);
          return !is_int32 || (target >= INT32_MIN && target <= INT32_MAX);
        });
  });
}

template <typename Source>
uint64_t CopyRealRun(const Copy& copy, const VectorView& view, uint64_t begin, uint64_t end,
                     Column& column) {
  return CopyFixedRun<double, Source>(copy, view, begin, end, column,
                                      [](Source value, double& target) {
                                        target = value;
                                        const int kind = std::fpclassify(target);
                                        return kind == FP_NORMAL || kind == FP_ZERO;
                                      });
}

// Strings into a string field: the JSON path appends a JSON string's text as it is.
uint64_t CopyTextRun(const Copy& copy, const VectorView& view, uint64_t begin, uint64_t end,
                     Column& column) {
  uint64_t row = begin;
  for (; row < end; ++row) {
    if (!view.IsValid(row)) {
      if (copy.slot->is_required) break;
      column.AppendNull();
      continue;
    }
    column.AppendBytes(view.TextAt(row));
  }
  return row - begin;
}

uint64_t CopyColumn(const Copy& copy, const VectorView& view, uint64_t begin, uint64_t end,
                    Column& column);

bool HasNoNulls(const VectorView& view, uint64_t begin, uint64_t end) {
  if (view.validity == nullptr) return true;
  for (uint64_t row = begin; row < end; ++row) {
    if (!view.IsValid(row)) return false;
  }
  return true;
}

// Rows [begin, end) of a struct none of whose rows is null, a field at a time (each its own run):
// as AppendStructCell appends them row by row. Returns how many rows it copied; the fields hold
// no more rows than the struct. nullopt when some row is a null struct (AppendCell decides it).
std::optional<uint64_t> CopyStructRun(const Copy& copy, const VectorView& view, uint64_t begin,
                                      uint64_t end, Column& column) {
  if (!HasNoNulls(view, begin, end)) return std::nullopt;
  const int64_t rows_before = column.length;
  uint64_t stop = end;
  for (size_t i = 0; i < copy.children.size(); ++i) {
    const Copy& child = copy.children[i];
    stop = begin + CopyColumn(child, view.children[i], begin, stop, column.children[child.field]);
  }
  const auto copied = static_cast<int64_t>(stop - begin);
  for (const Copy& child : copy.children) {
    column.children[child.field].TruncateTo(rows_before + copied);
  }
  for (size_t field : copy.absent_fields) {
    for (int64_t i = 0; i < copied; ++i) column.children[field].AppendNull();
  }
  column.AppendStructRows(copied);
  return stop - begin;
}

// Copies what it can of rows [begin, end) as one run; nullopt when this pair of source and field
// types has no run (AppendCell takes each value).
std::optional<uint64_t> CopyRun(const Copy& copy, const VectorView& view, uint64_t begin,
                                uint64_t end, Column& column) {
  const TypeId field = copy.slot->type.id();
  switch (copy.kind) {
    case Copy::Kind::kInteger:
      if (field != TypeId::kInt && field != TypeId::kLong) return std::nullopt;
      return CopyIntegerRun(copy, view, begin, end, column);
    case Copy::Kind::kReal:
      if (copy.source == DUCKDB_TYPE_FLOAT) {
        return CopyRealRun<float>(copy, view, begin, end, column);
      }
      return CopyRealRun<double>(copy, view, begin, end, column);
    case Copy::Kind::kBool:
      if (field != TypeId::kBoolean) return std::nullopt;
      return CopyFixedRun<uint8_t, bool>(copy, view, begin, end, column,
                                         [](bool value, uint8_t& target) {
                                           target = value ? 1 : 0;
                                           return true;
                                         });
    case Copy::Kind::kDate: {
      const int64_t scale = field == TypeId::kDate ? 1 : kMicrosPerDay;
      return CopyFixedRun<int64_t, int32_t>(copy, view, begin, end, column,
                                            [scale](int32_t days, int64_t& target) {
                                              if (!IsWrittenAsDate(days)) return false;
                                              target = days * scale;
                                              return true;
                                            });
    }
    case Copy::Kind::kTime:
      return CopyFixedRun<int64_t, int64_t>(copy, view, begin, end, column,
                                            [](int64_t micros, int64_t& target) {
                                              target = micros;
                                              return micros >= 0 && micros < kMicrosPerDay;
                                            });
    case Copy::Kind::kTimestamp:
      return CopyFixedRun<int64_t, int64_t>(copy, view, begin, end, column,
                                            [](int64_t micros, int64_t& target) {
                                              target = micros;
                                              return IsWrittenAsTimestamp(micros);
                                            });
    case Copy::Kind::kText:
      if (field != TypeId::kString) return std::nullopt;
      return CopyTextRun(copy, view, begin, end, column);
    case Copy::Kind::kStruct:
      return CopyStructRun(copy, view, begin, end, column);
    case Copy::Kind::kDecimal:
      return std::nullopt;
  }
  return std::nullopt;
}

// Rows [begin, end) of one column (or struct field): a run where its types have one, else value
// by value. Returns how many rows it appended: all, or those before the first one it does not take
// as it is (the JSON path reads that row).
uint64_t CopyColumn(const Copy& copy, const VectorView& view, uint64_t begin, uint64_t end,
                    Column& column) {
  if (const std::optional<uint64_t> copied = CopyRun(copy, view, begin, end, column)) {
    return *copied;
  }
  for (uint64_t row = begin; row < end; ++row) {
    if (!AppendCell(copy, view, row, column)) return row - begin;
  }
  return end - begin;
}

std::optional<LogicalType> DeclaredStructOf(duckdb_logical_type type) {
  std::vector<Field> fields;
  for (idx_t i = 0; i < duckdb_struct_type_child_count(type); ++i) {
    char* child_name = duckdb_struct_type_child_name(type, i);
    Field field;
    field.name = schema::ValidUtf8(child_name != nullptr ? child_name : "");
    duckdb_free(child_name);
    duckdb_logical_type child_type = duckdb_struct_type_child_type(type, i);
    std::optional<LogicalType> child = DeclaredTypeOf(child_type);
    duckdb_destroy_logical_type(&child_type);
    if (!child) return std::nullopt;
    field.type = std::move(*child);
    fields.push_back(std::move(field));
  }
  return LogicalType::Struct(std::move(fields));
}

std::optional<LogicalType> DeclaredListOf(duckdb_logical_type type) {
  duckdb_logical_type element_type = duckdb_list_type_child_type(type);
  std::optional<LogicalType> element = DeclaredTypeOf(element_type);
  duckdb_destroy_logical_type(&element_type);
  if (!element) return std::nullopt;
  return LogicalType::List(Field{0, "element", std::move(*element), true});
}
}  // namespace

std::optional<LogicalType> DeclaredTypeOf(duckdb_logical_type type) {
  switch (duckdb_get_type_id(type)) {
    case DUCKDB_TYPE_BOOLEAN:
      return LogicalType::Boolean();
    case DUCKDB_TYPE_TINYINT:
    case DUCKDB_TYPE_SMALLINT:
    case DUCKDB_TYPE_INTEGER:
    case DUCKDB_TYPE_UTINYINT:
    case DUCKDB_TYPE_USMALLINT:
      return LogicalType::Int();
    case DUCKDB_TYPE_BIGINT:
    case DUCKDB_TYPE_UINTEGER:
      return LogicalType::Long();
    case DUCKDB_TYPE_UBIGINT:  // beyond long: exact as a decimal of its 20 digits
      return LogicalType::Decimal(20, 0).value();
    case DUCKDB_TYPE_FLOAT:
      return LogicalType::Float();
    case DUCKDB_TYPE_DOUBLE:
      return LogicalType::Double();
    case DUCKDB_TYPE_DECIMAL: {
      Result<LogicalType> decimal =
          LogicalType::Decimal(duckdb_decimal_width(type), duckdb_decimal_scale(type));
      return decimal.ok() ? std::optional(*decimal) : std::nullopt;
    }
    case DUCKDB_TYPE_DATE:
      return LogicalType::Date();
    case DUCKDB_TYPE_TIME:
      return LogicalType::Time();
    case DUCKDB_TYPE_TIMESTAMP:
    case DUCKDB_TYPE_TIMESTAMP_S:
    case DUCKDB_TYPE_TIMESTAMP_MS:
    case DUCKDB_TYPE_TIMESTAMP_NS:
      return LogicalType::Timestamp();
    case DUCKDB_TYPE_TIMESTAMP_TZ:
      return LogicalType::TimestampTz();
    case DUCKDB_TYPE_VARCHAR:
      return LogicalType::String();
    case DUCKDB_TYPE_UUID:
      return LogicalType::Uuid();
    case DUCKDB_TYPE_STRUCT:
      return DeclaredStructOf(type);
    case DUCKDB_TYPE_LIST:
      return DeclaredListOf(type);
    default:
      return std::nullopt;
  }
}

uint64_t CountedBytesPerRow(duckdb_logical_type type) {
  switch (duckdb_get_type_id(type)) {
    case DUCKDB_TYPE_BOOLEAN:
    case DUCKDB_TYPE_TINYINT:
    case DUCKDB_TYPE_UTINYINT:
      return 1;
    case DUCKDB_TYPE_SMALLINT:
    case DUCKDB_TYPE_USMALLINT:
      return 2;
    case DUCKDB_TYPE_INTEGER:
    case DUCKDB_TYPE_UINTEGER:
    case DUCKDB_TYPE_FLOAT:
    case DUCKDB_TYPE_DATE:
      return 4;
    case DUCKDB_TYPE_DECIMAL: {
      const uint8_t width = duckdb_decimal_width(type);
      return width <= 4 ? 2 : width <= 9 ? 4 : width <= 18 ? 8 : 16;
    }
    case DUCKDB_TYPE_STRUCT: {
      uint64_t bytes = 0;
      for (idx_t i = 0; i < duckdb_struct_type_child_count(type); ++i) {
        duckdb_logical_type child = duckdb_struct_type_child_type(type, i);
        bytes += CountedBytesPerRow(child);
        duckdb_destroy_logical_type(&child);
      }
      return bytes;
    }
    case DUCKDB_TYPE_BIGINT:
    case DUCKDB_TYPE_UBIGINT:
    case DUCKDB_TYPE_DOUBLE:
    case DUCKDB_TYPE_TIME:
    case DUCKDB_TYPE_TIMESTAMP:
    case DUCKDB_TYPE_TIMESTAMP_S:
    case DUCKDB_TYPE_TIMESTAMP_MS:
    case DUCKDB_TYPE_TIMESTAMP_NS:
    case DUCKDB_TYPE_TIMESTAMP_TZ:
      return 8;
    default:  // strings, blobs, lists, 128-bit numbers, intervals
      return 16;
  }
}

std::optional<DuckdbColumnsPlan> DuckdbColumnsPlan::Make(const schema::RecordLayout& layout,
                                                         const std::vector<ResultColumn>& columns) {
  const std::vector<Slot>& fields = layout.fields();
  DuckdbColumnsPlan plan;
  std::vector<bool> is_present(fields.size(), false);
  for (size_t i = 0; i < columns.size(); ++i) {
    std::optional<Copy> copy = PlanCopy(columns[i].type(), fields, columns[i].name(), i);
    if (!copy) return std::nullopt;
    is_present[copy->field] = true;
    plan.columns_.push_back(std::move(*copy));
  }
  for (size_t field = 0; field < fields.size(); ++field) {
    if (is_present[field]) continue;
    if (fields[field].is_required) return std::nullopt;  // no row could fit
    plan.absent_fields_.push_back(field);
  }
  return plan;
}

uint64_t DuckdbColumnsPlan::Append(duckdb_data_chunk chunk, uint64_t begin, uint64_t end,
                                   TypedRows& rows) const {
  SKIPPR_DCHECK(begin <= end && end <= duckdb_data_chunk_get_size(chunk));
  std::vector<Column>& columns = rows.columns();
  const int64_t rows_before = rows.rows();
  // Column by column; a row one column does not take ends the block for the columns after it.
  uint64_t stop = end;
  for (const Copy& copy : columns_) {
    const VectorView view = ViewOf(duckdb_data_chunk_get_vector(chunk, copy.source_index), copy);
    stop = begin + CopyColumn(copy, view, begin, stop, columns[copy.field]);
  }
  const auto appended = static_cast<int64_t>(stop - begin);
  for (const Copy& copy : columns_) columns[copy.field].TruncateTo(rows_before + appended);
  for (size_t field : absent_fields_) {
    for (int64_t i = 0; i < appended; ++i) columns[field].AppendNull();
  }
  rows.EndRows(appended);
  return stop - begin;
}

}  // namespace skippr::sources::internal
