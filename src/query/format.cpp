// The output formats of `skipprd query`.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <limits>

#include "core/check.hpp"
#include "query/query.hpp"

namespace skippr::query {

namespace {

bool IsNumericType(const std::string& type) {
  static const char* const kNumeric[] = {"TINYINT",  "SMALLINT",  "INTEGER",  "BIGINT",
                                         "HUGEINT",  "UTINYINT",  "USMALLINT", "UINTEGER",
                                         "UBIGINT",  "UHUGEINT",  "FLOAT",    "DOUBLE",
                                         "BIGNUM"};
  for (const char* name : kNumeric) {
    if (type == name) return true;
  }
  return type.rfind("DECIMAL", 0) == 0;
}

// True when `text` is a JSON number (DuckDB writes "inf", "nan" and such for non-finite floats).
bool IsJsonNumber(std::string_view text) {
  size_t i = 0;
  const size_t n = text.size();
  const auto digits = [&] {
    const size_t start = i;
    while (i < n && text[i] >= '0' && text[i] <= '9') ++i;
    return i > start;
  };
  if (i < n && text[i] == '-') ++i;
  if (i < n && text[i] == '0') {
    ++i;
  } else if (!digits()) {
    return false;
  }
  if (i < n && text[i] == '.') {
    ++i;
    if (!digits()) return false;
  }
  if (i < n && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    if (i < n && (text[i] == '+' || text[i] == '-')) ++i;
    if (!digits()) return false;
  }
  return i == n;
}

std::string JsonString(std::string_view text) {
  return nlohmann::json(std::string(text)).dump(-1, ' ', false,
                                                nlohmann::json::error_handler_t::replace);
}

// Display width: UTF-8 code points.
size_t Width(std::string_view text) {
  size_t width = 0;
  for (unsigned char c : text) width += (c & 0xC0) != 0x80;
  return width;
}

// A value on one table line: control characters shown escaped.
std::string Cell(std::optional<std::string_view> value) {
  if (!value) return "NULL";
  std::string cell;
  for (char c : *value) {
    if (c == '\n') {
      cell += "\\n";
    } else if (c == '\r') {
      cell += "\\r";
    } else if (c == '\t') {
      cell += "\\t";
    } else {
      cell += c;
    }
  }
  return cell;
}

void RightTrim(std::string& line) {
  while (!line.empty() && line.back() == ' ') line.pop_back();
}

// Appends `value` as a CSV field: quoted when it holds , " CR or LF (quotes doubled), an empty
// string as "" (told apart from NULL, which is nothing).
void AppendCsvField(std::string& out, std::optional<std::string_view> value) {
  if (!value) return;
  if (value->empty()) {
    out += "\"\"";
    return;
  }
  const auto is_special = [](char c) { return c == ',' || c == '"' || c == '\r' || c == '\n'; };
  if (std::none_of(value->begin(), value->end(), is_special)) {
    out.append(*value);
    return;
  }
  out += '"';
  for (const char c : *value) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
}

// A writer's text, handed to the output in pieces of about kFlushBytes.
class BufferedOutput {
 public:
  explicit BufferedOutput(TextOutput output) : output_(std::move(output)) {}
  std::string& text() { return buffer_; }
  Status FlushIfFull() { return buffer_.size() >= kFlushBytes ? Flush() : Status::OK(); }
  Status Flush() {
    if (buffer_.empty()) return Status::OK();
    Status written = output_(buffer_);
    buffer_.clear();
    return written;
  }

 private:
  static constexpr size_t kFlushBytes = size_t{64} << 10;
  TextOutput output_;
  std::string buffer_;
};

class CsvWriter final : public ResultWriter {
 public:
  explicit CsvWriter(TextOutput output) : out_(std::move(output)) {}
  Status Begin(const std::vector<std::string>& header, const std::vector<std::string>&) override {
    columns_ = header.size();
    for (size_t c = 0; c < header.size(); ++c) {
      if (c) out_.text() += ',';
      AppendCsvField(out_.text(), header[c]);
    }
    out_.text() += '\n';
    return out_.FlushIfFull();
  }
  Status Write(const ResultRows& rows) override {
    for (size_t r = 0; r < rows.size(); ++r) {
      for (size_t c = 0; c < columns_; ++c) {
        if (c) out_.text() += ',';
        AppendCsvField(out_.text(), rows.Value(r, c));
      }
      out_.text() += '\n';
      SKIPPR_RETURN_IF_ERROR(out_.FlushIfFull());
    }
    return Status::OK();
  }
  Status End() override { return out_.Flush(); }

