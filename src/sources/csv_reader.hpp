// Internal to sources/: a streaming RFC 4180 reader over an InputStream. Rows are parsed in place
// in a growing window, so a row (or a quoted field spanning many lines) may be any size.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.hpp"
#include "sources/input_stream.hpp"

namespace skippr::sources {

struct CsvOptions {
  std::optional<char> delimiter;  // nullopt: sniff among , \t ; | from the first 64 KiB
  char quote = '"';
  bool has_header = true;
};

struct CsvRow {
  std::vector<std::string_view> fields;  // unescaped; valid until the next Next() call
  uint64_t line_number;                  // line where the row starts (1-based; header is line 1)
  uint64_t byte_offset;                  // of the row's first byte
};

// Bytes of input the delimiter sniffer looks at.
inline constexpr size_t kCsvSniffBytes = size_t{64} << 10;

// Picks the delimiter among , \t ; | whose per-line count outside quotes is non-zero and equal on
// the most sampled lines; ties (and no candidate at all) go to ','. `sample` is cut to whole lines
// unless `is_whole_input`. Exposed for tests.
char SniffCsvDelimiter(std::string_view sample, char quote, bool is_whole_input);

class CsvReader {
 public:
  // Reads the header (when options.has_header) and sniffs the delimiter when none is given.
  static Result<std::unique_ptr<CsvReader>> Open(std::unique_ptr<InputStream> input,
                                                 CsvOptions options);

  const std::vector<std::string>& header() const { return header_; }  // empty without a header
  char delimiter() const { return delimiter_; }                       // the chosen one
  // The next non-blank row; nullopt at end. Rows whose field count differs from the header are
  // returned as they are (the caller dead-letters them). An unterminated quoted field at the end
  // of the input is InvalidArgument naming the path and the line where the field started.
  Result<std::optional<CsvRow>> Next();
  const InputStream& input() const { return window_.input(); }
  // The line where the next row starts (1-based, counted from the stream's start).
  uint64_t next_line_number() const { return next_line_number_; }

 private:
  // Where a parsed field's bytes live: in the window, or in the row arena when unescaping
  // doubled quotes needed a copy. Offsets, because the arena may reallocate mid-row.
  struct FieldSpan {
    bool is_in_arena;
    size_t offset;  // from window_.begin(), or into arena_
    size_t size_bytes;
  };
  enum class ParseOutcome { kRow, kBlankLine, kNeedMoreInput };

  CsvReader(std::unique_ptr<InputStream> input, CsvOptions options);
  // Parses one row at window_.begin(); on kRow/kBlankLine sets `row_size_bytes_` (including its
  // line end) and `row_newlines_`.
  Result<ParseOutcome> ParseRow();
  // Parses a quoted field whose opening quote is at `field_begin`.
  Result<ParseOutcome> ParseQuotedField(const char* field_begin, const char** field_end);
  Status UnterminatedQuote(const char* field_begin) const;

  InputWindow window_;
  char delimiter_ = ',';
  char quote_ = '"';
  std::vector<std::string> header_;
  uint64_t next_line_number_ = 1;
  // Per-row scratch, reused between rows so steady-state parsing allocates nothing per field.
  std::vector<FieldSpan> spans_;
  std::string arena_;
  size_t row_size_bytes_ = 0;
  uint64_t row_newlines_ = 0;
};

}  // namespace skippr::sources
