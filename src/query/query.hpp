// The query engine of `skipprd query` (DESIGN.md §7): DuckDB in-process, one view per namespace
// named "<pipeline>"."<namespace>" over the `wal_scan` table function, which fills DuckDB vectors
// straight from columnar Batches (no per-row text conversion), and the output formats of the
// command. `wal_scan(pipeline, namespace, with_change_columns := true)` adds four columns after
// the table's: `__skippr_ordinal` BIGINT (the row's position in the batches, from 0 — their order,
// which DuckDB may not keep), `__skippr_deleted` BOOLEAN (the row is a CDC delete or truncate, not
// a row of the table), `__skippr_order_token` BLOB (the CDC order token; empty without one) and
// `__skippr_truncate` BOOLEAN (the row is a CDC truncate: rows with older tokens are gone).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "core/batch.hpp"
#include "core/status.hpp"
#include "core/types.hpp"
#include "core/value.hpp"

// DuckDB's C API handle, named without including duckdb.h.
using duckdb_prepared_statement = struct _duckdb_prepared_statement*;

namespace skippr::query {

namespace detail {
struct TableReference;  // file_pruning.hpp
}

// wal_scan's change columns (with_change_columns := true).
inline constexpr std::string_view kOrdinalColumn = "__skippr_ordinal";
inline constexpr std::string_view kDeletedColumn = "__skippr_deleted";
inline constexpr std::string_view kOrderTokenColumn = "__skippr_order_token";
inline constexpr std::string_view kTruncateColumn = "__skippr_truncate";
// The landed table already holds this change or a newer one of its key (TableSource::landed_token).
inline constexpr std::string_view kLandedColumn = "__skippr_landed";

// What a landed file's manifest says of one of its columns (Iceberg's column statistics): bounds
// of its non-null, non-NaN values (Null: not known), and counts (nullopt: not known).
struct ColumnStatistics {
  Value lower;
  Value upper;
  std::optional<int64_t> value_count;  // nulls and NaNs included
  std::optional<int64_t> null_count;
  std::optional<int64_t> nan_count;
};

// The column types whose landed files' statistics carry lower and upper bounds a filter can use:
// primitives whose Iceberg bounds order their values as DuckDB compares them (binary, uuid and
// time get counts only).
bool HasColumnBounds(const LogicalType& type);

// A Parquet file of a landed Iceberg snapshot, with its data sequence number and, for data files,
// the column statistics of its manifest entry by field id (what lets a statement skip the file).
struct LandedFile {
  std::string path;
  int64_t sequence_number = 0;
  std::map<int32_t, ColumnStatistics> column_statistics;
  // The file's URI as the table's manifests — and position deletes — name it (empty: no position
  // delete names the file).
  std::string uri;
};

// An Iceberg equality-delete file: it removes every row of a data file with a smaller sequence
// number whose `key_columns` equal one of its rows (NULL equals NULL, as Iceberg compares).
struct EqualityDeleteFile {
  std::string path;
  int64_t sequence_number = 0;
  std::vector<std::string> key_columns;  // the columns it holds, by name
};

// An Iceberg position-delete file: rows (file_path, pos), each removing row `pos` (from 0, in file
// order) of the data file whose URI is `file_path` — a file of a sequence number no greater than
// its own, since a URI names one file for good (no table has two files under one name).
struct PositionDeleteFile {
  std::string path;
  int64_t sequence_number = 0;
};

// A table of a DuckDB database file the engine attached (EngineOptions::attached_databases).
struct DatabaseTable {
  std::string database_path;
  std::string schema;
  std::string table;
  // Columns of the table that are not the namespace's (the sink's bookkeeping), left out.
  std::vector<std::string> hidden_columns;
};

// The rows of a landed Iceberg snapshot: its data files minus its position and equality deletes;
// or the rows of a table of a DuckDB database.
struct LandedRows {
  std::optional<DatabaseTable> database_table;
  std::vector<LandedFile> data_files;
  std::vector<EqualityDeleteFile> equality_delete_files;
  std::vector<PositionDeleteFile> position_delete_files;
};

// SQL of the live rows of `landed` (at least one data file, each with its URI) whose
// `key_columns` equal (NULL equal to NULL) a row of `keys_sql`, each with its data file's URI and
// its position in that file as columns __skippr_file and __skippr_position: what a position
// delete of the row names. Positions are DuckDB's `file_row_number`, which a file's own column of
// that name would hide: a table with one must not be position-deleted.
std::string LandedRowPositionsQuery(const LandedRows& landed,
                                    const std::vector<std::string>& key_columns,
                                    std::string_view keys_sql);

// The batches of a table, read while a scan runs: a scan holds the batches its threads are
// reading, never the table.
struct BatchList {
  // Rows per batch, known without reading the batch (a WAL slice's index entry says): the scan
  // numbers rows and shares work out by them.
  std::vector<int64_t> row_counts;
  // Batch `index` (< row_counts.size()), which must have row_counts[index] rows, holding at least
  // the top-level fields `fields` selects — the columns the statement uses (projection pushdown);
  // more is fine, the scan finds columns by field id. Called from the scan's threads, at once for
  // different batches; an error fails the statement.
  std::function<Result<std::shared_ptr<const Batch>>(size_t index, const FieldSelection& fields)>
      read;

