// Internal to pipeline/: what discover and sync share when they shape a source's records.
#pragma once

#include <vector>

#include "pipeline/pipeline.hpp"
#include "transform/transform.hpp"

namespace skippr::pipeline::internal {

// Discover only evolves the schema; sync also builds columns. With the source's primary_key (and
// no transform.ops, which may rename or derive the key) sync deadletters records whose key is
// missing, null or of another type; discover only those of another type (no sibling of a key
// column), so that a key the data lacks or cannot carry reaches the saved schema for the pass to
// refuse before reading (CheckKeyColumns) rather than making every record a deadletter.
enum class ShapingPurpose { kDiscover, kSync };
schema::ShaperOptions ShaperOptionsFor(const config::Config& config,
                                       const config::PipelineConfig& pipeline,
                                       ShapingPurpose purpose);

// Absorbs every record of `batch`. Deadletters (the source's and the shaper's) are left in
// `batch.deadletters` with their namespace, counted into `deadletter_count`, logged, and the first
// kDeadlettersDescribed copied (without their records) into `described`. Fails, absorbing nothing,
// when the batch's binding declared types do not fit its namespace (Shaper::ApplyDeclaredTypes).
Status AbsorbBatch(schema::Shaper& shaper, sources::SourceBatch& batch, uint64_t& deadletter_count,
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
