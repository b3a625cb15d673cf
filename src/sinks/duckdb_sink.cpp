// The Duckdb sink's database form: landings as DuckDB transactions in a native database file.
//
// A landing attaches the database (waiting while a reader holds it), prepares outside the
// transaction what only it can see — the table's columns, the landing's newest change per key in a
// temporary table (DuckDB lets one transaction write one database) — and then, in one transaction,
// writes the rows and its _skippr_landings row. A replay finds that row and writes nothing.
#include "sinks/internal/duckdb_sink.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <map>

#include "core/check.hpp"
#include "core/crash.hpp"
#include "sinks/internal/landing_sql.hpp"

namespace skippr::sinks::internal {

namespace {

using query::QuoteIdentifier;
using query::QuoteLiteral;

constexpr std::string_view kAlias = "skippr_sink";
constexpr std::string_view kChangesTable = "skippr_changes";  // temporary: the newest per key

// A NULL key is one key, as the lake and query see it.
std::string KeysMatch(const std::vector<std::string>& keys, std::string_view left,
                      std::string_view right) {
  return KeysCompared(keys, left, right, "IS NOT DISTINCT FROM");
}

std::string Lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

}  // namespace

// The database attached read-write for one landing; detached (and so checkpointed and unlocked)
// when it goes.
class DuckdbSink::Attached {
 public:
  static Result<Attached> Open(query::Engine& engine, const std::string& path) {
    SKIPPR_RETURN_IF_ERROR(engine.Attach(path, std::string(kAlias), /*read_only=*/false));
    return Attached(engine);
  }
  Attached(Attached&& other) noexcept : engine_(std::exchange(other.engine_, nullptr)) {}
  Attached& operator=(Attached&&) = delete;
  ~Attached() {
    if (engine_ == nullptr) return;
    // An open transaction (a failed landing) is rolled back first; DETACH needs none open.
    (void)engine_->Run("ROLLBACK");
    if (Result<query::QueryResult> detached =
            engine_->Run(fmt::format("DETACH {}", QuoteIdentifier(kAlias)));
        !detached.ok()) {
      spdlog::warn("duckdb sink: could not detach the database: {}", detached.status().message());
    }
  }

