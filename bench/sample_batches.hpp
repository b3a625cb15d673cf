// bench/sample_batches: one realistic WAL batch — `rows` Sample-source rides shaped as sync shapes
// them (one namespace) — for the benchmarks that commit segments in-process (bench/wal, bench/s3).
#pragma once

#include <cstdint>
#include <vector>

#include "core/batch.hpp"

namespace skippr::bench {

std::vector<Batch> MakeSampleBatches(uint64_t rows);

}  // namespace skippr::bench
