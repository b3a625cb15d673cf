#include "pipeline/pipeline.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <filesystem>

#include "aws/aws.hpp"
#include "core/file.hpp"
#include "pipeline/shaping.hpp"

namespace skippr::pipeline {

namespace fs = std::filesystem;

namespace internal {

schema::ShaperOptions ShaperOptionsFor(const config::Config& config,
                                       const config::PipelineConfig& pipeline,
                                       ShapingPurpose purpose) {
  schema::ShaperOptions options;
  options.default_namespace = pipeline.name;
  options.namespace_fields = pipeline.transform.namespace_fields;
  options.flatten_events = pipeline.transform.flatten_events;
  options.build_columns = purpose == ShapingPurpose::kSync;
  const config::ConnectorConfig& source = config.data_sources.at(pipeline.data_source).connector;
  if (source.Has("primary_key") && !HasOps(pipeline)) {
    options.key_fields = source.GetStringList("primary_key");
    options.key_fields_setting =
        fmt::format("data_sources.{}.{}.primary_key", pipeline.data_source, source.kind);
    options.key_checks_types_only = purpose == ShapingPurpose::kDiscover;
  }
  return options;
}

Status AbsorbBatch(schema::Shaper& shaper, sources::SourceBatch& batch, uint64_t& deadletter_count,
                   std::vector<schema::Deadletter>& described) {
  SKIPPR_RETURN_IF_ERROR(shaper.ApplyDeclaredTypes(batch.context));
  schema::RecordOrigin origin{batch.partition};
  for (sources::SourceRecord& record : batch.records) {
    origin.line = record.line;
    origin.row = record.row;
    RowChange* change = record.change ? &*record.change : nullptr;
    if (auto deadletter = shaper.Absorb(std::move(record.value), origin, batch.context, change)) {
      batch.deadletters.push_back(std::move(*deadletter));
    }
  }
  if (batch.columns) {
    for (schema::Deadletter& deadletter :
         shaper.AbsorbColumns(std::move(*batch.columns), {batch.partition}, batch.context)) {
      batch.deadletters.push_back(std::move(deadletter));
    }
    batch.columns.reset();
  }
  if (batch.deadletters.empty()) return Status::OK();
  const std::string source_namespace = shaper.NamespaceOf(batch.context);
  for (schema::Deadletter& deadletter : batch.deadletters) {
    if (deadletter.namespace_name.empty()) deadletter.namespace_name = source_namespace;
    if (deadletter_count++ < kDeadlettersDescribed) {
      spdlog::warn("Deadletter id={} ns={} err={}", schema::DeadletterId(deadletter),
                   deadletter.namespace_name, schema::DescribeDeadletter(deadletter));
      // Described without the record (up to 1 MiB each); the batch keeps it for the WAL.
      std::string payload = std::move(deadletter.payload);
      described.push_back(deadletter);
      deadletter.payload = std::move(payload);
    }
  }
  return Status::OK();
}

bool HasOps(const config::PipelineConfig& pipeline) {
  return pipeline.transform.type != config::TransformType::kCopy && !pipeline.transform.ops.empty();
}

Result<std::unique_ptr<transform::OpsRunner>> OpenOps(const config::Config& config,
                                                      const config::PipelineConfig& pipeline,
                                                      const store::ReadTransaction& read) {
  if (!HasOps(pipeline)) return std::unique_ptr<transform::OpsRunner>();
  SKIPPR_ASSIGN_OR_RETURN(schema::PipelineSchema output, schema::LoadSchema(read));
  return transform::OpsRunner::Open(pipeline, std::move(output), config.path);
}

Result<schema::PipelineSchema> LoadShaperSchema(const config::PipelineConfig& pipeline,
                                                const store::ReadTransaction& read) {
  return HasOps(pipeline) ? schema::LoadInputSchema(read) : schema::LoadSchema(read);
}

}  // namespace internal

namespace {
// Records per batch while discover samples (see Discover).
constexpr uint64_t kDiscoverRecordsPerBatch = 2048;

std::string StoreDirectory(const std::string& state_dir) {
  return (fs::path(state_dir) / "store").string();
}

Result<std::unique_ptr<store::Store>> OpenDynamoStore(const config::PipelineConfig& pipeline,
                                                      bool takes_writer_lease) {
  return store::OpenDynamoStore(
      {.table = pipeline.store_table,
       .pipeline_key = pipeline.store_key,
       .takes_writer_lease = takes_writer_lease,
       .lease_duration = std::chrono::seconds(pipeline.store_lease_seconds)});
}
}  // namespace

std::string PipelineState::wal_directory() const {
  if (wal_s3_uri_.empty()) return directory_ + "/wal";
  return wal_s3_uri_ + "/" + store_->identity().instance_id;
}

Status PipelineState::OpenWalEnv(const config::PipelineConfig& pipeline) {
  wal_s3_uri_ = pipeline.wal_s3_uri;
  if (wal_s3_uri_.empty()) return Status::OK();
  static const ProcessEnvironment environment;
  SKIPPR_ASSIGN_OR_RETURN(wal_s3_env_,
                          aws::S3Env::Open({}, environment, directory_ + "/wal-spool"));
  return Status::OK();
}

Result<PipelineState> PipelineState::OpenForWriting(const config::PipelineConfig& pipeline,
                                                    Env* env) {
  PipelineState state;
  state.directory_ = pipeline.StateDir();
  state.env_ = env;
  if (Status created = CreatePrivateDirectories(*env, state.directory_, "pipeline"); !created.ok()) {
    return Status(created.code(), fmt::format("{}; check DATA_DIR (or pipelines.{}.data_dir)",
                                              created.message(), pipeline.name));
  }
  // Also one an older skipprd created with the umask's mode (a mode change: the Env has no chmod).
  ::chmod(state.directory_.c_str(), 0700);
  if (!pipeline.store_table.empty()) {
    // The lease lives in the table with the store: a writer on another machine is fenced too.
    SKIPPR_ASSIGN_OR_RETURN(state.store_, OpenDynamoStore(pipeline, /*takes_writer_lease=*/true));
  } else {
    SKIPPR_ASSIGN_OR_RETURN(store::WriterLease lease,
                            store::WriterLease::Acquire(state.directory_, pipeline.name, env));
    state.lease_.emplace(std::move(lease));
    SKIPPR_ASSIGN_OR_RETURN(state.store_,
                            store::Store::Open({.directory = StoreDirectory(state.directory_),
                                                .env = env}));
  }
  SKIPPR_RETURN_IF_ERROR(state.OpenWalEnv(pipeline));
  return state;
}

Result<PipelineState> PipelineState::OpenForReading(const config::PipelineConfig& pipeline,
                                                    Env* env) {
  PipelineState state;
  state.directory_ = pipeline.StateDir();
  state.env_ = env;
  if (!pipeline.store_table.empty()) {
    Result<std::unique_ptr<store::Store>> store =
        OpenDynamoStore(pipeline, /*takes_writer_lease=*/false);
    if (store.status().code() == StatusCode::kNotFound) {
      return Status::NotFound(fmt::format(
          "pipeline '{}' has no state in DynamoDB table '{}' yet; run `skipprd discover "
          "--pipeline {}` first",
          pipeline.name, pipeline.store_table, pipeline.name));
    }
    SKIPPR_ASSIGN_OR_RETURN(state.store_, std::move(store));
    SKIPPR_RETURN_IF_ERROR(state.OpenWalEnv(pipeline));
    return state;
  }
  std::error_code error;
  if (!fs::exists(fs::path(StoreDirectory(state.directory_)) / "data.mdb", error)) {
    return Status::NotFound(fmt::format(
        "pipeline '{}' has no state in {} yet; run `skipprd discover --pipeline {}` first",
        pipeline.name, state.directory_, pipeline.name));
  }
  // A reader makes nothing durable: no fsync of the store's directory.
  SKIPPR_ASSIGN_OR_RETURN(
      state.store_,
      store::Store::Open(
          {.directory = StoreDirectory(state.directory_), .env = env, .syncs_directory = false}));
  SKIPPR_RETURN_IF_ERROR(state.OpenWalEnv(pipeline));
  return state;
}

Result<DiscoverResult> Discover(const config::Config& config,
                                const config::PipelineConfig& pipeline,
                                const std::function<void(const DiscoverProgress&)>& on_progress) {
  SKIPPR_ASSIGN_OR_RETURN(PipelineState state, PipelineState::OpenForWriting(pipeline));
  return Discover(config, pipeline, state, on_progress);
}

namespace {
// Discover with transform.ops: `result` holds the shaper's (input) changes and schema; the input
// schema is saved as it is, and the output schema evolved from every input namespace (the ops may
// have changed since the last run) is saved and becomes the result.
Result<DiscoverResult> SaveDiscoveredThroughOps(const config::PipelineConfig& pipeline,
                                                PipelineState& state, transform::OpsRunner& ops,
                                                DiscoverResult& result) {
  std::vector<schema::NamespaceChange> output_changes;
  for (const auto& [name, input] : result.schema.namespaces) {
    SKIPPR_ASSIGN_OR_RETURN(std::optional<schema::NamespaceChange> change, ops.Evolve(input));
    if (change) output_changes.push_back(std::move(*change));
  }
  if (!result.changes.empty() || !output_changes.empty()) {
    SKIPPR_ASSIGN_OR_RETURN(store::WriteTransaction write, state.store().BeginWrite());
    for (const schema::NamespaceChange& change : result.changes) {
      SKIPPR_RETURN_IF_ERROR(
          schema::SaveInputNamespace(write, result.schema.namespaces.at(change.namespace_name)));
    }
    for (const schema::NamespaceChange& change : output_changes) {
      const schema::NamespaceSchema& output = ops.output_schema().namespaces.at(change.namespace_name);
      SKIPPR_RETURN_IF_ERROR(schema::SaveNamespace(write, output));
      spdlog::info("discover {}: namespace {} {} through transform.ops (schema {}): {}",
                   pipeline.name, change.namespace_name,
                   change.is_new_namespace ? "discovered" : "evolved", output.schema_id,
                   fmt::join(change.changes, "; "));
    }
    SKIPPR_RETURN_IF_ERROR(write.Commit());
  }
  result.changes = std::move(output_changes);
  result.schema = ops.output_schema();
  return std::move(result);
}
}  // namespace

Result<DiscoverResult> Discover(const config::Config& config,
                                const config::PipelineConfig& pipeline, PipelineState& state,
                                const std::function<void(const DiscoverProgress&)>& on_progress,
                                uint64_t sample_records_per_partition) {
  schema::PipelineSchema saved;
  std::unique_ptr<transform::OpsRunner> ops;
  {
    SKIPPR_ASSIGN_OR_RETURN(store::ReadTransaction read, state.store().BeginRead());
    SKIPPR_ASSIGN_OR_RETURN(saved, internal::LoadShaperSchema(pipeline, read));
    SKIPPR_ASSIGN_OR_RETURN(ops, internal::OpenOps(config, pipeline, read));
  }
  const config::ConnectorConfig& connector = config.data_sources.at(pipeline.data_source).connector;
  SKIPPR_ASSIGN_OR_RETURN(std::unique_ptr<sources::Source> source, sources::MakeSource(connector, pipeline.data_source));
  sources::ReadOptions options;
  options.max_records_per_partition = sample_records_per_partition;
  // The sample's records are absorbed and dropped a small batch at a time: each batch's values
  // reuse the memory the last one freed, where one batch of the whole sample touched fresh pages
  // for all of it (a sync's discover spent a third of its time in page faults).
  options.max_records_per_batch = kDiscoverRecordsPerBatch;
  SKIPPR_RETURN_IF_ERROR(source->Open({}, options));

  schema::Shaper shaper(std::move(saved), internal::ShaperOptionsFor(
                                              config, pipeline, internal::ShapingPurpose::kDiscover));

  DiscoverResult result;
  DiscoverProgress progress;
  while (true) {
    SKIPPR_ASSIGN_OR_RETURN(std::optional<sources::SourceBatch> batch, source->Next());
    if (!batch) break;
    result.records += batch->record_count();  // before the shaper takes the columns
    SKIPPR_RETURN_IF_ERROR(
        internal::AbsorbBatch(shaper, *batch, result.deadletter_count, result.deadletters));
    result.bytes += batch->bytes_read;
    progress = {result.records, result.deadletter_count, result.bytes};
    if (on_progress) on_progress(progress);
  }
  if (result.deadletter_count > kDeadlettersDescribed) {
    spdlog::warn("{} more deadletters not described one by one",
                 result.deadletter_count - kDeadlettersDescribed);
  }

  result.changes = shaper.Seal();
  result.schema = shaper.schema();
  if (ops) return SaveDiscoveredThroughOps(pipeline, state, *ops, result);
  if (!result.changes.empty()) {
    SKIPPR_ASSIGN_OR_RETURN(store::WriteTransaction write, state.store().BeginWrite());
    for (const schema::NamespaceChange& change : result.changes) {
      SKIPPR_RETURN_IF_ERROR(
          schema::SaveNamespace(write, result.schema.namespaces.at(change.namespace_name)));
      spdlog::info("discover {}: namespace {} {} (schema {}): {}", pipeline.name,
                   change.namespace_name, change.is_new_namespace ? "discovered" : "evolved",
                   result.schema.namespaces.at(change.namespace_name).schema_id,
                   fmt::join(change.changes, "; "));
    }
    SKIPPR_RETURN_IF_ERROR(write.Commit());
  }
  return result;
}

Result<schema::NamespaceSchema> ApplyNamespaceFields(const config::PipelineConfig& pipeline,
                                                     const std::string& namespace_name,
                                                     std::vector<Field> fields) {
  SKIPPR_RETURN_IF_ERROR(schema::CheckNames(namespace_name, fields));
  SKIPPR_ASSIGN_OR_RETURN(PipelineState state, PipelineState::OpenForWriting(pipeline));
  SKIPPR_ASSIGN_OR_RETURN(store::WriteTransaction write, state.store().BeginWrite());
  SKIPPR_ASSIGN_OR_RETURN(schema::PipelineSchema saved, schema::LoadSchema(write));
  schema::NamespaceSchema ns;
  ns.name = namespace_name;
  if (auto it = saved.namespaces.find(namespace_name); it != saved.namespaces.end())
    ns = it->second;
  // Ids by name: a field that keeps its name keeps its id (and its nested ids when its type is
  // unchanged); everything else gets fresh ids, never reusing one.
  std::function<void(Field&, const Field*)> assign = [&](Field& field, const Field* previous) {
    field.id = previous != nullptr ? previous->id : ++ns.last_field_id;
    if (!field.type.is_nested()) return;
    if (previous != nullptr && previous->type == field.type) {
      field.type = previous->type;
      return;
    }
    for (Field& child : field.type.mutable_children()) assign(child, nullptr);
  };
  std::vector<std::string> changes;
  for (Field& field : fields) {
    const Field* previous = ns.FindField(field.name);
    assign(field, previous);
    if (previous == nullptr) {
      changes.push_back(fmt::format("added {} ({})", field.name, field.type.ToString()));
    } else if (previous->type != field.type || previous->nullable != field.nullable) {
      changes.push_back(fmt::format("changed {} to {}", field.name, field.type.ToString()));
    }
  }
  for (const Field& previous : ns.fields) {
    const bool kept = std::any_of(fields.begin(), fields.end(),
                                  [&](const Field& field) { return field.name == previous.name; });
    if (!kept) changes.push_back(fmt::format("removed {}", previous.name));
  }
  changes.insert(changes.begin(), "fields replaced by metadata apply");
  ns.fields = std::move(fields);
  ns.schema_id += 1;
  ns.history.push_back({ns.schema_id, changes});
  SKIPPR_RETURN_IF_ERROR(schema::SaveNamespace(write, ns));
  SKIPPR_RETURN_IF_ERROR(write.Commit());
  return ns;
}

Result<schema::PipelineSchema> ReadSchema(const config::PipelineConfig& pipeline) {
  Result<PipelineState> state = PipelineState::OpenForReading(pipeline);
  if (!state.ok()) {
    if (state.status().code() == StatusCode::kNotFound) return schema::PipelineSchema{};
    return state.status();
  }
  SKIPPR_ASSIGN_OR_RETURN(store::ReadTransaction read, state->store().BeginRead());
  return schema::LoadSchema(read);
}

}  // namespace skippr::pipeline
