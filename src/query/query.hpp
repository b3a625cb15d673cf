// The query engine of `skipprd query` (DESIGN.md §7): DuckDB in-process, one view per namespace named
// "<pipeline>"."<namespace>" over the `wal_scan` table function, which fills DuckDB vectors straight
// from columnar Batches (no per-row text conversion), and the output formats of the command.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/batch.hpp"
#include "core/status.hpp"
#include "core/types.hpp"

namespace skippr::query {

// Supplies the rows of one table: the target schema (current fields, with ids) and the batches to
// scan. Batches may carry OLDER schemas: they are projected onto the target by FIELD ID — a target
// field missing from a batch reads NULL; int→long, float→double and decimal precision widening are
// cast; nested struct children are matched by id too. The provider is called once per scan (at
// DuckDB's init), so a query sees exactly the batches the provider returns at that moment.
struct TableSource {
  std::string pipeline;
  std::string namespace_name;
  std::vector<Field> fields;
  std::function<Result<std::vector<std::shared_ptr<const Batch>>>()> batches;
  // Parquet files of rows landed elsewhere (an Iceberg snapshot's data files), read by column name
  // and unioned with the batches; files written before a column existed read NULL for it.
  std::vector<std::string> landed_files;
  // The batches may be scanned by several threads at once, their rows reaching DuckDB in no
  // particular order (writing a data file); off for tables users query, whose rows keep WAL order.
  bool allows_parallel_scan = false;
};

struct QueryResult {
  std::vector<std::string> header;
  std::vector<std::vector<std::optional<std::string>>> rows;  // values as text, NULL as nullopt
  std::vector<std::string> column_types;                       // DuckDB type names ("BIGINT", ...)
};

class Engine {
 public:
  // An in-memory DuckDB with the `wal_scan(pipeline, namespace)` table function registered.
  static Result<std::unique_ptr<Engine>> Open();
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Creates schema "<pipeline>" and view "<pipeline>"."<namespace>" AS SELECT * FROM wal_scan(...)
  // [UNION ALL BY NAME SELECT * FROM read_parquet(<landed_files>, union_by_name = true)].
  // Registering the same pipeline.namespace again replaces its source.
  Status RegisterTable(TableSource table);

  // Runs SQL (one or more statements; the last one's result is returned). Table names must be
  // qualified <pipeline>.<namespace>: an unqualified or unknown table name yields InvalidArgument
  // "unknown table 'x'; tables are referenced as <pipeline>.<namespace>: p.a, p.b". Other DuckDB
  // errors → InvalidArgument with DuckDB's message.
  Result<QueryResult> Run(const std::string& sql);

  // "pipeline.namespace", sorted.
  std::vector<std::string> TableNames() const;

 private:
  struct Handles;
  Engine();
  Status CheckTableReferences(const std::string& sql);
  Status UnknownTable(const std::string& name) const;

  std::unique_ptr<Handles> handles_;
  std::map<std::pair<std::string, std::string>, std::shared_ptr<const TableSource>> tables_;
};

// SQL quoting: "name" with inner quotes doubled; 'text' likewise.
std::string QuoteIdentifier(std::string_view name);
std::string QuoteLiteral(std::string_view text);

// Output formats of `skipprd query`:
//  - FormatTable: an aligned text table: column names, a rule, the rows (NULL as "NULL"), then
//    "(N rows)" ("(1 row)" for one).
//  - FormatCsv: header line then rows, RFC 4180 quoting (fields with , " CR or LF are quoted, quotes
//    doubled), NULL as an empty field, lines end in "\n".
//  - FormatJson: one array of objects keyed by column name, values typed where the DuckDB type is
//    numeric or boolean (non-finite numbers become strings), NULL as null.
//  - FormatPlain (--plain): {"header":[...],"rows":[[...]]}, every value a string, NULL as null.
// Every format ends with a newline.
std::string FormatTable(const QueryResult& result);
std::string FormatCsv(const QueryResult& result);
std::string FormatJson(const QueryResult& result);
std::string FormatPlain(const QueryResult& result);

}  // namespace skippr::query
