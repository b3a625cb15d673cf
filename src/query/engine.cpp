// The Engine: an in-memory DuckDB, the wal_scan table function, one view per registered table, and
// SQL runs whose results come back as text.
#include <duckdb.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "core/check.hpp"
#include "query/file_pruning.hpp"
#include "query/query.hpp"
#include "query/scan_counters.hpp"

namespace skippr::query {

namespace detail {
Result<Batch> ResultToBatch(duckdb_result& result);  // to_batch.cpp
Result<std::unique_ptr<BatchStream>> StreamResultAsBatches(duckdb_pending_result pending,
                                                           duckdb_result result,
                                                           std::vector<std::string> header,
                                                           std::vector<std::string> column_types);
bool HasBatchColumn(duckdb_logical_type type);
using SourceLookup =
    std::function<std::shared_ptr<const TableSource>(const std::string&, const std::string&)>;
// wal_scan.cpp; `counters` outlives the connection.
Status RegisterWalScan(duckdb_connection connection, SourceLookup lookup,
                       AtomicScanCounters* counters);
}  // namespace detail

std::string QuoteIdentifier(std::string_view name) {
  std::string quoted = "\"";
  for (char c : name) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  return quoted + "\"";
}

std::string QuoteLiteral(std::string_view text) {
  std::string quoted = "'";
  for (char c : text) {
    if (c == '\'') quoted += '\'';
    quoted += c;
  }
  return quoted + "'";
}

namespace {

// A message DuckDB may not have: "" for none.
std::string MessageText(const char* message) { return message != nullptr ? message : ""; }

// DuckDB's own wait for a result (duckdb_execute_prepared, duckdb_execute_pending) asks its task
// queue again at once while its worker threads hold every task: a core spinning beside the
// reader, committer and lander threads that need it (4% of a Parquet sync's CPU went there). This
// runs tasks until the result is ready and pauses, 50 µs doubling up to 1 ms, while none is free.
// DuckDB's message when the statement fails; `*result` then holds nothing to destroy.
std::optional<std::string> ExecutePending(duckdb_pending_result pending, duckdb_result* result) {
  *result = duckdb_result{};  // an empty result is safe to destroy, should a caller do so
  constexpr std::chrono::microseconds kFirstPause{50};
  constexpr std::chrono::microseconds kLongestPause{1000};
  std::chrono::microseconds pause = kFirstPause;
  while (true) {
    const duckdb_pending_state state = duckdb_pending_execute_task(pending);
    if (state == DUCKDB_PENDING_RESULT_READY) break;
    if (state == DUCKDB_PENDING_ERROR) {
      return MessageText(duckdb_pending_error(pending));
    }
    if (state == DUCKDB_PENDING_NO_TASKS_AVAILABLE) {
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, kLongestPause);
    } else {
      pause = kFirstPause;
    }
  }
  if (duckdb_execute_pending(pending, result) == DuckDBSuccess) return std::nullopt;
  std::string error = MessageText(duckdb_result_error(result));
  duckdb_destroy_result(result);
  return error;
}

// `statement` run to a materialised result by ExecutePending.
std::optional<std::string> ExecutePrepared(duckdb_prepared_statement statement,
                                           duckdb_result* result) {
  duckdb_pending_result pending = nullptr;
  std::optional<std::string> error;
  if (duckdb_pending_prepared(statement, &pending) != DuckDBSuccess) {
    error = MessageText(duckdb_pending_error(pending));
  } else {
    error = ExecutePending(pending, result);
  }
  duckdb_destroy_pending(&pending);
  return error;
}

std::string Lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

// DuckDB's spelling of a type, as LogicalType::ToString writes it.
std::string TypeName(duckdb_logical_type type) {
  const auto child_name = [](duckdb_logical_type child) {
    std::string name = TypeName(child);
    duckdb_destroy_logical_type(&child);
    return name;
  };
  const auto member = [](char* raw) {
    std::string name = raw ? raw : "";
    duckdb_free(raw);
    bool plain = !name.empty() && (std::islower(static_cast<unsigned char>(name[0])) || name[0] == '_');
    for (char c : name) {
      plain = plain && (std::islower(static_cast<unsigned char>(c)) ||
                        std::isdigit(static_cast<unsigned char>(c)) || c == '_');
    }
    return plain ? name : QuoteIdentifier(name);
  };
  switch (duckdb_get_type_id(type)) {
    case DUCKDB_TYPE_BOOLEAN: return "BOOLEAN";
    case DUCKDB_TYPE_TINYINT: return "TINYINT";
    case DUCKDB_TYPE_SMALLINT: return "SMALLINT";
    case DUCKDB_TYPE_INTEGER: return "INTEGER";
    case DUCKDB_TYPE_BIGINT: return "BIGINT";
    case DUCKDB_TYPE_UTINYINT: return "UTINYINT";
    case DUCKDB_TYPE_USMALLINT: return "USMALLINT";
    case DUCKDB_TYPE_UINTEGER: return "UINTEGER";
    case DUCKDB_TYPE_UBIGINT: return "UBIGINT";
    case DUCKDB_TYPE_HUGEINT: return "HUGEINT";
    case DUCKDB_TYPE_UHUGEINT: return "UHUGEINT";
    case DUCKDB_TYPE_FLOAT: return "FLOAT";
    case DUCKDB_TYPE_DOUBLE: return "DOUBLE";
    case DUCKDB_TYPE_DECIMAL:
      return fmt::format("DECIMAL({},{})", duckdb_decimal_width(type), duckdb_decimal_scale(type));
    case DUCKDB_TYPE_DATE: return "DATE";
    case DUCKDB_TYPE_TIME: return "TIME";
    case DUCKDB_TYPE_TIME_NS: return "TIME_NS";
    case DUCKDB_TYPE_TIME_TZ: return "TIME WITH TIME ZONE";
    case DUCKDB_TYPE_TIMESTAMP: return "TIMESTAMP";
    case DUCKDB_TYPE_TIMESTAMP_S: return "TIMESTAMP_S";
    case DUCKDB_TYPE_TIMESTAMP_MS: return "TIMESTAMP_MS";
    case DUCKDB_TYPE_TIMESTAMP_NS: return "TIMESTAMP_NS";
    case DUCKDB_TYPE_TIMESTAMP_TZ: return "TIMESTAMP WITH TIME ZONE";
    case DUCKDB_TYPE_INTERVAL: return "INTERVAL";
    case DUCKDB_TYPE_VARCHAR: return "VARCHAR";
    case DUCKDB_TYPE_BLOB: return "BLOB";
    case DUCKDB_TYPE_UUID: return "UUID";
    case DUCKDB_TYPE_BIT: return "BIT";
    case DUCKDB_TYPE_BIGNUM: return "BIGNUM";
    case DUCKDB_TYPE_SQLNULL: return "\"NULL\"";
    case DUCKDB_TYPE_ENUM: {
      std::string text = "ENUM(";
      const uint32_t size = duckdb_enum_dictionary_size(type);
      for (uint32_t i = 0; i < size; ++i) {
        char* value = duckdb_enum_dictionary_value(type, i);
        text += (i ? ", " : "") + QuoteLiteral(value ? value : "");
        duckdb_free(value);
      }
      return text + ")";
    }
    case DUCKDB_TYPE_LIST: return child_name(duckdb_list_type_child_type(type)) + "[]";
    case DUCKDB_TYPE_ARRAY:
      return fmt::format("{}[{}]", child_name(duckdb_array_type_child_type(type)),
                         duckdb_array_type_array_size(type));
    case DUCKDB_TYPE_MAP:
      return fmt::format("MAP({}, {})", child_name(duckdb_map_type_key_type(type)),
                         child_name(duckdb_map_type_value_type(type)));
    case DUCKDB_TYPE_STRUCT: {
      std::string text = "STRUCT(";
      const idx_t count = duckdb_struct_type_child_count(type);
      for (idx_t i = 0; i < count; ++i) {
        text += (i ? ", " : "") + member(duckdb_struct_type_child_name(type, i)) + " " +
                child_name(duckdb_struct_type_child_type(type, i));
      }
      return text + ")";
    }
    case DUCKDB_TYPE_UNION: {
      std::string text = "UNION(";
      const idx_t count = duckdb_union_type_member_count(type);
      for (idx_t i = 0; i < count; ++i) {
        text += (i ? ", " : "") + member(duckdb_union_type_member_name(type, i)) + " " +
                child_name(duckdb_union_type_member_type(type, i));
      }
      return text + ")";
    }
    default: return "UNKNOWN";
  }
}

}  // namespace

