// Internal to query/: which landed data files a statement can need.
//
// DuckDB's parse tree of a statement (json_serialize_sql) names every table the statement reads
// and, for each SELECT, the WHERE clause over the tables in its FROM. Of a WHERE, the parts that
// compare one table column with constants (=, <, <=, >, >=, BETWEEN, IN, IS [NOT] NULL, joined by
// AND and OR) are a filter a data file's manifest statistics can rule out: a file whose bounds,
// null and NaN counts show that none of its rows passes is left out of the table's view for that
// statement. Everything else in the statement is left to DuckDB; what cannot be read as such a
// filter rules nothing out, so a file is dropped only when its statistics prove no row can match.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "query/query.hpp"

namespace skippr::query::detail {

// A column as the statement wrote it: ["x"], ["t", "x"] or ["p", "t", "x"].
using ColumnPath = std::vector<std::string>;

// A filter on one table reference: an AND / OR tree of atoms, each on one column.
struct FileFilter {
  enum class Kind { kAnd, kOr, kCompare, kBetween, kIn, kIsNull, kIsNotNull };
  Kind kind = Kind::kAnd;
  std::vector<FileFilter> children;       // kAnd, kOr
  ColumnPath column;                      // the atoms
  std::string comparison;                 // kCompare: "=", "<", "<=", ">" or ">=" (column first)
  std::vector<nlohmann::json> constants;  // DuckDB parse-tree nodes: kCompare 1, kBetween 2, kIn n
};

// One place a statement reads a table.
struct TableReference {
  std::string catalog;
  std::string schema;
  std::string table;
  // Only for a table in the FROM of a SELECT whose WHERE holds a filter on it (else nullopt:
  // every file). `binding` is the name its columns are qualified with (its alias, or its name);
  // `is_only_table` says the FROM holds nothing else, so unqualified columns are its own and IS
  // NULL cannot be an outer join's missing match.
  std::optional<FileFilter> filter;
  std::string binding;
  bool has_alias = false;
  bool is_only_table = false;
};

// Every table reference of the statements in `tree` (json_serialize_sql's output), CTE names left
// out; nullopt when the tree holds no statements (DuckDB could not serialize them).
std::optional<std::vector<TableReference>> ParseTableReferences(const nlohmann::json& tree);

// A constant node as SQL text, rendered by DuckDB itself; nullopt when it cannot be.
using ConstantRenderer = std::function<std::optional<std::string>(const nlohmann::json&)>;

struct PruningOptions {
  // DuckDB compares text byte by byte (no default collation): only then do text bounds bound
  // what a comparison sees.
  bool compares_text_bytewise = true;
};

// How to tell the data files a statement needs: `statistics` holds a row per data file of the
// table (column f: its index; per column the filters use, lo_<i> and hi_<i> of the column's type,
// vc_<i>, nc_<i>, xc_<i>: value, null and NaN counts; NULL where not known), and `where`, over
// those columns, is true for the files some reference may need.
struct FilePruning {
  Batch statistics;
  std::string where;
};

// nullopt when one of `references` (all the statement's references to `table`) may need every file.
std::optional<FilePruning> PlanFilePruning(const TableSource& table,
                                           const std::vector<const TableReference*>& references,
                                           const ConstantRenderer& render,
                                           const PruningOptions& options);

}  // namespace skippr::query::detail
