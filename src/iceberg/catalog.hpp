// The table catalog: which metadata file is each table's current one (DESIGN.md §6). In a SQL
// database its two tables have exactly the shape the Apache Iceberg JDBC catalog creates
// (`iceberg_tables`, `iceberg_namespace_properties`), so Iceberg tools pointed at the same database
// see our tables; for a warehouse on S3 it can be a DynamoDB table instead.
// A commit is a compare-and-swap of the table's metadata_location: the commit point of a landing.
// Layout, SQL and protocol: docs/formats/iceberg-tables.md.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "aws/aws.hpp"
#include "core/env.hpp"
#include "core/environment.hpp"
#include "core/status.hpp"
#include "iceberg/table_metadata.hpp"

namespace skippr::iceberg {

struct TableIdentifier {
  std::string table_namespace;  // one name; the JDBC catalog reads '.' as a level separator
  std::string table_name;

  std::string ToString() const;  // "namespace.table"
};

// One connection to the catalog database; thread-safe (calls on one object are serialised). Names
// are 1..255 bytes, locations 1..1000 (the column sizes of the JDBC shape); others are
// InvalidArgument.
class Catalog {
 public:
  virtual ~Catalog() = default;

  // Where the tables' metadata files are written and read (CatalogOptions::env).
  Env& env() const { return *env_; }

  // Records the namespace (the JDBC catalog's `exists` = `true` property). OK when it exists.
  virtual Status CreateNamespace(const std::string& namespace_name) = 0;

  // Registers a table whose first metadata file is `metadata_location`. NotFound when the
  // namespace does not exist; Conflict when a table (or view) of that name exists.
  virtual Status CreateTable(const TableIdentifier& table,
                             const std::string& metadata_location) = 0;

  // The table's current metadata location. NotFound when there is no such table.
  virtual Result<std::string> LoadTable(const TableIdentifier& table) = 0;

  // The commit point: points the table at `new_location` if and only if it still points at
  // `expected_location`, in one transaction (previous_metadata_location becomes the expected one).
  // Conflict when another writer moved the pointer first (the message names both locations);
  // NotFound when the table does not exist.
  virtual Status CompareAndSwap(const TableIdentifier& table, const std::string& expected_location,
                                const std::string& new_location) = 0;

  // The namespace's table names, sorted. Empty for an unknown namespace.
  virtual Result<std::vector<std::string>> ListTables(const std::string& namespace_name) = 0;

  // "SQLite catalog /data/wh/skippr_catalog.db (catalog_name 'skippr')", for messages.
  virtual const std::string& description() const = 0;

 protected:
  explicit Catalog(Env* env) : env_(env) {}

 private:
  Env* env_;
};

inline constexpr std::string_view kDefaultCatalogName = "skippr";
inline constexpr std::string_view kDefaultSqliteCatalogFile = "skippr_catalog.db";

struct CatalogOptions {
  // The catalog_name column: catalogs with different names share one database independently.
  std::string catalog_name = std::string(kDefaultCatalogName);
  // file:///absolute/path (where the default SQLite database lives) or s3://bucket/prefix.
  std::string warehouse;
  // Empty: SQLite at {warehouse}/skippr_catalog.db. "postgresql://..." or "postgres://...": a
  // PostgreSQL database (libpq connection URI). "file:///path/x.db" or "/path/x.db": that SQLite
  // database file.
  std::string uri;
  // Set: the catalog is this DynamoDB table instead (created when absent), holding the tables of
  // `warehouse` (docs/formats/iceberg-tables.md, "The DynamoDB catalog"); `uri` must be empty.
  std::string dynamodb_table;
  aws::DynamoOptions dynamodb;
  const Environment* environment = nullptr;  // AWS settings; nullptr: the process environment
  int busy_timeout_ms = 10'000;  // SQLite: how long to wait for another writer's lock
  // The metadata files' I/O (and the warehouse directory's); the databases do their own.
  Env* env = Env::Default();
};

// Connects, creating the catalog tables when missing (and adding `iceberg_type` to a catalog the
// JDBC catalog created without it, as its schema-version V1 upgrade does).
Result<std::unique_ptr<Catalog>> OpenCatalog(const CatalogOptions& options);

// ----- Table commits: metadata files + catalog pointer -------------------------------------------
//
// A commit writes v{N+1}.metadata.json next to the base version v{N} (never replacing a file),
// swaps the catalog pointer from v{N} to it (the commit point), then updates version-hint.text.
// A writer that dies between the first two steps leaves a complete successor the catalog does not
// point at; LoadTableForCommit completes that commit (it is exactly what the writer would have
// swapped in), so the replayed landing then finds its landing id and becomes a no-op.

// Creates the namespace if needed, writes `metadata` as v1 and registers the table. When a v1 is
// already there but the catalog has no table (a create that died before registering), that v1 is
// registered and returned instead of `metadata`. Conflict when the table exists.
Result<VersionedMetadata> CreateTableWithMetadata(Catalog& catalog, const TableIdentifier& table,
                                                  const TableMetadata& metadata);

// The metadata file the catalog points at, read and checked. For readers: changes nothing.
// NotFound only when the catalog has no such table; a catalog row whose metadata file is gone is
// Corruption (MissingCurrentMetadata), never "create it again".
Result<VersionedMetadata> LoadTableMetadata(Catalog& catalog, const TableIdentifier& table);
Status MissingCurrentMetadata(const TableIdentifier& table, std::string_view metadata_location);

// For the table's writer: like LoadTableMetadata, but first completes a commit that wrote its
// metadata file and died before the swap (see above).
Result<VersionedMetadata> LoadTableForCommit(Catalog& catalog, const TableIdentifier& table);

// Commits `next` (built from base.metadata, see NextVersion) as version base.version + 1 (for a
// base named otherwise: one past the highest v{N} in metadata/). Conflict when another writer
// committed first: reload with LoadTableForCommit, re-apply, retry.
Result<VersionedMetadata> CommitTableMetadata(Catalog& catalog, const TableIdentifier& table,
                                              const VersionedMetadata& base,
                                              const TableMetadata& next);

}  // namespace skippr::iceberg
