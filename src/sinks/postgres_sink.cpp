// The Postgres sink: landings as PostgreSQL transactions, rows loaded with COPY.
//
// The landing's batches are read through DuckDB (the same wal_scan view every sink reads), each
// column rendered as PostgreSQL's text input for its column type, and streamed to COPY ... FROM
// STDIN as they come: nothing holds the landing's rows as text. DDL is transactional in
// PostgreSQL, so the table's evolution, the rows and the landing's row commit together.
#include "sinks/internal/postgres_sink.hpp"

#include <fmt/format.h>
#include <libpq-fe.h>
#include <spdlog/spdlog.h>

#include <charconv>
#include <cstring>
#include <map>

#include "core/check.hpp"
#include "core/crash.hpp"
#include "sinks/internal/landing_sql.hpp"

namespace skippr::sinks::internal {

namespace {

using query::QuoteIdentifier;
using query::QuoteLiteral;

constexpr std::string_view kStagingTable = "skippr_staging";
// The engine's name for a stream's batches (wal_scan's pipeline argument).
constexpr std::string_view kStreamPipeline = "skippr_stream";
// COPY data is sent in pieces of about this size.
constexpr size_t kCopyChunkBytes = 1 << 20;

struct PgRows {
  std::vector<std::vector<std::optional<std::string>>> rows;
  int64_t affected = 0;  // rows an INSERT, UPDATE, DELETE or COPY touched
};

std::string ErrorText(const PGconn* connection) {
  std::string text = PQerrorMessage(connection);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

}  // namespace

// One libpq connection; every failure names the server and the statement.
class PostgresConnection {
 public:
  static Result<std::unique_ptr<PostgresConnection>> Connect(const PostgresSink::Settings& settings,
                                                             const std::string& setting) {
    const std::string port = std::to_string(settings.port);
    std::vector<const char*> keywords = {
        "host", "port", "user", "dbname", "sslmode", "application_name", "connect_timeout"};
    std::vector<const char*> values = {settings.host.c_str(),
                                       port.c_str(),
                                       settings.user.c_str(),
                                       settings.database.c_str(),
                                       settings.sslmode.c_str(),
                                       "skipprd",
                                       "10"};
    if (!settings.password.empty()) {
      keywords.push_back("password");
      values.push_back(settings.password.c_str());
    }
    keywords.push_back(nullptr);
    values.push_back(nullptr);
    PGconn* connection = PQconnectdbParams(keywords.data(), values.data(), 0);
    if (PQstatus(connection) != CONNECTION_OK) {
      const std::string error = ErrorText(connection);
      PQfinish(connection);
      return Status::Unavailable(fmt::format(
          "{}: cannot connect to PostgreSQL {}: {}; check host, port, user, the password's "
          "environment variable, sslmode and the server's pg_hba.conf",
          setting, settings.Describe(), error));
    }
    PQsetNoticeProcessor(
        connection, [](void*, const char*) {}, nullptr);
    return std::unique_ptr<PostgresConnection>(
        new PostgresConnection(connection, settings.Describe()));
  }

  ~PostgresConnection() { PQfinish(connection_); }

  // Without parameters `sql` may be several statements (the last one's result comes back).
  Result<PgRows> Execute(const std::string& sql, const std::vector<std::string>& parameters = {}) {
    std::vector<const char*> values;
    for (const std::string& parameter : parameters) values.push_back(parameter.c_str());
    std::unique_ptr<PGresult, void (*)(PGresult*)> result(
        parameters.empty() ? PQexec(connection_, sql.c_str())
                           : PQexecParams(connection_, sql.c_str(), static_cast<int>(values.size()),
                                          nullptr, values.data(), nullptr, nullptr, 0),
        PQclear);
    const ExecStatusType status = PQresultStatus(result.get());
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
      return Failed(result.get(), sql);
    }
    PgRows rows;
    for (int row = 0; row < PQntuples(result.get()); ++row) {
      auto& values_out = rows.rows.emplace_back();
      for (int column = 0; column < PQnfields(result.get()); ++column) {
        values_out.push_back(
            PQgetisnull(result.get(), row, column)
                ? std::nullopt
                : std::optional<std::string>(PQgetvalue(result.get(), row, column)));
      }
    }
    const char* affected = PQcmdTuples(result.get());
    if (affected != nullptr && *affected != '\0') {
      std::from_chars(affected, affected + std::strlen(affected), rows.affected);
    }
    return rows;
  }

