// The catalog in the Iceberg JDBC catalog's table shape, over SQLite or PostgreSQL. The SQL is the
// JDBC catalog's (apache/iceberg JdbcUtil), so both read each other's rows. (The DynamoDB catalog
// is in dynamodb_catalog.cpp.)
#include "iceberg/catalog.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <mutex>
#include <utility>

#include "core/file.hpp"
#include "iceberg/internal/catalog_names.hpp"
#include "iceberg/internal/dynamodb_catalog.hpp"
#include "iceberg/internal/sql_database.hpp"

namespace skippr::iceberg {
namespace {

using internal::SqlDatabase;
using internal::SqlRows;

// The JDBC catalog's tables as it creates them: its "V0" iceberg_tables, then the V1 upgrade that
// adds iceberg_type (TABLE or VIEW; NULL in rows a V0 catalog wrote, which are tables).
constexpr std::string_view kCreateTablesSql =
    "CREATE TABLE IF NOT EXISTS iceberg_tables(catalog_name VARCHAR(255) NOT NULL,"
    "table_namespace VARCHAR(255) NOT NULL,table_name VARCHAR(255) NOT NULL,"
    "metadata_location VARCHAR(1000),previous_metadata_location VARCHAR(1000),"
    "PRIMARY KEY (catalog_name, table_namespace, table_name))";
constexpr std::string_view kAddRecordTypeSql =
    "ALTER TABLE iceberg_tables ADD COLUMN iceberg_type VARCHAR(5)";
constexpr std::string_view kCreateNamespacePropertiesSql =
    "CREATE TABLE IF NOT EXISTS iceberg_namespace_properties(catalog_name VARCHAR(255) NOT NULL,"
    "namespace VARCHAR(255) NOT NULL,property_key VARCHAR(255),property_value VARCHAR(1000),"
    "PRIMARY KEY (catalog_name, namespace, property_key))";

constexpr std::string_view kCreateNamespaceSql =
    "INSERT INTO iceberg_namespace_properties (catalog_name, namespace, property_key, "
    "property_value) VALUES ($1, $2, 'exists', 'true') ON CONFLICT DO NOTHING";
constexpr std::string_view kNamespaceExistsSql =
    "SELECT 1 FROM iceberg_namespace_properties WHERE catalog_name = $1 AND namespace = $2 "
    "UNION ALL SELECT 1 FROM iceberg_tables WHERE catalog_name = $1 AND table_namespace = $2";
constexpr std::string_view kInsertTableSql =
    "INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name, metadata_location, "
    "previous_metadata_location, iceberg_type) VALUES ($1, $2, $3, $4, NULL, 'TABLE')";
constexpr std::string_view kLoadTableSql =
    "SELECT metadata_location FROM iceberg_tables WHERE catalog_name = $1 AND "
    "table_namespace = $2 AND table_name = $3 AND (iceberg_type = 'TABLE' OR iceberg_type IS NULL)";
constexpr std::string_view kSwapSql =
    "UPDATE iceberg_tables SET metadata_location = $5, previous_metadata_location = $4 "
    "WHERE catalog_name = $1 AND table_namespace = $2 AND table_name = $3 AND "
    "metadata_location = $4 AND (iceberg_type = 'TABLE' OR iceberg_type IS NULL)";
constexpr std::string_view kListTablesSql =
    "SELECT table_name FROM iceberg_tables WHERE catalog_name = $1 AND table_namespace = $2 AND "
    "(iceberg_type = 'TABLE' OR iceberg_type IS NULL) ORDER BY table_name";

using internal::CheckTable;
using internal::CheckText;
using internal::kMaxLocationBytes;
using internal::kMaxNameBytes;

// Rolls back on destruction unless committed.
class Transaction {
 public:
  static Result<Transaction> Begin(SqlDatabase& database) {
    SKIPPR_RETURN_IF_ERROR(database.Begin());
    return Transaction(database);
  }
  Transaction(Transaction&& other) noexcept : database_(std::exchange(other.database_, nullptr)) {}
  Transaction& operator=(Transaction&&) = delete;
  ~Transaction() {
    if (database_ != nullptr) database_->Rollback();
  }
  Status Commit() { return std::exchange(database_, nullptr)->Commit(); }

 private:
  explicit Transaction(SqlDatabase& database) : database_(&database) {}
  SqlDatabase* database_;
};

class SqlCatalog final : public Catalog {
 public:
  SqlCatalog(std::unique_ptr<SqlDatabase> database, std::string catalog_name, Env* env)
      : Catalog(env),
        database_(std::move(database)),
        catalog_name_(std::move(catalog_name)),
        description_(
            fmt::format("{} (catalog_name '{}')", database_->description(), catalog_name_)) {}

