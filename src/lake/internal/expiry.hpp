// What a commit that expired snapshots leaves behind, removed (lake/ internal: lake.cpp's commit).
#pragma once

#include <string>
#include <vector>

#include "core/env.hpp"
#include "core/status.hpp"
#include "iceberg/iceberg.hpp"

namespace skippr::lake::internal {

// After `committed` (the metadata swapped in) expired `expired`: removes their manifest lists, the
// manifests no kept snapshot lists, the metadata files that fell out of the metadata log, and the
// data and delete files no kept snapshot has live any more (those a snapshot took out of the table
// — a maintenance rewrite, a replace or a truncate — once every snapshot that still had them is
// expired). Data files are removed only when the table's history is one line (every snapshot an
// ancestor of the current one, no other ref), as SkipprLake writes it; otherwise they stay.
Status RemoveUnreferencedFiles(Env& env, const iceberg::TableMetadata& committed,
                               const std::vector<iceberg::Snapshot>& expired,
                               const std::vector<std::string>& dropped_metadata_files);

}  // namespace skippr::lake::internal