  Status BeginCopy(const std::string& sql) {
    std::unique_ptr<PGresult, void (*)(PGresult*)> result(PQexec(connection_, sql.c_str()),
                                                          PQclear);
    if (PQresultStatus(result.get()) != PGRES_COPY_IN) return Failed(result.get(), sql).status();
    copy_sql_ = sql;
    return Status::OK();
  }
  Status PutCopyData(std::string_view data) {
    if (PQputCopyData(connection_, data.data(), static_cast<int>(data.size())) != 1) {
      return Status::Unavailable(fmt::format("PostgreSQL {}: sending COPY data failed: {}",
                                             description_, ErrorText(connection_)));
    }
    return Status::OK();
  }
  // Ends the COPY (with `failure` as the reason when it is not OK) and returns its rows.
  Result<int64_t> EndCopy(const Status& failure) {
    const std::string reason(failure.message());
    if (PQputCopyEnd(connection_, failure.ok() ? nullptr : reason.c_str()) != 1) {
      return Status::Unavailable(fmt::format("PostgreSQL {}: ending COPY failed: {}", description_,
                                             ErrorText(connection_)));
    }
    std::unique_ptr<PGresult, void (*)(PGresult*)> result(PQgetResult(connection_), PQclear);
    while (PGresult* extra = PQgetResult(connection_)) PQclear(extra);
    SKIPPR_RETURN_IF_ERROR(failure);
    if (PQresultStatus(result.get()) != PGRES_COMMAND_OK) {
      return Failed(result.get(), copy_sql_).status();
    }
    int64_t rows = 0;
    const char* affected = PQcmdTuples(result.get());
    std::from_chars(affected, affected + std::strlen(affected), rows);
    return rows;
  }

  void Rollback() {
    if (PQstatus(connection_) == CONNECTION_OK &&
        PQtransactionStatus(connection_) != PQTRANS_IDLE) {
      (void)Execute("ROLLBACK");
    }
  }
  // A connection lost between landings is opened again (the next landing is a new transaction).
  void ResetIfLost() {
    if (PQstatus(connection_) == CONNECTION_BAD) PQreset(connection_);
  }

 private:
  PostgresConnection(PGconn* connection, std::string description)
      : connection_(connection), description_(std::move(description)) {}

  Result<PgRows> Failed(const PGresult* result, const std::string& sql) const {
    const char* state = PQresultErrorField(result, PG_DIAG_SQLSTATE);
    std::string message = PQresultErrorMessage(result);
    while (!message.empty() && (message.back() == '\n' || message.back() == ' '))
      message.pop_back();
    if (message.empty()) message = ErrorText(connection_);
    const std::string statement = sql.size() > 300 ? sql.substr(0, 300) + "..." : sql;
    return Status::Unavailable(fmt::format("PostgreSQL {}: {} (SQLSTATE {}) in: {}", description_,
                                           message, state != nullptr ? state : "?", statement));
  }

