// Internal to sources/: PostgreSQL column types and the one decoder of their values: their text
// output (change rows: pgoutput's text tuples; snapshot columns selected as ::text) and, for the
// scalar types whose send form is plain, their binary form (snapshot rows: COPY ... TO STDOUT
// (FORMAT binary)), read into exactly what the text would give. The session settings the text
// depends on are fixed when a connection opens (kPostgresSessionOptions), so the same value
// always reads the same way. docs/config.md ("The PostgreSQL source") gives the mapping and the
// policies for values a column type cannot hold.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/batch.hpp"
#include "core/status.hpp"
#include "core/types.hpp"
#include "core/value.hpp"

namespace skippr::sources::postgres {

// Startup options of every connection (the libpq `options` keyword): ISO dates, UTC times, ISO
// 8601 intervals, floats that read back exactly, hex bytea, no parallel or synchronized scans
// (a snapshot range reads its rows in ctid order, which its resume point relies on).
inline constexpr const char* kPostgresSessionOptions =
    "-c DateStyle=ISO,YMD -c TimeZone=UTC -c IntervalStyle=iso_8601 -c extra_float_digits=3 "
    "-c bytea_output=hex -c client_encoding=UTF8 -c synchronize_seqscans=off "
    "-c max_parallel_workers_per_gather=0";

// A column's type as pg_catalog describes it, domains resolved to their base type.
struct PgType {
  uint32_t oid = 0;         // the base type's oid
  int32_t modifier = -1;    // its typmod (numeric precision and scale), -1 when none
  char category = 'U';      // pg_type.typcategory: 'A' array, 'E' enum, 'S' string, ...
  uint32_t element_oid = 0; // arrays: the element's base type
  char element_category = 'U';
  std::string name;         // format_type(), for messages: "numeric(10,2)", "integer[]"
};

// How one column's text values become Values of its logical type.
class PgColumnDecoder {
 public:
  explicit PgColumnDecoder(const PgType& type);

  // The Iceberg-aligned type of the column's values.
  const LogicalType& logical_type() const { return logical_type_; }

  // The column's text output as a Value of logical_type(), or a String holding the text when the
  // type cannot hold it (numeric NaN/±Infinity or beyond the decimal, ±infinity dates and
  // timestamps, a multi-dimensional array): the shaper puts such a value in the sibling column
  // `<name>_string`, so nothing is rounded or lost.
  Value Decode(std::string_view text) const;
  // The same value appended to `column` (of logical_type()); false, appending nothing, when the
  // type cannot hold it (the caller keeps the text for the sibling column, as Decode does).
  bool AppendTo(std::string_view text, Column& column) const;

  // Whether a snapshot reads the column in COPY's binary format: the scalar types whose binary
  // form is plain (integers, floats, numeric, bool, date and time types, uuid, bytea, text,
  // varchar, char). Others are selected as `::text` and read with AppendTo.
  bool reads_binary() const { return reads_binary_; }
  // A binary value (the type's send form) appended to `column`, as AppendTo appends the same
  // value's text output. When the type cannot hold it, appends nothing, sets `text` to the text
  // PostgreSQL writes for it (for the sibling column) and returns false. Corruption when the
  // bytes are not a value of the type.
  Result<bool> AppendBinaryTo(std::string_view bytes, Column& column, std::string* text) const;

 private:
  enum class Form : uint8_t {
    kBool, kInt, kLong, kFloat, kDouble, kDecimal, kText, kBytea, kUuid, kDate, kTime,
    kTimestamp, kTimestampTz, kArray,
  };
  static Form FormOf(uint32_t oid, int32_t modifier, LogicalType* type);
  // Into `out` (a Value or the end of a column); false when the form's type cannot hold `text`.
  template <typename Out>
  bool DecodeScalar(Form form, std::string_view text, Out& out) const;
  Value DecodeArray(std::string_view text) const;

  Form form_ = Form::kText;
  Form element_form_ = Form::kText;
  uint32_t oid_ = 0;  // the (base) type's oid
  bool reads_binary_ = false;
  LogicalType logical_type_ = LogicalType::String();
  LogicalType element_type_ = LogicalType::String();
};

// The text between `{` and `}` of a one-dimensional array literal, split into its elements
// (quotes and backslash escapes removed); nullopt for NULL elements. Nullopt overall when the
// literal is not a one-dimensional array (nested braces, dimension decorations).
std::optional<std::vector<std::optional<std::string>>> SplitArrayLiteral(std::string_view text);

// numeric's binary send form (ndigits, weight, sign, dscale, base-10000 digits) as numeric_out
// writes it: "-12.50" for dscale 2, "NaN", "Infinity", "-Infinity". Nullopt when malformed.
std::optional<std::string> NumericBinaryText(std::string_view bytes);

}  // namespace skippr::sources::postgres
