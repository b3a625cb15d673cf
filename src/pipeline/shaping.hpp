// Internal to pipeline/: what discover and sync share when they shape a source's records.
#pragma once

#include <vector>

#include "pipeline/pipeline.hpp"
#include "transform/transform.hpp"

namespace skippr::pipeline::internal {

schema::ShaperOptions ShaperOptionsFor(const config::PipelineConfig& pipeline, bool build_columns);

// Absorbs every record of `batch`. Deadletters (the source's and the shaper's) are left in
// `batch.deadletters` with their namespace, counted into `deadletter_count`, logged, and the first
// kDeadlettersDescribed copied (without their records) into `described`.
void AbsorbBatch(schema::Shaper& shaper, sources::SourceBatch& batch, uint64_t& deadletter_count,
                 std::vector<schema::Deadletter>& described);

// True when the pipeline's records pass through transform.ops between the shaper and the WAL: the
// shaper then evolves the input schema (schema::LoadInputSchema), readers see the ops' output.
bool HasOps(const config::PipelineConfig& pipeline);

// The ops of `pipeline` over the output schema `read` holds; null without ops.
Result<std::unique_ptr<transform::OpsRunner>> OpenOps(const config::Config& config,
                                                      const config::PipelineConfig& pipeline,
                                                      const store::ReadTransaction& read);

// The schema the shaper starts from: the input schema with ops, the saved schema without.
Result<schema::PipelineSchema> LoadShaperSchema(const config::PipelineConfig& pipeline,
                                                const store::ReadTransaction& read);

}  // namespace skippr::pipeline::internal