  PGconn* connection_;
  std::string description_;
  std::string copy_sql_;
};

namespace {

bool IsArrayElement(const LogicalType& type) {
  return !type.is_nested() && type.id() != TypeId::kBinary;
}

// PostgreSQL's type for a field, spelled as format_type() spells it (so that evolution can
// compare): decimals stay exact, timestamps keep their zone, a list of scalars is an array, and
// nested structs and maps (or lists of them) are jsonb.
std::string PostgresType(const LogicalType& type) {
  switch (type.id()) {
    case TypeId::kBoolean:
      return "boolean";
    case TypeId::kInt:
      return "integer";
    case TypeId::kLong:
      return "bigint";
    case TypeId::kFloat:
      return "real";
    case TypeId::kDouble:
      return "double precision";
    case TypeId::kDecimal:
      return fmt::format("numeric({},{})", type.decimal_precision(), type.decimal_scale());
    case TypeId::kDate:
      return "date";
    case TypeId::kTime:
      return "time without time zone";
    case TypeId::kTimestamp:
      return "timestamp without time zone";
    case TypeId::kTimestampTz:
      return "timestamp with time zone";
    case TypeId::kString:
      return "text";
    case TypeId::kBinary:
      return "bytea";
    case TypeId::kUuid:
      return "uuid";
    case TypeId::kList: {
      const LogicalType& element = type.children().at(0).type;
      return IsArrayElement(element) ? PostgresType(element) + "[]" : "jsonb";
    }
    case TypeId::kStruct:
    case TypeId::kMap:
      return "jsonb";
  }
  return "text";
}

// DuckDB SQL rendering `column` as PostgreSQL's text input for PostgresType(type); NULL stays NULL.
std::string PostgresText(const LogicalType& type, const std::string& column) {
  switch (type.id()) {
    case TypeId::kBinary:
      return fmt::format("'\\x' || hex({})", column);
    case TypeId::kStruct:
    case TypeId::kMap:
      return fmt::format("CAST(to_json({}) AS VARCHAR)", column);
    case TypeId::kList: {
      if (!IsArrayElement(type.children().at(0).type)) {
        return fmt::format("CAST(to_json({}) AS VARCHAR)", column);
      }
      // An array literal: each element double-quoted with \ and " escaped, NULL unquoted.
      return fmt::format(
          "CASE WHEN {0} IS NOT NULL THEN '{{' || coalesce(array_to_string(list_transform({0}, x "
          "-> CASE WHEN x IS NULL THEN 'NULL' ELSE '\"' || replace(replace(CAST(x AS VARCHAR), "
          "'\\', '\\\\'), '\"', '\\\"') || '\"' END), ','), '') || '}}' END",
          column);
    }
    default:
      return fmt::format("CAST({} AS VARCHAR)", column);
  }
}

// COPY's text format: \ and the row and column separators escaped, NULL as \N.
Status AppendCopyValue(std::string& out, std::optional<std::string_view> value,
                       std::string_view column) {
  if (!value) {
    out += "\\N";
    return Status::OK();
  }
  for (char c : *value) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\0':
        return Status::InvalidArgument(fmt::format(
            "column '{}' holds a NUL character, which PostgreSQL text cannot store; drop or "
            "replace it with transform.ops",
            column));
      default:
        out += c;
    }
  }
  return Status::OK();
}

// Streams a statement's rows into a COPY as DuckDB produces them.
class CopyWriter final : public query::ResultWriter {
 public:
  explicit CopyWriter(PostgresConnection& connection) : connection_(connection) {}
  Status Begin(const std::vector<std::string>& header, const std::vector<std::string>&) override {
    header_ = header;
    return Status::OK();
  }
  Status Write(const query::ResultRows& rows) override {
    for (size_t row = 0; row < rows.size(); ++row) {
      for (size_t column = 0; column < header_.size(); ++column) {
        if (column > 0) buffer_ += '\t';
        SKIPPR_RETURN_IF_ERROR(AppendCopyValue(buffer_, rows.Value(row, column), header_[column]));
      }
      buffer_ += '\n';
    }
    return buffer_.size() >= kCopyChunkBytes ? Flush() : Status::OK();
  }
  Status End() override { return Flush(); }

 private:
  Status Flush() {
    if (buffer_.empty()) return Status::OK();
    SKIPPR_RETURN_IF_ERROR(connection_.PutCopyData(buffer_));
    buffer_.clear();
    return Status::OK();
  }
  PostgresConnection& connection_;
  std::vector<std::string> header_;
  std::string buffer_;
};

// PostgreSQL cuts identifiers at 63 bytes (NAMEDATALEN - 1) without a word: a longer table or
// column name would land under another name, and never be found again by its own.
constexpr size_t kMaxIdentifierBytes = 63;

Status CheckIdentifierLengths(const schema::NamespaceSchema& namespace_schema) {
  const std::string tombstones = std::string(kTombstonesPrefix) + namespace_schema.name;
  if (tombstones.size() > kMaxIdentifierBytes) {
    return Status::InvalidArgument(fmt::format(
        "namespace '{}' is too long for a PostgreSQL table name ({} bytes; the sink's tables "
        "'<namespace>' and '{}<namespace>' must fit in {} bytes, so at most {}); shorten it, or "
        "land it in another sink",
        namespace_schema.name, namespace_schema.name.size(), kTombstonesPrefix,
        kMaxIdentifierBytes, kMaxIdentifierBytes - kTombstonesPrefix.size()));
  }
  for (const Field& field : namespace_schema.fields) {
    if (field.name.size() <= kMaxIdentifierBytes) continue;
    return Status::InvalidArgument(fmt::format(
        "namespace '{}': field '{}' is {} bytes, longer than a PostgreSQL column name may be "
        "({}); rename it with transform.ops (rename), or land it in another sink",
        namespace_schema.name, field.name, field.name.size(), kMaxIdentifierBytes));
  }
  return Status::OK();
}

