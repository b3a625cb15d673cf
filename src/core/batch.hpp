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
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/check.hpp"
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
  // Inline: a data file's statistics and the aggregates' keys read every value through it.
  std::string_view BytesAt(int64_t row) const {
    const auto begin = static_cast<size_t>(offsets[row]);
    return std::string_view(bytes).substr(begin, static_cast<size_t>(offsets[row + 1]) - begin);
  }
  // Decimal: (low, high) 64-bit halves of the unscaled value.
  std::pair<uint64_t, int64_t> Decimal128At(int64_t row) const;

  // Appends. The Value must already be of the column's kind (see ValueFitsColumn); Null is allowed.
  void AppendNull();
  void Append(const Value& value);
  // Typed appends for sources that decode straight into columns; each must match the column's
  // physical kind (checked in debug builds). Inline: the typed sources append every value
  // through them, from other modules.
  void AppendBool(bool value) {
    SKIPPR_DCHECK(PhysicalKindOf(type.id()) == PhysicalKind::kBool);
    AppendPresentBit();
    fixed.push_back(value ? 1 : 0);
    ++length;
  }
  void AppendInt64(int64_t value) {
    SKIPPR_DCHECK(PhysicalKindOf(type.id()) == PhysicalKind::kInt64);
    AppendPresentBit();
    AppendFixedBytes(&value, sizeof(value));
    ++length;
  }
  void AppendDouble(double value) {
    SKIPPR_DCHECK(PhysicalKindOf(type.id()) == PhysicalKind::kDouble);
    AppendPresentBit();
    AppendFixedBytes(&value, sizeof(value));
    ++length;
  }
  void AppendDecimal(__int128 unscaled);
  void AppendBytes(std::string_view value) {
    SKIPPR_DCHECK(PhysicalKindOf(type.id()) == PhysicalKind::kBytes);
    AppendPresentBit();
    bytes.append(value);
    offsets.push_back(static_cast<int64_t>(bytes.size()));
    ++length;
  }
  // A present struct row whose children the caller has already appended (one row each).
  void AppendStructRow() { AppendStructRows(1); }
  // `rows` present struct rows whose children the caller has already appended (`rows` each).
  void AppendStructRows(int64_t rows);
  // Appends `rows` null rows to a fixed-width column (their values zero) and returns the first
  // one's bytes: a source copying a run of values writes each present one there and marks it with
  // SetPresent, then takes back with TruncateTo the rows it could not fill.
  uint8_t* AppendNullFixedRows(int64_t rows);
  void SetPresent(int64_t row) {
    SKIPPR_DCHECK(row >= 0 && row < length);
    validity[row >> 3] |= static_cast<uint8_t>(1u << (row & 7));
  }
  // Appends every row of `other`, whose physical layout must be this column's (its logical type
  // may be narrower: int rows into a long column, decimal(10, 2) into decimal(12, 2)).
  void AppendColumn(const Column& other);
  // Brings a column added mid-batch up to `rows` with nulls.
  void PadNullsTo(int64_t rows);
  // Drops the rows from `rows` on (children included, also a struct's children that are ahead of
  // it), as if they had never been appended: a source decoding a record into columns takes back
  // the part of a record that did not fit.
  void TruncateTo(int64_t rows);
  // Rewrites int64 values as doubles and makes the column a double column (a field created in this
  // batch that widened int → double).
  void ConvertInt64ToDouble();

  // The row as a Value (for tests, messages and row-at-a-time consumers).
  Value ValueAt(int64_t row) const;
  // Checks lengths, offsets and children against each other; false and a reason when broken.
  bool Validate(std::string* reason) const;
  // The bytes its buffers hold (children included): what the column weighs uncompressed.
  uint64_t DataBytes() const;

 private:
  // The validity bit of row `length`, set: the row being appended is present. Called per value,
  // so the vector's growth stays out of line: inlined, it made every call save and restore six
  // registers (8% of the JSON reader thread's samples).
  void AppendPresentBit() {
    const auto byte = static_cast<size_t>(length >> 3);
    if (byte >= validity.size()) AppendValidityByte();  // every eighth row
    validity[byte] |= static_cast<uint8_t>(1u << (length & 7));
  }
  void AppendValidityByte();
  void AppendFixedBytes(const void* value, size_t size) {
    const auto* first = static_cast<const uint8_t*>(value);
    fixed.insert(fixed.end(), first, first + size);  // no zero-fill before the copy
  }
};

