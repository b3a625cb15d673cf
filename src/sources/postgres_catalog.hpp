// Internal to sources/: what the PostgreSQL source reads of a database's catalog — the tables a
// pipeline reads, their columns (types resolved through domains) and primary keys.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/status.hpp"
#include "sources/postgres_connection.hpp"
#include "sources/postgres_types.hpp"

namespace skippr::sources::postgres {

struct PgColumn {
  std::string name;
  PgType type;
};

// A relation that holds rows on disk (a table, or a leaf partition of a partitioned table).
struct PgStorage {
  uint32_t oid = 0;
  std::string qualified_name;  // quoted: "public"."rides"
  bool is_heap = false;        // rows addressable by ctid: read in block ranges
};

struct PgTable {
  uint32_t oid = 0;
  std::string schema;
  std::string name;
  char kind = 'r';            // pg_class.relkind
  char replica_identity = 'd';  // pg_class.relreplident: d(efault: the key), f(ull), n, i
  std::string namespace_name;  // postgres_<table>, or postgres_<schema>_<table> outside public
  std::vector<PgColumn> columns;
  std::vector<std::string> primary_key;  // column names, in key order; empty without one
  std::vector<PgStorage> storage;        // itself; a partitioned table's leaf partitions
};

// The namespace rows of schema.table land in (reference §7: source-native namespaces).
std::string NamespaceOfTable(const std::string& schema, const std::string& table);

// The tables `settings.tables` names (each resolved as PostgreSQL resolves a name in SQL:
// `orders`, `sales.orders`, `"Mixed Case"`), or every table of the public schema when it names
// none. A name that resolves to nothing is InvalidConfig naming the entry.
Result<std::vector<PgTable>> ListTables(PgConnection& connection,
                                        const PostgresSettings& settings);

// A type as a change stream's Relation message names it (its oid and the column's typmod), resolved
// as ListTables resolves a column's: through domains, with an array's element type.
Result<PgType> ResolveType(PgConnection& connection, uint32_t oid, int32_t modifier);

}  // namespace skippr::sources::postgres
