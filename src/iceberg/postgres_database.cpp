// The catalog's PostgreSQL connection (libpq). READ COMMITTED is enough for the catalog: its
// compare-and-swap is one UPDATE whose WHERE clause PostgreSQL re-checks against the newest row
// version after waiting for a concurrent writer, so exactly one of two racing swaps matches.
#include <fmt/format.h>
#include <libpq-fe.h>

#include <charconv>

#include "iceberg/internal/sql_database.hpp"

namespace skippr::iceberg::internal {
namespace {

// Any constant works: it only has to be the same in every skipprd.
constexpr std::string_view kLockCatalogSetupSql =
    "SELECT pg_advisory_xact_lock(7308332945738237549)";

std::string Trimmed(const char* text) {
  std::string trimmed = text != nullptr ? text : "";
  while (!trimmed.empty() && std::isspace(static_cast<unsigned char>(trimmed.back()))) {
    trimmed.pop_back();
  }
  return trimmed;
}

class PostgresDatabase final : public SqlDatabase {
 public:
  explicit PostgresDatabase(PGconn* connection)
      : connection_(connection),
        description_(fmt::format("PostgreSQL catalog {}@{}:{}/{}", PQuser(connection),
                                 PQhost(connection), PQport(connection), PQdb(connection))) {
    // NOTICEs ("relation already exists, skipping") are not for the user's terminal.
    PQsetNoticeProcessor(
        connection_, [](void*, const char*) {}, nullptr);
  }
  ~PostgresDatabase() override { PQfinish(connection_); }

  Result<SqlRows> Execute(std::string_view sql,
                          const std::vector<std::string>& parameters) override {
    // A connection lost outside a transaction is re-established; inside one it is an error (the
    // transaction is gone, and continuing on a new connection would silently split it).
    if (PQstatus(connection_) == CONNECTION_BAD && !is_in_transaction_) PQreset(connection_);
    std::vector<const char*> values;
    values.reserve(parameters.size());
    for (const std::string& parameter : parameters) values.push_back(parameter.c_str());
    std::unique_ptr<PGresult, void (*)(PGresult*)> result(
        PQexecParams(connection_, std::string(sql).c_str(), static_cast<int>(values.size()),
                     nullptr, values.data(), nullptr, nullptr, /*resultFormat=*/0),
        PQclear);
    const ExecStatusType status = PQresultStatus(result.get());
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) return Error(result.get(), sql);
    return ReadRows(result.get());
  }

  Status Begin() override {
    is_in_transaction_ = false;  // a fresh transaction may start on a re-established connection
    SKIPPR_RETURN_IF_ERROR(Execute("BEGIN", {}).status());
    is_in_transaction_ = true;
    return Status::OK();
  }
  Status Commit() override {
    Status committed = Execute("COMMIT", {}).status();
    is_in_transaction_ = false;
    return committed;
  }
  void Rollback() override {
    if (PQstatus(connection_) == CONNECTION_OK) (void)Execute("ROLLBACK", {});
    is_in_transaction_ = false;
  }

  Status LockCatalogSetup() override { return Execute(kLockCatalogSetupSql, {}).status(); }

  Result<bool> HasColumn(std::string_view table, std::string_view column) override {
    SKIPPR_ASSIGN_OR_RETURN(
        SqlRows found,
        Execute("SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema() "
                "AND table_name = $1 AND column_name = $2",
                {std::string(table), std::string(column)}));
    return !found.rows.empty();
  }

  const std::string& description() const override { return description_; }

 private:
  static SqlRows ReadRows(PGresult* result) {
    SqlRows rows;
    for (int row = 0; row < PQntuples(result); ++row) {
      std::vector<std::optional<std::string>>& values = rows.rows.emplace_back();
      for (int column = 0; column < PQnfields(result); ++column) {
        if (PQgetisnull(result, row, column)) {
          values.emplace_back();
        } else {
          values.emplace_back(std::string(PQgetvalue(result, row, column),
                                          static_cast<size_t>(PQgetlength(result, row, column))));
        }
      }
    }
    const std::string_view changed = PQcmdTuples(result);
    std::from_chars(changed.data(), changed.data() + changed.size(), rows.changed_rows);
    return rows;
  }

  Status Error(PGresult* result, std::string_view sql) const {
    const char* sqlstate_text = PQresultErrorField(result, PG_DIAG_SQLSTATE);
    const std::string sqlstate = sqlstate_text != nullptr ? sqlstate_text : "";
    const std::string reason =
        Trimmed(result != nullptr ? PQresultErrorMessage(result) : PQerrorMessage(connection_));
    const std::string message =
        fmt::format("{}: {} (while running: {})", description_, reason, sql);
    if (sqlstate == "23505") return Status::Conflict(message);  // unique_violation
    if (sqlstate == "53100") return Status::NoSpace(message + "; free disk space on the server");
    const bool is_transient = sqlstate == "40001" || sqlstate == "40P01" || sqlstate == "55P03" ||
                              sqlstate.rfind("08", 0) == 0 ||
                              PQstatus(connection_) == CONNECTION_BAD;
    if (is_transient) return Status::Unavailable(message + "; retry");
    return Status::IOError(message);
  }

  PGconn* connection_;
  std::string description_;
  bool is_in_transaction_ = false;
};

}  // namespace

Result<std::unique_ptr<SqlDatabase>> OpenPostgresDatabase(const std::string& uri) {
  PGconn* connection = PQconnectdb(uri.c_str());
  if (connection == nullptr) return Status::Internal("libpq could not allocate a connection");
  if (PQstatus(connection) != CONNECTION_OK) {
    // libpq's message names the host and the cause, never the password.
    const std::string reason = Trimmed(PQerrorMessage(connection));
    PQfinish(connection);
    return Status::Unavailable(
        fmt::format("cannot connect to the PostgreSQL catalog: {}; check the catalog uri and that "
                    "the server is running",
                    reason));
  }
  return std::unique_ptr<SqlDatabase>(std::make_unique<PostgresDatabase>(connection));
}

}  // namespace skippr::iceberg::internal