// Key columns are NOT NULL (the table's primary key): `=` lets PostgreSQL use its index.
std::string KeysEqual(const std::vector<std::string>& keys, std::string_view left,
                      std::string_view right) {
  return KeysCompared(keys, left, right, "=");
}

// The namespace's columns as PostgreSQL text, in field order, for a SELECT list.
std::string RenderedColumns(const schema::NamespaceSchema& namespace_schema) {
  std::vector<std::string> rendered;
  for (const Field& field : namespace_schema.fields) {
    rendered.push_back(PostgresText(field.type, QuoteIdentifier(field.name)));
  }
  return fmt::format("{}", fmt::join(rendered, ", "));
}

std::vector<std::string> FieldNames(const schema::NamespaceSchema& namespace_schema) {
  std::vector<std::string> names;
  for (const Field& field : namespace_schema.fields) names.push_back(field.name);
  return names;
}

}  // namespace

std::string PostgresSink::Settings::Describe() const {
  return fmt::format("{}@{}:{}/{}, schema {}", user, host, port, database, schema);
}

PostgresSink::Settings PostgresSink::SettingsOf(const config::ConnectorConfig& entry) {
  Settings settings;
  if (entry.Has("host")) settings.host = entry.GetString("host");
  if (entry.Has("port")) settings.port = entry.GetInteger("port");
  settings.user = entry.GetString("user");
  if (entry.Has("password")) settings.password = entry.GetString("password");
  settings.database = entry.GetString("database");
  if (entry.Has("schema")) settings.schema = entry.GetString("schema");
  if (entry.Has("sslmode")) settings.sslmode = entry.GetString("sslmode");
  return settings;
}

Capabilities PostgresSink::KindCapabilities() {
  return Capabilities{
      .write_policies = {WritePolicy::kAppend, WritePolicy::kReplaceTable,
                         WritePolicy::kMergeByKey},
      .lands_final_state = true,
      .streams = true,
      .streams_replacing = false,
      .is_transactional = true,
  };
}

PostgresSink::PostgresSink(SinkContext context, Settings settings,
                           std::unique_ptr<PostgresConnection> connection,
                           std::unique_ptr<query::Engine> engine)
    : capabilities_(KindCapabilities()),
      context_(std::move(context)),
      settings_(std::move(settings)),
      connection_(std::move(connection)),
      engine_(std::move(engine)) {}

PostgresSink::~PostgresSink() = default;

void PostgresSink::AbandonStream() {
  if (!stream_) return;
  // Written and never landed (the pass ended first): its slices land in a later round.
  connection_->Rollback();
  stream_.reset();
}

Result<std::unique_ptr<Sink>> PostgresSink::Open(const SinkContext& context,
                                                 const config::ConnectorConfig& entry,
                                                 const std::string& setting) {
  Settings settings = SettingsOf(entry);
  SKIPPR_ASSIGN_OR_RETURN(std::unique_ptr<PostgresConnection> connection,
                          PostgresConnection::Connect(settings, setting));
  SKIPPR_ASSIGN_OR_RETURN(std::unique_ptr<query::Engine> engine,
                          query::Engine::Open({.checks_table_names = false}));
  std::unique_ptr<PostgresSink> sink(
      new PostgresSink(context, std::move(settings), std::move(connection), std::move(engine)));
  SKIPPR_RETURN_IF_ERROR(sink->CreateBookkeeping());
  return std::unique_ptr<Sink>(std::move(sink));
}

std::string PostgresSink::Table(std::string_view name) const {
  return fmt::format("{}.{}", QuoteIdentifier(settings_.schema), QuoteIdentifier(name));
}

Status PostgresSink::CreateBookkeeping() {
  // Two sinks may start at once: the first creates, the other waits on the lock and finds them.
  return connection_
      ->Execute(fmt::format(
          "BEGIN; SELECT pg_advisory_xact_lock(7308332945738237550); "
          "CREATE SCHEMA IF NOT EXISTS {0}; "
          "CREATE TABLE IF NOT EXISTS {1} (landing_id text PRIMARY KEY, table_name text NOT NULL, "
          "pipeline text NOT NULL, pipeline_instance text NOT NULL, wal_segment_ids text NOT "
          "NULL, rows bigint NOT NULL, landed_at timestamptz NOT NULL DEFAULT now()); "
          "CREATE TABLE IF NOT EXISTS {2} (table_name text PRIMARY KEY, order_token bytea NOT "
          "NULL); COMMIT",
          QuoteIdentifier(settings_.schema), Table(kLandingsTable), Table(kTruncatesTable)))
      .status();
}