 private:
  BufferedOutput out_;
  size_t columns_ = 0;
};

class JsonWriter final : public ResultWriter {
 public:
  explicit JsonWriter(TextOutput output) : out_(std::move(output)) {}
  Status Begin(const std::vector<std::string>& header,
               const std::vector<std::string>& column_types) override {
    for (const std::string& name : header) keys_.push_back(JsonString(name) + ':');
    for (size_t c = 0; c < header.size(); ++c) {
      const std::string type = c < column_types.size() ? column_types[c] : "";
      kinds_.push_back(type == "BOOLEAN" ? Kind::kBoolean
                                         : IsNumericType(type) ? Kind::kNumber : Kind::kText);
    }
    out_.text() += '[';
    return Status::OK();
  }
  Status Write(const ResultRows& rows) override {
    for (size_t r = 0; r < rows.size(); ++r) {
      out_.text() += rows_written_++ ? ",{" : "{";
      for (size_t c = 0; c < keys_.size(); ++c) {
        if (c) out_.text() += ',';
        out_.text() += keys_[c];
        AppendValue(rows.Value(r, c), kinds_[c]);
      }
      out_.text() += '}';
      SKIPPR_RETURN_IF_ERROR(out_.FlushIfFull());
    }
    return Status::OK();
  }
  Status End() override {
    out_.text() += "]\n";
    return out_.Flush();
  }

 private:
  enum class Kind { kText, kNumber, kBoolean };
  void AppendValue(std::optional<std::string_view> value, Kind kind) {
    if (!value) {
      out_.text() += "null";
    } else if ((kind == Kind::kBoolean && (*value == "true" || *value == "false")) ||
               (kind == Kind::kNumber && IsJsonNumber(*value))) {
      out_.text() += *value;
    } else {
      out_.text() += JsonString(*value);
    }
  }

  BufferedOutput out_;
  std::vector<std::string> keys_;  // "name":
  std::vector<Kind> kinds_;
  size_t rows_written_ = 0;
};

class PlainWriter final : public ResultWriter {
 public:
  explicit PlainWriter(TextOutput output) : out_(std::move(output)) {}
  Status Begin(const std::vector<std::string>& header, const std::vector<std::string>&) override {
    columns_ = header.size();
    out_.text() += "{\"header\":[";
    for (size_t c = 0; c < header.size(); ++c) out_.text() += (c ? "," : "") + JsonString(header[c]);
    out_.text() += "],\"rows\":[";
    return Status::OK();
  }
  Status Write(const ResultRows& rows) override {
    for (size_t r = 0; r < rows.size(); ++r) {
      out_.text() += rows_written_++ ? ",[" : "[";
      for (size_t c = 0; c < columns_; ++c) {
        if (c) out_.text() += ',';
        const std::optional<std::string_view> value = rows.Value(r, c);
        out_.text() += value ? JsonString(*value) : "null";
      }
      out_.text() += ']';
      SKIPPR_RETURN_IF_ERROR(out_.FlushIfFull());
    }
    return Status::OK();
  }
  Status End() override {
    out_.text() += "]}\n";
    return out_.Flush();
  }

 private:
  BufferedOutput out_;
  size_t columns_ = 0;
  size_t rows_written_ = 0;
};

// Aligns the rows it holds (at most `row_limit`); past the limit it writes those and counts the
// rest.
class TableWriter final : public ResultWriter {
 public:
  TableWriter(TextOutput output, size_t row_limit) : out_(std::move(output)), row_limit_(row_limit) {}
  Status Begin(const std::vector<std::string>& header,
               const std::vector<std::string>& column_types) override {
    header_ = header;
    for (size_t c = 0; c < header.size(); ++c) {
      right_aligned_.push_back(c < column_types.size() && IsNumericType(column_types[c]));
    }
    return Status::OK();
  }
  Status Write(const ResultRows& rows) override {
    for (size_t r = 0; r < rows.size(); ++r, ++row_count_) {
      if (row_count_ < row_limit_) {
        std::vector<std::string> line;
        for (size_t c = 0; c < header_.size(); ++c) line.push_back(Cell(rows.Value(r, c)));
        cells_.push_back(std::move(line));
      } else if (!written_) {
        SKIPPR_RETURN_IF_ERROR(WriteTable());
      }
    }
    return Status::OK();
  }
  Status End() override {
    if (!written_) SKIPPR_RETURN_IF_ERROR(WriteTable());
    if (row_count_ <= row_limit_) {
      out_.text() += row_count_ == 1 ? "(1 row)\n" : fmt::format("({} rows)\n", row_count_);
    } else {
      out_.text() += fmt::format("({} rows, the first {} shown; --output csv or json writes every "
                                 "row)\n", row_count_, row_limit_);
    }
    return out_.Flush();
  }

