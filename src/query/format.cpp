// The output formats of `skipprd query`.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

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
bool IsJsonNumber(const std::string& text) {
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

std::string JsonString(const std::string& text) {
  return nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Display width: UTF-8 code points.
size_t Width(const std::string& text) {
  size_t width = 0;
  for (unsigned char c : text) width += (c & 0xC0) != 0x80;
  return width;
}

// A value on one table line: control characters shown escaped.
std::string Cell(const std::optional<std::string>& value) {
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

std::string CsvField(const std::optional<std::string>& value) {
  if (!value) return "";
  if (value->empty()) return "\"\"";  // an empty string, told apart from NULL
  if (value->find_first_of(",\"\r\n") == std::string::npos) return *value;
  std::string quoted = "\"";
  for (char c : *value) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  return quoted + "\"";
}

}  // namespace

std::string FormatTable(const QueryResult& result) {
  const size_t columns = result.header.size();
  std::vector<std::vector<std::string>> cells;
  std::vector<size_t> widths(columns);
  for (size_t c = 0; c < columns; ++c) widths[c] = Width(result.header[c]);
  for (const auto& row : result.rows) {
    std::vector<std::string> line;
    for (size_t c = 0; c < columns; ++c) {
      line.push_back(Cell(c < row.size() ? row[c] : std::nullopt));
      widths[c] = std::max(widths[c], Width(line.back()));
    }
    cells.push_back(std::move(line));
  }
  const auto pad = [](const std::string& text, size_t width, bool right) {
    const std::string fill(width - Width(text), ' ');
    return right ? fill + text : text + fill;
  };
  std::string out;
  if (columns > 0) {
    std::string header;
    std::string rule;
    for (size_t c = 0; c < columns; ++c) {
      header += (c ? " | " : "") + pad(result.header[c], widths[c], false);
      rule += (c ? "-+-" : "") + std::string(widths[c], '-');
    }
    RightTrim(header);
    out += header + "\n" + rule + "\n";
    for (const auto& line : cells) {
      std::string text;
      for (size_t c = 0; c < columns; ++c) {
        const bool numeric = c < result.column_types.size() && IsNumericType(result.column_types[c]);
        text += (c ? " | " : "") + pad(line[c], widths[c], numeric);
      }
      RightTrim(text);
      out += text + "\n";
    }
  }
  out += result.rows.size() == 1 ? "(1 row)\n" : fmt::format("({} rows)\n", result.rows.size());
  return out;
}

std::string FormatCsv(const QueryResult& result) {
  std::string out;
  const auto line = [&](const auto& values) {
    for (size_t c = 0; c < values.size(); ++c) {
      if (c) out += ',';
      out += CsvField(values[c]);
    }
    out += '\n';
  };
  std::vector<std::optional<std::string>> header(result.header.begin(), result.header.end());
  line(header);
  for (const auto& row : result.rows) line(row);
  return out;
}

std::string FormatJson(const QueryResult& result) {
  std::string out = "[";
  for (size_t r = 0; r < result.rows.size(); ++r) {
    const auto& row = result.rows[r];
    out += r ? ",{" : "{";
    for (size_t c = 0; c < result.header.size(); ++c) {
      if (c) out += ',';
      out += JsonString(result.header[c]) + ':';
      const std::optional<std::string>& value = c < row.size() ? row[c] : std::nullopt;
      const std::string type = c < result.column_types.size() ? result.column_types[c] : "";
      if (!value) {
        out += "null";
      } else if (type == "BOOLEAN" && (*value == "true" || *value == "false")) {
        out += *value;
      } else if (IsNumericType(type) && IsJsonNumber(*value)) {
        out += *value;
      } else {
        out += JsonString(*value);
      }
    }
    out += '}';
  }
  return out + "]\n";
}

std::string FormatPlain(const QueryResult& result) {
  nlohmann::ordered_json document;
  document["header"] = result.header;
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const auto& row : result.rows) {
    nlohmann::ordered_json values = nlohmann::ordered_json::array();
    for (const auto& value : row) {
      values.push_back(value ? nlohmann::ordered_json(*value) : nlohmann::ordered_json(nullptr));
    }
    rows.push_back(std::move(values));
  }
  document["rows"] = std::move(rows);
  return document.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace skippr::query