namespace detail {
std::string DuckTypeName(duckdb_logical_type type) { return TypeName(type); }
}  // namespace detail

namespace {

// "Catalog Error: Table with name x does not exist!..." → "x" (a name without ' ' or '!').
std::optional<std::string> MissingTableName(const std::string& message) {
  constexpr std::string_view kBefore = "Table with name ";
  constexpr std::string_view kAfter = " does not exist";
  if (message.find("Catalog Error") == std::string::npos) return std::nullopt;
  for (size_t start = message.find(kBefore); start != std::string::npos;
       start = message.find(kBefore, start + 1)) {
    const size_t name_begin = start + kBefore.size();
    const size_t name_end = message.find_first_of(" !", name_begin);
    if (name_end == std::string::npos || name_end == name_begin) continue;
    if (std::string_view(message).substr(name_end).starts_with(kAfter)) {
      return message.substr(name_begin, name_end - name_begin);
    }
  }
  return std::nullopt;
}

// ----- file access off (EngineOptions::allows_file_access = false) ------------------------------

// DuckDB's refusals once external access is off and the configuration locked.
bool IsAccessRefusal(const std::string& message) {
  return message.find("Permission Error") != std::string::npos ||
         message.find("disabled by configuration") != std::string::npos ||
         message.find("configuration has been locked") != std::string::npos;
}

// `what` is blocked; `detail` (DuckDB's own message, when it refused) follows the explanation.
Status FileAccessRefused(std::string_view what, std::string_view detail = "") {
  return Status::InvalidArgument(fmt::format(
      "{}: query reads only the pipelines' tables <pipeline>.<namespace>, so reading or writing "
      "other files, attaching databases, installing or loading extensions and changing settings "
      "are off — run `skipprd query {}` to allow them{}{}",
      what, kAllowFileAccessFlag, detail.empty() ? "" : ". DuckDB: ", detail));
}

// EXPLAIN ANALYZE (or EXPLAIN (ANALYZE ...)) anywhere in `sql`: it runs what it explains.
bool ExplainsAnalyze(const std::string& sql) {
  const std::string lower = Lower(sql);
  for (size_t at = lower.find("explain"); at != std::string::npos;
       at = lower.find("explain", at + 1)) {
    size_t next = at + 7;
    while (next < lower.size() && (std::isspace(static_cast<unsigned char>(lower[next])) ||
                                   lower[next] == '(')) {
      ++next;
    }
    if (lower.compare(next, 5, "analy") == 0) return true;
  }
  return false;
}

// Whether every SET or RESET word in `sql` is followed by VARIABLE: DuckDB gives SET VARIABLE (a
// session variable, harmless) the statement type of SET, and the C API has no text per statement.
// A text that also holds another SET is refused as a whole (the safe side); lock_configuration
// refuses setting changes besides.
bool OnlySetsVariables(const std::string& sql) {
  const std::string lower = Lower(sql);
  const auto is_word_byte = [&](size_t at) {
    return at < lower.size() && (std::isalnum(static_cast<unsigned char>(lower[at])) ||
                                 lower[at] == '_');
  };
  for (const std::string_view word : {std::string_view("set"), std::string_view("reset")}) {
    for (size_t at = lower.find(word); at != std::string::npos; at = lower.find(word, at + 1)) {
      if ((at > 0 && is_word_byte(at - 1)) || is_word_byte(at + word.size())) continue;
      size_t next = at + word.size();
      while (next < lower.size() && std::isspace(static_cast<unsigned char>(lower[next]))) ++next;
      if (lower.compare(next, 8, "variable") != 0 || is_word_byte(next + 8)) return false;
    }
  }
  return true;
}

// Statements that only read tables or change this in-memory session pass; the rest could write
// files (COPY, EXPORT, EXPLAIN ANALYZE of one, a PREPAREd one run by EXECUTE), reach other
// databases (ATTACH), load code (INSTALL/LOAD) or undo the restriction (SET/RESET).
Status CheckStatementAllowed(duckdb_statement_type type, const std::string& sql) {
  switch (type) {
    case DUCKDB_STATEMENT_TYPE_SELECT:
    case DUCKDB_STATEMENT_TYPE_INSERT:
    case DUCKDB_STATEMENT_TYPE_UPDATE:
    case DUCKDB_STATEMENT_TYPE_DELETE:
    case DUCKDB_STATEMENT_TYPE_CREATE:
    case DUCKDB_STATEMENT_TYPE_CREATE_FUNC:
    case DUCKDB_STATEMENT_TYPE_DROP:
    case DUCKDB_STATEMENT_TYPE_ALTER:
    case DUCKDB_STATEMENT_TYPE_TRANSACTION:
    case DUCKDB_STATEMENT_TYPE_VARIABLE_SET:
    case DUCKDB_STATEMENT_TYPE_PRAGMA:
    case DUCKDB_STATEMENT_TYPE_CALL:
    case DUCKDB_STATEMENT_TYPE_ANALYZE:
      return Status::OK();
    case DUCKDB_STATEMENT_TYPE_EXPLAIN:
      // EXPLAIN ANALYZE runs the statement it explains (which may be a COPY).
      if (!ExplainsAnalyze(sql)) return Status::OK();
      return FileAccessRefused("EXPLAIN ANALYZE is not allowed");
    case DUCKDB_STATEMENT_TYPE_COPY:
      return FileAccessRefused("COPY is not allowed");
    case DUCKDB_STATEMENT_TYPE_EXPORT:
      return FileAccessRefused("EXPORT DATABASE is not allowed");
    case DUCKDB_STATEMENT_TYPE_ATTACH:
    case DUCKDB_STATEMENT_TYPE_DETACH:
      return FileAccessRefused("ATTACH and DETACH are not allowed");
    case DUCKDB_STATEMENT_TYPE_LOAD:
      return FileAccessRefused("INSTALL and LOAD are not allowed");
    case DUCKDB_STATEMENT_TYPE_SET:
      if (OnlySetsVariables(sql)) return Status::OK();
      return FileAccessRefused("SET and RESET are not allowed (SET VARIABLE is)");
    default:
      return FileAccessRefused("this kind of statement is not allowed");
  }
}

// A chunk of VARCHAR vectors (strings may hold NUL bytes) as ResultRows.
class VarcharChunkRows final : public ResultRows {
 public:
  VarcharChunkRows(duckdb_data_chunk chunk, idx_t columns) : size_(duckdb_data_chunk_get_size(chunk)) {
    for (idx_t c = 0; c < columns; ++c) {
      duckdb_vector vector = duckdb_data_chunk_get_vector(chunk, c);
      data_.push_back(static_cast<duckdb_string_t*>(duckdb_vector_get_data(vector)));
      validity_.push_back(duckdb_vector_get_validity(vector));
    }
  }
  size_t size() const override { return size_; }
  std::optional<std::string_view> Value(size_t row, size_t column) const override {
    if (validity_[column] != nullptr && !duckdb_validity_row_is_valid(validity_[column], row)) {
      return std::nullopt;
    }
    duckdb_string_t& value = data_[column][row];
    return std::string_view(duckdb_string_t_data(&value), duckdb_string_t_length(value));
  }

 private:
  size_t size_;
  std::vector<duckdb_string_t*> data_;
  std::vector<uint64_t*> validity_;
};

// Rows converted to text up front (the small results of statements other than SELECT).
class TextRows final : public ResultRows {
 public:
  explicit TextRows(std::vector<std::vector<std::optional<std::string>>> rows) : rows_(std::move(rows)) {}
  size_t size() const override { return rows_.size(); }
  std::optional<std::string_view> Value(size_t row, size_t column) const override {
    const std::optional<std::string>& value = rows_[row][column];
    if (!value) return std::nullopt;
    return std::string_view(*value);
  }

