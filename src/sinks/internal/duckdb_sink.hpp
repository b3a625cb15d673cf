// Internal to sinks/: the Duckdb sink's database form (`database: /abs/path/file.duckdb`, schema
// `main` by default): one table per namespace in a native DuckDB database that users open with
// DuckDB itself. docs/formats/duckdb-sink.md describes the tables it keeps.
#pragma once

#include <memory>
#include <string>

#include "query/query.hpp"
#include "sinks/internal/landing_sql.hpp"
#include "sinks/sinks.hpp"

namespace skippr::sinks::internal {

class DuckdbSink final : public Sink {
 public:
  struct Settings {
    std::string database_path;  // absolute
    std::string schema = "main";
  };
  static Settings SettingsOf(const config::ConnectorConfig& entry);

  static Capabilities KindCapabilities();
  static Result<std::unique_ptr<Sink>> Open(const SinkContext& context,
                                            const config::ConnectorConfig& entry,
                                            const std::string& setting);
  static Result<query::LandedRows> ReadLanded(const SinkContext& context,
                                              const config::ConnectorConfig& entry,
                                              const std::string& namespace_name,
                                              const CommitId& commit);

  // Whether the database holds the landing, attached read-only by an engine of its own.
  static Result<bool> HoldsLandingReadOnly(const config::ConnectorConfig& entry,
                                           const std::string& namespace_name,
                                           const std::string& landing_id);

  const Capabilities& capabilities() const override { return capabilities_; }
  // One DuckDB transaction: the rows (appended, replacing the table, or per key the newest
  // change — an upsert or a delete — applied when it is newer than what the table holds) and the
  // landing's row in _skippr_landings. The table is created, or its columns added and widened,
  // before it. The database is attached for the landing only, so readers can open it between.
  Result<LandingOutcome> Land(const Landing& landing,
                              const schema::NamespaceSchema& namespace_schema,
                              const std::vector<std::shared_ptr<const Batch>>& batches) override;
  Result<bool> IsLanded(const std::string& namespace_name, const std::string& landing_id) override;

 private:
  DuckdbSink(SinkContext context, Settings settings, std::unique_ptr<query::Engine> engine);
  class Attached;
  Result<bool> HoldsLanding(const std::string& namespace_name, const std::string& landing_id);
  Status CreateBookkeeping();
  Status EvolveTable(const schema::NamespaceSchema& namespace_schema, bool keeps_order_tokens);
  Result<int64_t> StageChanges(const Landing& landing, bool keeps_order_tokens);
  Result<LandingOutcome> ApplyLanding(const Landing& landing, int64_t rows,
                                      bool keeps_order_tokens);
  Result<int64_t> CountOf(const std::string& sql);
  std::string Table(std::string_view name) const;  // "skippr_sink"."schema"."name"

  const Capabilities capabilities_;
  const SinkContext context_;
  const Settings settings_;
  std::unique_ptr<query::Engine> engine_;
};

}  // namespace skippr::sinks::internal
