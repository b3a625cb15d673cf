// Every namespace of every pipeline as a query table <pipeline>.<namespace>: in one pinned store
// snapshot, the landed Iceberg snapshot recorded there (data files minus equality deletes) plus the
// live WAL slices not landed in it, projected onto the current schema — under merge_by_key, the
// live slices upsert by key over the landed rows.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "pipeline/landing.hpp"
#include "pipeline/pipeline.hpp"

namespace skippr::pipeline {

namespace {

// How often a query re-pins when a segment file vanished under it (reclaimed after landing).
constexpr int kSnapshotAttempts = 10;

// One pinned store snapshot of a pipeline: per namespace, the live WAL slices not landed yet
// (decoded once, shared by every scan of the query) and the landed Iceberg snapshot's files.
struct SnapshotTables {
  std::map<std::string, std::vector<std::shared_ptr<const Batch>>> batches_by_namespace;
  std::map<std::string, query::LandedRows> landed_by_namespace;
};

Result<std::shared_ptr<SnapshotTables>> ReadSnapshotOnce(PipelineState& state) {
  auto tables = std::make_shared<SnapshotTables>();
  // One read transaction pins the catalog: the landed snapshot and the landed slices it records
  // are one cut, so a slice is read either from the lake or from the WAL, never both or neither.
  SKIPPR_ASSIGN_OR_RETURN(store::ReadTransaction read, state.store().BeginRead());
  SKIPPR_ASSIGN_OR_RETURN(std::vector<wal::SegmentEntry> segments, wal::LiveSegments(read));
  SKIPPR_ASSIGN_OR_RETURN(internal::LandingState landing, internal::ReadLandingState(read));
  for (const auto& [namespace_name, snapshot] : landing.snapshots) {
    SKIPPR_ASSIGN_OR_RETURN(tables->landed_by_namespace[namespace_name],
                            lake::LandedRowsOf(snapshot, &state.env()));
  }
  for (const wal::SegmentEntry& entry : segments) {
    bool any_live = false;
    for (const wal::SliceSummary& slice : entry.slices) {
      any_live = any_live || !landing.landed.contains({entry.segment_id, slice.ordinal});
    }
    if (!any_live) continue;
    SKIPPR_ASSIGN_OR_RETURN(wal::SegmentReader reader,
                            wal::OpenSegment(state.wal_directory(), entry, &state.env()));
    for (const wal::SliceInfo& slice : reader.slices()) {
      if (landing.landed.contains({entry.segment_id, slice.ordinal})) continue;
      SKIPPR_ASSIGN_OR_RETURN(Batch batch, reader.ReadSlice(slice.ordinal));
      tables->batches_by_namespace[slice.namespace_name].push_back(
          std::make_shared<const Batch>(std::move(batch)));
    }
  }
  return tables;
}

Result<std::shared_ptr<SnapshotTables>> ReadSnapshot(PipelineState& state) {
  for (int attempt = 1;; ++attempt) {
    Result<std::shared_ptr<SnapshotTables>> tables = ReadSnapshotOnce(state);
    // A segment landed and reclaimed between pinning the catalog and opening its file: its rows
    // are in the lake in a newer snapshot, which a fresh pin sees.
    if (tables.ok() || tables.status().code() != StatusCode::kNotFound ||
        attempt == kSnapshotAttempts) {
      return tables;
    }
  }
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
    const internal::LakePolicy policy = internal::ResolveLakePolicy(config, pipeline);
    for (const auto& [ns_name, ns] : saved.namespaces) {
      query::TableSource table;
      table.pipeline = name;
      table.namespace_name = ns_name;
      table.fields = ns.fields;
      if (auto landed = snapshot->landed_by_namespace.find(ns_name);
          landed != snapshot->landed_by_namespace.end()) {
        table.landed = landed->second;
      }
      // Under merge_by_key the live rows upsert the landed ones, as their landing will. Keys the
      // schema cannot carry fail the sync, not the query: the rows then read as appended.
      if (lake::CheckKeyColumns(policy.key_columns, ns.fields).ok()) {
        table.key_columns = policy.key_columns;
      }
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
