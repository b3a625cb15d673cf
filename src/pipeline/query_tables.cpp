// Every namespace of every pipeline as a query table <pipeline>.<namespace>: the live WAL slices of
// one pinned store snapshot, projected onto the current schema.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "pipeline/pipeline.hpp"

namespace skippr::pipeline {

namespace {

// The rows of one namespace in one snapshot: decoded once, shared by every scan of the query.
struct SnapshotTables {
  std::map<std::string, std::vector<std::shared_ptr<const Batch>>> batches_by_namespace;
};

Result<std::shared_ptr<SnapshotTables>> ReadSnapshot(PipelineState& state) {
  auto tables = std::make_shared<SnapshotTables>();
  // One read transaction pins the catalog; the segment files it names are read while it is held, so
  // reclaim (which removes the catalog entry first) cannot pull them from under this query.
  SKIPPR_ASSIGN_OR_RETURN(store::ReadTransaction read, state.store().BeginRead());
  SKIPPR_ASSIGN_OR_RETURN(std::vector<wal::SegmentEntry> segments, wal::LiveSegments(read));
  for (const wal::SegmentEntry& entry : segments) {
    SKIPPR_ASSIGN_OR_RETURN(wal::SegmentReader reader, wal::OpenSegment(state.wal_directory(), entry));
    for (const wal::SliceInfo& slice : reader.slices()) {
      SKIPPR_ASSIGN_OR_RETURN(Batch batch, reader.ReadSlice(slice.ordinal));
      tables->batches_by_namespace[slice.namespace_name].push_back(
          std::make_shared<const Batch>(std::move(batch)));
    }
  }
  return tables;
}

}  // namespace

Result<std::unique_ptr<query::Engine>> OpenQueryEngine(const config::Config& config) {
  SKIPPR_ASSIGN_OR_RETURN(std::unique_ptr<query::Engine> engine, query::Engine::Open());
  for (const auto& [name, pipeline] : config.pipelines) {
    Result<PipelineState> state = PipelineState::OpenForReading(pipeline);
    if (!state.ok()) {
      if (state.status().code() == StatusCode::kNotFound) continue;  // never synced: no tables
      return state.status();
    }
    auto shared_state = std::make_shared<PipelineState>(std::move(state).value());
    schema::PipelineSchema saved;
    std::shared_ptr<SnapshotTables> snapshot;
    {
      SKIPPR_ASSIGN_OR_RETURN(store::ReadTransaction read, shared_state->store().BeginRead());
      SKIPPR_ASSIGN_OR_RETURN(saved, schema::LoadSchema(read));
    }
    SKIPPR_ASSIGN_OR_RETURN(snapshot, ReadSnapshot(*shared_state));
    for (const auto& [ns_name, ns] : saved.namespaces) {
      query::TableSource table;
      table.pipeline = name;
      table.namespace_name = ns_name;
      table.fields = ns.fields;
      table.batches = [snapshot, ns_name = ns_name]() -> Result<std::vector<std::shared_ptr<const Batch>>> {
        auto it = snapshot->batches_by_namespace.find(ns_name);
        if (it == snapshot->batches_by_namespace.end()) return std::vector<std::shared_ptr<const Batch>>{};
        return it->second;
      };
      SKIPPR_RETURN_IF_ERROR(engine->RegisterTable(std::move(table)));
    }
  }
  return engine;
}

}  // namespace skippr::pipeline
