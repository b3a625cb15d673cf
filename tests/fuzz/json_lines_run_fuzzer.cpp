// Typed JSON lines read a run at a time (TypedRows::AppendJsonLine, one simdjson document stream
// over many lines) against one line at a time (AppendJson), over any bytes. Invariant: every line
// is taken, or left, alike, and the rows taken are the same values from the same lines. A run
// restarts at the line after each one it could not take and spans a few lines chosen by the
// input, so that runs start and end everywhere; what follows a run is readable and is the next
// line, as in the reader's window.
#include <fmt/format.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_support.hpp"
#include "schema/schema.hpp"
#include "sources/typed_rows.hpp"

namespace {

using skippr::LogicalType;
using Slot = skippr::schema::RecordLayout::Slot;

Slot MakeSlot(const char* key, LogicalType type, std::vector<Slot> children = {}) {
  return Slot{key, std::move(type), /*is_required=*/false, /*is_plain_key=*/true,
              std::move(children)};
}

std::shared_ptr<const skippr::schema::RecordLayout> Layout() {
  const LogicalType nested = LogicalType::Struct(
      {skippr::Field{11, "a", LogicalType::Long()}, skippr::Field{12, "b", LogicalType::String()}});
  std::vector<Slot> fields;
  fields.push_back(MakeSlot("id", LogicalType::Long()));
  fields.push_back(MakeSlot("n", LogicalType::Int()));
  fields.push_back(MakeSlot("x", LogicalType::Double()));
  fields.push_back(MakeSlot("s", LogicalType::String()));
  fields.push_back(MakeSlot("t", LogicalType::TimestampTz()));
  fields.push_back(MakeSlot("d", LogicalType::Date()));
  fields.push_back(MakeSlot("f", LogicalType::Boolean()));
  fields.push_back(MakeSlot("o", nested,
                            {MakeSlot("a", LogicalType::Long()), MakeSlot("b", LogicalType::String())}));
  return std::make_shared<const skippr::schema::RecordLayout>("fuzz", 1, std::move(fields));
}

std::vector<std::string> RowsOf(const skippr::ColumnRows& rows) {
  std::vector<std::string> described;
  for (int64_t row = 0; row < rows.num_rows; ++row) {
    described.push_back(fmt::format("{} (line {})", rows.RowAt(row).ToJson(),
                                    rows.lines[static_cast<size_t>(row)]));
  }
  return described;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::shared_ptr<const skippr::schema::RecordLayout> layout = Layout();
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t last_line_feed = input.rfind('\n');
  if (last_line_feed == std::string_view::npos) return 0;
  const std::string padded =
      std::string(input) + std::string(simdjson::SIMDJSON_PADDING, '\0');
  const std::string_view lines(padded.data(), last_line_feed);  // as LineReader::BufferedLines

  // A run from `offset` over `count` lines (fewer at the end), up to a '\n' as a run ends.
  const auto run_from = [&](size_t offset, size_t count) {
    size_t end = offset;
    for (; count > 0 && end < lines.size(); --count) {
      end = std::min(lines.find('\n', end), lines.size()) + 1;
    }
    return lines.substr(offset, end > offset ? end - 1 - offset : 0);
  };
  skippr::sources::internal::TypedRows alone(layout);
  skippr::sources::internal::TypedRows in_runs(layout);
  in_runs.StartJsonLines(run_from(0, 1 + size % 17));
  uint64_t line_number = 0;
  for (size_t at = 0; at < lines.size();) {
    // LF, CR and CRLF end a line.
    const size_t end = std::min(lines.find_first_of("\r\n", at), lines.size());
    size_t next = end + 1;
    if (end + 1 < padded.size() && padded[end] == '\r' && padded[end + 1] == '\n') ++next;
    const std::string_view text = lines.substr(at, end - at);
    ++line_number;
    at = next;
    if (text.find_first_not_of(" \t") == std::string_view::npos) continue;  // blank
    const bool expected = alone.AppendJson(text, line_number);
    bool taken = in_runs.has_json_lines() && in_runs.AppendJsonLine(text, line_number);
    if (!taken) taken = in_runs.AppendJson(text, line_number);
    FUZZ_CHECK(taken == expected, fmt::format("line {} taken {} from runs, {} alone", line_number,
                                              taken, expected));
    if (!in_runs.has_json_lines() && next <= lines.size()) {
      in_runs.StartJsonLines(run_from(next, 1 + (line_number * 7 + size) % 17));
    }
  }
  FUZZ_CHECK(RowsOf(in_runs.Take(1)) == RowsOf(alone.Take(1)), "rows differ");
  return 0;
}
