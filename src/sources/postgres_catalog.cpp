#include "sources/postgres_catalog.hpp"

#include <fmt/format.h>

namespace skippr::sources::postgres {

namespace {

uint32_t ToOid(std::string_view text) {
  uint32_t value = 0;
  for (char c : text) value = value * 10 + static_cast<uint32_t>(c - '0');
  return value;
}

Result<std::vector<uint32_t>> ResolveTableOids(PgConnection& connection,
                                               const PostgresSettings& settings) {
  std::vector<uint32_t> oids;
  if (settings.tables.empty()) {
    SKIPPR_ASSIGN_OR_RETURN(
        PgResult result,
        connection.Query("listing the tables of schema public",
                         "SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = "
                         "c.relnamespace WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') "
                         "AND NOT c.relispartition ORDER BY c.relname"));
    for (int row = 0; row < result.rows(); ++row) oids.push_back(ToOid(result.Text(row, 0)));
    return oids;
  }
  for (size_t i = 0; i < settings.tables.size(); ++i) {
    const std::string& entry = settings.tables[i];
    SKIPPR_ASSIGN_OR_RETURN(PgResult result,
                            connection.Query("resolving a table name",
                                             "SELECT to_regclass($1)::oid", {entry}));
    if (result.rows() != 1 || result.IsNull(0, 0)) {
      return Status::InvalidConfig(fmt::format(
          "data_sources.{}.tables[{}]: no table or view '{}' in database {} (names resolve as in "
          "SQL: schema.table, double quotes for mixed case); fix the entry or create the table",
          settings.source_name, i, entry, connection.description()));
    }
    oids.push_back(ToOid(result.Text(0, 0)));
  }
  return oids;
}

Result<std::vector<PgColumn>> ReadColumns(PgConnection& connection, uint32_t oid) {
  // Domains resolve to their base type (and the domain's own typmod, as numeric(10,2) carries it).
  static const std::string kColumns = R"sql(
    WITH RECURSIVE resolved(attnum, attname, type_oid, typmod, depth) AS (
      SELECT a.attnum, a.attname, a.atttypid, a.atttypmod, 0
        FROM pg_attribute a
       WHERE a.attrelid = $1::oid AND a.attnum > 0 AND NOT a.attisdropped
      UNION ALL
      SELECT r.attnum, r.attname, t.typbasetype, t.typtypmod, r.depth + 1
        FROM resolved r JOIN pg_type t ON t.oid = r.type_oid
       WHERE t.typtype = 'd')
    SELECT DISTINCT ON (r.attnum) r.attname, r.type_oid, r.typmod, t.typcategory, t.typelem,
           COALESCE(e.typcategory, 'U'), format_type(a.atttypid, a.atttypmod)
      FROM resolved r
      JOIN pg_type t ON t.oid = r.type_oid
      JOIN pg_attribute a ON a.attrelid = $1::oid AND a.attnum = r.attnum
      LEFT JOIN pg_type e ON e.oid = t.typelem AND t.typcategory = 'A'
     ORDER BY r.attnum, r.depth DESC)sql";
  SKIPPR_ASSIGN_OR_RETURN(PgResult result, connection.Query("reading a table's columns", kColumns,
                                                            {std::to_string(oid)}));
  std::vector<PgColumn> columns;
  for (int row = 0; row < result.rows(); ++row) {
    PgColumn column;
    column.name = std::string(result.Text(row, 0));
    column.type.oid = ToOid(result.Text(row, 1));
    column.type.modifier = static_cast<int32_t>(result.Integer(row, 2));
    column.type.category = result.Text(row, 3).empty() ? 'U' : result.Text(row, 3)[0];
    column.type.element_oid = ToOid(result.Text(row, 4));
    column.type.element_category = result.Text(row, 5).empty() ? 'U' : result.Text(row, 5)[0];
    column.type.name = std::string(result.Text(row, 6));
    columns.push_back(std::move(column));
  }
  return columns;
}

Result<std::vector<std::string>> ReadPrimaryKey(PgConnection& connection, uint32_t oid) {
  SKIPPR_ASSIGN_OR_RETURN(
      PgResult result,
      connection.Query("reading a table's primary key",
                       "SELECT a.attname FROM pg_index i, unnest(i.indkey) WITH ORDINALITY "
                       "k(attnum, position) JOIN pg_attribute a ON a.attnum = k.attnum "
                       "WHERE i.indrelid = $1::oid AND i.indisprimary AND a.attrelid = "
                       "i.indrelid ORDER BY k.position",
                       {std::to_string(oid)}));
  std::vector<std::string> key;
  for (int row = 0; row < result.rows(); ++row) key.emplace_back(result.Text(row, 0));
  return key;
}

Result<std::vector<PgStorage>> ReadStorage(PgConnection& connection, const PgTable& table) {
  SKIPPR_ASSIGN_OR_RETURN(
      PgResult result,
      connection.Query("listing a table's partitions",
                       "SELECT c.oid, quote_ident(n.nspname) || '.' || quote_ident(c.relname), "
                       "c.relkind FROM pg_partition_tree($1::oid) p JOIN pg_class c ON c.oid = "
                       "p.relid JOIN pg_namespace n ON n.oid = c.relnamespace WHERE p.isleaf "
                       "ORDER BY c.relname",
                       {std::to_string(table.oid)}));
  std::vector<PgStorage> storage;
  for (int row = 0; row < result.rows(); ++row) {
    const char kind = result.Text(row, 2).empty() ? 'r' : result.Text(row, 2)[0];
    storage.push_back({ToOid(result.Text(row, 0)), std::string(result.Text(row, 1)), kind == 'r'});
  }
  if (storage.empty()) {
    // Not a table (a view, a materialised view, a foreign table): read whole by its name.
    storage.push_back({table.oid,
                       connection.QuoteIdentifier(table.schema) + "." +
                           connection.QuoteIdentifier(table.name),
                       table.kind == 'r' || table.kind == 'm'});
  }
  return storage;
}

}  // namespace