  // Creates the tables when missing, and upgrades a V0 iceberg_tables as the JDBC catalog does.
  Status CreateCatalogTables() {
    SKIPPR_ASSIGN_OR_RETURN(Transaction transaction, Transaction::Begin(*database_));
    SKIPPR_RETURN_IF_ERROR(database_->LockCatalogSetup());
    SKIPPR_RETURN_IF_ERROR(database_->Execute(kCreateTablesSql).status());
    SKIPPR_ASSIGN_OR_RETURN(bool has_record_type,
                            database_->HasColumn("iceberg_tables", "iceberg_type"));
    if (!has_record_type) SKIPPR_RETURN_IF_ERROR(database_->Execute(kAddRecordTypeSql).status());
    SKIPPR_RETURN_IF_ERROR(database_->Execute(kCreateNamespacePropertiesSql).status());
    return transaction.Commit();
  }

  Status CreateNamespace(const std::string& namespace_name) override {
    SKIPPR_RETURN_IF_ERROR(CheckText("namespace", namespace_name, kMaxNameBytes));
    std::lock_guard<std::mutex> lock(mutex_);
    return database_->Execute(kCreateNamespaceSql, {catalog_name_, namespace_name}).status();
  }

  Status CreateTable(const TableIdentifier& table, const std::string& metadata_location) override {
    SKIPPR_RETURN_IF_ERROR(CheckTable(table));
    SKIPPR_RETURN_IF_ERROR(CheckText("metadata location", metadata_location, kMaxLocationBytes));
    std::lock_guard<std::mutex> lock(mutex_);
    SKIPPR_ASSIGN_OR_RETURN(Transaction transaction, Transaction::Begin(*database_));
    SKIPPR_ASSIGN_OR_RETURN(
        SqlRows namespace_rows,
        database_->Execute(kNamespaceExistsSql, {catalog_name_, table.table_namespace}));
    if (namespace_rows.rows.empty()) {
      return Status::NotFound(
          fmt::format("namespace '{}' does not exist in the {}; create it first",
                      table.table_namespace, description_));
    }
    Status inserted = database_
                          ->Execute(kInsertTableSql, {catalog_name_, table.table_namespace,
                                                      table.table_name, metadata_location})
                          .status();
    if (inserted.code() == StatusCode::kConflict) {
      return Status::Conflict(
          fmt::format("table {} already exists in the {} (a table or view of "
                      "that name)",
                      table.ToString(), description_));
    }
    SKIPPR_RETURN_IF_ERROR(inserted);
    return transaction.Commit();
  }

  Result<std::string> LoadTable(const TableIdentifier& table) override {
    SKIPPR_RETURN_IF_ERROR(CheckTable(table));
    std::lock_guard<std::mutex> lock(mutex_);
    SKIPPR_ASSIGN_OR_RETURN(std::optional<std::string> location, CurrentLocation(table));
    if (!location) {
      return Status::NotFound(
          fmt::format("table {} does not exist in the {}", table.ToString(), description_));
    }
    return *location;
  }

  Status CompareAndSwap(const TableIdentifier& table, const std::string& expected_location,
                        const std::string& new_location) override {
    SKIPPR_RETURN_IF_ERROR(CheckTable(table));
    SKIPPR_RETURN_IF_ERROR(
        CheckText("expected metadata location", expected_location, kMaxLocationBytes));
    SKIPPR_RETURN_IF_ERROR(CheckText("new metadata location", new_location, kMaxLocationBytes));
    std::lock_guard<std::mutex> lock(mutex_);
    SKIPPR_ASSIGN_OR_RETURN(Transaction transaction, Transaction::Begin(*database_));
    SKIPPR_ASSIGN_OR_RETURN(
        SqlRows swapped,
        database_->Execute(kSwapSql, {catalog_name_, table.table_namespace, table.table_name,
                                      expected_location, new_location}));
    if (swapped.changed_rows == 1) return transaction.Commit();
    if (swapped.changed_rows > 1) {
      return Status::Internal(fmt::format("the swap changed {} rows of {}; its primary key is gone",
                                          swapped.changed_rows, description_));
    }
    SKIPPR_ASSIGN_OR_RETURN(std::optional<std::string> actual_location, CurrentLocation(table));
    return LostSwap(table, expected_location, actual_location);
  }