 private:
  std::vector<std::vector<std::optional<std::string>>> rows_;
};

// Hands every chunk of a (streaming) result of VARCHAR columns to `writer` and returns what the
// writer said; when the statement fails while it streams, DuckDB's message is in `duckdb_error`.
Status StreamTextRows(duckdb_result& result, idx_t columns, ResultWriter& writer,
                      std::string* duckdb_error) {
  while (true) {
    duckdb_data_chunk chunk = duckdb_fetch_chunk(result);
    if (chunk == nullptr) break;
    Status written = writer.Write(VarcharChunkRows(chunk, columns));
    duckdb_destroy_data_chunk(&chunk);
    SKIPPR_RETURN_IF_ERROR(written);
  }
  const char* error = duckdb_result_error(&result);
  if (error != nullptr) *duckdb_error = error;
  return Status::OK();
}

// Collects a streamed result into a QueryResult.
class CollectingWriter final : public ResultWriter {
 public:
  explicit CollectingWriter(QueryResult* result) : result_(result) {}
  Status Begin(const std::vector<std::string>& header,
               const std::vector<std::string>& column_types) override {
    result_->header = header;
    result_->column_types = column_types;
    return Status::OK();
  }
  Status Write(const ResultRows& rows) override {
    for (size_t r = 0; r < rows.size(); ++r) {
      std::vector<std::optional<std::string>> row;
      for (size_t c = 0; c < result_->header.size(); ++c) {
        const std::optional<std::string_view> value = rows.Value(r, c);
        row.push_back(value ? std::optional<std::string>(std::string(*value)) : std::nullopt);
      }
      result_->rows.push_back(std::move(row));
    }
    return Status::OK();
  }
  Status End() override { return Status::OK(); }

 private:
  QueryResult* result_;
};

// Strips trailing whitespace and semicolons so the statement can sit inside a subquery.
std::string StripStatementEnd(std::string sql) {
  while (!sql.empty() && (std::isspace(static_cast<unsigned char>(sql.back())) || sql.back() == ';')) {
    sql.pop_back();
  }
  return sql;
}

// ----- the view of a table ---------------------------------------------------------------------

// The schema of the engine's own tables (a reserved pipeline name: no pipeline's tables are there).
constexpr std::string_view kInternalSchema = "_skippr";

// Helper columns the view adds inside itself; a table field may not be named like them.
constexpr std::string_view kReservedPrefix = "__skippr_";
constexpr std::string_view kSequenceColumn = "__skippr_sequence";
constexpr std::string_view kFileColumn = "__skippr_file";
constexpr std::string_view kPositionColumn = "__skippr_position";
constexpr std::string_view kLocalFileColumn = "__skippr_path";

Status CheckViewColumns(const TableSource& table) {
  for (const Field& field : table.fields) {
    if (field.name.starts_with(kReservedPrefix)) {
      return Status::InvalidArgument(fmt::format(
          "table {}.{}: column '{}' starts with '{}', which query reserves for its own columns; "
          "rename it (transform.ops rename)",
          table.pipeline, table.namespace_name, field.name, kReservedPrefix));
    }
  }
  // (Delete files' key columns are matched against the data files' own columns, which may still
  // hold one the table has dropped since.)
  std::set<std::string> names;
  for (const Field& field : table.fields) names.insert(field.name);
  for (const std::string& key : table.key_columns) {
    if (!names.contains(key)) {
      return Status::InvalidArgument(fmt::format("table {}.{}: key column '{}' is not a column",
                                                 table.pipeline, table.namespace_name, key));
    }
  }
  return Status::OK();
}

// `l.a IS NOT DISTINCT FROM r.a AND ...`: Iceberg's equality, where NULL equals NULL.
std::string KeysEqual(const std::vector<std::string>& keys, std::string_view left,
                      std::string_view right) {
  std::vector<std::string> terms;
  for (const std::string& key : keys) {
    terms.push_back(
        fmt::format("{0}.{1} IS NOT DISTINCT FROM {2}.{1}", left, QuoteIdentifier(key), right));
  }
  return fmt::format("{}", fmt::join(terms, " AND "));
}

std::string QuotedList(const std::vector<std::string>& names, std::string_view prefix = "") {
  std::vector<std::string> quoted;
  for (const std::string& name : names)
    quoted.push_back(std::string(prefix) + QuoteIdentifier(name));
  return fmt::format("{}", fmt::join(quoted, ", "));
}

// `[path, ...]` of `files` as a DuckDB list literal.
std::string PathList(const std::vector<const LandedFile*>& files) {
  std::vector<std::string> paths;
  for (const LandedFile* file : files) paths.push_back(QuoteLiteral(file->path));
  return fmt::format("[{}]", fmt::join(paths, ", "));
}

// The rows of `data_files`, with the helper columns the deletes need: each file's URI and row
// positions (kFileColumn, kPositionColumn) when `positioned`, its sequence number
// (kSequenceColumn) when `sequenced`. A positioned file is read alone: `file_row_number` is
// DuckDB's position within the file being read, unless the file has a column of that name — which
// SkipprLake never position-deletes (lake.cpp's AllowsPositionDeletes).
std::string DataFileRows(const std::vector<const LandedFile*>& data_files,
                         const std::function<bool(const LandedFile&)>& positioned, bool sequenced) {
  const auto sequence_column = [&](int64_t sequence_number) {
    return sequenced ? fmt::format(", CAST({} AS BIGINT) AS {}", sequence_number, kSequenceColumn)
                     : std::string();
  };
  std::map<int64_t, std::vector<const LandedFile*>> unpositioned_by_sequence;
  std::vector<std::string> branches;
  for (const LandedFile* file : data_files) {
    if (!positioned(*file)) {
      unpositioned_by_sequence[sequenced ? file->sequence_number : 0].push_back(file);
      continue;
    }
    branches.push_back(fmt::format(
        "SELECT *, {} AS {}, file_row_number AS {}{} FROM read_parquet({})",
        QuoteLiteral(file->uri), kFileColumn, kPositionColumn,
        sequence_column(file->sequence_number), QuoteLiteral(file->path)));
  }
  for (const auto& [sequence_number, files] : unpositioned_by_sequence) {
    branches.push_back(fmt::format("SELECT *{} FROM read_parquet({}, union_by_name = true)",
                                   sequence_column(sequence_number), PathList(files)));
  }
  // Columns keep wal_scan's order and types; BY NAME fills the columns a file lacks with NULL.
  return fmt::format("{}", fmt::join(branches, " UNION ALL BY NAME "));
}

// `rows` (of DataFileRows, positioned) without the rows the position deletes remove: one anti
// join on (file URI, position) against every delete file, read once. Rows of unpositioned files
// have NULL in both columns and match nothing. The helper columns stay.
std::string WithoutDeletedPositions(const std::string& rows,
                                    const std::vector<PositionDeleteFile>& delete_files) {
  std::vector<std::string> paths;
  for (const PositionDeleteFile& file : delete_files) paths.push_back(QuoteLiteral(file.path));
  return fmt::format(
      "SELECT l.* FROM ({2}) l ANTI JOIN (SELECT file_path, pos FROM "
      "read_parquet([{3}])) x ON l.{0} = x.file_path AND l.{1} = x.pos",
      kFileColumn, kPositionColumn, rows, fmt::join(paths, ", "));
}

// `rows` (of DataFileRows, sequenced) without (Iceberg's rule) the rows an equality delete with a
// greater sequence number matches: the deletes are the keys with the greatest sequence number that
// deletes each, one anti join per set of key columns — no row of a data file is joined to
// anything to learn its sequence number.
std::string WithoutEqualityDeleted(std::string rows,
                                   const std::vector<EqualityDeleteFile>& delete_files) {
  std::map<std::vector<std::string>, std::vector<const EqualityDeleteFile*>> deletes_by_keys;
  for (const EqualityDeleteFile& file : delete_files) {
    deletes_by_keys[file.key_columns].push_back(&file);
  }
  for (const auto& [keys, files] : deletes_by_keys) {
    std::vector<std::string> deletes;
    for (const EqualityDeleteFile* file : files) {
      deletes.push_back(fmt::format("SELECT {}, CAST({} AS BIGINT) AS {} FROM read_parquet({})",
                                    QuotedList(keys), file->sequence_number, kSequenceColumn,
                                    QuoteLiteral(file->path)));
    }
    rows = fmt::format(
        "SELECT l.* FROM ({0}) l ANTI JOIN (SELECT {1}, max({2}) AS {2} FROM ({3}) GROUP BY ALL) x "
        "ON {4} AND x.{2} > l.{2}",
        rows, QuotedList(keys), kSequenceColumn, fmt::join(deletes, " UNION ALL "),
        KeysEqual(keys, "l", "x"));
  }
  return fmt::format("SELECT * EXCLUDE ({}) FROM ({})", kSequenceColumn, rows);
}

// `rows` of data files of `landed` (with the helper columns its deletes need) minus the rows
// `landed`'s position and equality deletes remove.
std::string LiveRows(std::string rows, const LandedRows& landed) {
  const bool sequenced = !landed.equality_delete_files.empty();
  if (!landed.position_delete_files.empty()) {
    rows = WithoutDeletedPositions(rows, landed.position_delete_files);
  }
  if (sequenced) rows = WithoutEqualityDeleted(std::move(rows), landed.equality_delete_files);
  return rows;
}

// The landed rows of `data_files` (of `landed`), or "" when there are none.
std::string LandedQuery(const std::vector<const LandedFile*>& data_files,
                        const LandedRows& landed) {
  if (data_files.empty()) return "";
  // Only files no newer than a position-delete file can have rows it removes.
  int64_t newest_position_delete = -1;
  for (const PositionDeleteFile& file : landed.position_delete_files) {
    newest_position_delete = std::max(newest_position_delete, file.sequence_number);
  }
  const auto positioned = [&](const LandedFile& file) {
    return !file.uri.empty() && file.sequence_number <= newest_position_delete;
  };
  const std::string rows = LiveRows(
      DataFileRows(data_files, positioned, !landed.equality_delete_files.empty()), landed);
  if (std::none_of(data_files.begin(), data_files.end(),
                   [&](const LandedFile* file) { return positioned(*file); })) {
    return rows;
  }
  return fmt::format("SELECT * EXCLUDE ({}, {}) FROM ({})", kFileColumn, kPositionColumn, rows);
}

// The rows of a table of an attached DuckDB database (as `alias`), without its hidden columns.
std::string DatabaseTableQuery(const DatabaseTable& table, const std::string& alias) {
  std::string columns = "*";
  if (!table.hidden_columns.empty()) {
    std::vector<std::string> hidden;
    for (const std::string& column : table.hidden_columns) hidden.push_back(QuoteLiteral(column));
    columns = fmt::format("COLUMNS(c -> c NOT IN ({}))", fmt::join(hidden, ", "));
  }
  return fmt::format("SELECT {} FROM {}.{}.{}", columns, QuoteIdentifier(alias),
                     QuoteIdentifier(table.schema), QuoteIdentifier(table.table));
}

// The view's query: the live batches, then the landed rows (of `landed_files`, indexes into the
// table's data files; nullptr: all of them; or the table of the database attached as
// `database_alias`) their keys do not replace.
std::string ViewQuery(const TableSource& table, const std::vector<size_t>* landed_files,
                      const std::string& database_alias) {
  const std::string scan_arguments =
      fmt::format("{}, {}", QuoteLiteral(table.pipeline), QuoteLiteral(table.namespace_name));
  std::vector<const LandedFile*> data_files;
  if (landed_files == nullptr) {
    for (const LandedFile& file : table.landed.data_files) data_files.push_back(&file);
  } else {
    for (size_t index : *landed_files) data_files.push_back(&table.landed.data_files.at(index));
  }
  const std::string landed =
      table.landed.database_table
          ? DatabaseTableQuery(*table.landed.database_table, database_alias)
          : LandedQuery(data_files, table.landed);
  if (table.key_columns.empty()) {
    const std::string live = fmt::format("SELECT * FROM wal_scan({})", scan_arguments);
    return landed.empty() ? live : fmt::format("{} UNION ALL BY NAME {}", live, landed);
  }
  // Per key the change with the greatest order token, then the last in WAL order (which wal_scan
  // numbers; DuckDB's own order is not guaranteed): a source re-read after a crash may commit an
  // older change after a newer one (a snapshot range resumed under a newer snapshot). A change the
  // landed table holds already is left out, as its landing will leave it out.
  // A CDC truncate leaves only the changes after it (its scan reads no column of the table).
  const std::string changes =
      fmt::format("(SELECT * FROM wal_scan({}, with_change_columns := true) WHERE NOT {})",
                  scan_arguments, kLandedColumn);
  const std::string last_truncate = fmt::format(
      "(SELECT coalesce(max({0}), ''::BLOB) FROM {1} WHERE {2})", kOrderTokenColumn, changes,
      kTruncateColumn);
  const std::string live = fmt::format(
      "SELECT * EXCLUDE ({0}, {1}, {4}, {5}, {7}) FROM {2} WHERE ({6} = ''::BLOB OR {4} > {6}) "
      "QUALIFY row_number() OVER (PARTITION BY {3} ORDER BY {4} DESC, {0} DESC) = 1 AND NOT {1}",
      kOrdinalColumn, kDeletedColumn, changes, QuotedList(table.key_columns), kOrderTokenColumn,
      kTruncateColumn, last_truncate, kLandedColumn);
  if (landed.empty()) return live;
  return fmt::format(
      "{} UNION ALL BY NAME SELECT l.* FROM ({}) l ANTI JOIN (SELECT {} FROM {}) x ON {} "
      "WHERE {} = ''::BLOB",
      live, landed, QuotedList(table.key_columns), changes,
      KeysEqual(table.key_columns, "l", "x"), last_truncate);
}

}  // namespace

