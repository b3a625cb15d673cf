// BackgroundAggregator (landing.hpp): the transform.aggregates processor on a thread of its own,
// woken after each WAL commit, so ingest never waits for it (seeds/materialised-views.txt).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "pipeline/landing.hpp"

namespace skippr::pipeline::internal {

namespace {

// A source that keys its rows (a PostgreSQL table) changes entities, which the aggregates track by
// business key: the landed rows become their last-row images (a snapshot change each, keyed as
// the source keys it, BusinessKeyOf), so that a later update or delete of one is applied exactly,
// not as an insert of an unknown entity.
void AddLastRowImages(const std::vector<std::string>& key_fields, Batch& batch) {
  if (key_fields.empty()) return;
  std::vector<const Column*> keys;
  for (const std::string& key_field : key_fields) {
    auto field = std::find_if(batch.fields.begin(), batch.fields.end(),
                              [&](const Field& candidate) { return candidate.name == key_field; });
    if (field == batch.fields.end()) return;  // not keyable: the rows stay plain inserts
    keys.push_back(&batch.columns[static_cast<size_t>(field - batch.fields.begin())]);
  }
  batch.cdc.emplace();
  for (int64_t row = 0; row < batch.num_rows; ++row) {
    const auto key_value = [&](size_t i) { return keys[i]->ValueAt(row); };
    batch.cdc->Append(RowChange{.mutation = Mutation::kSnapshot,
                                .business_key = BusinessKeyOf(keys.size(), key_value)});
  }
}

// Rows per batch the baseline hands over: DuckDB's chunks gathered up to this many.
constexpr int64_t kBaselineBatchRows = 65'536;

// The landed tables (their snapshots from one store snapshot) and the live slices they already
// hold: where an aggregate rebuilt after reclaim starts. The tables' rows are streamed through
// DuckDB when the processor asks for them, a batch at a time.
Result<transform::LandedBaseline> ReadLandedBaseline(
    PipelineState& state, const std::string& pipeline_name,
    const std::optional<config::ConnectorConfig>& data_sink) {
  SKIPPR_ASSIGN_OR_RETURN(store::ReadTransaction read, state.store().BeginRead());
  SKIPPR_ASSIGN_OR_RETURN(const LandingState landing, ReadLandingState(read));
  SKIPPR_ASSIGN_OR_RETURN(const schema::PipelineSchema saved, schema::LoadSchema(read));
  transform::LandedBaseline baseline;
  for (const sinks::SliceRef& slice : landing.landed) {
    baseline.landed_slices.insert({slice.segment_id, slice.ordinal});
  }
  struct LandedTable {
    query::TableSource source;
    std::vector<std::string> key_fields;
  };
  auto tables = std::make_shared<std::vector<LandedTable>>();
  for (const auto& [namespace_name, commit] : landing.commits) {
    if (namespace_name == schema::kDeadlettersNamespace) continue;  // never aggregated
    if (!data_sink) {
      return Status::InvalidConfig(fmt::format(
          "pipeline {}: namespace '{}' was landed in a data_sink the config no longer names; an "
          "aggregate rebuilt after reclaim starts from the landed rows — restore the data_sink",
          pipeline_name, namespace_name));
    }
    if (!sinks::IsReadBack(*data_sink)) {
      return Status::NotSupported(fmt::format(
          "pipeline {}: an aggregate must be rebuilt, and the WAL of namespace '{}' was reclaimed "
          "after landing in a {} sink, whose rows skipprd does not read back; keep the aggregate's "
          "config as it was, or rebuild it with a new pipeline name",
          pipeline_name, namespace_name, data_sink->kind));
    }
    auto fields = saved.namespaces.find(namespace_name);
    if (fields == saved.namespaces.end()) {
      return Status::Corruption(fmt::format(
          "namespace '{}' has a landed table but no saved schema", namespace_name));
    }
    LandedTable table;
    table.source.pipeline = pipeline_name;
    table.source.namespace_name = namespace_name;
    table.source.fields = fields->second.fields;
    SKIPPR_ASSIGN_OR_RETURN(table.source.landed,
                            sinks::ReadLanded({pipeline_name, "", &state.env(),
                                               state.sink_directory()},
                                              *data_sink, namespace_name, commit));
    table.key_fields = fields->second.key_fields;
    tables->push_back(std::move(table));
  }
  baseline.for_each_batch = [tables, pipeline_name](
                                const transform::LandedBaseline::BatchConsumer& consume) -> Status {
    SKIPPR_ASSIGN_OR_RETURN(std::unique_ptr<query::Engine> engine, query::Engine::Open());
    for (const LandedTable& table : *tables) {
      const std::string namespace_name = table.source.namespace_name;
      SKIPPR_RETURN_IF_ERROR(engine->RegisterTable(table.source));
      SKIPPR_ASSIGN_OR_RETURN(std::unique_ptr<query::BatchStream> stream,
                              engine->OpenBatchStream(fmt::format(
                                  "SELECT * FROM {}.{}", query::QuoteIdentifier(pipeline_name),
                                  query::QuoteIdentifier(namespace_name))));
      for (;;) {
        SKIPPR_ASSIGN_OR_RETURN(std::optional<Batch> batch, stream->Next(kBaselineBatchRows));
        if (!batch) break;
        batch->namespace_name = namespace_name;
        AddLastRowImages(table.key_fields, *batch);
        SKIPPR_RETURN_IF_ERROR(consume(*batch));
      }
    }
    return Status::OK();
  };
  return baseline;
}

}  // namespace

Result<std::unique_ptr<BackgroundAggregator>> BackgroundAggregator::Start(
    PipelineState& state, const config::Config& config, const config::PipelineConfig& pipeline) {
  // Opening resets aggregates whose config changed, on this thread: a refusal fails the pass
  // before anything is read.
  const std::string pipeline_name = pipeline.name;
  std::optional<config::ConnectorConfig> data_sink;
  if (pipeline.data_sink) data_sink = config.data_sinks.at(*pipeline.data_sink).connector;
  SKIPPR_ASSIGN_OR_RETURN(
      std::unique_ptr<transform::AggregateProcessor> processor,
      transform::AggregateProcessor::Open(
          state.store(), state.wal_directory(), pipeline.transform.aggregates,
          {.wal_env = &state.wal_env()},
          [&state, pipeline_name, data_sink] {
            return ReadLandedBaseline(state, pipeline_name, data_sink);
          }));
  return std::unique_ptr<BackgroundAggregator>(
      new BackgroundAggregator(pipeline.name, std::move(processor)));
}

BackgroundAggregator::BackgroundAggregator(std::string pipeline_name,
                                           std::unique_ptr<transform::AggregateProcessor> processor)
    : pipeline_name_(std::move(pipeline_name)),
      processor_(std::move(processor)),
      rounds_([this] { return ProcessRound(); }) {}

BackgroundAggregator::~BackgroundAggregator() = default;

void BackgroundAggregator::RequestProcessing() { rounds_.Request(); }

Status BackgroundAggregator::failure() const { return rounds_.failure(); }

Result<int64_t> BackgroundAggregator::Finish() {
  SKIPPR_RETURN_IF_ERROR(rounds_.Finish());
  return rows_applied_;
}

Status BackgroundAggregator::ProcessRound() {
  Result<int64_t> applied = processor_->ProcessCommitted();
  if (!applied.ok()) {
    spdlog::error("sync {}: the aggregate processor stopped: {}", pipeline_name_,
                  applied.status().message());
    return applied.status();
  }
  rows_applied_ += *applied;
  return Status::OK();
}

}  // namespace skippr::pipeline::internal