  // Instead of the two above, for batches that arrive while the scan runs (a landing written as
  // the WAL commits): the next batch, waiting for it, or nullptr after the last. Called from the
  // scan's threads one at a time. The rows are not known up front, so a scan with change columns
  // (which numbers them) cannot read such a list.
  std::function<Result<std::shared_ptr<const Batch>>()> next;

  // A list of batches already in memory (read whole, whatever the selection).
  static BatchList InMemory(std::vector<std::shared_ptr<const Batch>> batches);
  // A list of the batches `next` hands out as they come.
  static BatchList Streaming(std::function<Result<std::shared_ptr<const Batch>>()> next);
  bool is_streaming() const { return static_cast<bool>(next); }
};

// Supplies the rows of one table: the target schema (current fields, with ids) and the batches to
// scan. Batches may carry OLDER schemas: they are projected onto the target by FIELD ID — a target
// field missing from a batch reads NULL; int→long, float→double and decimal precision widening are
// cast; nested struct children are matched by id too. A scan reads the batches the list names,
// each when a thread reaches it; several threads read at once where the statement allows it
// (DuckDB scans on one thread, in batch order, where rows must keep their order).
struct TableSource {
  std::string pipeline;
  std::string namespace_name;
  std::vector<Field> fields;
  BatchList batches;
  // Rows landed elsewhere, read by column name and unioned with the batches; files written before
  // a column existed read NULL for it.
  LandedRows landed;
  // Empty: every batch row is a row of the table. Otherwise (write_policy merge_by_key) the batches
  // are changes keyed by these top-level columns, in order: per key only the last row is in the
  // table, none when that row is a CDC delete, and a key the batches hold replaces its landed rows.
  std::vector<std::string> key_columns;
  // A keyed change stream whose landings leave out the changes the table already holds (a replay,
  // or an older change a newer snapshot read holds): the newest order token landed for a business
  // key ("" when none), and the newest truncate landed ("" when none). A live change at or before
  // either is left out of the table's view as its landing will leave it out. Unset: none is.
  // Called from the scan's threads, at once.
  std::function<Result<std::string>(std::string_view business_key)> landed_token;
  std::string landed_truncate_token;
};

// `<pipeline>.<namespace>` as a query names it.
struct TableName {
  std::string pipeline;
  std::string namespace_name;
  auto operator<=>(const TableName&) const = default;
  std::string ToString() const { return pipeline + "." + namespace_name; }
};

// Where an engine's tables come from when they are bound on demand (pipeline/query_tables.cpp
// implements it over the Skippr Store): every name is listed up front, cheaply, and a table's
// source is built only when a statement first reads it, so one table that cannot be read fails
// only the statements that read it.
class TableBinder {
 public:
  virtual ~TableBinder() = default;
  // Every table there is; no data is read.
  virtual std::vector<TableName> Names() const = 0;
  // A source per requested table, in the same order, or why that table cannot be read (the
  // engine puts the table's name in front). Tables of one pipeline bound in one call read one
  // pinned store snapshot.
  virtual std::vector<Result<TableSource>> Bind(const std::vector<TableName>& tables) = 0;
  // Why the pipeline named like `schema` (any case) has no tables listed, when it is broken (its
  // store unreadable); OK when it simply does not exist. Asked before reporting an unknown table.
  virtual Status SchemaProblem(const std::string& schema) const = 0;
};

// What SQL run through an engine may touch besides its tables.
struct EngineOptions {
  // true: DuckDB as it comes (the lake writer's and transform.ops' own engines, and
  // `skipprd query --allow-file-access`). false: DuckDB's enable_external_access is off and the
  // configuration locked — no file outside `readable_directories`, no network, no extension
  // install or load, no SET — and statements that write files or attach databases (COPY, EXPORT,
  // ATTACH, DETACH, INSTALL/LOAD, SET/RESET) are refused with an error naming the flag.
  bool allows_file_access = true;
  // Absolute directories whose files stay readable when file access is off: the landed tables'
  // data directories.
  std::vector<std::string> readable_directories;
  // DuckDB database files attached read-only when the engine opens (before file access is
  // restricted), as `skippr_database_<index>`: the Duckdb sinks' databases, whose tables
  // LandedRows::database_table names. A file that does not exist yet is left out. While another
  // process writes one, the attach waits for it (a landing holds it for one transaction).
  std::vector<std::string> attached_databases;
  // false: Run does not check that tables are named <pipeline>.<namespace> (an engine that writes
  // to databases it attached itself, and reads its own registered tables).
  bool checks_table_names = true;
};

// The flag of `skipprd query` that lifts the restriction; errors name it.
inline constexpr std::string_view kAllowFileAccessFlag = "--allow-file-access";

struct QueryResult {
  std::vector<std::string> header;
  std::vector<std::vector<std::optional<std::string>>> rows;  // values as text, NULL as nullopt
  std::vector<std::string> column_types;                       // DuckDB type names ("BIGINT", ...)
};

// A chunk of a result's rows as it streams: values as text (DuckDB's own cast), NULL as nullopt.
// Valid only during the ResultWriter::Write call that receives it.
class ResultRows {
 public:
  virtual ~ResultRows() = default;
  virtual size_t size() const = 0;
  virtual std::optional<std::string_view> Value(size_t row, size_t column) const = 0;
};

// Receives a statement's result while it runs: the columns, then every chunk once, then the end.
// Memory is the writer's business: the engine keeps nothing of a chunk once Write returns. An
// error from the writer (a closed pipe, a full disk) stops the statement with that error.
class ResultWriter {
 public:
  virtual ~ResultWriter() = default;
  virtual Status Begin(const std::vector<std::string>& header,
                       const std::vector<std::string>& column_types) = 0;
  virtual Status Write(const ResultRows& rows) = 0;
  virtual Status End() = 0;
};

// A statement's result as it streams, as columnar Batches (the Python module's results): values
// keep their types — no text conversion — mapped as Engine::RunToBatch maps them; a column of a
// type skipprd has no column for (HUGEINT, INTERVAL, ENUM, ...) arrives as DuckDB's text of it.
// Holds DuckDB's result, so it must not outlive its Engine, and the Engine runs nothing else
// while it is open.
class BatchStream {
 public:
  virtual ~BatchStream() = default;
  virtual const std::vector<std::string>& header() const = 0;
  virtual const std::vector<std::string>& column_types() const = 0;  // DuckDB's type names
  virtual const std::vector<Field>& fields() const = 0;  // the Batches' fields, in column order
  // The next rows — whole chunks of DuckDB's, up to about `max_rows` — or nullopt after the last.
  // The Batch's fields are named like the header's columns (ids 0). A statement that fails while
  // it streams fails here, with DuckDB's message.
  virtual Result<std::optional<Batch>> Next(int64_t max_rows) = 0;
};

// What the wal_scan scans of an engine read, summed over every statement since it opened (for
// tests and bench/query): the batches, and the top-level columns those batches held — the columns
// their readers decoded.
struct ScanCounters {
  int64_t batches = 0;
  int64_t columns = 0;
  // Landed data files of the tables statements read, and of those the ones their views read
  // after the files whose statistics rule out the statement's filter were left out.
  int64_t landed_files = 0;
  int64_t landed_files_read = 0;
};

class Engine {
 public:
  // An in-memory DuckDB with the `wal_scan(pipeline, namespace)` table function registered.
  static Result<std::unique_ptr<Engine>> Open(EngineOptions options = {});
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Creates schema "<pipeline>" and view "<pipeline>"."<namespace>": the batches (wal_scan), or
  // with key columns their last row per key, UNION ALL BY NAME the landed rows (read_parquet of
  // the data files minus the equality deletes that apply to them by sequence number, and minus the
  // keys the batches hold). Registering the same pipeline.namespace again replaces its source.
  // InvalidArgument when a key column is not a field, or a field name is one the view reserves
  // (`__skippr_*`).
  Status RegisterTable(TableSource table);