std::string LandedRowPositionsQuery(const LandedRows& landed,
                                    const std::vector<std::string>& key_columns,
                                    std::string_view keys_sql) {
  SKIPPR_CHECK_MSG(!landed.data_files.empty(), "a table with rows to position-delete");
  const bool sequenced = !landed.equality_delete_files.empty();
  std::map<int64_t, std::vector<const LandedFile*>> files_by_sequence;
  std::vector<std::string> uri_of_path;
  for (const LandedFile& file : landed.data_files) {
    SKIPPR_CHECK_MSG(!file.uri.empty(), "a file to position-delete has its URI");
    files_by_sequence[sequenced ? file.sequence_number : 0].push_back(&file);
    uri_of_path.push_back(fmt::format("({}, {})", QuoteLiteral(file.path), QuoteLiteral(file.uri)));
  }
  // Every file of a sequence number in one read: files by their local paths, their rows by
  // file_row_number (no file has a column of that name, as the caller checked).
  std::vector<std::string> groups;
  for (const auto& [sequence_number, files] : files_by_sequence) {
    groups.push_back(fmt::format(
        "SELECT *, file_row_number AS {}{} FROM read_parquet({}, filename = '{}', "
        "union_by_name = true)",
        kPositionColumn,
        sequenced ? fmt::format(", CAST({} AS BIGINT) AS {}", sequence_number, kSequenceColumn)
                  : "",
        PathList(files), kLocalFileColumn));
  }
  // The keys first: the deletes then apply to the few rows left, not to the table.
  const std::string rows = fmt::format(
      "SELECT l.* EXCLUDE ({0}), m.uri AS {1} FROM ({2}) l SEMI JOIN ({3}) k ON {4} JOIN (VALUES "
      "{5}) m(path, uri) ON l.{0} = m.path",
      kLocalFileColumn, kFileColumn, fmt::join(groups, " UNION ALL BY NAME "), keys_sql,
      KeysEqual(key_columns, "l", "k"), fmt::join(uri_of_path, ", "));
  return LiveRows(rows, landed);
}

struct Engine::Handles {
  detail::AtomicScanCounters scan_counters;  // declared first: the connection's scans use it
  duckdb_database database = nullptr;
  duckdb_connection connection = nullptr;
  ~Handles() {
    if (connection != nullptr) duckdb_disconnect(&connection);
    if (database != nullptr) duckdb_close(&database);
  }
};

Engine::Engine() : handles_(std::make_unique<Handles>()) {}
Engine::~Engine() = default;

Result<std::unique_ptr<Engine>> Engine::Open(EngineOptions options) {
  std::unique_ptr<Engine> engine(new Engine());
  char* error = nullptr;
  if (duckdb_open_ext(nullptr, &engine->handles_->database, nullptr, &error) != DuckDBSuccess) {
    std::string message = error ? error : "unknown error";
    duckdb_free(error);
    return Status::Internal("could not open DuckDB: " + message);
  }
  if (duckdb_connect(engine->handles_->database, &engine->handles_->connection) != DuckDBSuccess) {
    return Status::Internal("could not connect to DuckDB");
  }
  Engine* raw = engine.get();
  SKIPPR_RETURN_IF_ERROR(detail::RegisterWalScan(
      engine->handles_->connection,
      [raw](const std::string& pipeline,
            const std::string& namespace_name) -> std::shared_ptr<const TableSource> {
        if (auto it = raw->tables_.find({pipeline, namespace_name}); it != raw->tables_.end()) {
          return it->second;
        }
        auto internal = raw->internal_tables_.find({pipeline, namespace_name});
        return internal == raw->internal_tables_.end() ? nullptr : internal->second;
      },
      &engine->handles_->scan_counters));
  // Timestamps with a zone print in UTC, whatever the machine's zone (needs ICU; ignored without).
  duckdb_result result;
  duckdb_query(engine->handles_->connection, "SET TimeZone = 'UTC'", &result);
  duckdb_destroy_result(&result);
  engine->checks_table_names_ = options.checks_table_names;
  SKIPPR_RETURN_IF_ERROR(engine->AttachDatabases(options.attached_databases));
  if (!options.allows_file_access) SKIPPR_RETURN_IF_ERROR(engine->ApplyFileAccess(options));
  return engine;
}

