// Internal to sources/: streams the top-level elements of a JSON array file ("[{...}, {...}]")
// one at a time, so that a file is never held whole and a bad element costs only itself.
//
// A small structural scanner tracks strings, escapes and bracket nesting to find where each
// element ends (the ',' or ']' at nesting depth 0); the element's bytes are handed out in place
// for a JSON parser. What the scanner cannot make sense of is handed out as a problem element
// with the reason, and scanning carries on:
//   - an element over the size limit is skipped without being buffered (its nesting still tracked);
//   - a bracket that closes nothing or the wrong thing, nesting deeper than 1024 levels, or a line
//     break inside a string (JSON strings cannot hold one: it is an unbalanced quote) breaks the
//     element; scanning resumes at the next line that starts (after blanks and an optional ',')
//     with a value or the closing ']' no further right than the column where the array's elements
//     start (so not at a nested object that happens to start a line);
//   - a file that ends inside an element or before the closing ']', content after the ']', and an
//     empty element ("[1,,2]") are one problem each; a trailing ',' before ']' is accepted.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.hpp"
#include "sources/input_stream.hpp"

namespace skippr::sources {

struct JsonArrayElement {
  // The element's bytes without surrounding blanks, valid until the next Next() call, followed by
  // at least kLinePaddingBytes readable bytes. For a problem: at most its first 1 KiB.
  std::string_view text;
  uint64_t line_number = 0;  // of its first byte (1-based)
  uint64_t byte_offset = 0;  // of its first byte in the decompressed stream (+ the OpenAt offset)
  uint64_t size_bytes = 0;   // all of its bytes, also when `text` holds only the first 1 KiB
  // Where scanning continues: after the ',' that ends it, or at the closing ']' (so a reader
  // opened there sees the end of the array), and the line number there.
  uint64_t next_byte_offset = 0;
  uint64_t next_line_number = 1;
  std::optional<std::string> problem;  // why it cannot be a record; nullopt for a whole element
};

class JsonArrayScanner {
 public:
  // `is_at_array_start`: the input starts at the file's beginning (a byte order mark, blanks,
  // then '['); otherwise it was opened at an element's next_byte_offset, numbering lines from
  // `first_line_number`.
  JsonArrayScanner(std::unique_ptr<InputStream> input, bool is_at_array_start,
                   uint64_t first_line_number, uint64_t max_element_bytes);

  // The next element or problem; nullopt after the array (and anything after it) ended.
  Result<std::optional<JsonArrayElement>> Next();
  const InputStream& input() const { return window_.input(); }

 private:
  enum class State { kBeforeArray, kBeforeElement, kAfterArray, kDone };
  enum class ScanEnd { kSeparator, kBroken, kEndOfInput };

  Result<std::optional<JsonArrayElement>> NextInState();
  // Skips blanks (counting lines); the next byte, or nullopt at the end of the input.
  Result<std::optional<char>> PeekPastBlanks();
  // Counts the byte at `position` (just scanned) for line numbers and columns.
  void CountByte(const char* position);
  void StartElement();
  // Scans the element starting at window_.begin() up to its separator (left unconsumed),
  // reading more input as needed.
  Result<ScanEnd> ScanElement();
  // Scans the bytes in the window; nullopt when it needs more.
  std::optional<ScanEnd> ScanBytes();
  Result<JsonArrayElement> FinishElement(ScanEnd how);
  // Everything from here to the end of the input as one problem.
  Result<JsonArrayElement> RestOfInputProblem(std::string reason);
  // After a broken element: skips to where the next element (or the closing ']') starts.
  Status Resynchronise();
  // Consumes through the next line end; false at the end of the input.
  Result<bool> SkipPastLineEnd();
  JsonArrayElement Problem(std::string reason);
  void Consume(size_t bytes);

  InputWindow window_;
  State state_;
  const uint64_t max_element_bytes_;
  uint64_t line_number_;
  bool was_carriage_return_ = false;  // the last byte counted: a '\n' after '\r' is no new line
  uint64_t line_start_offset_ = 0;    // stream offset where the current line starts
  bool is_line_start_ = true;         // only blanks, ',' and '[' since the line started
  // The smallest column (bytes from its line's start) of an element that started a line: where
  // top-level elements start. Resynchronising accepts element starts only up to it, not nested
  // objects that happen to start a line.
  std::optional<uint64_t> element_column_;

  // The element being scanned; it starts at window_.begin().
  uint64_t element_offset_ = 0;
  uint64_t element_line_ = 0;
  size_t scanned_bytes_ = 0;    // bytes after window_.begin() already scanned
  bool is_skipping_ = false;    // over the size limit: scanned bytes are dropped
  bool is_in_string_ = false;
  bool is_escaped_ = false;
  std::string open_brackets_;   // '{' and '[' still open, innermost last
  size_t unchecked_depth_ = 0;  // brackets open beyond the nesting limit (counted, not matched)
  bool is_too_deep_ = false;    // the element went beyond the nesting limit
  std::string broken_reason_;
  std::string prefix_;          // the first 1 KiB of a problem element, padded when handed out
};

}  // namespace skippr::sources