// True when `value` can be appended as-is to a column of `type` (the kinds match exactly).
bool ValueFitsColumn(const Value& value, const LogicalType& type);

// kTruncate: the source emptied the table; its row carries no values, only its order — every row
// of the namespace with an older order token is gone.
enum class Mutation : uint8_t { kSnapshot = 0, kInsert = 1, kUpdate = 2, kDelete = 3, kTruncate = 4 };

// Strings packed end to end, as the WAL stores them: the i-th is bytes[offsets[i], offsets[i + 1]).
// One allocation per batch instead of one per string.
class PackedStrings {
 public:
  PackedStrings() = default;
  PackedStrings(std::initializer_list<std::string_view> strings) {
    for (std::string_view text : strings) push_back(text);
  }
  void push_back(std::string_view text) {
    bytes_.append(text);
    offsets_.push_back(static_cast<int64_t>(bytes_.size()));
  }
  // Building one string in pieces: append to bytes(), then EndString().
  std::string& bytes() { return bytes_; }
  void EndString() { offsets_.push_back(static_cast<int64_t>(bytes_.size())); }
  void Append(const PackedStrings& other);
  void reserve(size_t strings, size_t total_bytes) {
    offsets_.reserve(strings + 1);
    bytes_.reserve(total_bytes);
  }
  std::string_view operator[](size_t i) const {
    return std::string_view(bytes_).substr(static_cast<size_t>(offsets_[i]),
                                           static_cast<size_t>(offsets_[i + 1] - offsets_[i]));
  }
  size_t size() const { return offsets_.size() - 1; }
  bool empty() const { return size() == 0; }
  const std::vector<int64_t>& offsets() const { return offsets_; }
  const std::string& text() const { return bytes_; }
  // For a reader that fills both from storage; it must leave offsets starting at 0, never
  // decreasing and ending at text's size.
  std::vector<int64_t>& mutable_offsets() { return offsets_; }
  std::string& mutable_text() { return bytes_; }
  friend bool operator==(const PackedStrings& a, const PackedStrings& b) {
    return a.offsets_ == b.offsets_ && a.bytes_ == b.bytes_;
  }

 private:
  std::vector<int64_t> offsets_{0};
  std::string bytes_;
};

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
  PackedStrings event_ids;     // equality identity of the source event
  PackedStrings order_tokens;  // bytes, lexicographically ordered within the source
  PackedStrings business_keys; // encoded entity key (empty: none)

  void Append(const RowChange& change) {
    mutations.push_back(change.mutation);
    event_ids.push_back(change.event_id);
    order_tokens.push_back(change.order_token);
    business_keys.push_back(change.business_key);
  }
  void Append(const CdcSidecar& other);
  size_t size() const { return mutations.size(); }
};

// Rows a source decoded straight into typed columns (a database table's, whose column types it
// declares), instead of one Value per record. A source column may come twice: as a column of its
// declared type and, right after it under the same name, a String column holding the values that
// type cannot hold (a numeric NaN), null where the other has the value; the shaper sends those
// strings to a sibling column, as it does a String Value in the column's place. Every column is
// num_rows long.
struct ColumnRows {
  std::vector<std::string> names;  // the source's column names, parallel to `columns`
  std::vector<Column> columns;
  int64_t num_rows = 0;
  uint64_t first_row = 1;  // the partition's record number of row 0 (RecordOrigin::row)
  // Each row's 1-based line in a text file (RecordOrigin::line); empty where lines mean nothing.
  std::vector<uint64_t> lines;
  std::optional<CdcSidecar> cdc;

  // Row `row` as the object the same source would have handed over as a record.
  Value RowAt(int64_t row) const;
  // The bytes its columns hold (Column::DataBytes).
  uint64_t DataBytes() const;
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
  uint64_t DataBytes() const;  // of its columns (Column::DataBytes)
};

}  // namespace skippr