namespace {

// How long an attach waits for another process to let go of a database file, and how often it
// says it is waiting.
constexpr auto kAttachWait = std::chrono::minutes(10);
constexpr auto kAttachWaitReport = std::chrono::seconds(30);

bool IsLockConflict(std::string_view message) {
  return message.find("Could not set lock on file") != std::string_view::npos ||
         message.find("Conflicting lock") != std::string_view::npos;
}

Status AttachDatabaseWaiting(duckdb_connection connection, const std::string& path,
                             const std::string& alias, bool read_only) {
  const std::string sql = fmt::format("ATTACH {} AS {}{}", QuoteLiteral(path),
                                      QuoteIdentifier(alias), read_only ? " (READ_ONLY)" : "");
  const auto start = std::chrono::steady_clock::now();
  auto next_report = start + kAttachWaitReport;
  auto pause = std::chrono::milliseconds(5);
  while (true) {
    duckdb_result result;
    const bool ok = duckdb_query(connection, sql.c_str(), &result) == DuckDBSuccess;
    const std::string error = ok ? "" : MessageText(duckdb_result_error(&result));
    duckdb_destroy_result(&result);
    if (ok) return Status::OK();
    const auto now = std::chrono::steady_clock::now();
    if (!IsLockConflict(error) || now - start > kAttachWait) {
      return Status::Unavailable(fmt::format(
          "could not open the DuckDB database {}{}: {}", path,
          IsLockConflict(error) ? " (another process held it for 10 minutes; is a `skipprd "
                                  "query` or a DuckDB session still open on it?)"
                                : "",
          error));
    }
    if (now >= next_report) {
      spdlog::info("waiting for another process to let go of the DuckDB database {}: {}", path,
                   error);
      next_report = now + kAttachWaitReport;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(200));
  }
}

}  // namespace

Status Engine::Attach(const std::string& path, const std::string& alias, bool read_only) {
  return AttachDatabaseWaiting(handles_->connection, path, alias, read_only);
}

Status Engine::AttachDatabases(const std::vector<std::string>& paths) {
  for (const std::string& path : paths) {
    if (attached_aliases_.contains(path)) continue;
    std::error_code error;
    if (!std::filesystem::exists(path, error)) continue;  // nothing landed there yet
    const std::string alias = fmt::format("skippr_database_{}", attached_aliases_.size());
    SKIPPR_RETURN_IF_ERROR(
        AttachDatabaseWaiting(handles_->connection, path, alias, /*read_only=*/true));
    attached_aliases_.emplace(path, alias);
  }
  return Status::OK();
}

// DuckDB allows changing allowed_directories only while external access is on, and nothing once
// the configuration is locked: hence this order, and a lock that SQL cannot lift.
Status Engine::ApplyFileAccess(const EngineOptions& options) {
  std::vector<std::string> statements;
  if (!options.readable_directories.empty()) {
    std::vector<std::string> directories;
    for (const std::string& directory : options.readable_directories) {
      directories.push_back(QuoteLiteral(directory.ends_with('/') ? directory : directory + "/"));
    }
    statements.push_back(fmt::format("SET allowed_directories = [{}]", fmt::join(directories, ", ")));
  }
  statements.insert(statements.end(),
                    {"SET autoinstall_known_extensions = false",
                     "SET autoload_known_extensions = false", "SET enable_external_access = false",
                     "SET lock_configuration = true"});
  for (const std::string& statement : statements) {
    duckdb_result result;
    const bool ok = duckdb_query(handles_->connection, statement.c_str(), &result) == DuckDBSuccess;
    const std::string error = ok ? "" : duckdb_result_error(&result);
    duckdb_destroy_result(&result);
    if (!ok) return Status::Internal(fmt::format("could not restrict DuckDB ({}): {}", statement, error));
  }
  allows_file_access_ = false;
  return Status::OK();
}

bool HasColumnBounds(const LogicalType& type) {
  switch (type.id()) {
    case TypeId::kBoolean:
    case TypeId::kInt:
    case TypeId::kLong:
    case TypeId::kFloat:
    case TypeId::kDouble:
    case TypeId::kDecimal:
    case TypeId::kDate:
    case TypeId::kTimestamp:
    case TypeId::kTimestampTz:
    case TypeId::kString:
      return true;
    default:
      return false;
  }
}

BatchList BatchList::InMemory(std::vector<std::shared_ptr<const Batch>> batches) {
  BatchList list;
  for (const std::shared_ptr<const Batch>& batch : batches) {
    list.row_counts.push_back(batch == nullptr ? 0 : batch->num_rows);
  }
  auto shared = std::make_shared<const std::vector<std::shared_ptr<const Batch>>>(std::move(batches));
  list.read = [shared](size_t index, const FieldSelection&) -> Result<std::shared_ptr<const Batch>> {
    return (*shared)[index];
  };
  return list;
}

BatchList BatchList::Streaming(std::function<Result<std::shared_ptr<const Batch>>()> next) {
  BatchList list;
  list.next = std::move(next);
  return list;
}

void Engine::SetBinder(std::unique_ptr<TableBinder> binder) { binder_ = std::move(binder); }

ScanCounters Engine::scan_counters() const {
  const detail::AtomicScanCounters& counters = handles_->scan_counters;
  return {counters.batches.load(std::memory_order_relaxed),
          counters.columns.load(std::memory_order_relaxed),
          counters.landed_files.load(std::memory_order_relaxed),
          counters.landed_files_read.load(std::memory_order_relaxed)};
}

Status Engine::RegisterTable(TableSource table) {
  if (table.pipeline.empty() || table.namespace_name.empty()) {
    return Status::InvalidArgument("a query table needs a pipeline and a namespace name");
  }
  if (table.fields.empty()) {
    return Status::InvalidArgument(
        fmt::format("table {}.{} has no columns", table.pipeline, table.namespace_name));
  }
  if (!table.batches.read && !table.batches.row_counts.empty()) {
    return Status::InvalidArgument(
        fmt::format("table {}.{} has no batch reader", table.pipeline, table.namespace_name));
  }
  SKIPPR_RETURN_IF_ERROR(CheckViewColumns(table));
  const TableKey key{table.pipeline, table.namespace_name};
  std::shared_ptr<const TableSource> previous;
  if (auto it = tables_.find(key); it != tables_.end()) previous = it->second;
  tables_[key] = std::make_shared<const TableSource>(std::move(table));
  Status created = CreateView(key, nullptr);
  if (!created.ok()) {
    if (previous) {
      tables_[key] = previous;
    } else {
      tables_.erase(key);
    }
    return Status::InvalidArgument(
        fmt::format("table {}.{} cannot be read: DuckDB refuses its view: {}", key.first,
                    key.second, created.message()));
  }
  return Status::OK();
}

// (Re)creates the view of a registered table over `landed_files` of its data files (nullptr: all).
Status Engine::CreateView(const TableKey& key, const std::vector<size_t>* landed_files) {
  const TableSource& table = *tables_.at(key);
  std::string database_alias;
  if (const std::optional<DatabaseTable>& database = table.landed.database_table) {
    auto attached = attached_aliases_.find(database->database_path);
    if (attached == attached_aliases_.end()) {
      return Status::Unavailable(fmt::format(
          "the DuckDB database {} holding its landed rows was created after this query began; "
          "run the query again",
          database->database_path));
    }
    database_alias = attached->second;
  }
  const std::string sql =
      fmt::format("CREATE SCHEMA IF NOT EXISTS {0}; CREATE OR REPLACE VIEW {0}.{1} AS {2}",
                  QuoteIdentifier(key.first), QuoteIdentifier(key.second),
                  ViewQuery(table, landed_files, database_alias));
  duckdb_result result;
  const bool ok = duckdb_query(handles_->connection, sql.c_str(), &result) == DuckDBSuccess;
  const std::string error = ok ? "" : duckdb_result_error(&result);
  duckdb_destroy_result(&result);
  if (!ok) return Status::InvalidArgument(error);
  if (landed_files == nullptr) {
    pruned_views_.erase(key);
  } else {
    pruned_views_[key] = *landed_files;
  }
  return Status::OK();
}

