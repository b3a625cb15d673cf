// SkipprLake behind the Sink interface: the lake's types at the boundary, nothing else.
#include "sinks/internal/lake_sink.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "aws/aws.hpp"
#include "core/environment.hpp"

namespace skippr::sinks::internal {

namespace {

// The entry's settings, read once (the registry has checked their types and defaults).
lake::LakeOptions LakeOptionsOf(const SinkContext& context, const config::ConnectorConfig& entry) {
  lake::LakeOptions options;
  options.env = context.env;
  options.pipeline = context.pipeline;
  options.pipeline_instance = context.pipeline_instance;
  options.warehouse = entry.GetString("warehouse");
  if (entry.Has("table_namespace")) options.table_namespace = entry.GetString("table_namespace");
  if (entry.Has("catalog_uri")) options.catalog_uri = entry.GetString("catalog_uri");
  if (entry.Has("catalog_table")) options.catalog_table = entry.GetString("catalog_table");
  // One region and endpoint for the bucket and the catalog table, as for the S3 source; the
  // standard AWS_ENDPOINT_URL_S3 / _DYNAMODB variables tell them apart.
  if (entry.Has("region")) {
    options.access.s3.region = entry.GetString("region");
    options.access.dynamodb.region = entry.GetString("region");
  }
  if (entry.Has("endpoint_url")) options.access.s3.endpoint_url = entry.GetString("endpoint_url");
  options.access.local_directory = context.local_directory;
  if (entry.Has("max_snapshot_age_seconds")) {
    options.max_snapshot_age_ms = entry.GetInteger("max_snapshot_age_seconds") * 1000;
  }
  if (entry.Has("min_snapshots_to_keep")) {
    options.min_snapshots_to_keep = static_cast<int32_t>(entry.GetInteger("min_snapshots_to_keep"));
  }
  return options;
}

lake::Landing LakeLandingOf(const Landing& landing) {
  return lake::Landing{landing.landing_id, landing.namespace_name, landing.SegmentIds(),
                       landing.replaces_table, landing.key_columns};
}

CommitId CommitOf(const lake::LandedSnapshot& snapshot) {
  return CommitId{snapshot.metadata_location, snapshot.snapshot_id};
}

LandingOutcome OutcomeOf(const lake::LandingOutcome& outcome) {
  return LandingOutcome{CommitOf(outcome.snapshot), outcome.was_landed_before, outcome.rows,
                        outcome.rows_written, outcome.rows_deleted};
}

SinkCheck CheckWarehouseBucket(const lake::LakeOptions& options, const std::string& setting) {
  static const ProcessEnvironment environment;
  const auto fail = [&](std::string_view why) {
    return SinkCheck{false, fmt::format("{}: cannot list and write warehouse {}: {}", setting,
                                        options.warehouse, why)};
  };
  Result<std::pair<std::string, std::string>> location = aws::ParseS3Uri(options.warehouse);
  if (!location.ok()) return fail(location.status().message());
  auto [bucket, prefix] = *location;
  if (!prefix.empty() && prefix.back() != '/') prefix += '/';
  Result<std::unique_ptr<aws::S3Client>> client =
      aws::S3Client::Open(options.access.s3, environment);
  if (!client.ok()) return fail(client.status().message());
  const std::string probe = prefix + ".doctor-probe";
  Status checked = (*client)->ListObjects(bucket, prefix).status();
  if (checked.ok()) checked = (*client)->PutObject(bucket, probe, "skipprd doctor").status();
  if (checked.ok()) checked = (*client)->DeleteObject(bucket, probe);
  if (!checked.ok()) {
    return fail(fmt::format("at {}: {}", (*client)->endpoint(), checked.message()));
  }
  return {true, fmt::format("{}: warehouse {} listed and written at {}", setting, options.warehouse,
                            (*client)->endpoint())};
}

SinkCheck CheckCatalogTable(const lake::LakeOptions& options, const std::string& setting) {
  static const ProcessEnvironment environment;
  Result<std::unique_ptr<aws::DynamoClient>> client =
      aws::DynamoClient::Open(options.access.dynamodb, environment);
  if (!client.ok()) return {false, fmt::format("{}: {}", setting, client.status().message())};
  Result<bool> exists = (*client)->TableExists(options.catalog_table);
  if (!exists.ok()) {
    return {false, fmt::format("{}: cannot read catalog table '{}' at {}: {}", setting,
                               options.catalog_table, (*client)->endpoint(),
                               exists.status().message())};
  }
  if (*exists) {
    return {true, fmt::format("{}: catalog table '{}' found at {}", setting, options.catalog_table,
                              (*client)->endpoint())};
  }
  return {true, fmt::format("{}: catalog table '{}' does not exist at {}; the first sync creates "
                            "it (this needs dynamodb:CreateTable), or create it yourself: {}",
                            setting, options.catalog_table, (*client)->endpoint(),
                            aws::CreateTableCommand(options.catalog_table))};
}

}  // namespace

std::vector<SinkCheck> LakeSink::Check(const config::ConnectorConfig& entry,
                                       const std::string& setting) {
  const lake::LakeOptions options = LakeOptionsOf({}, entry);
  std::vector<SinkCheck> checks;
  if (lake::IsWarehouseOnS3(options.warehouse)) {
    checks.push_back(CheckWarehouseBucket(options, setting));
  }
  if (!options.catalog_table.empty()) checks.push_back(CheckCatalogTable(options, setting));
  return checks;
}

Capabilities LakeSink::KindCapabilities() {
  return Capabilities{
      .write_policies = {WritePolicy::kAppend, WritePolicy::kReplaceTable,
                         WritePolicy::kMergeByKey},
      .lands_final_state = true,
      .streams = true,
      .streams_replacing = true,
      .is_transactional = true,
  };
}

LakeSink::LakeSink(std::unique_ptr<lake::LakeWriter> writer)
    : capabilities_(KindCapabilities()), writer_(std::move(writer)) {}

Result<std::unique_ptr<Sink>> LakeSink::Open(const SinkContext& context,
                                             const config::ConnectorConfig& entry,
                                             const std::string&) {
  SKIPPR_ASSIGN_OR_RETURN(std::unique_ptr<lake::LakeWriter> writer,
                          lake::LakeWriter::Open(LakeOptionsOf(context, entry)));
  return std::unique_ptr<Sink>(new LakeSink(std::move(writer)));
}

Result<query::LandedRows> LakeSink::ReadLanded(const SinkContext& context,
                                               const config::ConnectorConfig& entry,
                                               const std::string&, const CommitId& commit) {
  const lake::LakeOptions options = LakeOptionsOf(context, entry);
  if (!lake::IsWarehouseOnS3(options.warehouse)) {
    return lake::LandedRowsOf({commit.location, commit.version}, context.env);
  }
  // The local copies it fetches outlive the Env.
  SKIPPR_ASSIGN_OR_RETURN(const std::unique_ptr<Env> env,
                          lake::OpenWarehouseEnv(options.warehouse, options.access));
  return lake::LandedRowsOf({commit.location, commit.version}, env.get());
}

Result<LandingOutcome> LakeSink::Land(const Landing& landing,
                                      const schema::NamespaceSchema& namespace_schema,
                                      const std::vector<std::shared_ptr<const Batch>>& batches) {
  SKIPPR_ASSIGN_OR_RETURN(const lake::LandingOutcome outcome,
                          writer_->Land(LakeLandingOf(landing), namespace_schema, batches));
  return OutcomeOf(outcome);
}

Result<bool> LakeSink::IsLanded(const std::string& namespace_name, const std::string& landing_id) {
  return writer_->HoldsLanding(namespace_name, landing_id);
}

Result<int64_t> LakeSink::WriteStream(const schema::NamespaceSchema& namespace_schema,
                                      StreamedBatches next) {
  return writer_->WriteStream(namespace_schema, std::move(next));
}

Result<LandingOutcome> LakeSink::LandStreamed(const Landing& landing,
                                              const schema::NamespaceSchema& namespace_schema,
                                              int64_t rows) {
  SKIPPR_ASSIGN_OR_RETURN(const lake::LandingOutcome outcome,
                          writer_->LandStreamed(LakeLandingOf(landing), namespace_schema, rows));
  return OutcomeOf(outcome);
}

Result<MaintenanceOutcome> LakeSink::Maintain(const schema::NamespaceSchema& namespace_schema,
                                              const LandingPolicy& policy) {
  SKIPPR_ASSIGN_OR_RETURN(
      const lake::MaintenanceOutcome outcome,
      writer_->Maintain(namespace_schema,
                        {.target_file_bytes = static_cast<int64_t>(policy.target_file_bytes)}));
  return MaintenanceOutcome{
      outcome.committed,          CommitOf(outcome.snapshot),   outcome.data_files_rewritten,
      outcome.data_files_written, outcome.delete_files_removed, outcome.rows_written};
}

}  // namespace skippr::sinks::internal
