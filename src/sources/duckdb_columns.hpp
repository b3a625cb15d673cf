// Internal to sources/: the rows of a DuckDB query (a Parquet file as DuckDB reads it) copied
// column by column into a layout's columns — the typed reading of docs/schema.md without a text
// round trip. A value is copied only where the JSON path would append the same thing from
// DuckDB's JSON text of the row (to_json); any other row is left for the JSON path to read.
#pragma once

#include <duckdb.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "schema/schema.hpp"
#include "sources/typed_rows.hpp"

namespace skippr::sources::internal {

// A result column: its name and DuckDB type (owned).
class ResultColumn {
 public:
  ResultColumn(std::string name, duckdb_logical_type type) : name_(std::move(name)), type_(type) {}
  ResultColumn(ResultColumn&& other) noexcept
      : name_(std::move(other.name_)), type_(std::exchange(other.type_, nullptr)) {}
  ResultColumn(const ResultColumn&) = delete;
  ResultColumn& operator=(const ResultColumn&) = delete;
  ResultColumn& operator=(ResultColumn&&) = delete;
  ~ResultColumn() {
    if (type_ != nullptr) duckdb_destroy_logical_type(&type_);
  }
  const std::string& name() const { return name_; }
  duckdb_logical_type type() const { return type_; }

 private:
  std::string name_;
  duckdb_logical_type type_;
};

// Our type of a column DuckDB reads as `type`, kept exactly (the widths a schema has no kind for
// widened: unsigned ints to the next signed kind, UBIGINT to decimal(20, 0)), struct and list
// types with their children; nullopt for a type we have no kind for (a map, a union, an
// interval, ...), whose values the shaper infers a type from.
std::optional<LogicalType> DeclaredTypeOf(duckdb_logical_type type);

// The bytes DuckDB's streaming result counts for a row of a column of `type` when it decides how
// many rows to hold ahead of its reader: the vector's physical width (a string's 16-byte header,
// never its text; a struct's fields'; a list's header alone, where DuckDB also counts the
// elements).
uint64_t CountedBytesPerRow(duckdb_logical_type type);

// How a query's columns land in the fields of one layout.
class DuckdbColumnsPlan {
 public:
  // nullopt when some column has no field in `layout`, or a type whose values that field does
  // not take as the JSON path would (a list, a double into a string field), or when a required
  // field has no column: then every row takes the JSON path.
  static std::optional<DuckdbColumnsPlan> Make(const schema::RecordLayout& layout,
                                               const std::vector<ResultColumn>& columns);

  // Appends rows [begin, end) of `chunk`, a chunk of the planned query, to `rows` (built for the
  // same layout). Returns how many were appended: all, or those before the first row with a value
  // its column does not take as is (a NaN, an int beyond an int field), which the JSON path reads.
  uint64_t Append(duckdb_data_chunk chunk, uint64_t begin, uint64_t end, TypedRows& rows) const;

  // One source column (or struct field) and the field it lands in; public for the .cpp's helpers.
  struct Copy {
    enum class Kind : uint8_t {
      kBool,
      kInteger,
      kReal,
      kDecimal,
      kDate,
      kTime,
      kTimestamp,
      kText,
      kStruct
    };
    Kind kind = Kind::kText;
    duckdb_type source = DUCKDB_TYPE_INVALID;  // a decimal's: its internal integer type
    const schema::RecordLayout::Slot* slot = nullptr;
    size_t field = 0;         // the slot's index among its siblings (the column's index)
    size_t source_index = 0;  // the column's, or struct field's, index in DuckDB's type
    int decimal_scale = 0;
    std::vector<Copy> children;         // a struct's fields that have a source field
    std::vector<size_t> absent_fields;  // a struct's fields without one: null in every row
  };

 private:
  std::vector<Copy> columns_;
  std::vector<size_t> absent_fields_;  // top-level fields no column names
};

}  // namespace skippr::sources::internal