std::vector<std::string> Engine::TableNames() const {
  std::set<std::string> names;
  for (const auto& [key, source] : tables_) names.insert(key.first + "." + key.second);
  if (binder_) {
    for (const TableName& name : binder_->Names()) names.insert(name.ToString());
  }
  return {names.begin(), names.end()};
}

Status Engine::UnknownTable(const std::string& name) const {
  const std::vector<std::string> names = TableNames();
  std::string list;
  for (const std::string& table : names) list += (list.empty() ? "" : ", ") + table;
  if (list.empty()) list = "(no tables)";
  return Status::InvalidArgument(fmt::format(
      "unknown table '{}'; tables are referenced as <pipeline>.<namespace>: {}", name, list));
}

// A query's single text value (its first column of its first row), with `parameter` bound to $1
// when given; nullopt on an error or no row.
std::optional<std::string> Engine::QueryOneText(const std::string& sql,
                                                const std::string* parameter) {
  duckdb_prepared_statement statement = nullptr;
  if (duckdb_prepare(handles_->connection, sql.c_str(), &statement) != DuckDBSuccess) {
    duckdb_destroy_prepare(&statement);
    return std::nullopt;
  }
  if (parameter != nullptr) {
    duckdb_bind_varchar_length(statement, 1, parameter->data(), parameter->size());
  }
  duckdb_result result;
  std::optional<std::string> text;
  if (!ExecutePrepared(statement, &result)) {
    duckdb_data_chunk chunk = duckdb_fetch_chunk(result);
    if (chunk != nullptr && duckdb_data_chunk_get_size(chunk) > 0) {
      duckdb_vector vector = duckdb_data_chunk_get_vector(chunk, 0);
      uint64_t* validity = duckdb_vector_get_validity(vector);
      if (validity == nullptr || duckdb_validity_row_is_valid(validity, 0)) {
        auto* data = static_cast<duckdb_string_t*>(duckdb_vector_get_data(vector));
        text.emplace(duckdb_string_t_data(&data[0]), duckdb_string_t_length(data[0]));
      }
    }
    if (chunk != nullptr) duckdb_destroy_data_chunk(&chunk);
    duckdb_destroy_result(&result);  // set only when the statement ran
  }
  duckdb_destroy_prepare(&statement);
  return text;
}

// The tables a statement names (CTE names left out), each with the filter its SELECT puts on it,
// from DuckDB's own parse tree; nullopt when json_serialize_sql cannot serialize the statement
// (only SELECTs serialize).
std::optional<std::vector<detail::TableReference>> Engine::ReferencedTables(
    const std::string& sql) {
  // No json extension: DuckDB's catalog errors still apply.
  const std::optional<std::string> serialized =
      QueryOneText("SELECT json_serialize_sql($1::VARCHAR)", &sql);
  if (!serialized) return std::nullopt;
  return detail::ParseTableReferences(
      nlohmann::json::parse(*serialized, nullptr, /*allow_exceptions=*/false));
}

// A constant of a statement's parse tree as SQL text, as DuckDB renders it: the constant put in
// the select list of `SELECT 1`'s parse tree, turned back into SQL by json_deserialize_sql.
std::optional<std::string> Engine::RenderConstant(const std::string& constant_json) {
  if (!select_template_) {
    const std::string one = "SELECT 1";
    select_template_ = QueryOneText("SELECT json_serialize_sql($1::VARCHAR)", &one).value_or("");
  }
  nlohmann::json tree = nlohmann::json::parse(*select_template_, nullptr, false);
  nlohmann::json constant = nlohmann::json::parse(constant_json, nullptr, false);
  if (!tree.is_object() || !tree.contains("statements") || !tree["statements"].is_array() ||
      tree["statements"].empty() || !constant.is_object()) {
    return std::nullopt;
  }
  nlohmann::json& node = tree["statements"][0]["node"];
  if (!node.is_object() || !node.contains("select_list")) return std::nullopt;
  node["select_list"] = nlohmann::json::array({constant});
  const std::string rendered = tree.dump();
  std::optional<std::string> sql =
      QueryOneText("SELECT json_deserialize_sql($1::VARCHAR)", &rendered);
  constexpr std::string_view kSelect = "SELECT ";
  if (!sql || !sql->starts_with(kSelect)) return std::nullopt;
  return sql->substr(kSelect.size());
}

// The registered or binder table `schema`.`table` names (DuckDB compares names without case).
std::optional<TableName> Engine::KnownTable(const std::string& schema,
                                            const std::string& table) const {
  for (const auto& [key, source] : tables_) {
    if (Lower(key.first) == Lower(schema) && Lower(key.second) == Lower(table)) {
      return TableName{key.first, key.second};
    }
  }
  if (binder_) {
    for (const TableName& name : binder_->Names()) {
      if (Lower(name.pipeline) == Lower(schema) && Lower(name.namespace_name) == Lower(table)) {
        return name;
      }
    }
  }
  return std::nullopt;
}

// Binds the binder's tables not registered yet; what could not be bound is kept in unbindable_
// (a later statement that reads the table gets the same error) and returned.
std::map<TableName, Status> Engine::BindTables(const std::vector<TableName>& tables) {
  std::map<TableName, Status> failures;
  std::vector<TableName> wanted;
  for (const TableName& name : tables) {
    if (auto it = unbindable_.find(name); it != unbindable_.end()) {
      failures.emplace(name, it->second);
    } else if (!tables_.contains({name.pipeline, name.namespace_name}) &&
               std::find(wanted.begin(), wanted.end(), name) == wanted.end()) {
      wanted.push_back(name);
    }
  }
  if (wanted.empty() || !binder_) return failures;
  std::vector<Result<TableSource>> sources = binder_->Bind(wanted);
  SKIPPR_CHECK(sources.size() == wanted.size());
  for (size_t i = 0; i < wanted.size(); ++i) {
    // RegisterTable's own errors already name the table.
    Status status = sources[i].ok()
                        ? RegisterTable(std::move(sources[i]).value())
                        : Status(sources[i].status().code(),
                                 fmt::format("table {} cannot be read: {}", wanted[i].ToString(),
                                             sources[i].status().message()));
    if (status.ok()) continue;
    unbindable_.emplace(wanted[i], status);
    failures.emplace(wanted[i], status);
  }
  return failures;
}

// Every table a statement names must be a registered or binder <pipeline>.<namespace> (or a CTE):
// DuckDB would otherwise resolve unqualified names against its default schema, or read files named
// as tables. The ones the statement reads are bound now; one that cannot be fails the statement.
// Statements json_serialize_sql cannot parse bind every table, and DuckDB's own errors tell.
Status Engine::BindReferencedTables(const std::string& sql) {
  const std::optional<std::vector<detail::TableReference>> refs = ReferencedTables(sql);
  if (!refs) {
    if (binder_) BindTables(binder_->Names());
    return ReadOnlyNeededLandedFiles(nullptr);
  }
  std::vector<TableName> read;
  for (const detail::TableReference& ref : *refs) {
    std::optional<TableName> known;
    if (!ref.schema.empty() && (ref.catalog.empty() || Lower(ref.catalog) == "memory")) {
      known = KnownTable(ref.schema, ref.table);
    }
    if (!known) {
      std::string name;
      for (const std::string* part : {&ref.catalog, &ref.schema, &ref.table}) {
        if (!part->empty()) name += (name.empty() ? "" : ".") + *part;
      }
      if (binder_ && !ref.schema.empty()) {
        SKIPPR_RETURN_IF_ERROR(binder_->SchemaProblem(ref.schema));
      }
      return UnknownTable(name);
    }
    read.push_back(*known);
  }
  const std::map<TableName, Status> failures = BindTables(read);
  if (!failures.empty()) return failures.begin()->second;
  return ReadOnlyNeededLandedFiles(&*refs);
}

