// The columnar Batch (DESIGN.md §5): one namespace, one schema version, per column a validity bitmap
// and either fixed-width values, offsets + bytes, or children. Everything downstream (WAL, processor,
// DuckDB table functions, Parquet) works on batches.
//
// Physical layout per logical type (promotions int→long and float→double are metadata-only):
//   boolean                                   fixed: 1 byte per row (0/1)
//   int, long, date, time, timestamp(tz)      fixed: int64 per row (date: days; time/timestamps: µs)
//   float, double                             fixed: double per row
//   decimal(p,s)                              fixed: 16-byte little-endian two's-complement unscaled
//   string, binary, uuid                      offsets (num_rows + 1, int64) into bytes
//   struct                                    children, one per field, each num_rows long
//   list                                      offsets (num_rows + 1) into children[0] (the element)
//   map                                       offsets (num_rows + 1) into children[0] (key), [1] (value)
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/types.hpp"
#include "core/value.hpp"

namespace skippr {

enum class PhysicalKind : uint8_t { kBool, kInt64, kDouble, kDecimal128, kBytes, kStruct, kList, kMap };
PhysicalKind PhysicalKindOf(TypeId type);
// Bytes per row in `fixed` for fixed-width kinds, 0 otherwise.
size_t FixedWidthBytes(PhysicalKind kind);

struct Column {
  LogicalType type = LogicalType::String();
  int64_t length = 0;
  std::vector<uint8_t> validity;  // bit i (LSB first) set = row i present
  std::vector<uint8_t> fixed;
  std::vector<int64_t> offsets;   // starts with 0 once the column has rows of an offsets kind
  std::string bytes;
  std::vector<Column> children;

  explicit Column(LogicalType column_type);
  bool IsValid(int64_t row) const { return (validity[row >> 3] >> (row & 7)) & 1; }
  int64_t Int64At(int64_t row) const;
  double DoubleAt(int64_t row) const;
  bool BoolAt(int64_t row) const { return fixed[row] != 0; }
  std::string_view BytesAt(int64_t row) const;
  // Decimal: (low, high) 64-bit halves of the unscaled value.
  std::pair<uint64_t, int64_t> Decimal128At(int64_t row) const;

  // Appends. The Value must already be of the column's kind (see ValueFitsColumn); Null is allowed.
  void AppendNull();
  void Append(const Value& value);
  // Brings a column added mid-batch up to `rows` with nulls.
  void PadNullsTo(int64_t rows);
  // Rewrites int64 values as doubles and makes the column a double column (a field created in this
  // batch that widened int → double).
  void ConvertInt64ToDouble();

  // The row as a Value (for tests, messages and row-at-a-time consumers).
  Value ValueAt(int64_t row) const;
  // Checks lengths, offsets and children against each other; false and a reason when broken.
  bool Validate(std::string* reason) const;
};

// True when `value` can be appended as-is to a column of `type` (the kinds match exactly).
bool ValueFitsColumn(const Value& value, const LogicalType& type);

// kTruncate: the source emptied the table; its row carries no values, only its order — every row
// of the namespace with an older order token is gone.
enum class Mutation : uint8_t { kSnapshot = 0, kInsert = 1, kUpdate = 2, kDelete = 3, kTruncate = 4 };

// One row's change-data-capture metadata, as a CDC source hands it over with the row.
struct RowChange {
  Mutation mutation = Mutation::kInsert;
  std::string event_id;      // equality identity of the source event
  std::string order_token;   // bytes, lexicographically ordered within the source
  std::string business_key;  // encoded entity key (empty: none)
};

// Per-row change-data-capture metadata, present on batches from CDC sources.
struct CdcSidecar {
  std::vector<Mutation> mutations;
  std::vector<std::string> event_ids;     // equality identity of the source event
  std::vector<std::string> order_tokens;  // bytes, lexicographically ordered within the source
  std::vector<std::string> business_keys; // encoded entity key (empty: none)

  void Append(RowChange change) {
    mutations.push_back(change.mutation);
    event_ids.push_back(std::move(change.event_id));
    order_tokens.push_back(std::move(change.order_token));
    business_keys.push_back(std::move(change.business_key));
  }
  size_t size() const { return mutations.size(); }
};

// Which top-level fields a reader of stored batches decodes: all of them, or only those listed by
// field id (a query's scan) or by name (a consumer that resolves fields by name, as the aggregates
// do) — projection pushdown. A reader may return more than it was asked for; consumers find
// columns by id or name, never by position.
class FieldSelection {
 public:
  static FieldSelection All() { return FieldSelection(); }
  static FieldSelection Only(std::vector<int32_t> field_ids) {
    FieldSelection selection;
    selection.all_ = false;
    selection.field_ids_ = std::move(field_ids);
    return selection;
  }
  static FieldSelection Named(std::vector<std::string> names) {
    FieldSelection selection;
    selection.all_ = false;
    selection.names_ = std::move(names);
    return selection;
  }
  bool all() const { return all_; }
  bool Includes(const Field& field) const {
    return all_ ||
           std::find(field_ids_.begin(), field_ids_.end(), field.id) != field_ids_.end() ||
           std::find(names_.begin(), names_.end(), field.name) != names_.end();
  }

 private:
  FieldSelection() = default;
  bool all_ = true;
  std::vector<int32_t> field_ids_;
  std::vector<std::string> names_;
};

struct Batch {
  std::string namespace_name;
  int32_t schema_id = 0;
  std::vector<Field> fields;    // top-level fields, parallel to `columns`
  std::vector<Column> columns;
  int64_t num_rows = 0;
  std::optional<CdcSidecar> cdc;

  // Row `row` as an object Value keyed by field name.
  Value RowAt(int64_t row) const;
  bool Validate(std::string* reason) const;
};

}  // namespace skippr