 private:
  Status WriteTable() {
    written_ = true;
    const size_t columns = header_.size();
    if (columns == 0) return Status::OK();
    std::vector<size_t> widths(columns);
    for (size_t c = 0; c < columns; ++c) widths[c] = Width(header_[c]);
    for (const auto& line : cells_) {
      for (size_t c = 0; c < columns; ++c) widths[c] = std::max(widths[c], Width(line[c]));
    }
    const auto pad = [](const std::string& text, size_t width, bool right) {
      const std::string fill(width - Width(text), ' ');
      return right ? fill + text : text + fill;
    };
    std::string header;
    std::string rule;
    for (size_t c = 0; c < columns; ++c) {
      header += (c ? " | " : "") + pad(header_[c], widths[c], false);
      rule += (c ? "-+-" : "") + std::string(widths[c], '-');
    }
    RightTrim(header);
    out_.text() += header + "\n" + rule + "\n";
    for (const auto& line : cells_) {
      std::string text;
      for (size_t c = 0; c < columns; ++c) {
        text += (c ? " | " : "") + pad(line[c], widths[c], right_aligned_[c]);
      }
      RightTrim(text);
      out_.text() += text + "\n";
      SKIPPR_RETURN_IF_ERROR(out_.FlushIfFull());
    }
    cells_.clear();
    return out_.Flush();
  }

  BufferedOutput out_;
  const size_t row_limit_;
  std::vector<std::string> header_;
  std::vector<bool> right_aligned_;
  std::vector<std::vector<std::string>> cells_;
  size_t row_count_ = 0;
  bool written_ = false;
};

// A QueryResult's rows as one chunk.
class QueryResultRows final : public ResultRows {
 public:
  explicit QueryResultRows(const QueryResult& result) : result_(result) {}
  size_t size() const override { return result_.rows.size(); }
  std::optional<std::string_view> Value(size_t row, size_t column) const override {
    const auto& values = result_.rows[row];
    if (column >= values.size() || !values[column]) return std::nullopt;
    return std::string_view(*values[column]);
  }

 private:
  const QueryResult& result_;
};

std::string FormatWhole(OutputFormat format, const QueryResult& result) {
  std::string text;
  std::unique_ptr<ResultWriter> writer = MakeFormatWriter(
      format,
      [&text](std::string_view piece) {
        text += piece;
        return Status::OK();
      },
      std::numeric_limits<size_t>::max());
  // Writing to a string cannot fail.
  SKIPPR_CHECK(writer->Begin(result.header, result.column_types).ok());
  SKIPPR_CHECK(writer->Write(QueryResultRows(result)).ok());
  SKIPPR_CHECK(writer->End().ok());
  return text;
}

}  // namespace

std::unique_ptr<ResultWriter> MakeFormatWriter(OutputFormat format, TextOutput output,
                                               size_t table_row_limit) {
  switch (format) {
    case OutputFormat::kCsv: return std::make_unique<CsvWriter>(std::move(output));
    case OutputFormat::kJson: return std::make_unique<JsonWriter>(std::move(output));
    case OutputFormat::kPlain: return std::make_unique<PlainWriter>(std::move(output));
    case OutputFormat::kTable: break;
  }
  return std::make_unique<TableWriter>(std::move(output), table_row_limit);
}

std::string FormatTable(const QueryResult& result) { return FormatWhole(OutputFormat::kTable, result); }
std::string FormatCsv(const QueryResult& result) { return FormatWhole(OutputFormat::kCsv, result); }
std::string FormatJson(const QueryResult& result) { return FormatWhole(OutputFormat::kJson, result); }
std::string FormatPlain(const QueryResult& result) { return FormatWhole(OutputFormat::kPlain, result); }

}  // namespace skippr::query
