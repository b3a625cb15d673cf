// Internal to pipeline/: one sync pass (SyncOnce's work), as a sequence of named steps.
#pragma once

#include <functional>

#include "pipeline/pipeline.hpp"

namespace skippr::pipeline::internal {

// Recovers the WAL, starts landing and the aggregates beside ingest, runs discover when no schema
// exists, reads the source from its committed positions, commits batches to the WAL (with their
// positions and schema changes in one store transaction) whenever the buffer threshold is
// reached, until the source has nothing more; then drains the commits, the aggregates and a last
// landing round.
Result<SyncResult> RunSyncPass(const config::Config& config,
                               const config::PipelineConfig& pipeline, PipelineState& state,
                               const std::function<void(const SyncProgress&)>& on_progress,
                               const SyncOptions& options);

}  // namespace skippr::pipeline::internal