  // Tables not registered yet come from `binder`, each bound (TableBinder::Bind, then
  // RegisterTable) when a statement first reads it.
  void SetBinder(std::unique_ptr<TableBinder> binder);

  // Runs SQL (one or more statements; the last one's result is returned). Table names must be
  // qualified <pipeline>.<namespace>: an unqualified or unknown table name yields InvalidArgument
  // "unknown table 'x'; tables are referenced as <pipeline>.<namespace>: p.a, p.b". The binder's
  // tables the SQL reads are bound first (all of them when DuckDB cannot serialize the statement,
  // e.g. DESCRIBE or EXPLAIN); a table that cannot be bound fails the statement only when the
  // statement reads it: "table p.a cannot be read: <cause>", with the cause's code. Other DuckDB
  // errors → InvalidArgument with DuckDB's message (with file access off, a blocked statement's
  // message says what is blocked and names kAllowFileAccessFlag).
  Result<QueryResult> Run(const std::string& sql);

  // Run, with the last statement's result streamed to `writer` as DuckDB produces it (a single
  // SELECT streams chunk by chunk; other statements' results are small and come at once).
  // Begin is called before any row and End after the last; on an error neither is called again
  // and what the writer received so far is all there is.
  Status Stream(const std::string& sql, ResultWriter& writer);