Result<PgType> ResolveType(PgConnection& connection, uint32_t oid, int32_t modifier) {
  static const std::string kType = R"sql(
    WITH RECURSIVE resolved(type_oid, typmod, depth) AS (
      SELECT $1::oid, $2::int, 0
      UNION ALL
      SELECT t.typbasetype, t.typtypmod, r.depth + 1
        FROM resolved r JOIN pg_type t ON t.oid = r.type_oid
       WHERE t.typtype = 'd')
    SELECT r.type_oid, CASE WHEN r.depth = 0 THEN $2::int ELSE r.typmod END, t.typcategory,
           t.typelem, COALESCE(e.typcategory, 'U'), format_type($1::oid, $2::int)
      FROM resolved r
      JOIN pg_type t ON t.oid = r.type_oid
      LEFT JOIN pg_type e ON e.oid = t.typelem AND t.typcategory = 'A'
     ORDER BY r.depth DESC LIMIT 1)sql";
  SKIPPR_ASSIGN_OR_RETURN(PgResult result,
                          connection.Query("resolving a column type", kType,
                                           {std::to_string(oid), std::to_string(modifier)}));
  PgType type;
  if (result.rows() != 1) {
    type.oid = oid;
    type.modifier = modifier;
    return type;  // an unknown type reads as text
  }
  type.oid = ToOid(result.Text(0, 0));
  type.modifier = static_cast<int32_t>(result.Integer(0, 1));
  type.category = result.Text(0, 2).empty() ? 'U' : result.Text(0, 2)[0];
  type.element_oid = ToOid(result.Text(0, 3));
  type.element_category = result.Text(0, 4).empty() ? 'U' : result.Text(0, 4)[0];
  type.name = std::string(result.Text(0, 5));
  return type;
}

std::string NamespaceOfTable(const std::string& schema, const std::string& table) {
  return schema == "public" ? "postgres_" + table : "postgres_" + schema + "_" + table;
}

Result<std::vector<PgTable>> ListTables(PgConnection& connection,
                                        const PostgresSettings& settings) {
  SKIPPR_ASSIGN_OR_RETURN(const std::vector<uint32_t> oids,
                          ResolveTableOids(connection, settings));
  std::vector<PgTable> tables;
  for (uint32_t oid : oids) {
    SKIPPR_ASSIGN_OR_RETURN(
        PgResult result,
        connection.Query("reading a table's name",
                         "SELECT n.nspname, c.relname, c.relkind, c.relreplident FROM pg_class c "
                         "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = $1::oid",
                         {std::to_string(oid)}));
    PgTable table;
    table.oid = oid;
    table.schema = std::string(result.Text(0, 0));
    table.name = std::string(result.Text(0, 1));
    table.kind = result.Text(0, 2)[0];
    table.replica_identity = result.Text(0, 3)[0];
    table.namespace_name = NamespaceOfTable(table.schema, table.name);
    SKIPPR_ASSIGN_OR_RETURN(table.columns, ReadColumns(connection, oid));
    SKIPPR_ASSIGN_OR_RETURN(table.primary_key, ReadPrimaryKey(connection, oid));
    SKIPPR_ASSIGN_OR_RETURN(table.storage, ReadStorage(connection, table));
    tables.push_back(std::move(table));
  }
  return tables;
}

}  // namespace skippr::sources::postgres
