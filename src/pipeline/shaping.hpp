// Internal to pipeline/: what discover and sync share when they shape a source's records.
#pragma once

#include <vector>

#include "pipeline/pipeline.hpp"

namespace skippr::pipeline::internal {

schema::ShaperOptions ShaperOptionsFor(const config::PipelineConfig& pipeline, bool build_columns);

// Absorbs every record of `batch`. Deadletters (the source's and the shaper's) are counted into
// `deadletter_count`, logged, and the first kDeadlettersDescribed kept in `described`.
void AbsorbBatch(schema::Shaper& shaper, sources::SourceBatch& batch, uint64_t& deadletter_count,
                 std::vector<schema::Deadletter>& described);

}  // namespace skippr::pipeline::internal
