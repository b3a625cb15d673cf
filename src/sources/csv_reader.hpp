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
  // Resuming inside a file: its header, known from reading the start (no header line is read;
  // has_header is ignored), with `delimiter` set to the one the file was read with, and the line
  // number at the byte offset the input was opened at.
  std::optional<std::vector<std::string>> known_header;
  uint64_t first_line_number = 1;
  // A record that grows past this without ending (a quoted field that never closes, a line that
  // never ends) is a problem row, not buffered further.
  uint64_t max_record_bytes = uint64_t{16} << 20;
};

// Bytes of a problem row's physical line kept in CsvRow::raw_text.
inline constexpr size_t kCsvProblemTextBytes = 1024;

struct CsvRow {
  std::vector<std::string_view> fields;  // unescaped; valid until the next Next() call
  uint64_t line_number;                  // line where the row starts (1-based; header is line 1)
  uint64_t byte_offset;                  // of the row's first byte (decompressed stream offset)
  uint64_t next_byte_offset = 0;         // just after the row and its line end
  uint64_t next_line_number = 0;         // the line number at next_byte_offset
  bool is_ascii = false;  // every byte of the row is ASCII (so its fields are valid UTF-8)
  // Why the row cannot be read, or nullopt. A problem row has no fields; it is the physical line
  // where the broken record started (`raw_text`: its first kCsvProblemTextBytes), and reading
  // resumes at the next physical line.
  std::optional<std::string> problem;
  std::string_view raw_text;
};

// Bytes of input the delimiter sniffer looks at.
inline constexpr size_t kCsvSniffBytes = size_t{64} << 10;

// Picks the delimiter among , \t ; | whose per-line count outside quotes is non-zero and equal on
// the most sampled lines; ties (and no candidate at all) go to ','. `sample` is cut to whole lines
// unless `is_whole_input`. Exposed for tests.
char SniffCsvDelimiter(std::string_view sample, char quote, bool is_whole_input);

// Line ends: LF, CR and CRLF, also mixed (outside quotes; inside, they are the field's text).
// Leniency, as Python's csv and most readers: a quote inside an unquoted field is a literal
// character (5'11" stays 5'11"); text after a closing quote is kept ("ab"c reads abc).
class CsvReader {
 public:
  // Reads the header (when options.has_header and no known_header) and sniffs the delimiter when
  // none is given.
  static Result<std::unique_ptr<CsvReader>> Open(std::unique_ptr<InputStream> input,
                                                 CsvOptions options);

  const std::vector<std::string>& header() const { return header_; }  // empty without a header
  // Why the header line could not be read (it is a problem row), or nullopt.
  const std::optional<CsvRow>& header_problem() const { return header_problem_; }
  char delimiter() const { return delimiter_; }                       // the chosen one
  // The next non-blank row, or a problem row; nullopt at end. Rows whose field count differs
  // from the header are returned as they are (the caller dead-letters them).
  Result<std::optional<CsvRow>> Next();
  // The row Next() returns next, without consuming it (the blank lines before it are): until
  // Next() is called, a batch that ends now leaves the row to the next one. Null at the end and
  // at a row that cannot be read (Next() hands that one out as a problem row).
  Result<const CsvRow*> Peek();
  // Consumes the row Peek() returned (not null), as Next() would, without handing it out: its
  // fields' storage is kept for the next row.
  void SkipPeeked();
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
  enum class ParseOutcome {
    kRow,
    kBlankLine,
    kNeedMoreInput,
    kUnterminatedQuote,  // a quoted field the input ends inside, or that outgrows the limit
    kLineTooLong,        // a line that outgrows the limit
    kEnd,                // no more rows (ParseNextRow only)
  };

  CsvReader(std::unique_ptr<InputStream> input, CsvOptions options);
  Status ReadHeader();
  // Parses one row at window_.begin(); on kRow/kBlankLine sets `row_size_bytes_` (including its
  // line end) and `row_newlines_`.
  Result<ParseOutcome> ParseRow();
  // Parses the next row at the window's start, reading input as needed and consuming the blank
  // lines before it: kRow (parsed, not consumed), a problem, or kEnd.
  Result<ParseOutcome> ParseNextRow();
  // Parses a quoted field whose opening quote is at `field_begin`.
  ParseOutcome ParseQuotedField(const char* field_begin, const char** field_end);
  bool IsOverLimit(const char* end) const;
  std::string LimitText() const;  // "16 MiB"
  // The row at window_.begin() cannot be read: hands it out as a problem and skips its first
  // physical line without holding the rest of it.
  Result<CsvRow> ProblemRow(ParseOutcome outcome);

  InputWindow window_;
  LineEndFinder line_ends_;
  char delimiter_ = ',';
  char quote_ = '"';
  uint64_t max_record_bytes_;
  std::vector<std::string> header_;
  std::optional<CsvRow> header_problem_;
  std::string header_problem_text_;
  uint64_t next_line_number_ = 1;
  // Per-row scratch, reused between rows so steady-state parsing allocates nothing per field.
  std::vector<FieldSpan> spans_;
  std::string arena_;
  size_t row_size_bytes_ = 0;
  uint64_t row_newlines_ = 0;
  // Where the quoted field of a kUnterminatedQuote started (line, stream byte offset).
  uint64_t open_quote_line_ = 0;
  uint64_t open_quote_offset_ = 0;
  std::string problem_text_;
  CsvRow peeked_;             // what Peek() parsed, until Next() or SkipPeeked() consumes it
  bool has_peeked_ = false;
};

}  // namespace skippr::sources
