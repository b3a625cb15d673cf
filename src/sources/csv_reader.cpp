#include "sources/csv_reader.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "core/check.hpp"
#include "core/text.hpp"

namespace skippr::sources {
namespace {

constexpr std::array<char, 4> kSniffCandidates = {',', '\t', ';', '|'};  // ',' first: wins ties

const char* FindByte(const char* begin, const char* end, char byte) {
  return static_cast<const char*>(std::memchr(begin, byte, static_cast<size_t>(end - begin)));
}

// Line ends in a quoted field's text: LF, CR and CRLF each count once.
uint64_t CountLineEnds(const char* begin, const char* end) {
  auto count = static_cast<uint64_t>(std::count(begin, end, '\n'));
  for (const char* cr = FindByte(begin, end, '\r'); cr != nullptr; cr = FindByte(cr + 1, end, '\r')) {
    if (cr + 1 == end || cr[1] != '\n') ++count;
  }
  return count;
}

std::string PrintableChar(char c) {
  if (c == '\t') return "'\\t'";
  if (c == '\n') return "'\\n'";
  if (c == '\r') return "'\\r'";
  return fmt::format("'{}'", c);
}

}  // namespace

char SniffCsvDelimiter(std::string_view sample, char quote, bool is_whole_input) {
  using Counts = std::array<uint32_t, kSniffCandidates.size()>;
  std::vector<Counts> line_counts;
  Counts counts{};
  bool is_in_quotes = false;
  bool is_at_field_start = true;  // a quote opens a field only right after a line start or a
                                  // candidate delimiter; elsewhere it is a literal character
  bool has_content = false;
  for (size_t i = 0; i < sample.size(); ++i) {
    char c = sample[i];
    if (is_in_quotes) {
      if (c == quote) {
        if (i + 1 < sample.size() && sample[i + 1] == quote) {
          ++i;  // doubled quote
        } else {
          is_in_quotes = false;
        }
      }
      continue;
    }
    if (c == '\n' || c == '\r') {  // "\r\n" reads as a line end and a blank line
      if (has_content) line_counts.push_back(counts);  // blank lines say nothing
      counts = {};
      has_content = false;
      is_at_field_start = true;
      continue;
    }
    has_content = true;
    if (c == quote && is_at_field_start) {
      is_in_quotes = true;
      is_at_field_start = false;
      continue;
    }
    auto candidate = std::find(kSniffCandidates.begin(), kSniffCandidates.end(), c);
    is_at_field_start = candidate != kSniffCandidates.end();
    if (is_at_field_start) ++counts[static_cast<size_t>(candidate - kSniffCandidates.begin())];
  }
  // The sample's last line is cut at the sample boundary unless the sample is the whole input;
  // keep it only when it is all there is.
  if (has_content && (is_whole_input || line_counts.empty())) line_counts.push_back(counts);

  char best_delimiter = ',';
  size_t best_consistent_lines = 0;
  std::vector<uint32_t> candidate_counts;
  for (size_t k = 0; k < kSniffCandidates.size(); ++k) {
    candidate_counts.clear();
    for (const Counts& line : line_counts) candidate_counts.push_back(line[k]);
    std::sort(candidate_counts.begin(), candidate_counts.end());
    // The most frequent per-line count (the larger one on a tie) and how many lines have it.
    uint32_t mode_count = 0;
    size_t mode_lines = 0;
    for (size_t run_begin = 0; run_begin < candidate_counts.size();) {
      size_t run_end = run_begin;
      while (run_end < candidate_counts.size() &&
             candidate_counts[run_end] == candidate_counts[run_begin]) {
        ++run_end;
      }
      if (run_end - run_begin >= mode_lines) {
        mode_lines = run_end - run_begin;
        mode_count = candidate_counts[run_begin];
      }
      run_begin = run_end;
    }
    if (mode_count == 0) continue;
    if (mode_lines > best_consistent_lines) {  // strict: earlier candidates win ties
      best_consistent_lines = mode_lines;
      best_delimiter = kSniffCandidates[k];
    }
  }
  return best_delimiter;
}

CsvReader::CsvReader(std::unique_ptr<InputStream> input, CsvOptions options)
    : window_(std::move(input)),
      quote_(options.quote),
      max_record_bytes_(options.max_record_bytes),
      next_line_number_(options.first_line_number) {}

Result<std::unique_ptr<CsvReader>> CsvReader::Open(std::unique_ptr<InputStream> input,
                                                   CsvOptions options) {
  SKIPPR_CHECK(input != nullptr);
  const std::string path = input->path();
  auto is_line_end = [](char c) { return c == '\n' || c == '\r'; };
  if (is_line_end(options.quote) || (options.delimiter && (is_line_end(*options.delimiter) ||
                                                           *options.delimiter == options.quote))) {
    return Status::InvalidArgument(fmt::format(
        "cannot read {} as CSV with delimiter {} and quote {}: they must differ and neither may be "
        "a line end; fix the CSV options",
        path, options.delimiter ? PrintableChar(*options.delimiter) : "(sniffed)",
        PrintableChar(options.quote)));
  }
  std::unique_ptr<CsvReader> reader(new CsvReader(std::move(input), options));
  InputWindow& window = reader->window_;
  SKIPPR_RETURN_IF_ERROR(window.SkipByteOrderMark());

  if (options.delimiter) {
    reader->delimiter_ = *options.delimiter;
  } else {
    while (window.size_bytes() < kCsvSniffBytes && !window.is_input_exhausted()) {
      SKIPPR_RETURN_IF_ERROR(window.ReadMore(/*fill_window=*/true).status());
    }
    size_t sample_bytes = std::min(window.size_bytes(), kCsvSniffBytes);
    bool is_whole_input = window.is_input_exhausted() && sample_bytes == window.size_bytes();
    reader->delimiter_ = SniffCsvDelimiter(std::string_view(window.begin(), sample_bytes),
                                           options.quote, is_whole_input);
    if (reader->delimiter_ == options.quote) {
      return Status::InvalidArgument(fmt::format(
          "cannot read {} as CSV: the quote character {} is also the delimiter it uses; set the "
          "delimiter (or another quote) in the CSV options",
          path, PrintableChar(options.quote)));
    }
  }

  if (options.known_header) {
    reader->header_ = std::move(*options.known_header);
  } else if (options.has_header) {
    SKIPPR_RETURN_IF_ERROR(reader->ReadHeader());
  }
  return reader;
}

Status CsvReader::ReadHeader() {
  SKIPPR_ASSIGN_OR_RETURN(std::optional<CsvRow> header_row, Next());
  if (!header_row) return Status::OK();
  if (header_row->problem) {
    header_problem_ = std::move(header_row);
    header_problem_text_ = problem_text_;  // problem_text_ is reused by the next problem row
    header_problem_->raw_text = header_problem_text_;
    return Status::OK();
  }
  header_.reserve(header_row->fields.size());
  for (std::string_view name : header_row->fields) header_.emplace_back(name);
  return Status::OK();
}

Result<CsvReader::ParseOutcome> CsvReader::ParseNextRow() {
  while (true) {
    if (window_.size_bytes() == 0) {
      if (window_.is_input_exhausted()) return ParseOutcome::kEnd;
      SKIPPR_RETURN_IF_ERROR(window_.ReadMore(/*fill_window=*/true).status());
      continue;
    }
    SKIPPR_ASSIGN_OR_RETURN(ParseOutcome outcome, ParseRow());
    // A quoted field open at the end of an input cut by its size limit is a row still being
    // written, not a broken one: stop before it (the next pass reads it whole).
    if (outcome == ParseOutcome::kUnterminatedQuote && window_.is_cut_by_limit()) {
      return ParseOutcome::kEnd;
    }
    if (outcome == ParseOutcome::kNeedMoreInput) {
      // The row runs past the window: read more (growing it) and parse the row again. The
      // window at least doubles its data each time, so a huge row costs O(size) overall.
      SKIPPR_CHECK(!window_.is_input_exhausted());
      SKIPPR_RETURN_IF_ERROR(window_.ReadMore(/*fill_window=*/true).status());
      continue;
    }
    if (outcome != ParseOutcome::kBlankLine) return outcome;
    window_.ConsumeUntil(window_.begin() + row_size_bytes_);
    next_line_number_ += row_newlines_;
  }
}

Result<const CsvRow*> CsvReader::Peek() {
  if (!has_peeked_) {
    SKIPPR_ASSIGN_OR_RETURN(ParseOutcome outcome, ParseNextRow());
    if (outcome != ParseOutcome::kRow) return nullptr;
    const char* row_begin = window_.begin();
    peeked_.line_number = next_line_number_;
    peeked_.byte_offset = window_.ByteOffsetOf(row_begin);
    peeked_.next_byte_offset = window_.ByteOffsetOf(row_begin + row_size_bytes_);
    peeked_.next_line_number = next_line_number_ + row_newlines_;
    // One pass over the row's bytes, not one per field: unescaping only drops quote bytes.
    peeked_.is_ascii = IsAscii(std::string_view(row_begin, row_size_bytes_));
    peeked_.fields.clear();  // keeps its storage from the last row
    for (const FieldSpan& span : spans_) {
      const char* base = span.is_in_arena ? arena_.data() : row_begin;
      peeked_.fields.emplace_back(base + span.offset, span.size_bytes);
    }
    has_peeked_ = true;
  }
  return &peeked_;
}

void CsvReader::SkipPeeked() {
  SKIPPR_CHECK_MSG(has_peeked_, "SkipPeeked() without a peeked row");
  window_.ConsumeUntil(window_.begin() + row_size_bytes_);
  next_line_number_ += row_newlines_;
  has_peeked_ = false;
}

Result<std::optional<CsvRow>> CsvReader::Next() {
  SKIPPR_ASSIGN_OR_RETURN(const CsvRow* peeked, Peek());
  if (peeked == nullptr) {
    // At the end, or at a row that cannot be read, which Peek() parsed and left in place.
    SKIPPR_ASSIGN_OR_RETURN(ParseOutcome outcome, ParseNextRow());
    if (outcome == ParseOutcome::kEnd) return std::optional<CsvRow>();
    SKIPPR_CHECK(outcome == ParseOutcome::kUnterminatedQuote ||
                 outcome == ParseOutcome::kLineTooLong);
    SKIPPR_ASSIGN_OR_RETURN(CsvRow problem, ProblemRow(outcome));
    return std::optional<CsvRow>(std::move(problem));
  }
  std::optional<CsvRow> row = peeked_;  // a copy: peeked_ keeps its storage
  SkipPeeked();
  return row;
}

bool CsvReader::IsOverLimit(const char* end) const {
  return static_cast<uint64_t>(end - window_.begin()) > max_record_bytes_;
}

Result<CsvReader::ParseOutcome> CsvReader::ParseRow() {
  spans_.clear();
  arena_.clear();
  row_newlines_ = 0;
  const char* row_begin = window_.begin();
  const char* end = window_.end();
  const bool is_input_exhausted = window_.is_input_exhausted();
  auto offset_in_row = [row_begin](const char* p) { return static_cast<size_t>(p - row_begin); };

  // The line end ('\n' or '\r') of the current physical line, or `end` when the window holds no
  // more of them.
  const char* line_end = nullptr;
  bool has_line_end = false;
  const char* field_begin = row_begin;
  bool is_single_unquoted_field = true;
  while (true) {
    const char* cursor = field_begin;
    bool is_quoted = cursor < end && *cursor == quote_;
    FieldSpan span{false, offset_in_row(field_begin), 0};
    if (is_quoted) {
      ParseOutcome outcome = ParseQuotedField(field_begin, &cursor);
      if (outcome != ParseOutcome::kRow) return outcome;
      span = spans_.back();  // ParseQuotedField records the content; the tail may extend it
      spans_.pop_back();
      is_single_unquoted_field = false;
    }
    if (line_end == nullptr || line_end < cursor) {
      line_end = line_ends_.Find(window_, cursor);
      has_line_end = line_end != nullptr;
      if (!has_line_end) line_end = end;
    }
    const char* field_end = FindByte(cursor, line_end, delimiter_);
    const bool ends_row = field_end == nullptr;
    const char* next_line = end;
    if (ends_row) {
      if (!has_line_end && !is_input_exhausted) {
        return IsOverLimit(end) ? ParseOutcome::kLineTooLong : ParseOutcome::kNeedMoreInput;
      }
      if (has_line_end) next_line = PastLineEnd(window_, line_end);
      if (next_line == nullptr) return ParseOutcome::kNeedMoreInput;  // "\r" then maybe "\n"
      field_end = line_end;
    }
    const char* text_end = field_end;

    if (!is_quoted) {
      span.size_bytes = offset_in_row(text_end) - span.offset;
    } else if (text_end > cursor) {
      // Text after the closing quote ("ab"c): not RFC 4180, kept literally as most readers do.
      if (!span.is_in_arena) {
        size_t arena_offset = arena_.size();
        arena_.append(row_begin + span.offset, span.size_bytes);
        span = FieldSpan{true, arena_offset, span.size_bytes};
      }
      arena_.append(cursor, static_cast<size_t>(text_end - cursor));
      span.size_bytes += static_cast<size_t>(text_end - cursor);
    }
    spans_.push_back(span);

    if (ends_row) {
      row_size_bytes_ = offset_in_row(next_line);
      if (has_line_end) ++row_newlines_;
      bool is_blank = is_single_unquoted_field && spans_.size() == 1 && span.size_bytes == 0;
      return is_blank ? ParseOutcome::kBlankLine : ParseOutcome::kRow;
    }
    is_single_unquoted_field = false;
    field_begin = field_end + 1;
  }
}

CsvReader::ParseOutcome CsvReader::ParseQuotedField(const char* field_begin,
                                                    const char** field_end) {
  const char* row_begin = window_.begin();
  const char* end = window_.end();
  const bool is_input_exhausted = window_.is_input_exhausted();
  const char* content_begin = field_begin + 1;
  const char* scan = content_begin;
  bool has_doubled_quotes = false;
  const char* closing_quote = nullptr;
  const auto unterminated = [&] {
    // Unquoted text cannot hold a line end, so every line end before the field is inside an
    // earlier quoted field of this row, all counted in row_newlines_.
    open_quote_line_ = next_line_number_ + row_newlines_;
    open_quote_offset_ = window_.ByteOffsetOf(field_begin);
    return ParseOutcome::kUnterminatedQuote;
  };
  while (closing_quote == nullptr) {
    const char* found = FindByte(scan, end, quote_);
    const bool needs_more = found == nullptr || (found + 1 == end && !is_input_exhausted);
    if (needs_more) {  // at `end` a quote may still be the first half of ""
      if (found == nullptr && is_input_exhausted) return unterminated();
      return IsOverLimit(end) ? unterminated() : ParseOutcome::kNeedMoreInput;
    }
    if (found + 1 < end && found[1] == quote_) {
      has_doubled_quotes = true;
      scan = found + 2;
      continue;
    }
    closing_quote = found;
  }
  row_newlines_ += CountLineEnds(content_begin, closing_quote);

  size_t content_bytes = static_cast<size_t>(closing_quote - content_begin);
  if (!has_doubled_quotes) {
    spans_.push_back(
        FieldSpan{false, static_cast<size_t>(content_begin - row_begin), content_bytes});
  } else {
    // Only fields with "" need an owned copy; the arena is reused from row to row.
    size_t arena_offset = arena_.size();
    const char* piece = content_begin;
    while (piece < closing_quote) {
      const char* quote = FindByte(piece, closing_quote, quote_);
      if (quote == nullptr) quote = closing_quote;
      arena_.append(piece, static_cast<size_t>(quote - piece));
      if (quote == closing_quote) break;
      arena_.push_back(quote_);
      piece = quote + 2;  // skip the doubled quote's second half
    }
    spans_.push_back(FieldSpan{true, arena_offset, arena_.size() - arena_offset});
  }
  *field_end = closing_quote + 1;
  return ParseOutcome::kRow;
}

std::string CsvReader::LimitText() const {
  if (max_record_bytes_ % (1 << 20) == 0) return fmt::format("{} MiB", max_record_bytes_ >> 20);
  return fmt::format("{}-byte", max_record_bytes_);
}

Result<CsvRow> CsvReader::ProblemRow(ParseOutcome outcome) {
  const char* row_begin = window_.begin();
  CsvRow row{{}, next_line_number_, window_.ByteOffsetOf(row_begin)};
  const bool is_over_limit = IsOverLimit(window_.end());
  if (outcome == ParseOutcome::kUnterminatedQuote) {
    row.problem = fmt::format(
        "unterminated quoted field starting at line {} (byte offset {}): {}; line {} (byte "
        "offset {}) is skipped and reading resumes after it: close the quote or fix the file",
        open_quote_line_, open_quote_offset_,
        is_over_limit ? fmt::format("the record grows past the {} limit", LimitText())
                      : std::string("the file ends inside the quotes"),
        row.line_number, row.byte_offset);
  } else {
    row.problem = fmt::format(
        "line {} (byte offset {}) is longer than the {} record limit; it is skipped: split it "
        "into smaller records",
        row.line_number, row.byte_offset, LimitText());
  }
  // The physical line where the record started is the problem; the next one is read afresh.
  const char* first_line_end = line_ends_.Find(window_, row_begin);
  const size_t line_bytes =
      static_cast<size_t>((first_line_end != nullptr ? first_line_end : window_.end()) - row_begin);
  problem_text_.assign(row_begin, std::min(line_bytes, kCsvProblemTextBytes));
  row.raw_text = problem_text_;
  while (true) {
    const char* line_end = line_ends_.Find(window_, window_.begin());
    const char* next_line = line_end != nullptr ? PastLineEnd(window_, line_end) : nullptr;
    if (line_end == nullptr && window_.is_input_exhausted()) next_line = window_.end();
    if (next_line != nullptr) {
      window_.ConsumeUntil(next_line);
      break;
    }
    // Not held: dropped as it is searched (a '\r' at the end waits for its possible '\n').
    window_.ConsumeUntil(line_end != nullptr ? line_end : window_.end());
    SKIPPR_RETURN_IF_ERROR(window_.ReadMore(/*fill_window=*/true).status());
  }
  ++next_line_number_;
  row.next_byte_offset = window_.ByteOffsetOf(window_.begin());
  row.next_line_number = next_line_number_;
  return row;
}

}  // namespace skippr::sources
