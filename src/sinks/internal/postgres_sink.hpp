// Internal to sinks/: the Postgres sink (reference §10.7): one table per namespace in `schema`
// (public), each landing one PostgreSQL transaction with its `_skippr_landings` row.
// docs/formats/postgres-sink.md describes the tables it keeps and how a landing applies.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "query/query.hpp"
#include "sinks/sinks.hpp"

namespace skippr::sinks::internal {

class PostgresConnection;

class PostgresSink final : public Sink {
 public:
  struct Settings {
    std::string host = "localhost";
    int64_t port = 5432;
    std::string user;
    std::string password;  // empty: none (libpq's own sources, such as ~/.pgpass, apply)
    std::string database;
    std::string schema = "public";
    std::string sslmode = "prefer";
    std::string Describe() const;  // "user@host:port/database, schema s"
  };
  static Settings SettingsOf(const config::ConnectorConfig& entry);

  static Capabilities KindCapabilities();
  static Result<std::unique_ptr<Sink>> Open(const SinkContext& context,
                                            const config::ConnectorConfig& entry,
                                            const std::string& setting);
  // doctor: the server reachable with these settings, the privileges a landing needs, the schema.
  static std::vector<SinkCheck> Check(const config::ConnectorConfig& entry,
                                      const std::string& setting);

  ~PostgresSink() override;
  const Capabilities& capabilities() const override { return capabilities_; }
  // One transaction: the table created or its columns added and widened, the rows COPYed in —
  // straight into the table for an append (after a TRUNCATE to replace it), or into a staging
  // table for a keyed landing, whose newest change per key is applied when newer than the table's
  // row, tombstone and truncate — and the landing's `_skippr_landings` row.
  Result<LandingOutcome> Land(const Landing& landing,
                              const schema::NamespaceSchema& namespace_schema,
                              const std::vector<std::shared_ptr<const Batch>>& batches) override;
  Result<bool> IsLanded(const std::string& namespace_name, const std::string& landing_id) override;
  // An append streamed: WriteStream opens the landing's transaction and COPYs the batches into
  // the table as they come; LandStreamed adds the `_skippr_landings` row and commits. A crash in
  // between loses the open transaction with the connection, and the slices land again in a round.
  Result<int64_t> WriteStream(const schema::NamespaceSchema& namespace_schema,
                              StreamedBatches next) override;
  Result<LandingOutcome> LandStreamed(const Landing& landing,
                                      const schema::NamespaceSchema& namespace_schema,
                                      int64_t rows) override;

 private:
  PostgresSink(SinkContext context, Settings settings,
               std::unique_ptr<PostgresConnection> connection,
               std::unique_ptr<query::Engine> engine);
  Status CreateBookkeeping();
  Result<int64_t> LandingCount(const std::string& namespace_name);
  Status EvolveTable(const schema::NamespaceSchema& namespace_schema,
                     const std::vector<std::string>& key_columns, bool keeps_order_tokens);
  // COPYs the rows `select_sql` gives (in the engine) into `table` (`columns`).
  Result<int64_t> CopyRows(const std::string& select_sql, const std::string& table,
                           const std::vector<std::string>& columns);
  void AbandonStream();  // rolls back a stream's open transaction, if any
  Result<int64_t> CopyIntoTable(const schema::NamespaceSchema& namespace_schema);
  // Inserts the landing's `_skippr_landings` row and commits the open transaction.
  Result<LandingOutcome> Commit(const Landing& landing, int64_t rows, LandingOutcome landed);
  Result<LandingOutcome> Merge(const Landing& landing,
                               const schema::NamespaceSchema& namespace_schema,
                               bool keeps_order_tokens);
  std::string Table(std::string_view name) const;  // "schema"."name"

  const Capabilities capabilities_;
  const SinkContext context_;
  const Settings settings_;
  std::unique_ptr<PostgresConnection> connection_;
  std::unique_ptr<query::Engine> engine_;  // renders the landing's rows as COPY text
  // A stream's transaction is open: its namespace and rows, until LandStreamed commits it.
  struct OpenStream {
    std::string namespace_name;
    int64_t rows = 0;
  };
  std::optional<OpenStream> stream_;
};

}  // namespace skippr::sinks::internal
