#include "sources/postgres_connection.hpp"

#include <fmt/format.h>
#include <libpq-fe.h>

#include <charconv>

#include "core/check.hpp"
#include "sources/postgres_types.hpp"

namespace skippr::sources::postgres {

namespace {
std::string Trimmed(const char* message) {
  std::string text = message != nullptr ? message : "";
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}
}  // namespace

Result<PostgresSettings> PostgresSettings::FromConnector(const config::ConnectorConfig& connector) {
  PostgresSettings settings;
  const auto text = [&](const char* name, std::string& out) {
    if (connector.Has(name)) out = connector.GetString(name);
  };
  text("host", settings.host);
  if (connector.Has("port")) settings.port = static_cast<int>(connector.GetInteger("port"));
  text("user", settings.user);
  text("password", settings.password);
  text("database", settings.database);
  text("connection_string", settings.connection_string);
  text("sslmode", settings.sslmode);
  text("sslrootcert", settings.sslrootcert);
  if (connector.Has("tables")) settings.tables = connector.GetStringList("tables");
  if (connector.Has("cdc_mode")) {
    const std::string& mode = connector.GetString("cdc_mode");
    settings.cdc_mode = mode == "snapshot_then_cdc" ? CdcMode::kSnapshotThenCdc
                        : mode == "cdc_only"        ? CdcMode::kCdcOnly
                                                    : CdcMode::kSnapshot;
  }
  text("replication_slot_name", settings.replication_slot_name);
  text("publication_name", settings.publication_name);
  if (connector.Has("cdc_idle_timeout_seconds")) {
    settings.cdc_idle_timeout_seconds = connector.GetInteger("cdc_idle_timeout_seconds");
  }
  if (connector.Has("heartbeat_interval_seconds")) {
    settings.heartbeat_interval_seconds = connector.GetInteger("heartbeat_interval_seconds");
  }
  if (connector.Has("batch_size_rows")) {
    settings.batch_size_rows = static_cast<uint64_t>(connector.GetInteger("batch_size_rows"));
  }
  if (connector.Has("snapshot_parallelism")) {
    settings.snapshot_parallelism = static_cast<int>(connector.GetInteger("snapshot_parallelism"));
  }
  return settings;
}

std::string PostgresSettings::Describe() const {
  if (!connection_string.empty() && database.empty()) return "the server of connection_string";
  return fmt::format("{}@{}:{}/{}", user, host, port, database);
}

PgResult::~PgResult() {
  if (result_ != nullptr) PQclear(result_);
}

PgResult& PgResult::operator=(PgResult&& other) noexcept {
  if (this != &other) {
    if (result_ != nullptr) PQclear(result_);
    result_ = other.result_;
    other.result_ = nullptr;
  }
  return *this;
}

int PgResult::rows() const { return PQntuples(result_); }
bool PgResult::IsNull(int row, int column) const { return PQgetisnull(result_, row, column) != 0; }
std::string_view PgResult::Text(int row, int column) const {
  return {PQgetvalue(result_, row, column),
          static_cast<size_t>(PQgetlength(result_, row, column))};
}
int64_t PgResult::Integer(int row, int column) const {
  const std::string_view text = Text(row, column);
  int64_t value = 0;
  std::from_chars(text.data(), text.data() + text.size(), value);
  return value;
}

Result<std::unique_ptr<PgConnection>> PgConnection::Connect(const PostgresSettings& settings,
                                                            Kind kind) {
  std::vector<const char*> keywords;
  std::vector<const char*> values;
  const std::string port = std::to_string(settings.port);
  const bool use_string = kind == Kind::kQuery && !settings.connection_string.empty();
  if (use_string) {
    // expand_dbname: the string's own settings, then those below on top.
    keywords.push_back("dbname");
    values.push_back(settings.connection_string.c_str());
  } else {
    keywords.insert(keywords.end(), {"host", "port", "user", "dbname", "sslmode"});
    values.insert(values.end(), {settings.host.c_str(), port.c_str(), settings.user.c_str(),
                                 settings.database.c_str(), settings.sslmode.c_str()});
    if (!settings.password.empty()) {
      keywords.push_back("password");
      values.push_back(settings.password.c_str());
    }
    if (!settings.sslrootcert.empty()) {
      keywords.push_back("sslrootcert");
      values.push_back(settings.sslrootcert.c_str());
    }
  }
  keywords.insert(keywords.end(), {"options", "application_name", "connect_timeout"});
  values.insert(values.end(), {kPostgresSessionOptions, "skipprd", "30"});
  if (kind == Kind::kReplication) {
    keywords.push_back("replication");
    values.push_back("database");
  }
  keywords.push_back(nullptr);
  values.push_back(nullptr);
  pg_conn* connection = PQconnectdbParams(keywords.data(), values.data(), use_string ? 1 : 0);
  const std::string description = settings.Describe();
  if (connection == nullptr) {
    return Status::Unavailable(
        fmt::format("cannot connect to PostgreSQL {}: out of memory", description));
  }
  if (PQstatus(connection) != CONNECTION_OK) {
    const std::string message = Trimmed(PQerrorMessage(connection));
    PQfinish(connection);
    return Status::Unavailable(fmt::format(
        "data_sources.{}: cannot connect to PostgreSQL {}: {}; check host, port, user, database, "
        "the password's environment variable, sslmode and the server's pg_hba.conf",
        settings.source_name, description, message));
  }
  return std::unique_ptr<PgConnection>(new PgConnection(connection, description));
}

PgConnection::~PgConnection() { PQfinish(connection_); }

Status PgConnection::ServerError(std::string_view what, const pg_result* result) const {
  std::string message = Trimmed(result != nullptr ? PQresultErrorMessage(result) : nullptr);
  if (message.empty()) message = Trimmed(PQerrorMessage(connection_));
  const char* state = result != nullptr ? PQresultErrorField(result, PG_DIAG_SQLSTATE) : nullptr;
  const std::string code = state != nullptr ? state : "";
  // 42501 insufficient_privilege; 42P01 undefined_table: the user's to fix, not a transient fault.
  const std::string text = fmt::format("PostgreSQL {}: {} failed: {}", description_, what, message);
  if (code == "42501") return Status::InvalidConfig(text + "; grant the privilege named above");
  if (code.rfind("42", 0) == 0) return Status::InvalidConfig(text);
  return Status::IOError(text);
}

Result<PgResult> PgConnection::Query(std::string_view what, const std::string& sql,
                                     const std::vector<std::string>& parameters) {
  std::vector<const char*> values;
  values.reserve(parameters.size());
  for (const std::string& parameter : parameters) values.push_back(parameter.c_str());
  // Without parameters, the simple query protocol: a replication connection knows no other.
  pg_result* raw = values.empty()
                       ? PQexec(connection_, sql.c_str())
                       : PQexecParams(connection_, sql.c_str(), static_cast<int>(values.size()),
                                      nullptr, values.data(), nullptr, nullptr, 0);
  PgResult owned(raw);
  const ExecStatusType status = raw != nullptr ? PQresultStatus(raw) : PGRES_FATAL_ERROR;
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) return ServerError(what, raw);
  return owned;
}