Result<int64_t> PostgresSink::LandingCount(const std::string& namespace_name) {
  SKIPPR_ASSIGN_OR_RETURN(
      const PgRows counted,
      connection_->Execute(
          fmt::format("SELECT count(*) FROM {} WHERE table_name = $1", Table(kLandingsTable)),
          {namespace_name}));
  return std::stoll(*counted.rows.at(0).at(0));
}

Result<bool> PostgresSink::IsLanded(const std::string& namespace_name,
                                    const std::string& landing_id) {
  connection_->ResetIfLost();
  SKIPPR_ASSIGN_OR_RETURN(
      const PgRows found,
      connection_->Execute(fmt::format("SELECT 1 FROM {} WHERE landing_id = $1 AND table_name = $2",
                                       Table(kLandingsTable)),
                           {landing_id, namespace_name}));
  return !found.rows.empty();
}

// Creates the table (its key as primary key), or adds the columns it lacks and widens the ones the
// schema widened. Inside the landing's transaction.
Status PostgresSink::EvolveTable(const schema::NamespaceSchema& namespace_schema,
                                 const std::vector<std::string>& key_columns,
                                 bool keeps_order_tokens) {
  SKIPPR_RETURN_IF_ERROR(CheckIdentifierLengths(namespace_schema));
  const std::string table = Table(namespace_schema.name);
  std::vector<std::string> columns;
  for (const Field& field : namespace_schema.fields) {
    columns.push_back(QuoteIdentifier(field.name) + " " + PostgresType(field.type));
  }
  if (keeps_order_tokens) columns.push_back(QuoteIdentifier(kOrderTokenColumn) + " bytea");
  if (!key_columns.empty())
    columns.push_back(fmt::format("PRIMARY KEY ({})", QuotedList(key_columns)));
  SKIPPR_RETURN_IF_ERROR(connection_
                             ->Execute(fmt::format("CREATE TABLE IF NOT EXISTS {} ({})", table,
                                                   fmt::join(columns, ", ")))
                             .status());
  SKIPPR_ASSIGN_OR_RETURN(
      const PgRows present,
      connection_->Execute("SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
                           "WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped",
                           {table}));
  std::map<std::string, std::string> present_types;
  for (const auto& row : present.rows) present_types[*row[0]] = *row[1];
  if (keeps_order_tokens && !present_types.contains(std::string(kOrderTokenColumn))) {
    SKIPPR_RETURN_IF_ERROR(connection_
                               ->Execute(fmt::format("ALTER TABLE {} ADD COLUMN {} bytea", table,
                                                     QuoteIdentifier(kOrderTokenColumn)))
                               .status());
  }
  for (const Field& field : namespace_schema.fields) {
    const std::string type = PostgresType(field.type);
    auto existing = present_types.find(field.name);
    std::string statement;
    if (existing == present_types.end()) {
      statement =
          fmt::format("ALTER TABLE {} ADD COLUMN {} {}", table, QuoteIdentifier(field.name), type);
    } else if (existing->second != type) {
      statement = fmt::format("ALTER TABLE {0} ALTER COLUMN {1} TYPE {2} USING {1}::{2}", table,
                              QuoteIdentifier(field.name), type);
    } else {
      continue;
    }
    if (Result<PgRows> altered = connection_->Execute(statement); !altered.ok()) {
      return Status::InvalidArgument(fmt::format(
          "the PostgreSQL table {}.{} ({}) cannot take column '{}' as {}{}: {}", settings_.schema,
          namespace_schema.name, settings_.Describe(), field.name, type,
          existing == present_types.end() ? "" : fmt::format(" (it is {})", existing->second),
          altered.status().message()));
    }
  }
  return Status::OK();
}

Result<int64_t> PostgresSink::CopyRows(const std::string& select_sql, const std::string& table,
                                       const std::vector<std::string>& columns) {
  SKIPPR_RETURN_IF_ERROR(
      connection_->BeginCopy(fmt::format("COPY {} ({}) FROM STDIN", table, QuotedList(columns))));
  CopyWriter writer(*connection_);
  const Status streamed = engine_->Stream(select_sql, writer);
  return connection_->EndCopy(streamed);
}

