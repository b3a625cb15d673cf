// Internal to sources/: a libpq connection as the PostgreSQL source uses it — settings parsed once
// from the connector, every failure a Status naming the server and what to do.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.hpp"
#include "core/status.hpp"

struct pg_conn;
struct pg_result;

namespace skippr::sources::postgres {

enum class CdcMode { kSnapshot, kSnapshotThenCdc, kCdcOnly };

// The `Postgres` data source's settings (docs/config.md), parsed once.
struct PostgresSettings {
  std::string source_name;  // data_sources.<name>, for messages
  std::string host = "localhost";
  int port = 5432;
  std::string user = "postgres";
  std::string password;           // resolved from ${ENV}
  std::string database;
  std::string connection_string;  // resolved from ${ENV}; snapshot reads only
  std::string sslmode = "prefer";
  std::string sslrootcert;
  std::vector<std::string> tables;  // empty: every table in public
  CdcMode cdc_mode = CdcMode::kSnapshot;
  std::string replication_slot_name = "skippr_slot";
  std::string publication_name = "skippr_publication";
  std::optional<int64_t> cdc_idle_timeout_seconds;
  std::optional<int64_t> heartbeat_interval_seconds;  // unset: no heartbeats
  uint64_t batch_size_rows = 10'000;
  int snapshot_parallelism = 1;

  static Result<PostgresSettings> FromConnector(const config::ConnectorConfig& connector);
  // "postgres@localhost:5432/shop" (never the password), for messages and logs.
  std::string Describe() const;
};

// A query result; frees itself.
class PgResult {
 public:
  explicit PgResult(pg_result* result) : result_(result) {}
  ~PgResult();
  PgResult(PgResult&& other) noexcept : result_(other.result_) { other.result_ = nullptr; }
  PgResult& operator=(PgResult&& other) noexcept;
  PgResult(const PgResult&) = delete;
  PgResult& operator=(const PgResult&) = delete;

  int rows() const;
  bool IsNull(int row, int column) const;
  std::string_view Text(int row, int column) const;
  int64_t Integer(int row, int column) const;  // a column of an integer type

 private:
  pg_result* result_;
};

class PgConnection {
 public:
  enum class Kind { kQuery, kReplication };
  // Connects with the settings' fields (or its connection_string, for queries), the session
  // options the decoder relies on (postgres_types.hpp) and `application_name` skipprd.
  static Result<std::unique_ptr<PgConnection>> Connect(const PostgresSettings& settings,
                                                       Kind kind = Kind::kQuery);
  ~PgConnection();
  PgConnection(const PgConnection&) = delete;
  PgConnection& operator=(const PgConnection&) = delete;

  // A statement with text parameters ($1, $2, ...); an error names `what` and the server's message.
  Result<PgResult> Query(std::string_view what, const std::string& sql,
                         const std::vector<std::string>& parameters = {});
  Status Execute(std::string_view what, const std::string& sql) {
    return Query(what, sql).status();
  }
  // COPY ... TO STDOUT: `on_message` gets each CopyData message as the server sends it (a row:
  // in text format its line with the newline, in binary format its tuple, the file header before
  // the first and the end marker last); returning false cancels the COPY on the server and
  // returns OK (a transaction the connection is in is then aborted).
  Status CopyOut(std::string_view what, const std::string& copy_sql,
                 const std::function<bool(std::string_view message)>& on_message);

  std::string QuoteIdentifier(std::string_view identifier) const;
  std::string QuoteLiteral(std::string_view literal) const;
  int server_version() const;  // 150004 for 15.4
  pg_conn* raw() { return connection_; }
  const std::string& description() const { return description_; }

 private:
  PgConnection(pg_conn* connection, std::string description)
      : connection_(connection), description_(std::move(description)) {}
  Status ServerError(std::string_view what, const pg_result* result) const;
  void CancelRunningStatement();

  pg_conn* connection_;
  std::string description_;
};

}  // namespace skippr::sources::postgres
