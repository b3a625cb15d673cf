// Internal to sources/: records decoded straight into a namespace's columns (schema::RecordLayout)
// instead of one Value each — the typed reading of docs/schema.md. A record that does not fit the
// layout as it is (a new field, a value for a sibling column, invalid JSON) is taken back whole and
// left for the Value path, which decides what it becomes.
#pragma once

#include <simdjson.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "core/batch.hpp"
#include "schema/schema.hpp"

namespace skippr::sources::internal {

// Rows built column by column, a record at a time, for one of a layout's namespaces: every
// top-level field (JSON) or the fields a CSV header names, in header order.
class TypedRows {
 public:
  using Slot = schema::RecordLayout::Slot;

  // Columns for every field of `layout`, in its order.
  explicit TypedRows(std::shared_ptr<const schema::RecordLayout> layout);
  TypedRows(TypedRows&&) noexcept;
  TypedRows& operator=(TypedRows&&) noexcept;
  ~TypedRows();
  // Columns for the fields named by `header` (a CSV file's, names unique): nullopt when a name has
  // no field, or a key field has no column, since then no row fits.
  static std::optional<TypedRows> ForHeader(std::shared_ptr<const schema::RecordLayout> layout,
                                            const std::vector<std::string>& header);

  const schema::RecordLayout* layout() const { return layout_.get(); }
  int64_t rows() const { return rows_.num_rows; }
  // What the rows so far weigh in memory (ColumnRows::DataBytes).
  uint64_t DataBytes() const { return rows_.DataBytes(); }

  // Appends the JSON object in `text` (followed by simdjson::SIMDJSON_PADDING readable bytes) as
  // a row from `line` when every value fits its column; false, with nothing appended, otherwise.
  // It parses with the run's parser: a run being read is over.
  bool AppendJson(std::string_view padded_text, uint64_t line);
  // JSON lines may also be parsed a run at a time (simdjson's document stream): one pass over a
  // run of lines finds the structure of all of them, where AppendJson starts over for each line.
  // Runs take at most this many bytes.
  static constexpr size_t kMaxJsonLinesRunBytes = size_t{1} << 20;
  // Starts a run over `padded_lines`: whole lines, then a '\n' and simdjson::SIMDJSON_PADDING - 1
  // more readable bytes, all in place until the run is over. The parse reads the byte after the
  // run where the run ends inside a value: it must be a line end, as it is after a line that
  // AppendJson parses, not what the next line starts with. Without a document in them there is
  // no run (has_json_lines() is false).
  void StartJsonLines(std::string_view padded_lines);
  bool has_json_lines() const { return json_lines_ != nullptr; }
  // Appends `text`, the run's next line that is not blank, as AppendJson would: true when the
  // run's parse of it is one object alone on its line that fits. On false, nothing was appended
  // and the run is over (the line may still fit alone: the run cannot tell a line that does not
  // fit from one whose parse a neighbour spoilt, such as a string left open).
  bool AppendJsonLine(std::string_view text, uint64_t line);
  void EndJsonLines();
  // Appends a CSV row's cells (one per column, valid UTF-8) as ScalarToken::OfText reads them.
  bool AppendCells(const std::vector<std::string_view>& cells, uint64_t line);

  // For a columnar source that appends a block of rows column by column: the columns (parallel to
  // the layout's fields), then EndRows(count) once each holds `count` more rows, all from line 0.
  std::vector<Column>& columns() { return rows_.columns; }
  void EndRows(int64_t count);

  // The rows so far (row 0 being the partition's record `first_row`); starts again empty.
  ColumnRows Take(uint64_t first_row);

 private:
  TypedRows(std::shared_ptr<const schema::RecordLayout> layout, std::vector<const Slot*> slots);
  // Empty columns again, with room for as much as the last rows taken held.
  void Reset(const ColumnRows* previous);
  bool AppendObject(simdjson::ondemand::object& object, const std::vector<Slot>& slots,
                    std::vector<Column>& columns);
  bool AppendValue(simdjson::ondemand::value& value, const Slot& slot, Column& column);
  // Pads the columns `row` left out with nulls; false when one is a required (key) field.
  bool CloseRow(const std::vector<Slot>& slots, std::vector<Column>& columns) const;
  bool EndRow(bool fits, uint64_t line);
  struct JsonLinesRun;
  bool AppendRunDocument(JsonLinesRun& run, std::string_view text);

  std::shared_ptr<const schema::RecordLayout> layout_;
  std::vector<const Slot*> slots_;  // parallel to rows_.columns
  ColumnRows rows_;
  int64_t row_ = 0;  // the row being appended (== rows_.num_rows)
  // Behind a pointer, built and destroyed in typed_rows.cpp: simdjson's parser changes its layout
  // with the includer's flags (-O0 adds development checks), so it must not be part of ours.
  std::unique_ptr<simdjson::ondemand::parser> parser_;
  std::unique_ptr<JsonLinesRun> json_lines_;  // the run being read, parsed by parser_
};

}  // namespace skippr::sources::internal