Result<LandingOutcome> PostgresSink::Land(
    const Landing& landing, const schema::NamespaceSchema& namespace_schema,
    const std::vector<std::shared_ptr<const Batch>>& batches) {
  SKIPPR_CHECK(landing.namespace_name == namespace_schema.name);
  int64_t rows = 0;
  for (const auto& batch : batches) rows += batch->num_rows;
  AbandonStream();
  connection_->ResetIfLost();
  SKIPPR_RETURN_IF_ERROR(connection_->Execute("BEGIN").status());
  Result<LandingOutcome> outcome = [&]() -> Result<LandingOutcome> {
    SKIPPR_ASSIGN_OR_RETURN(const bool was_landed,
                            IsLanded(landing.namespace_name, landing.landing_id));
    if (was_landed) {
      SKIPPR_ASSIGN_OR_RETURN(const int64_t version, LandingCount(landing.namespace_name));
      return LandingOutcome{{settings_.Describe(), version}, true, rows, 0, 0};
    }
    SKIPPR_RETURN_IF_ERROR(RegisterLanding(*engine_, namespace_schema, batches));
    const bool keeps_order_tokens = !landing.key_columns.empty() && CarriesOrderTokens(batches);
    SKIPPR_RETURN_IF_ERROR(EvolveTable(namespace_schema, landing.key_columns, keeps_order_tokens));
    LandingOutcome landed;
    if (landing.key_columns.empty()) {
      if (landing.replaces_table) {
        SKIPPR_RETURN_IF_ERROR(
            connection_->Execute("TRUNCATE " + Table(landing.namespace_name)).status());
      }
      SKIPPR_ASSIGN_OR_RETURN(landed.rows_written, CopyIntoTable(namespace_schema));
    } else {
      SKIPPR_ASSIGN_OR_RETURN(landed, Merge(landing, namespace_schema, keeps_order_tokens));
    }
    return Commit(landing, rows, landed);
  }();
  if (!outcome.ok() || outcome->was_landed_before) connection_->Rollback();
  return outcome;
}

Result<LandingOutcome> PostgresSink::Commit(const Landing& landing, int64_t rows,
                                            LandingOutcome landed) {
  landed.rows = rows;
  const std::vector<uint64_t> segment_ids = landing.SegmentIds();
  SKIPPR_RETURN_IF_ERROR(
      connection_
          ->Execute(fmt::format("INSERT INTO {} (landing_id, table_name, pipeline, "
                                "pipeline_instance, wal_segment_ids, rows) VALUES ($1, $2, $3, "
                                "$4, $5, $6)",
                                Table(kLandingsTable)),
                    {landing.landing_id, landing.namespace_name, context_.pipeline,
                     context_.pipeline_instance, fmt::format("{}", fmt::join(segment_ids, ",")),
                     std::to_string(rows)})
          .status());
  SKIPPR_ASSIGN_OR_RETURN(landed.commit.version, LandingCount(landing.namespace_name));
  landed.commit.location = settings_.Describe();
  CrashPoint("postgres_sink.before_commit");
  SKIPPR_RETURN_IF_ERROR(connection_->Execute("COMMIT").status());
  CrashPoint("postgres_sink.after_commit");
  return landed;
}

Result<int64_t> PostgresSink::WriteStream(const schema::NamespaceSchema& namespace_schema,
                                          StreamedBatches next) {
  AbandonStream();
  connection_->ResetIfLost();
  SKIPPR_RETURN_IF_ERROR(connection_->Execute("BEGIN").status());
  Result<int64_t> rows = [&]() -> Result<int64_t> {
    SKIPPR_RETURN_IF_ERROR(EvolveTable(namespace_schema, {}, false));
    query::TableSource source;
    source.pipeline = std::string(kStreamPipeline);
    source.namespace_name = namespace_schema.name;
    source.fields = namespace_schema.fields;
    source.batches = query::BatchList::Streaming(std::move(next));
    SKIPPR_RETURN_IF_ERROR(engine_->RegisterTable(std::move(source)));
    return CopyRows(
        fmt::format("SELECT {} FROM wal_scan({}, {})", RenderedColumns(namespace_schema),
                    QuoteLiteral(kStreamPipeline), QuoteLiteral(namespace_schema.name)),
        Table(namespace_schema.name), FieldNames(namespace_schema));
  }();
  if (!rows.ok() || *rows == 0) {
    connection_->Rollback();  // nothing to land: the stream had no batch
    return rows;
  }
  stream_ = OpenStream{namespace_schema.name, *rows};
  return rows;
}