  // Run, with the last statement's result streamed as Batches (BatchStream). Its columns of types
  // skipprd has no column for are cast to text when `sql` is that one statement, else refused with
  // InvalidArgument naming the column.
  Result<std::unique_ptr<BatchStream>> OpenBatchStream(const std::string& sql);

  // Runs one SELECT and returns its rows as a Batch: fields named like the result's columns, with
  // id 0 (the caller numbers them), types mapped from DuckDB's (TINYINT..INTEGER → int, BIGINT and
  // UINTEGER → long, TIMESTAMP_S/MS/NS → timestamp, STRUCT, LIST and MAP with VARCHAR keys
  // nested; DuckDB types a bare NULL as INTEGER). Other DuckDB types (HUGEINT, UBIGINT, INTERVAL, ENUM, ...)
  // fail with InvalidArgument naming the column. DuckDB errors → InvalidArgument with its message.
  // Table references are not checked as Run checks them: the caller writes the SQL.
  Result<Batch> RunToBatch(const std::string& sql);

  // Attaches the DuckDB database file `path` as `alias`, waiting (up to 10 minutes, saying so in
  // the log every 30 s) while another process holds a conflicting lock on it. Detach with Run.
  Status Attach(const std::string& path, const std::string& alias, bool read_only);

  // "pipeline.namespace", sorted: the registered tables and the binder's.
  std::vector<std::string> TableNames() const;

  ScanCounters scan_counters() const;