// Points each view at the landed data files the statement can need (file_pruning.hpp): for a table
// the statement reads, the files some reference to it may need; every other view reads all its
// files again. `references` nullptr: the statement could not be analysed, every view reads all.
Status Engine::ReadOnlyNeededLandedFiles(const std::vector<detail::TableReference>* references) {
  std::map<TableKey, std::vector<const detail::TableReference*>> by_table;
  if (references != nullptr) {
    for (const detail::TableReference& ref : *references) {
      if (std::optional<TableName> known = KnownTable(ref.schema, ref.table)) {
        by_table[{known->pipeline, known->namespace_name}].push_back(&ref);
      }
    }
  }
  for (const auto& [key, source] : tables_) {
    auto refs = by_table.find(key);
    std::optional<std::vector<size_t>> needed;
    if (refs != by_table.end()) needed = NeededLandedFiles(*source, refs->second);
    if (needed && needed->size() == source->landed.data_files.size()) needed.reset();
    auto pruned = pruned_views_.find(key);
    const bool is_current = needed ? pruned != pruned_views_.end() && pruned->second == *needed
                                   : pruned == pruned_views_.end();
    // A view that cannot be pruned reads every file; one that cannot be made whole again must not
    // serve the statement: it would read fewer files than the statement needs.
    if (!is_current && !CreateView(key, needed ? &*needed : nullptr).ok()) {
      const Status whole = CreateView(key, nullptr);
      if (!whole.ok()) {
        return Status::Internal(fmt::format("table {}.{}: its view could not be recreated: {}",
                                            key.first, key.second, whole.message()));
      }
    }
    if (refs == by_table.end()) continue;
    const int64_t total = static_cast<int64_t>(source->landed.data_files.size());
    const int64_t read = needed ? static_cast<int64_t>(needed->size()) : total;
    handles_->scan_counters.landed_files += total;
    handles_->scan_counters.landed_files_read += read;
    if (total > 0) {
      spdlog::debug(
          "query: {}.{} reads {} of its {} landed data files{}", key.first, key.second, read, total,
          read < total ? " (the others' column statistics rule out the statement's filter)" : "");
    }
  }
  return Status::OK();
}

// The indexes of the table's landed data files that `references` can need; nullopt: all of them.
std::optional<std::vector<size_t>> Engine::NeededLandedFiles(
    const TableSource& table, const std::vector<const detail::TableReference*>& references) {
  if (table.landed.data_files.empty()) return std::nullopt;
  detail::PruningOptions options;
  const std::optional<std::string> collation =
      QueryOneText("SELECT current_setting('default_collation')", nullptr);
  options.compares_text_bytewise =
      collation && (collation->empty() || Lower(*collation) == "binary");
  const detail::ConstantRenderer render = [this](const nlohmann::json& constant) {
    return RenderConstant(constant.dump());
  };
  std::optional<detail::FilePruning> pruning =
      detail::PlanFilePruning(table, references, render, options);
  if (!pruning) return std::nullopt;
  // The statistics are a table of the engine's own, which no statement can name.
  const TableKey statistics{std::string(kInternalSchema), "landed_file_statistics"};
  const std::vector<Field> fields = pruning->statistics.fields;
  internal_tables_[statistics] = std::make_shared<const TableSource>(TableSource{
      statistics.first, statistics.second, fields,
      BatchList::InMemory({std::make_shared<const Batch>(std::move(pruning->statistics))})});
  const std::string sql =
      fmt::format("SELECT f FROM wal_scan({}, {}) WHERE {} ORDER BY f",
                  QuoteLiteral(statistics.first), QuoteLiteral(statistics.second), pruning->where);
  duckdb_result result;
  const bool ok = duckdb_query(handles_->connection, sql.c_str(), &result) == DuckDBSuccess;
  internal_tables_.erase(statistics);
  if (!ok) {
    // A constant the column's type cannot hold, say: DuckDB will say so when the statement runs.
    spdlog::debug("query: {}.{}: landed files not pruned: {}", table.pipeline, table.namespace_name,
                  duckdb_result_error(&result));
    duckdb_destroy_result(&result);
    return std::nullopt;
  }
  std::vector<size_t> needed;
  const idx_t rows = duckdb_row_count(&result);
  for (idx_t row = 0; row < rows; ++row) {
    const int64_t index = duckdb_value_int64(&result, 0, row);
    SKIPPR_CHECK(index >= 0 && static_cast<size_t>(index) < table.landed.data_files.size());
    needed.push_back(static_cast<size_t>(index));
  }
  duckdb_destroy_result(&result);
  return needed;
}

// A DuckDB error as the user should read it: a missing table that could not be bound says why; a
// blocked file, network or settings access says what is blocked and which flag lifts it.
Status Engine::ExplainFailure(const std::string& message) const {
  // A batch wal_scan could not read: its own status (a damaged slice is Corruption), not DuckDB's
  // text of it.
  if (std::optional<Status> scan = handles_->scan_counters.failure.Take()) return *scan;
  if (std::optional<std::string> table = MissingTableName(message)) {
    for (const auto& [name, status] : unbindable_) {
      if (Lower(name.namespace_name) == Lower(*table) || Lower(name.ToString()) == Lower(*table)) {
        return status;
      }
    }
    return UnknownTable(*table);
  }
  if (!allows_file_access_ && IsAccessRefusal(message)) {
    return FileAccessRefused("file access is off", message);
  }
  return Status::InvalidArgument(message);
}

Result<QueryResult> Engine::Run(const std::string& sql) {
  QueryResult result;
  CollectingWriter writer(&result);
  SKIPPR_RETURN_IF_ERROR(Stream(sql, writer));
  return result;
}

Status Engine::Stream(const std::string& sql, ResultWriter& writer) {
  return RunStatements(sql, [&](duckdb_prepared_statement statement, bool is_only) {
    return is_only ? StreamSingleStatement(sql, statement, writer)
                   : ExecuteToWriter(statement, writer);
  });
}

namespace {

// The columns of a prepared statement's result: names and DuckDB type names.
void DescribeColumns(duckdb_prepared_statement statement, std::vector<std::string>* header,
                     std::vector<std::string>* column_types, bool* has_only_batch_columns) {
  *has_only_batch_columns = true;
  const idx_t columns = duckdb_prepared_statement_column_count(statement);
  for (idx_t c = 0; c < columns; ++c) {
    const char* name = duckdb_prepared_statement_column_name(statement, c);  // ours to free
    header->emplace_back(name ? name : "");
    duckdb_free(const_cast<char*>(name));
    duckdb_logical_type type = duckdb_prepared_statement_column_logical_type(statement, c);
    column_types->push_back(TypeName(type));
    *has_only_batch_columns = *has_only_batch_columns && detail::HasBatchColumn(type);
    duckdb_destroy_logical_type(&type);
  }
}

// `sql` (one statement) with each column of a type without a Batch column cast to text — read by
// position, named as before, so that duplicate names stay apart; nullopt when every column has
// one.
std::optional<std::string> CastColumnsWithoutBatchType(duckdb_prepared_statement statement,
                                                       const std::string& sql,
                                                       const std::vector<std::string>& header) {
  std::vector<std::string> select;
  bool casts = false;
  for (idx_t c = 0; c < header.size(); ++c) {
    duckdb_logical_type type = duckdb_prepared_statement_column_logical_type(statement, c);
    const bool has_column = detail::HasBatchColumn(type);
    duckdb_destroy_logical_type(&type);
    const std::string column = has_column ? fmt::format("#{}", c + 1)
                                          : fmt::format("CAST(#{} AS VARCHAR)", c + 1);
    select.push_back(fmt::format("{} AS {}", column, QuoteIdentifier(header[c])));
    casts = casts || !has_column;
  }
  if (!casts) return std::nullopt;
  return fmt::format("SELECT {} FROM (\n{}\n)", fmt::join(select, ", "), StripStatementEnd(sql));
}

}  // namespace

Result<std::unique_ptr<BatchStream>> Engine::OpenBatchStream(const std::string& sql) {
  std::unique_ptr<BatchStream> stream;
  SKIPPR_RETURN_IF_ERROR(
      RunStatements(sql, [&](duckdb_prepared_statement statement, bool is_only) {
        return StreamBatches(statement, is_only ? &sql : nullptr, &stream);
      }));
  return stream;
}