Result<LandingOutcome> PostgresSink::LandStreamed(const Landing& landing,
                                                  const schema::NamespaceSchema&, int64_t rows) {
  SKIPPR_CHECK_MSG(stream_ && stream_->namespace_name == landing.namespace_name,
                   "LandStreamed follows the WriteStream of its namespace");
  SKIPPR_CHECK_MSG(stream_->rows == rows, "the streamed rows are the landing's");
  SKIPPR_CHECK_MSG(!landing.replaces_table && landing.key_columns.empty(),
                   "only appends stream (capabilities: streams_replacing is off)");
  stream_.reset();
  LandingOutcome landed;
  landed.rows_written = rows;
  Result<LandingOutcome> outcome = Commit(landing, rows, landed);
  if (!outcome.ok()) connection_->Rollback();
  return outcome;
}

Result<int64_t> PostgresSink::CopyIntoTable(const schema::NamespaceSchema& namespace_schema) {
  return CopyRows(fmt::format("SELECT {} FROM {}", RenderedColumns(namespace_schema),
                              LandingScan(namespace_schema.name, false)),
                  Table(namespace_schema.name), FieldNames(namespace_schema));
}

// The keyed landing's newest change per key COPYed into a staging table, then applied where it is
// newer than what the table holds (upsert-if-newer, delete-if-newer).
Result<LandingOutcome> PostgresSink::Merge(const Landing& landing,
                                           const schema::NamespaceSchema& namespace_schema,
                                           bool keeps_order_tokens) {
  const std::string table = Table(landing.namespace_name);
  const std::string tombstones = Table(std::string(kTombstonesPrefix) + landing.namespace_name);
  const std::string staging = QuoteIdentifier(kStagingTable);
  const std::string token = QuoteIdentifier(kOrderTokenColumn);
  const std::string staged_token = QuoteIdentifier(query::kOrderTokenColumn);
  const std::string deleted = QuoteIdentifier(query::kDeletedColumn);
  const std::string keys = QuotedList(landing.key_columns);
  const auto execute = [&](const std::string& sql) -> Result<int64_t> {
    SKIPPR_ASSIGN_OR_RETURN(const PgRows done, connection_->Execute(sql));
    return done.affected;
  };
  SKIPPR_RETURN_IF_ERROR(
      execute(fmt::format("CREATE TEMP TABLE {0} (LIKE {1}) ON COMMIT DROP; ALTER TABLE {0} ADD "
                          "COLUMN {2} boolean, ADD COLUMN {3} bytea",
                          staging, table, deleted, staged_token))
          .status());
  if (keeps_order_tokens) {
    SKIPPR_RETURN_IF_ERROR(
        execute(fmt::format("CREATE TABLE IF NOT EXISTS {} AS SELECT {}, {} FROM {} WITH NO DATA; "
                            "CREATE UNIQUE INDEX IF NOT EXISTS {} ON {} ({})",
                            tombstones, keys, token, table,
                            QuoteIdentifier(std::string(kTombstonesPrefix) +
                                            landing.namespace_name + "_key"),
                            tombstones, keys))
            .status());
  }
  // A TRUNCATE among the changes: the rows (and tombstones) before it go first.
  SKIPPR_ASSIGN_OR_RETURN(const query::QueryResult truncate,
                          engine_->Run(LandingTruncateSql(landing.namespace_name)));
  if (truncate.rows.at(0).at(0) != "0") {
    SKIPPR_RETURN_IF_ERROR(execute("TRUNCATE " + table).status());
    if (keeps_order_tokens) {
      SKIPPR_RETURN_IF_ERROR(execute("TRUNCATE " + tombstones).status());
      SKIPPR_RETURN_IF_ERROR(
          connection_
              ->Execute(fmt::format("INSERT INTO {0} VALUES ($1, decode($2, 'hex')) ON CONFLICT "
                                    "(table_name) DO UPDATE SET order_token = "
                                    "greatest({0}.order_token, excluded.order_token)",
                                    Table(kTruncatesTable)),
                        {landing.namespace_name, *truncate.rows.at(0).at(1)})
              .status());
    }
  }
  const std::string rendered =
      fmt::format("{}, {}, '\\x' || hex({})", RenderedColumns(namespace_schema),
                  query::kDeletedColumn, query::kOrderTokenColumn);
  std::vector<std::string> staged_columns = FieldNames(namespace_schema);
  staged_columns.push_back(std::string(query::kDeletedColumn));
  staged_columns.push_back(std::string(query::kOrderTokenColumn));
  SKIPPR_RETURN_IF_ERROR(
      CopyRows(fmt::format("SELECT {} FROM ({})", rendered,
                           NewestChangePerKeySql(landing.namespace_name, landing.key_columns)),
               staging, staged_columns)
          .status());
  if (keeps_order_tokens) {
    // Only what is newer than the key's row, its tombstone and the table's last truncate.
    SKIPPR_RETURN_IF_ERROR(
        execute(fmt::format(
                    "DELETE FROM {0} s USING {1} t WHERE {2} AND t.{3} >= s.{4}; "
                    "DELETE FROM {0} s USING {5} t WHERE {2} AND t.{3} >= s.{4}; "
                    "DELETE FROM {0} s WHERE s.{4} <= coalesce((SELECT order_token FROM {6} WHERE "
                    "table_name = {7}), ''::bytea)",
                    staging, table, KeysEqual(landing.key_columns, "t", "s"), token, staged_token,
                    tombstones, Table(kTruncatesTable), QuoteLiteral(landing.namespace_name)))
            .status());
  }
  LandingOutcome outcome;
  SKIPPR_ASSIGN_OR_RETURN(outcome.rows_deleted,
                          execute(fmt::format("DELETE FROM {} t USING {} s WHERE {}", table,
                                              staging, KeysEqual(landing.key_columns, "t", "s"))));
  const std::string columns = QuotedList(FieldNames(namespace_schema));
  if (keeps_order_tokens) {
    SKIPPR_RETURN_IF_ERROR(
        execute(fmt::format("DELETE FROM {0} t USING {1} s WHERE {2}; INSERT INTO {0} ({3}, {4}) "
                            "SELECT {3}, {5} FROM {1} WHERE {6}",
                            tombstones, staging, KeysEqual(landing.key_columns, "t", "s"), keys,
                            token, staged_token, deleted))
            .status());
  }
  SKIPPR_ASSIGN_OR_RETURN(
      outcome.rows_written,
      execute(fmt::format("INSERT INTO {} ({}{}) SELECT {}{} FROM {} WHERE NOT {}", table, columns,
                          keeps_order_tokens ? ", " + token : "", columns,
                          keeps_order_tokens ? ", " + staged_token : "", staging, deleted)));
  return outcome;
}