  Result<std::vector<std::string>> ListTables(const std::string& namespace_name) override {
    SKIPPR_RETURN_IF_ERROR(CheckText("namespace", namespace_name, kMaxNameBytes));
    std::lock_guard<std::mutex> lock(mutex_);
    SKIPPR_ASSIGN_OR_RETURN(SqlRows found,
                            database_->Execute(kListTablesSql, {catalog_name_, namespace_name}));
    std::vector<std::string> names;
    for (auto& row : found.rows) names.push_back(row[0].value_or(""));
    return names;
  }

  const std::string& description() const override { return description_; }

 private:
  Result<std::optional<std::string>> CurrentLocation(const TableIdentifier& table) {
    SKIPPR_ASSIGN_OR_RETURN(SqlRows found,
                            database_->Execute(kLoadTableSql, {catalog_name_, table.table_namespace,
                                                               table.table_name}));
    if (found.rows.empty()) return std::optional<std::string>();
    if (!found.rows[0][0]) {
      return Status::Corruption(fmt::format("table {} in the {} has no metadata_location",
                                            table.ToString(), description_));
    }
    return found.rows[0][0];
  }

  Status LostSwap(const TableIdentifier& table, const std::string& expected_location,
                  const std::optional<std::string>& actual_location) const {
    if (!actual_location) {
      return Status::NotFound(
          fmt::format("cannot commit to table {}: it does not exist in the {} "
                      "(was it dropped?)",
                      table.ToString(), description_));
    }
    return Status::Conflict(fmt::format(
        "commit conflict on table {}: the {} points at {}, not at {} which this commit was based "
        "on; another writer committed first. Reload the table and retry",
        table.ToString(), description_, *actual_location, expected_location));
  }

  std::mutex mutex_;
  std::unique_ptr<SqlDatabase> database_;
  std::string catalog_name_;
  std::string description_;
};

bool IsPostgresUri(std::string_view uri) {
  return uri.starts_with("postgresql://") || uri.starts_with("postgres://");
}

Result<std::string> SqlitePath(const CatalogOptions& options) {
  if (!options.uri.empty()) {
    SKIPPR_ASSIGN_OR_RETURN(std::string path, EnvPathOfUri(options.uri));
    if (path.starts_with("s3://")) {
      return Status::InvalidArgument(
          "a catalog_uri names a PostgreSQL database (postgresql://...) or a local SQLite file "
          "(file:///path/x.db), not an object on S3");
    }
    return path;
  }
  if (options.warehouse.empty()) {
    return Status::InvalidArgument("the Iceberg catalog needs a warehouse (file:///path) or a uri");
  }
  SKIPPR_ASSIGN_OR_RETURN(std::string warehouse_path, EnvPathOfUri(options.warehouse));
  if (warehouse_path.starts_with("s3://")) {
    return Status::InvalidArgument(fmt::format(
        "warehouse {} is on S3, where no SQLite catalog can live: set catalog_table (a DynamoDB "
        "table) or catalog_uri (postgresql://...)",
        options.warehouse));
  }
  if (Status created = CreateDirectoriesDurably(*options.env, warehouse_path); !created.ok()) {
    return Status(created.code(), fmt::format("cannot create the warehouse directory {}: {}",
                                              warehouse_path, created.message()));
  }
  return fmt::format("{}/{}", warehouse_path == "/" ? "" : warehouse_path,
                     kDefaultSqliteCatalogFile);
}

}  // namespace

std::string TableIdentifier::ToString() const {
  return fmt::format("{}.{}", table_namespace, table_name);
}

Result<std::unique_ptr<Catalog>> OpenCatalog(const CatalogOptions& options) {
  SKIPPR_RETURN_IF_ERROR(CheckText("catalog name", options.catalog_name, kMaxNameBytes));
  if (!options.dynamodb_table.empty()) {
    if (!options.uri.empty()) {
      return Status::InvalidArgument(
          "a catalog is either a DynamoDB table (catalog_table) or a database (catalog_uri), not "
          "both");
    }
    return internal::OpenDynamoCatalog(options);
  }
  std::unique_ptr<SqlDatabase> database;
  if (IsPostgresUri(options.uri)) {
    SKIPPR_ASSIGN_OR_RETURN(database, internal::OpenPostgresDatabase(options.uri));
  } else {
    SKIPPR_ASSIGN_OR_RETURN(std::string path, SqlitePath(options));
    SKIPPR_ASSIGN_OR_RETURN(database, internal::OpenSqliteDatabase(path, options.busy_timeout_ms));
  }
  auto catalog =
      std::make_unique<SqlCatalog>(std::move(database), options.catalog_name, options.env);
  SKIPPR_RETURN_IF_ERROR(catalog->CreateCatalogTables());
  return std::unique_ptr<Catalog>(std::move(catalog));
}

}  // namespace skippr::iceberg
