// SkipprLake behind the Sink interface: the lake's types at the boundary, nothing else.
#include "sinks/internal/lake_sink.hpp"

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

}  // namespace

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

Result<query::LandedRows> LakeSink::ReadLanded(const config::ConnectorConfig&, const std::string&,
                                               const CommitId& commit, Env* env) {
  return lake::LandedRowsOf({commit.location, commit.version}, env);
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