 private:
  struct Handles;
  using TableKey = std::pair<std::string, std::string>;  // pipeline, namespace
  Engine();
  Status ApplyFileAccess(const EngineOptions& options);
  Status AttachDatabases(const std::vector<std::string>& paths);
  std::optional<std::vector<detail::TableReference>> ReferencedTables(const std::string& sql);
  std::optional<TableName> KnownTable(const std::string& schema, const std::string& table) const;
  Status BindReferencedTables(const std::string& sql);
  std::map<TableName, Status> BindTables(const std::vector<TableName>& tables);
  Status CreateView(const TableKey& key, const std::vector<size_t>* landed_files);
  Status ReadOnlyNeededLandedFiles(const std::vector<detail::TableReference>* references);
  std::optional<std::vector<size_t>> NeededLandedFiles(
      const TableSource& table, const std::vector<const detail::TableReference*>& references);
  std::optional<std::string> RenderConstant(const std::string& constant_json);
  std::optional<std::string> QueryOneText(const std::string& sql, const std::string* parameter);
  Status ExplainFailure(const std::string& message) const;
  Status ExecuteDiscarding(duckdb_prepared_statement statement) const;
  Status StreamBatches(duckdb_prepared_statement statement, const std::string* only_sql,
                       std::unique_ptr<BatchStream>* stream) const;
  Status RunStatements(const std::string& sql,
                       const std::function<Status(duckdb_prepared_statement, bool is_only)>& run_last);
  Status StreamSingleStatement(const std::string& sql, duckdb_prepared_statement statement,
                               ResultWriter& writer) const;
  Status ExecuteToWriter(duckdb_prepared_statement statement, ResultWriter& writer) const;
  Status UnknownTable(const std::string& name) const;

  std::unique_ptr<Handles> handles_;
  bool allows_file_access_ = true;
  bool checks_table_names_ = true;
  std::map<std::string, std::string> attached_aliases_;  // database path → its catalog's alias
  std::map<TableKey, std::shared_ptr<const TableSource>> tables_;
  // Tables wal_scan reads for the engine itself (landed file statistics): no view, never bound.
  std::map<TableKey, std::shared_ptr<const TableSource>> internal_tables_;
  // The landed data files each view reads, where a statement's filter left some out (absent: all).
  std::map<TableKey, std::vector<size_t>> pruned_views_;
  std::optional<std::string>
      select_template_;  // json_serialize_sql('SELECT 1'), to render constants
  std::unique_ptr<TableBinder> binder_;
  std::map<TableName, Status> unbindable_;  // binder tables that failed to bind, and why
};

// SQL quoting: "name" with inner quotes doubled; 'text' likewise.
std::string QuoteIdentifier(std::string_view name);
std::string QuoteLiteral(std::string_view text);

// Output formats of `skipprd query`:
//  - kTable: an aligned text table: column names, a rule, the rows (NULL as "NULL"), then
//    "(N rows)" ("(1 row)" for one). Aligning needs the rows, so a writer shows at most
//    `table_row_limit` of them (written when the limit is passed) and ends with
//    "(N rows, the first L shown; --output csv or json writes every row)".
//  - kCsv: header line then rows, RFC 4180 quoting (fields with , " CR or LF are quoted, quotes
//    doubled), NULL as an empty field, lines end in "\n".
//  - kJson: one array of objects keyed by column name, values typed where the DuckDB type is
//    numeric or boolean (non-finite numbers become strings), NULL as null.
//  - kPlain (--plain): {"header":[...],"rows":[[...]]}, every value a string, NULL as null.
// Every format ends with a newline. csv, json and plain write each chunk as it comes and never cap.
enum class OutputFormat { kTable, kCsv, kJson, kPlain };

inline constexpr size_t kTableRowLimit = 1000;

// Where a format writer's text goes, piece by piece in order (at most about 64 KiB at a time).
using TextOutput = std::function<Status(std::string_view)>;

std::unique_ptr<ResultWriter> MakeFormatWriter(OutputFormat format, TextOutput output,
                                               size_t table_row_limit = kTableRowLimit);

// A whole result in one format (the table without a row limit).
std::string FormatTable(const QueryResult& result);
std::string FormatCsv(const QueryResult& result);
std::string FormatJson(const QueryResult& result);
std::string FormatPlain(const QueryResult& result);

}  // namespace skippr::query