Status PgConnection::CopyOut(std::string_view what, const std::string& copy_sql,
                             const std::function<bool(std::string_view message)>& on_message) {
  {
    pg_result* raw = PQexec(connection_, copy_sql.c_str());
    PgResult owned(raw);
    if (raw == nullptr || PQresultStatus(raw) != PGRES_COPY_OUT) return ServerError(what, raw);
  }
  bool stopped = false;
  while (true) {
    char* buffer = nullptr;
    const int length = PQgetCopyData(connection_, &buffer, 0);
    if (length == -1) break;  // done: the final result follows
    if (length < 0) {
      if (stopped) break;  // the cancel below ended the COPY
      return ServerError(what, nullptr);
    }
    const bool go_on =
        stopped || on_message(std::string_view(buffer, static_cast<size_t>(length)));
    PQfreemem(buffer);
    if (!go_on && !stopped) {
      // libpq cannot abandon a COPY mid-stream: ask the server to cancel it, then drain what it
      // sent before the cancel arrived.
      stopped = true;
      CancelRunningStatement();
    }
  }
  Status failure;
  while (pg_result* raw = PQgetResult(connection_)) {
    PgResult owned(raw);
    if (PQresultStatus(raw) != PGRES_COMMAND_OK && failure.ok() && !stopped) {
      failure = ServerError(what, raw);
    }
  }
  return failure;
}

void PgConnection::CancelRunningStatement() {
  PGcancel* cancel = PQgetCancel(connection_);
  if (cancel == nullptr) return;
  char error[256];
  PQcancel(cancel, error, sizeof(error));  // best effort: draining ends the COPY either way
  PQfreeCancel(cancel);
}

std::string PgConnection::QuoteIdentifier(std::string_view identifier) const {
  char* quoted = PQescapeIdentifier(connection_, identifier.data(), identifier.size());
  SKIPPR_CHECK(quoted != nullptr);
  std::string text(quoted);
  PQfreemem(quoted);
  return text;
}

std::string PgConnection::QuoteLiteral(std::string_view literal) const {
  char* quoted = PQescapeLiteral(connection_, literal.data(), literal.size());
  SKIPPR_CHECK(quoted != nullptr);
  std::string text(quoted);
  PQfreemem(quoted);
  return text;
}

int PgConnection::server_version() const { return PQserverVersion(connection_); }

}  // namespace skippr::sources::postgres
