// Internal to sinks/: a landing's batches as DuckDB sees them, for the sinks that turn them into
// SQL (the DuckDB database and PostgreSQL): registered in a query::Engine as
// wal_scan('skippr_landing', <namespace>), and the queries over them every such sink needs.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "query/query.hpp"
#include "sinks/sinks.hpp"

namespace skippr::sinks::internal {

// The bookkeeping tables and column a database sink keeps beside the namespaces' tables
// (docs/formats/duckdb-sink.md, postgres-sink.md).
inline constexpr std::string_view kLandingsTable = "_skippr_landings";
inline constexpr std::string_view kTruncatesTable = "_skippr_truncates";
inline constexpr std::string_view kTombstonesPrefix = "_skippr_tombstones_";
inline constexpr std::string_view kOrderTokenColumn = "_skippr_order_token";

// Registers `batches` (of `namespace_schema`, projected onto its current fields) as the landing's
// table of `engine`, replacing the previous landing's.
Status RegisterLanding(query::Engine& engine, const schema::NamespaceSchema& namespace_schema,
                       const std::vector<std::shared_ptr<const Batch>>& batches);

// wal_scan over the landing's batches, with the change columns when asked.
std::string LandingScan(const std::string& namespace_name, bool with_change_columns);

// Whether the batches are source changes with order tokens (a CDC stream's).
bool CarriesOrderTokens(const std::vector<std::shared_ptr<const Batch>>& batches);

// The landing's newest change per key — greatest order token, then last in WAL order — after its
// last TRUNCATE (if any): the namespace's columns plus query::kOrdinalColumn, kDeletedColumn and
// kOrderTokenColumn.
std::string NewestChangePerKeySql(const std::string& namespace_name,
                                  const std::vector<std::string>& key_columns);
// One row: the number of TRUNCATE changes in the landing, and the greatest one's order token in
// hex ("" when none).
std::string LandingTruncateSql(const std::string& namespace_name);

// `left`.k1 <op> `right`.k1 AND ... over the key columns: op "IS NOT DISTINCT FROM" makes a NULL
// key one key (as the lake and query see it); "=" lets PostgreSQL use the key's index (its key
// columns are NOT NULL).
std::string KeysCompared(const std::vector<std::string>& keys, std::string_view left,
                         std::string_view right, std::string_view op);

// "a", "b" quoted and joined by ", ", each after `prefix` ("t." for one table's columns).
std::string QuotedList(const std::vector<std::string>& names, std::string_view prefix = "");

}  // namespace skippr::sinks::internal
