// The catalog's SQLite connection: WAL journal (readers never block the writer), synchronous=FULL
// (a commit is on disk when COMMIT returns), and a busy timeout for the other writers' locks.
#include <fmt/format.h>
#include <sqlite3.h>

#include "iceberg/internal/sql_database.hpp"

namespace skippr::iceberg::internal {
namespace {

class SqliteDatabase final : public SqlDatabase {
 public:
  SqliteDatabase(sqlite3* db, std::string path, int busy_timeout_ms)
      : db_(db),
        path_(std::move(path)),
        description_(fmt::format("SQLite catalog {}", path_)),
        busy_timeout_ms_(busy_timeout_ms) {}
  ~SqliteDatabase() override { sqlite3_close_v2(db_); }

  Status Configure() {
    sqlite3_busy_timeout(db_, busy_timeout_ms_);
    SKIPPR_ASSIGN_OR_RETURN(SqlRows journal, Execute("PRAGMA journal_mode=WAL", {}));
    const bool is_wal = !journal.rows.empty() && journal.rows[0][0] == "wal";
    if (!is_wal) {
      return Status::NotSupported(fmt::format(
          "{}: SQLite cannot use its WAL journal here (a network filesystem?); put the warehouse "
          "on a local disk or use a PostgreSQL catalog",
          description_));
    }
    return Execute("PRAGMA synchronous=FULL", {}).status();
  }

  Result<SqlRows> Execute(std::string_view sql,
                          const std::vector<std::string>& parameters) override {
    sqlite3_stmt* raw_statement = nullptr;
    const int prepared =
        sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &raw_statement, nullptr);
    std::unique_ptr<sqlite3_stmt, int (*)(sqlite3_stmt*)> statement(raw_statement,
                                                                    sqlite3_finalize);
    if (prepared != SQLITE_OK) return Error(sql);
    SKIPPR_RETURN_IF_ERROR(Bind(statement.get(), parameters, sql));
    SqlRows result;
    int stepped = SQLITE_OK;
    while ((stepped = sqlite3_step(statement.get())) == SQLITE_ROW) {
      result.rows.push_back(ReadRow(statement.get()));
    }
    if (stepped != SQLITE_DONE) return Error(sql);
    result.changed_rows = sqlite3_changes64(db_);
    return result;
  }

  Status Begin() override { return Execute("BEGIN IMMEDIATE", {}).status(); }
  Status Commit() override {
    Status committed = Execute("COMMIT", {}).status();
    if (!committed.ok()) Rollback();  // a failed COMMIT can leave the transaction open
    return committed;
  }
  void Rollback() override {
    if (!sqlite3_get_autocommit(db_)) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }

  // BEGIN IMMEDIATE already holds the database's only write lock.
  Status LockCatalogSetup() override { return Status::OK(); }

  Result<bool> HasColumn(std::string_view table, std::string_view column) override {
    SKIPPR_ASSIGN_OR_RETURN(SqlRows found,
                            Execute("SELECT 1 FROM pragma_table_info($1) WHERE name = $2",
                                    {std::string(table), std::string(column)}));
    return !found.rows.empty();
  }

  const std::string& description() const override { return description_; }

 private:
  Status Bind(sqlite3_stmt* statement, const std::vector<std::string>& parameters,
              std::string_view sql) {
    for (size_t i = 0; i < parameters.size(); ++i) {
      const std::string name = fmt::format("${}", i + 1);
      const int index = sqlite3_bind_parameter_index(statement, name.c_str());
      if (index == 0) {
        return Status::Internal(fmt::format("SQL without parameter {}: {}", name, sql));
      }
      if (sqlite3_bind_text(statement, index, parameters[i].data(),
                            static_cast<int>(parameters[i].size()),
                            SQLITE_TRANSIENT) != SQLITE_OK) {
        return Error(sql);
      }
    }
    return Status::OK();
  }

  static std::vector<std::optional<std::string>> ReadRow(sqlite3_stmt* statement) {
    std::vector<std::optional<std::string>> row;
    for (int column = 0; column < sqlite3_column_count(statement); ++column) {
      if (sqlite3_column_type(statement, column) == SQLITE_NULL) {
        row.emplace_back();
        continue;
      }
      const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(statement, column));
      row.emplace_back(
          std::string(text, static_cast<size_t>(sqlite3_column_bytes(statement, column))));
    }
    return row;
  }

  Status Error(std::string_view sql) const {
    const int code = sqlite3_extended_errcode(db_);
    const std::string message =
        fmt::format("{}: {} (while running: {})", description_, sqlite3_errmsg(db_), sql);
    switch (code & 0xff) {
      case SQLITE_CONSTRAINT:
        if (code == SQLITE_CONSTRAINT_PRIMARYKEY || code == SQLITE_CONSTRAINT_UNIQUE) {
          return Status::Conflict(message);
        }
        return Status::IOError(message);
      case SQLITE_BUSY:
      case SQLITE_LOCKED:
        return Status::Unavailable(fmt::format(
            "{}; another connection held the lock for the whole busy timeout ({} ms): retry",
            message, busy_timeout_ms_));
      case SQLITE_FULL:
        return Status::NoSpace(message + "; free disk space");
      case SQLITE_CORRUPT:
      case SQLITE_NOTADB:
        return Status::Corruption(message +
                                  "; the catalog database is damaged: restore it from a "
                                  "backup");
      default:
        return Status::IOError(message);
    }
  }

  sqlite3* db_;
  std::string path_;
  std::string description_;
  int busy_timeout_ms_;
};

}  // namespace

Result<std::unique_ptr<SqlDatabase>> OpenSqliteDatabase(const std::string& path,
                                                        int busy_timeout_ms) {
  sqlite3* db = nullptr;
  const int opened =
      sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  if (opened != SQLITE_OK) {
    const std::string reason = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(opened);
    sqlite3_close_v2(db);
    return Status::IOError(fmt::format("cannot open the SQLite catalog {}: {}", path, reason));
  }
  auto database = std::make_unique<SqliteDatabase>(db, path, busy_timeout_ms);
  SKIPPR_RETURN_IF_ERROR(database->Configure());
  return std::unique_ptr<SqlDatabase>(std::move(database));
}

}  // namespace skippr::iceberg::internal