std::vector<SinkCheck> PostgresSink::Check(const config::ConnectorConfig& entry,
                                           const std::string& setting) {
  const Settings settings = SettingsOf(entry);
  Result<std::unique_ptr<PostgresConnection>> connection =
      PostgresConnection::Connect(settings, setting);
  if (!connection.ok()) return {{false, std::string(connection.status().message())}};
  std::vector<SinkCheck> checks = {
      {true, fmt::format("{}: PostgreSQL {} reachable", setting, settings.Describe())}};
  Result<PgRows> privileges =
      (*connection)
          ->Execute(
              "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1), "
              "CASE WHEN EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1) "
              "THEN has_schema_privilege($1, 'CREATE') AND has_schema_privilege($1, 'USAGE') "
              "ELSE has_database_privilege(current_database(), 'CREATE') END",
              {settings.schema});
  if (!privileges.ok()) {
    checks.push_back({false, std::string(privileges.status().message())});
    return checks;
  }
  const bool exists = privileges->rows.at(0).at(0) == "t";
  const bool may_create = privileges->rows.at(0).at(1) == "t";
  if (may_create) {
    checks.push_back(
        {true, fmt::format("{}: schema '{}' {}; user {} may create tables in it", setting,
                           settings.schema, exists ? "exists" : "will be created", settings.user)});
  } else {
    checks.push_back(
        {false,
         fmt::format(
             "{}: user {} may not {} schema '{}'; GRANT {} to it, or set schema to one it may",
             setting, settings.user, exists ? "create tables in" : "create", settings.schema,
             exists ? fmt::format("CREATE, USAGE ON SCHEMA {}", settings.schema)
                    : fmt::format("CREATE ON DATABASE {}", settings.database))});
  }
  return checks;
}

}  // namespace skippr::sinks::internal
