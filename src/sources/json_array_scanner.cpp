#include "sources/json_array_scanner.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/check.hpp"

namespace skippr::sources {
namespace {

constexpr size_t kProblemPrefixBytes = 1024;
// simdjson's default depth limit: a deeper element cannot be parsed anyway.
constexpr size_t kMaxNestingDepth = 1024;

bool IsBlank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

}  // namespace

JsonArrayScanner::JsonArrayScanner(std::unique_ptr<InputStream> input, bool is_at_array_start,
                                   uint64_t first_line_number, uint64_t max_element_bytes)
    : window_(std::move(input)),
      state_(is_at_array_start ? State::kBeforeArray : State::kBeforeElement),
      max_element_bytes_(max_element_bytes),
      line_number_(first_line_number) {
  line_start_offset_ = window_.ByteOffsetOf(window_.begin());
}

Result<std::optional<JsonArrayElement>> JsonArrayScanner::Next() {
  if (state_ == State::kBeforeArray) SKIPPR_RETURN_IF_ERROR(window_.SkipByteOrderMark());
  return NextInState();
}

Result<std::optional<JsonArrayElement>> JsonArrayScanner::NextInState() {
  using MaybeElement = std::optional<JsonArrayElement>;
  while (true) {
    if (state_ == State::kDone) return MaybeElement();
    SKIPPR_ASSIGN_OR_RETURN(std::optional<char> next, PeekPastBlanks());
    StartElement();
    switch (state_) {
      case State::kBeforeArray:
        if (next == '[') {
          Consume(1);
          state_ = State::kBeforeElement;
          continue;
        }
        if (!next) {
          state_ = State::kDone;
          return MaybeElement(Problem("the file holds no JSON array"));
        }
        {
          SKIPPR_ASSIGN_OR_RETURN(JsonArrayElement problem,
                                  RestOfInputProblem("a JSON array file must start with '['"));
          return MaybeElement(std::move(problem));
        }
      case State::kBeforeElement: {
        if (!next) {
          state_ = State::kDone;
          return MaybeElement(Problem(
              "the file ends before the array's closing ']'; it may be truncated: re-copy it"));
        }
        if (*next == ']') {
          Consume(1);
          state_ = State::kAfterArray;
          continue;
        }
        if (*next == ',') {
          Consume(1);
          return MaybeElement(Problem("an empty element (a ',' without a value before it)"));
        }
        if (is_line_start_) {
          const uint64_t column = element_offset_ - line_start_offset_;
          element_column_ = element_column_ ? std::min(*element_column_, column) : column;
        }
        SKIPPR_ASSIGN_OR_RETURN(ScanEnd how, ScanElement());
        SKIPPR_ASSIGN_OR_RETURN(JsonArrayElement element, FinishElement(how));
        return MaybeElement(std::move(element));
      }
      case State::kAfterArray:
        if (!next) {
          state_ = State::kDone;
          return MaybeElement();
        }
        {
          SKIPPR_ASSIGN_OR_RETURN(
              JsonArrayElement problem,
              RestOfInputProblem(
                  "content after the array's closing ']'; a JSON array file holds one array"));
          return MaybeElement(std::move(problem));
        }
      case State::kDone:
        break;
    }
  }
}

Result<std::optional<char>> JsonArrayScanner::PeekPastBlanks() {
  while (true) {
    const char* position = window_.begin();
    const char* end = window_.end();
    for (; position < end && IsBlank(*position); ++position) CountByte(position);
    window_.ConsumeUntil(position);
    if (position < end) return std::optional<char>(*position);
    if (window_.is_input_exhausted()) return std::optional<char>();
    SKIPPR_RETURN_IF_ERROR(window_.ReadMore(/*fill_window=*/false).status());
  }
}

void JsonArrayScanner::CountByte(const char* position) {
  const char c = *position;
  if (c == '\n' || c == '\r') {
    if (c == '\r' || !was_carriage_return_) ++line_number_;  // "\r\n" is one line end
    line_start_offset_ = window_.ByteOffsetOf(position + 1);
    is_line_start_ = true;
  }
  was_carriage_return_ = c == '\r';
}

void JsonArrayScanner::StartElement() {
  element_offset_ = window_.ByteOffsetOf(window_.begin());
  element_line_ = line_number_;
  scanned_bytes_ = 0;
  is_skipping_ = false;
  is_in_string_ = false;
  is_escaped_ = false;
  open_brackets_.clear();
  unchecked_depth_ = 0;
  is_too_deep_ = false;
  prefix_.clear();
}

void JsonArrayScanner::Consume(size_t bytes) {
  SKIPPR_DCHECK(bytes <= window_.size_bytes());
  window_.ConsumeUntil(window_.begin() + bytes);
}

Result<JsonArrayScanner::ScanEnd> JsonArrayScanner::ScanElement() {
  while (true) {
    if (std::optional<ScanEnd> end = ScanBytes()) return *end;
    if (window_.is_input_exhausted()) return ScanEnd::kEndOfInput;
    if (!is_skipping_ && scanned_bytes_ > max_element_bytes_) {
      // Over the limit: keep the first bytes for the problem, then stop buffering the element.
      prefix_.assign(window_.begin(), kProblemPrefixBytes);
      is_skipping_ = true;
    }
    if (is_skipping_) {
      Consume(scanned_bytes_);
      scanned_bytes_ = 0;
    }
    SKIPPR_RETURN_IF_ERROR(window_.ReadMore(/*fill_window=*/true).status());
  }
}

std::optional<JsonArrayScanner::ScanEnd> JsonArrayScanner::ScanBytes() {
  const char* const begin = window_.begin();
  const char* const end = window_.end();
  const auto stop = [&](const char* position, ScanEnd how) {
    scanned_bytes_ = static_cast<size_t>(position - begin);
    return std::optional<ScanEnd>(how);
  };
  const auto broken = [&](const char* position, std::string reason) {
    broken_reason_ = std::move(reason);
    return stop(position, ScanEnd::kBroken);
  };
  for (const char* position = begin + scanned_bytes_; position < end; ++position) {
    const char c = *position;
    if (is_in_string_) {
      if (is_escaped_) {
        is_escaped_ = false;
      } else if (c == '\\') {
        is_escaped_ = true;
      } else if (c == '"') {
        is_in_string_ = false;
      } else if (c == '\n' || c == '\r') {
        return broken(position, "a line break inside a string (JSON strings cannot hold one): "
                                "a quote is missing");
      }
      continue;
    }
    switch (c) {
      case '"':
        is_in_string_ = true;
        break;
      case '{':
      case '[':
        // Deeper than any parser here goes: only counted, so that the element still ends at its
        // own closing bracket and costs one deadletter (breaking here would resynchronise inside
        // it, at every nested line that looks like an element start).
        if (open_brackets_.size() == kMaxNestingDepth) {
          ++unchecked_depth_;
          is_too_deep_ = true;
          break;
        }
        open_brackets_.push_back(c);
        break;
      case '}':
      case ']':
        if (unchecked_depth_ > 0) {
          --unchecked_depth_;
          break;
        }
        if (open_brackets_.empty()) {
          if (c == ']') return stop(position, ScanEnd::kSeparator);
          return broken(position, "a '}' that closes nothing");
        }
        if ((c == '}') != (open_brackets_.back() == '{')) {
          return broken(position, fmt::format("a '{}' where a '{}' is open", c,
                                              open_brackets_.back()));
        }
        open_brackets_.pop_back();
        break;
      case ',':
        if (open_brackets_.empty()) return stop(position, ScanEnd::kSeparator);
        break;
      default:
        break;
    }
    CountByte(position);
  }
  scanned_bytes_ = static_cast<size_t>(end - begin);
  return std::nullopt;
}

Result<JsonArrayElement> JsonArrayScanner::RestOfInputProblem(std::string reason) {
  state_ = State::kDone;
  prefix_.assign(window_.begin(), std::min(window_.size_bytes(), kProblemPrefixBytes));
  while (!window_.is_input_exhausted() || window_.size_bytes() > 0) {
    Consume(window_.size_bytes());
    SKIPPR_RETURN_IF_ERROR(window_.ReadMore(/*fill_window=*/true).status());
  }
  return Problem(std::move(reason));
}

Result<JsonArrayElement> JsonArrayScanner::FinishElement(ScanEnd how) {
  is_line_start_ = false;
  if (how != ScanEnd::kSeparator && !is_skipping_) {
    prefix_.assign(window_.begin(), std::min(scanned_bytes_, kProblemPrefixBytes));
  }
  const bool is_whole =
      open_brackets_.empty() && unchecked_depth_ == 0 && !is_in_string_ && !is_skipping_;
  if (how == ScanEnd::kEndOfInput && !is_whole) {
    state_ = State::kDone;
    Consume(scanned_bytes_);
    return Problem("the file ends inside this element; it may be truncated: re-copy it");
  }
  if (how == ScanEnd::kBroken) {
    Consume(scanned_bytes_);
    SKIPPR_RETURN_IF_ERROR(Resynchronise());
    return Problem(broken_reason_);
  }
  // A separator: ',' (consumed) or the closing ']' (left for the next call to see); or the end
  // of the input after a whole element, whose missing ']' the next call reports.
  const char* text_begin = window_.begin();
  const char* text_end = text_begin + scanned_bytes_;
  const bool is_comma = how == ScanEnd::kSeparator && *text_end == ',';
  // Over the limit: skipped once it outgrew the window, or whole in a window that grew past it.
  if (is_skipping_ || scanned_bytes_ > max_element_bytes_) {
    Consume(scanned_bytes_ + (is_comma ? 1 : 0));
    return Problem(fmt::format("an element of {} bytes exceeds the {} MiB limit; split it",
                               window_.ByteOffsetOf(window_.begin()) - element_offset_,
                               max_element_bytes_ >> 20));
  }
  if (is_too_deep_) {
    prefix_.assign(text_begin, std::min(scanned_bytes_, kProblemPrefixBytes));
    Consume(scanned_bytes_ + (is_comma ? 1 : 0));
    return Problem(fmt::format("nested deeper than {} levels", kMaxNestingDepth));
  }
  while (text_end > text_begin && IsBlank(text_end[-1])) --text_end;
  JsonArrayElement element;
  element.text = std::string_view(text_begin, static_cast<size_t>(text_end - text_begin));
  element.line_number = element_line_;
  element.byte_offset = element_offset_;
  element.size_bytes = scanned_bytes_;
  Consume(scanned_bytes_ + (is_comma ? 1 : 0));
  element.next_byte_offset = window_.ByteOffsetOf(window_.begin());
  element.next_line_number = line_number_;
  return element;
}

JsonArrayElement JsonArrayScanner::Problem(std::string reason) {
  JsonArrayElement problem;
  const size_t prefix_bytes = prefix_.size();
  prefix_.append(kLinePaddingBytes, '\0');  // the padding every element text promises
  problem.text = std::string_view(prefix_.data(), prefix_bytes);
  problem.line_number = element_line_;
  problem.byte_offset = element_offset_;
  problem.next_byte_offset = window_.ByteOffsetOf(window_.begin());
  problem.next_line_number = line_number_;
  problem.size_bytes = problem.next_byte_offset - element_offset_;
  problem.problem = std::move(reason);
  return problem;
}

Status JsonArrayScanner::Resynchronise() {
  // The broken element runs at least to the end of the line where it broke.
  SKIPPR_ASSIGN_OR_RETURN(bool has_more, SkipPastLineEnd());
  while (has_more) {
    SKIPPR_ASSIGN_OR_RETURN(std::optional<char> next, PeekPastBlanks());
    if (!next) return Status::OK();
    const uint64_t first_column = window_.ByteOffsetOf(window_.begin()) - line_start_offset_;
    const uint64_t line = line_number_;
    if (*next == ',') {  // a leading comma: the element may follow on the same line
      Consume(1);
      SKIPPR_ASSIGN_OR_RETURN(next, PeekPastBlanks());
      if (!next) return Status::OK();
      if (line_number_ != line) continue;
    }
    const bool is_top_level_column = !element_column_ || first_column <= *element_column_;
    const bool starts_value_or_end = *next != '}' && *next != ',' && *next != ':';
    if (is_top_level_column && starts_value_or_end) {
      is_line_start_ = true;
      return Status::OK();
    }
    SKIPPR_ASSIGN_OR_RETURN(has_more, SkipPastLineEnd());
  }
  return Status::OK();
}

Result<bool> JsonArrayScanner::SkipPastLineEnd() {
  while (true) {
    const char* position = window_.begin();
    const char* end = window_.end();
    while (position < end && *position != '\n' && *position != '\r') ++position;
    if (position < end) {
      CountByte(position);
      window_.ConsumeUntil(position + 1);
      return true;
    }
    window_.ConsumeUntil(end);
    was_carriage_return_ = false;
    if (window_.is_input_exhausted()) return false;
    SKIPPR_RETURN_IF_ERROR(window_.ReadMore(/*fill_window=*/true).status());
  }
}

}  // namespace skippr::sources