 private:
  explicit Attached(query::Engine& engine) : engine_(&engine) {}
  query::Engine* engine_;
};

DuckdbSink::Settings DuckdbSink::SettingsOf(const config::ConnectorConfig& entry) {
  Settings settings;
  settings.database_path = entry.GetString("database");
  if (settings.database_path.starts_with("file://")) {
    settings.database_path = settings.database_path.substr(std::string_view("file://").size());
  }
  if (entry.Has("schema")) settings.schema = entry.GetString("schema");
  return settings;
}

Capabilities DuckdbSink::KindCapabilities() {
  return Capabilities{
      .write_policies = {WritePolicy::kAppend, WritePolicy::kReplaceTable,
                         WritePolicy::kMergeByKey},
      .lands_final_state = true,
      .streams = false,
      .is_transactional = true,
  };
}

DuckdbSink::DuckdbSink(SinkContext context, Settings settings,
                       std::unique_ptr<query::Engine> engine)
    : capabilities_(KindCapabilities()),
      context_(std::move(context)),
      settings_(std::move(settings)),
      engine_(std::move(engine)) {}

Result<std::unique_ptr<Sink>> DuckdbSink::Open(const SinkContext& context,
                                               const config::ConnectorConfig& entry,
                                               const std::string& setting) {
  Settings settings = SettingsOf(entry);
  if (!settings.database_path.starts_with('/')) {
    return Status::InvalidConfig(fmt::format(
        "{}.database: '{}' is not an absolute path; give the database file as /path/file.duckdb",
        setting, settings.database_path));
  }
  SKIPPR_ASSIGN_OR_RETURN(std::unique_ptr<query::Engine> engine,
                          query::Engine::Open({.checks_table_names = false}));
  // Rows of a table have no order: DuckDB may then insert from several threads.
  SKIPPR_RETURN_IF_ERROR(engine->Run("SET preserve_insertion_order = false").status());
  return std::unique_ptr<Sink>(new DuckdbSink(context, std::move(settings), std::move(engine)));
}

Result<query::LandedRows> DuckdbSink::ReadLanded(const SinkContext&,
                                                 const config::ConnectorConfig& entry,
                                                 const std::string& namespace_name,
                                                 const CommitId&) {
  const Settings settings = SettingsOf(entry);
  query::LandedRows landed;
  landed.database_table = query::DatabaseTable{
      settings.database_path, settings.schema, namespace_name, {std::string(kOrderTokenColumn)}};
  return landed;
}

Result<bool> DuckdbSink::HoldsLandingReadOnly(const config::ConnectorConfig& entry,
                                              const std::string& namespace_name,
                                              const std::string& landing_id) {
  const Settings settings = SettingsOf(entry);
  std::error_code error;
  if (!std::filesystem::exists(settings.database_path, error)) return false;
  SKIPPR_ASSIGN_OR_RETURN(std::unique_ptr<query::Engine> engine,
                          query::Engine::Open({.checks_table_names = false}));
  SKIPPR_RETURN_IF_ERROR(
      engine->Attach(settings.database_path, std::string(kAlias), /*read_only=*/true));
  SKIPPR_ASSIGN_OR_RETURN(
      const query::QueryResult tables,
      engine->Run(fmt::format("SELECT count(*) FROM duckdb_tables() WHERE database_name = {} AND "
                              "schema_name = {} AND table_name = {}",
                              QuoteLiteral(kAlias), QuoteLiteral(settings.schema),
                              QuoteLiteral(kLandingsTable))));
  if (tables.rows.at(0).at(0) == "0") return false;
  SKIPPR_ASSIGN_OR_RETURN(
      const query::QueryResult held,
      engine->Run(fmt::format("SELECT count(*) FROM {}.{}.{} WHERE landing_id = {} AND "
                              "table_name = {}",
                              QuoteIdentifier(kAlias), QuoteIdentifier(settings.schema),
                              QuoteIdentifier(kLandingsTable), QuoteLiteral(landing_id),
                              QuoteLiteral(namespace_name))));
  return held.rows.at(0).at(0) != "0";
}

std::string DuckdbSink::Table(std::string_view name) const {
  return fmt::format("{}.{}.{}", QuoteIdentifier(kAlias), QuoteIdentifier(settings_.schema),
                     QuoteIdentifier(name));
}

Result<int64_t> DuckdbSink::CountOf(const std::string& sql) {
  SKIPPR_ASSIGN_OR_RETURN(const query::QueryResult result, engine_->Run(sql));
  SKIPPR_CHECK_MSG(result.rows.size() == 1 && !result.rows[0].empty(), "a count is one row");
  const std::optional<std::string>& text = result.rows[0][0];
  int64_t count = 0;
  if (text) std::from_chars(text->data(), text->data() + text->size(), count);
  return count;
}

Status DuckdbSink::CreateBookkeeping() {
  return engine_
      ->Run(fmt::format(
          "CREATE SCHEMA IF NOT EXISTS {0}.{1}; "
          "CREATE TABLE IF NOT EXISTS {2} (landing_id VARCHAR PRIMARY KEY, table_name VARCHAR "
          "NOT NULL, pipeline VARCHAR NOT NULL, pipeline_instance VARCHAR NOT NULL, "
          "wal_segment_ids VARCHAR NOT NULL, rows BIGINT NOT NULL, landed_at TIMESTAMPTZ NOT "
          "NULL); "
          "CREATE TABLE IF NOT EXISTS {3} (table_name VARCHAR PRIMARY KEY, order_token BLOB NOT "
          "NULL)",
          QuoteIdentifier(kAlias), QuoteIdentifier(settings_.schema), Table(kLandingsTable),
          Table(kTruncatesTable)))
      .status();
}

Result<bool> DuckdbSink::HoldsLanding(const std::string& namespace_name,
                                      const std::string& landing_id) {
  SKIPPR_ASSIGN_OR_RETURN(
      const int64_t count,
      CountOf(fmt::format("SELECT count(*) FROM {} WHERE landing_id = {} AND table_name = {}",
                          Table(kLandingsTable), QuoteLiteral(landing_id),
                          QuoteLiteral(namespace_name))));
  return count > 0;
}

Result<bool> DuckdbSink::IsLanded(const std::string& namespace_name,
                                  const std::string& landing_id) {
  std::error_code error;
  if (!std::filesystem::exists(settings_.database_path, error)) return false;
  SKIPPR_ASSIGN_OR_RETURN(Attached attached, Attached::Open(*engine_, settings_.database_path));
  SKIPPR_RETURN_IF_ERROR(CreateBookkeeping());
  return HoldsLanding(namespace_name, landing_id);
}

// Creates the namespace's table from the landing's columns, or adds the columns it lacks and
// widens those the schema has widened (int → long, float → double, decimal precision).
Status DuckdbSink::EvolveTable(const schema::NamespaceSchema& namespace_schema,
                               bool keeps_order_tokens) {
  const std::string table = Table(namespace_schema.name);
  const std::string scan = LandingScan(namespace_schema.name, false);
  SKIPPR_RETURN_IF_ERROR(
      engine_
          ->Run(fmt::format("CREATE TABLE IF NOT EXISTS {} AS SELECT *{} FROM {} LIMIT 0", table,
                            keeps_order_tokens ? fmt::format(", NULL::BLOB AS {}",
                                                             QuoteIdentifier(kOrderTokenColumn))
                                               : "",
                            scan))
          .status());
  SKIPPR_ASSIGN_OR_RETURN(const query::QueryResult wanted,
                          engine_->Run(fmt::format("DESCRIBE SELECT * FROM {}", scan)));
  SKIPPR_ASSIGN_OR_RETURN(
      const query::QueryResult present,
      engine_->Run(fmt::format(
          "SELECT column_name, data_type FROM duckdb_columns() WHERE database_name = {} AND "
          "schema_name = {} AND table_name = {}",
          QuoteLiteral(kAlias), QuoteLiteral(settings_.schema),
          QuoteLiteral(namespace_schema.name))));
  std::map<std::string, std::string> present_types;  // by lower-case name: DuckDB's rule
  for (const auto& row : present.rows) present_types[Lower(*row[0])] = *row[1];
  if (keeps_order_tokens && !present_types.contains(std::string(kOrderTokenColumn))) {
    SKIPPR_RETURN_IF_ERROR(engine_
                               ->Run(fmt::format("ALTER TABLE {} ADD COLUMN {} BLOB", table,
                                                 QuoteIdentifier(kOrderTokenColumn)))
                               .status());
  }
  for (const auto& row : wanted.rows) {
    const std::string& column = *row[0];
    const std::string& type = *row[1];
    auto existing = present_types.find(Lower(column));
    std::string statement;
    if (existing == present_types.end()) {
      statement =
          fmt::format("ALTER TABLE {} ADD COLUMN {} {}", table, QuoteIdentifier(column), type);
    } else if (existing->second != type) {
      statement = fmt::format("ALTER TABLE {} ALTER COLUMN {} SET DATA TYPE {}", table,
                              QuoteIdentifier(column), type);
    } else {
      continue;
    }
    if (Result<query::QueryResult> altered = engine_->Run(statement); !altered.ok()) {
      return Status::InvalidArgument(fmt::format(
          "the DuckDB table {}.{} in {} cannot take column '{}' as {}{}: {}", settings_.schema,
          namespace_schema.name, settings_.database_path, column, type,
          existing == present_types.end() ? "" : fmt::format(" (it is {})", existing->second),
          altered.status().message()));
    }
  }
  return Status::OK();
}

// The landing's changes for a keyed table, as the temporary table skippr_changes: per key the
// newest (greatest order token, then last in WAL order) after the landing's last truncate, and —
// for a table that keeps order tokens — only where it is newer than the table's row, tombstone and
// truncate of that key. Returns the landing's truncate's presence as 1, else 0.
Result<int64_t> DuckdbSink::StageChanges(const Landing& landing, bool keeps_order_tokens) {
  std::string newer_than_table;
  if (keeps_order_tokens) {
    const std::string token = QuoteIdentifier(kOrderTokenColumn);
    newer_than_table = fmt::format(
        " WHERE NOT EXISTS (SELECT 1 FROM {0} t WHERE {1} AND t.{2} >= c.{3})"
        " AND NOT EXISTS (SELECT 1 FROM {4} t WHERE {1} AND t.{2} >= c.{3})"
        " AND c.{3} > coalesce((SELECT order_token FROM {5} WHERE table_name = {6}), ''::BLOB)",
        Table(landing.namespace_name), KeysMatch(landing.key_columns, "t", "c"), token,
        query::kOrderTokenColumn, Table(std::string(kTombstonesPrefix) + landing.namespace_name),
        Table(kTruncatesTable), QuoteLiteral(landing.namespace_name));
  }
  SKIPPR_RETURN_IF_ERROR(
      engine_
          ->Run(fmt::format(
              "CREATE OR REPLACE TEMP TABLE {} AS SELECT * FROM ({}) c{}", kChangesTable,
              NewestChangePerKeySql(landing.namespace_name, landing.key_columns), newer_than_table))
          .status());
  return CountOf(LandingTruncateSql(landing.namespace_name));
}

Result<LandingOutcome> DuckdbSink::Land(const Landing& landing,
                                        const schema::NamespaceSchema& namespace_schema,
                                        const std::vector<std::shared_ptr<const Batch>>& batches) {
  SKIPPR_CHECK(landing.namespace_name == namespace_schema.name);
  int64_t rows = 0;
  for (const auto& batch : batches) rows += batch->num_rows;
  SKIPPR_ASSIGN_OR_RETURN(Attached attached, Attached::Open(*engine_, settings_.database_path));
  SKIPPR_RETURN_IF_ERROR(CreateBookkeeping());
  const CommitId commit_so_far{settings_.database_path, 0};
  SKIPPR_ASSIGN_OR_RETURN(const bool was_landed,
                          HoldsLanding(landing.namespace_name, landing.landing_id));
  if (was_landed) {
    SKIPPR_ASSIGN_OR_RETURN(
        const int64_t version,
        CountOf(fmt::format("SELECT count(*) FROM {} WHERE table_name = {}", Table(kLandingsTable),
                            QuoteLiteral(landing.namespace_name))));
    return LandingOutcome{{settings_.database_path, version}, true, rows, 0, 0};
  }
  SKIPPR_RETURN_IF_ERROR(RegisterLanding(*engine_, namespace_schema, batches));
  const bool keeps_order_tokens = !landing.key_columns.empty() && CarriesOrderTokens(batches);
  SKIPPR_RETURN_IF_ERROR(EvolveTable(namespace_schema, keeps_order_tokens));
  return ApplyLanding(landing, rows, keeps_order_tokens);
}

Result<LandingOutcome> DuckdbSink::ApplyLanding(const Landing& landing, int64_t rows,
                                                bool keeps_order_tokens) {
  const std::string table = Table(landing.namespace_name);
  const std::string tombstones = Table(std::string(kTombstonesPrefix) + landing.namespace_name);
  const std::string token = QuoteIdentifier(kOrderTokenColumn);
  const bool is_keyed = !landing.key_columns.empty();
  int64_t truncates = 0;
  if (is_keyed) {
    if (keeps_order_tokens) {
      SKIPPR_RETURN_IF_ERROR(
          engine_
              ->Run(fmt::format("CREATE TABLE IF NOT EXISTS {} AS SELECT {}, NULL::BLOB AS {} "
                                "FROM {} LIMIT 0",
                                tombstones, QuotedList(landing.key_columns), token,
                                LandingScan(landing.namespace_name, false)))
              .status());
    }
    SKIPPR_ASSIGN_OR_RETURN(truncates, StageChanges(landing, keeps_order_tokens));
  }
  LandingOutcome outcome;
  outcome.rows = rows;
  std::vector<std::string> statements = {"BEGIN TRANSACTION"};
  if (landing.replaces_table || truncates > 0) {
    statements.push_back(fmt::format("DELETE FROM {}", table));
    if (keeps_order_tokens) statements.push_back(fmt::format("DELETE FROM {}", tombstones));
  }
  if (truncates > 0 && keeps_order_tokens) {
    const std::string changes = LandingScan(landing.namespace_name, true);
    statements.push_back(
        fmt::format("INSERT OR REPLACE INTO {} SELECT {}, max({}) FROM {} WHERE {}",
                    Table(kTruncatesTable), QuoteLiteral(landing.namespace_name),
                    query::kOrderTokenColumn, changes, query::kTruncateColumn));
  }
  SKIPPR_RETURN_IF_ERROR(engine_->Run(fmt::format("{}", fmt::join(statements, "; "))).status());
  if (!is_keyed) {
    SKIPPR_ASSIGN_OR_RETURN(outcome.rows_written,
                            CountOf(fmt::format("INSERT INTO {} BY NAME SELECT * FROM {}", table,
                                                LandingScan(landing.namespace_name, false))));
  } else {
    const std::string changes(kChangesTable);
    SKIPPR_ASSIGN_OR_RETURN(
        outcome.rows_deleted,
        CountOf(fmt::format("DELETE FROM {0} t USING {1} c WHERE {2}", table, changes,
                            KeysMatch(landing.key_columns, "t", "c"))));
    if (keeps_order_tokens) {
      SKIPPR_RETURN_IF_ERROR(
          engine_
              ->Run(fmt::format("DELETE FROM {0} t USING {1} c WHERE {2}", tombstones, changes,
                                KeysMatch(landing.key_columns, "t", "c")))
              .status());
      SKIPPR_RETURN_IF_ERROR(
          engine_
              ->Run(fmt::format("INSERT INTO {} SELECT {}, {} FROM {} WHERE {}", tombstones,
                                QuotedList(landing.key_columns), query::kOrderTokenColumn, changes,
                                query::kDeletedColumn))
              .status());
    }
    SKIPPR_ASSIGN_OR_RETURN(
        outcome.rows_written,
        CountOf(fmt::format(
            "INSERT INTO {} BY NAME SELECT * EXCLUDE ({}, {}, {}){} FROM {} "
            "WHERE NOT {}",
            table, query::kOrdinalColumn, query::kDeletedColumn, query::kOrderTokenColumn,
            keeps_order_tokens ? fmt::format(", {} AS {}", query::kOrderTokenColumn, token) : "",
            changes, query::kDeletedColumn)));
  }
  const std::vector<uint64_t> segment_ids = landing.SegmentIds();
  SKIPPR_RETURN_IF_ERROR(
      engine_
          ->Run(fmt::format("INSERT INTO {} VALUES ({}, {}, {}, {}, {}, {}, now())",
                            Table(kLandingsTable), QuoteLiteral(landing.landing_id),
                            QuoteLiteral(landing.namespace_name), QuoteLiteral(context_.pipeline),
                            QuoteLiteral(context_.pipeline_instance),
                            QuoteLiteral(fmt::format("{}", fmt::join(segment_ids, ","))), rows))
          .status());
  SKIPPR_ASSIGN_OR_RETURN(
      outcome.commit.version,
      CountOf(fmt::format("SELECT count(*) FROM {} WHERE table_name = {}", Table(kLandingsTable),
                          QuoteLiteral(landing.namespace_name))));
  outcome.commit.location = settings_.database_path;
  CrashPoint("duckdb_sink.before_commit");
  SKIPPR_RETURN_IF_ERROR(engine_->Run("COMMIT").status());
  CrashPoint("duckdb_sink.after_commit");
  return outcome;
}

}  // namespace skippr::sinks::internal
