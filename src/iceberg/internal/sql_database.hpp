// The little SQL the catalog needs, over SQLite or PostgreSQL. Statements name their parameters
// $1, $2, ... on both; every value travels as text.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.hpp"

namespace skippr::iceberg::internal {

struct SqlRows {
  std::vector<std::vector<std::optional<std::string>>> rows;  // nullopt: SQL NULL
  int64_t changed_rows = 0;  // rows an INSERT / UPDATE / DELETE changed
};

// One connection; not thread-safe (the catalog serialises its calls).
class SqlDatabase {
 public:
  virtual ~SqlDatabase() = default;

  // Errors: Conflict for a unique-key violation, Unavailable for lock timeouts and lost
  // connections, NoSpace for a full disk, Corruption for a damaged database, IOError otherwise.
  virtual Result<SqlRows> Execute(std::string_view sql,
                                  const std::vector<std::string>& parameters = {}) = 0;

  // A write transaction. SQLite takes its write lock here (BEGIN IMMEDIATE), so a transaction
  // that reads before it writes never fails on the lock upgrade.
  virtual Status Begin() = 0;
  virtual Status Commit() = 0;
  virtual void Rollback() = 0;  // best effort; the transaction is over either way

  // Inside a transaction: waits until no other connection is creating the catalog tables.
  virtual Status LockCatalogSetup() = 0;
  virtual Result<bool> HasColumn(std::string_view table, std::string_view column) = 0;

  // "SQLite catalog /wh/skippr_catalog.db", "PostgreSQL catalog postgres@127.0.0.1:5432/db".
  virtual const std::string& description() const = 0;
};

Result<std::unique_ptr<SqlDatabase>> OpenSqliteDatabase(const std::string& path,
                                                        int busy_timeout_ms);

// `uri`: a libpq connection URI (postgresql://user:password@host:port/database?options).
Result<std::unique_ptr<SqlDatabase>> OpenPostgresDatabase(const std::string& uri);

}  // namespace skippr::iceberg::internal
