#include "sources/csv_reader.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "core/check.hpp"

namespace skippr::sources {
namespace {

constexpr std::array<char, 4> kSniffCandidates = {',', '\t', ';', '|'};  // ',' first: wins ties

const char* FindByte(const char* begin, const char* end, char byte) {
  return static_cast<const char*>(std::memchr(begin, byte, static_cast<size_t>(end - begin)));
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
    if (c == '\n') {
      if (has_content) line_counts.push_back(counts);  // blank lines say nothing
      counts = {};
      has_content = false;
      is_at_field_start = true;
      continue;
    }
    if (c != '\r') has_content = true;
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
    : window_(std::move(input)), quote_(options.quote) {}

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

  if (options.has_header) {
    SKIPPR_ASSIGN_OR_RETURN(std::optional<CsvRow> header_row, reader->Next());
    if (header_row) {
      reader->header_.reserve(header_row->fields.size());
      for (std::string_view name : header_row->fields) reader->header_.emplace_back(name);
    }
  }
  return reader;
}

Result<std::optional<CsvRow>> CsvReader::Next() {
  using MaybeRow = std::optional<CsvRow>;
  while (true) {
    if (window_.size_bytes() == 0) {
      if (window_.is_input_exhausted()) return MaybeRow();
      SKIPPR_RETURN_IF_ERROR(window_.ReadMore(/*fill_window=*/true).status());
      continue;
    }
    Result<ParseOutcome> parsed = ParseRow();
    // A quoted field open at the end of an input cut by its size limit is a row still being
    // written, not a broken one: stop before it (the next pass reads it whole).
    if (!parsed.ok() && window_.is_cut_by_limit()) return MaybeRow();
    SKIPPR_ASSIGN_OR_RETURN(ParseOutcome outcome, std::move(parsed));
    if (outcome == ParseOutcome::kNeedMoreInput) {
      // The row runs past the window: read more (growing it) and parse the row again. The
      // window at least doubles its data each time, so a huge row costs O(size) overall.
      SKIPPR_CHECK(!window_.is_input_exhausted());
      SKIPPR_RETURN_IF_ERROR(window_.ReadMore(/*fill_window=*/true).status());
      continue;
    }
    const char* row_begin = window_.begin();
    uint64_t line_number = next_line_number_;
    uint64_t byte_offset = window_.ByteOffsetOf(row_begin);
    window_.ConsumeUntil(row_begin + row_size_bytes_);
    next_line_number_ += row_newlines_;
    if (outcome == ParseOutcome::kBlankLine) continue;

    CsvRow row{{}, line_number, byte_offset};
    row.fields.reserve(spans_.size());
    for (const FieldSpan& span : spans_) {
      const char* base = span.is_in_arena ? arena_.data() : row_begin;
      row.fields.emplace_back(base + span.offset, span.size_bytes);
    }
    return MaybeRow(std::move(row));
  }
}

Result<CsvReader::ParseOutcome> CsvReader::ParseRow() {
  spans_.clear();
  arena_.clear();
  row_newlines_ = 0;
  const char* row_begin = window_.begin();
  const char* end = window_.end();
  const bool is_input_exhausted = window_.is_input_exhausted();
  auto offset_in_row = [row_begin](const char* p) { return static_cast<size_t>(p - row_begin); };

  // The '\n' ending the current physical line, or `end` when the window holds no more of them.
  const char* line_end = nullptr;
  bool has_line_end = false;
  const char* field_begin = row_begin;
  bool is_single_unquoted_field = true;
  while (true) {
    const char* cursor = field_begin;
    bool is_quoted = cursor < end && *cursor == quote_;
    FieldSpan span{false, offset_in_row(field_begin), 0};
    if (is_quoted) {
      SKIPPR_ASSIGN_OR_RETURN(ParseOutcome outcome, ParseQuotedField(field_begin, &cursor));
      if (outcome == ParseOutcome::kNeedMoreInput) return outcome;
      span = spans_.back();  // ParseQuotedField records the content; the tail may extend it
      spans_.pop_back();
      is_single_unquoted_field = false;
    }
    if (line_end == nullptr || line_end < cursor) {
      line_end = FindByte(cursor, end, '\n');
      has_line_end = line_end != nullptr;
      if (!has_line_end) line_end = end;
    }
    const char* field_end = FindByte(cursor, line_end, delimiter_);
    const bool ends_row = field_end == nullptr;
    if (ends_row) {
      if (!has_line_end && !is_input_exhausted) return ParseOutcome::kNeedMoreInput;
      field_end = line_end;
    }
    const char* text_end = field_end;
    if (ends_row && text_end > cursor && text_end[-1] == '\r') --text_end;  // \r\n line end

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
      row_size_bytes_ = offset_in_row(has_line_end ? line_end + 1 : end);
      if (has_line_end) ++row_newlines_;
      bool is_blank = is_single_unquoted_field && spans_.size() == 1 && span.size_bytes == 0;
      return is_blank ? ParseOutcome::kBlankLine : ParseOutcome::kRow;
    }
    is_single_unquoted_field = false;
    field_begin = field_end + 1;
  }
}

Result<CsvReader::ParseOutcome> CsvReader::ParseQuotedField(const char* field_begin,
                                                            const char** field_end) {
  const char* row_begin = window_.begin();
  const char* end = window_.end();
  const bool is_input_exhausted = window_.is_input_exhausted();
  const char* content_begin = field_begin + 1;
  const char* scan = content_begin;
  bool has_doubled_quotes = false;
  const char* closing_quote = nullptr;
  while (closing_quote == nullptr) {
    const char* found = FindByte(scan, end, quote_);
    if (found == nullptr) {
      if (is_input_exhausted) return UnterminatedQuote(field_begin);
      return ParseOutcome::kNeedMoreInput;
    }
    if (found + 1 == end && !is_input_exhausted) {
      return ParseOutcome::kNeedMoreInput;  // cannot tell "" from a closing quote yet
    }
    if (found + 1 < end && found[1] == quote_) {
      has_doubled_quotes = true;
      scan = found + 2;
      continue;
    }
    closing_quote = found;
  }
  row_newlines_ += static_cast<uint64_t>(std::count(content_begin, closing_quote, '\n'));

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

Status CsvReader::UnterminatedQuote(const char* field_begin) const {
  // Unquoted text cannot hold a newline, so every newline before the field is inside an earlier
  // quoted field of this row, all counted in row_newlines_.
  uint64_t line_number = next_line_number_ + row_newlines_;
  return Status::InvalidArgument(fmt::format(
      "{}: unterminated quoted field starting at line {} (byte offset {}): the file ends inside "
      "the quotes; close the quote or fix the file",
      window_.input().path(), line_number, window_.ByteOffsetOf(field_begin)));
}

}  // namespace skippr::sources