// The last statement of OpenBatchStream, started streaming. `only_sql`: the SQL when the statement
// is all of it, so that columns without a Batch type can be cast to text around it.
Status Engine::StreamBatches(duckdb_prepared_statement statement, const std::string* only_sql,
                             std::unique_ptr<BatchStream>* stream) const {
  std::vector<std::string> header;
  std::vector<std::string> column_types;
  bool has_only_batch_columns = true;
  DescribeColumns(statement, &header, &column_types, &has_only_batch_columns);
  duckdb_prepared_statement cast_statement = nullptr;
  if (!has_only_batch_columns && only_sql != nullptr &&
      duckdb_prepared_statement_type(statement) == DUCKDB_STATEMENT_TYPE_SELECT) {
    const std::optional<std::string> cast =
        CastColumnsWithoutBatchType(statement, *only_sql, header);
    if (cast && duckdb_prepare(handles_->connection, cast->c_str(), &cast_statement) !=
                    DuckDBSuccess) {
      duckdb_destroy_prepare(&cast_statement);  // streamed uncast: the columns are refused
    }
  }
  duckdb_pending_result pending = nullptr;
  duckdb_result result;
  Status status = Status::OK();
  if (duckdb_pending_prepared_streaming(cast_statement ? cast_statement : statement, &pending) !=
      DuckDBSuccess) {
    status = ExplainFailure(MessageText(duckdb_pending_error(pending)));
    duckdb_destroy_pending(&pending);
  } else if (const std::optional<std::string> error = ExecutePending(pending, &result)) {
    status = ExplainFailure(*error);
    duckdb_destroy_pending(&pending);
  } else {
    Result<std::unique_ptr<BatchStream>> opened = detail::StreamResultAsBatches(
        pending, result, std::move(header), std::move(column_types));
    if (opened.ok()) *stream = std::move(*opened);
    status = opened.status();
  }
  duckdb_destroy_prepare(&cast_statement);
  return status;
}

// Runs the statements of `sql` in order — each allowed by the file-access rule, all but the last
// with their results dropped — and hands the last one, prepared, to `run_last`.
Status Engine::RunStatements(
    const std::string& sql,
    const std::function<Status(duckdb_prepared_statement, bool is_only)>& run_last) {
  duckdb_connection connection = handles_->connection;
  handles_->scan_counters.failure.Take();  // a failure of an earlier statement is not this one's
  // DuckDB reads C strings: SQL would end silently at a NUL and fail as something else.
  if (const size_t nul = sql.find('\0'); nul != std::string::npos) {
    return Status::InvalidArgument(fmt::format(
        "the SQL holds a NUL character at byte {}; remove it (write chr(0) for one in a value)",
        nul));
  }
  if (checks_table_names_) SKIPPR_RETURN_IF_ERROR(BindReferencedTables(sql));

  duckdb_extracted_statements extracted = nullptr;
  const idx_t count = duckdb_extract_statements(connection, sql.c_str(), &extracted);
  if (count == 0) {
    const char* error = duckdb_extract_statements_error(extracted);
    std::string message = error ? error : "";
    duckdb_destroy_extracted(&extracted);
    if (message.empty()) return Status::InvalidArgument("no SQL statement to run");
    return ExplainFailure(message);
  }
  Status status = Status::OK();
  for (idx_t i = 0; i < count && status.ok(); ++i) {
    duckdb_prepared_statement statement = nullptr;
    if (duckdb_prepare_extracted_statement(connection, extracted, i, &statement) != DuckDBSuccess) {
      status = ExplainFailure(MessageText(duckdb_prepare_error(statement)));
    } else if (!allows_file_access_) {
      status = CheckStatementAllowed(duckdb_prepared_statement_type(statement), sql);
    }
    if (status.ok()) {
      status = i + 1 < count ? ExecuteDiscarding(statement) : run_last(statement, count == 1);
    }
    duckdb_destroy_prepare(&statement);
  }
  duckdb_destroy_extracted(&extracted);
  return status;
}

// A statement before the last one: run, its result dropped.
Status Engine::ExecuteDiscarding(duckdb_prepared_statement statement) const {
  duckdb_result result;
  if (const std::optional<std::string> error = ExecutePrepared(statement, &result)) {
    return ExplainFailure(*error);
  }
  duckdb_destroy_result(&result);
  return Status::OK();
}

// The only statement: a SELECT streams, wrapped so DuckDB itself casts every value (nested ones
// too) to text; anything else runs as ExecuteToWriter.
Status Engine::StreamSingleStatement(const std::string& sql, duckdb_prepared_statement statement,
                                     ResultWriter& writer) const {
  const idx_t columns = duckdb_prepared_statement_column_count(statement);
  if (columns == 0 || duckdb_prepared_statement_type(statement) != DUCKDB_STATEMENT_TYPE_SELECT) {
    return ExecuteToWriter(statement, writer);
  }
  std::vector<std::string> header;
  std::vector<std::string> column_types;
  for (idx_t c = 0; c < columns; ++c) {
    const char* name = duckdb_prepared_statement_column_name(statement, c);  // ours to free
    header.emplace_back(name ? name : "");
    duckdb_free(const_cast<char*>(name));
    duckdb_logical_type type = duckdb_prepared_statement_column_logical_type(statement, c);
    column_types.push_back(TypeName(type));
    duckdb_destroy_logical_type(&type);
  }
  const std::string wrapped =
      "SELECT CAST(COLUMNS(*) AS VARCHAR) FROM (\n" + StripStatementEnd(sql) + "\n)";
  duckdb_prepared_statement text_statement = nullptr;
  if (duckdb_prepare(handles_->connection, wrapped.c_str(), &text_statement) != DuckDBSuccess ||
      duckdb_prepared_statement_column_count(text_statement) != columns) {
    duckdb_destroy_prepare(&text_statement);
    return ExecuteToWriter(statement, writer);
  }
  duckdb_pending_result pending = nullptr;
  duckdb_result result;
  Status status = Status::OK();
  if (duckdb_pending_prepared_streaming(text_statement, &pending) != DuckDBSuccess) {
    status = ExplainFailure(MessageText(duckdb_pending_error(pending)));
  } else if (const std::optional<std::string> error = ExecutePending(pending, &result)) {
    status = ExplainFailure(*error);
  } else {
    std::string duckdb_error;
    status = writer.Begin(header, column_types);
    if (status.ok()) status = StreamTextRows(result, columns, writer, &duckdb_error);
    if (status.ok()) status = duckdb_error.empty() ? writer.End() : ExplainFailure(duckdb_error);
    duckdb_destroy_result(&result);
  }
  duckdb_destroy_pending(&pending);
  duckdb_destroy_prepare(&text_statement);
  return status;
}

// Other statements (EXPLAIN, DESCRIBE, PRAGMA, ...; small results): DuckDB's C conversion of each
// value, handed over as one chunk.
Status Engine::ExecuteToWriter(duckdb_prepared_statement statement, ResultWriter& writer) const {
  duckdb_result result;
  if (const std::optional<std::string> error = ExecutePrepared(statement, &result)) {
    return ExplainFailure(*error);
  }
  const idx_t columns = duckdb_column_count(&result);
  std::vector<std::string> header;
  std::vector<std::string> column_types;
  for (idx_t c = 0; c < columns; ++c) {
    header.emplace_back(duckdb_column_name(&result, c));
    duckdb_logical_type type = duckdb_column_logical_type(&result, c);
    column_types.push_back(TypeName(type));
    duckdb_destroy_logical_type(&type);
  }
  std::vector<std::vector<std::optional<std::string>>> rows;
  const idx_t row_count = duckdb_row_count(&result);
  for (idx_t r = 0; r < row_count; ++r) {
    std::vector<std::optional<std::string>> row(columns);
    for (idx_t c = 0; c < columns; ++c) {
      if (duckdb_value_is_null(&result, c, r)) continue;
      char* text = duckdb_value_varchar(&result, c, r);
      if (text != nullptr) {
        row[c] = text;
        duckdb_free(text);
      }
    }
    rows.push_back(std::move(row));
  }
  duckdb_destroy_result(&result);
  SKIPPR_RETURN_IF_ERROR(writer.Begin(header, column_types));
  SKIPPR_RETURN_IF_ERROR(writer.Write(TextRows(std::move(rows))));
  return writer.End();
}

Result<Batch> Engine::RunToBatch(const std::string& sql) {
  duckdb_prepared_statement statement = nullptr;
  std::optional<std::string> error;
  duckdb_result result;
  if (duckdb_prepare(handles_->connection, sql.c_str(), &statement) != DuckDBSuccess) {
    error = MessageText(duckdb_prepare_error(statement));
  } else {
    error = ExecutePrepared(statement, &result);
  }
  duckdb_destroy_prepare(&statement);
  if (error) return Status::InvalidArgument(*error);
  Result<Batch> batch = detail::ResultToBatch(result);
  duckdb_destroy_result(&result);
  return batch;
}

}  // namespace skippr::query
