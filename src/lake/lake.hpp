// SkipprLake (DESIGN.md §6): WAL slices landed exactly once in Apache Iceberg v2 tables, one table
// per namespace at {warehouse}/{table_namespace}/{namespace}. A landing writes one Parquet data file
// through DuckDB (Iceberg field ids, zstd, the `iceberg.schema` footer key), one manifest, a
// manifest list carrying the table's earlier manifests, and a new metadata version swapped in by
// compare-and-set in the catalog. The snapshot summary records the landing id, so a landing
// replayed after a crash finds itself in the table's history and changes nothing.
#pragma once

#include <compare>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/batch.hpp"
#include "core/status.hpp"
#include "schema/schema.hpp"

namespace skippr::iceberg {
class Catalog;
struct ManifestList;
struct Manifest;
struct Snapshot;
struct TableMetadata;
}
namespace skippr::query {
class Engine;
}

namespace skippr::lake {

// Snapshot summary keys skipprd adds to Iceberg's own.
inline constexpr std::string_view kLandingIdKey = "skippr.landing-id";
inline constexpr std::string_view kWalSegmentIdsKey = "skippr.wal-segment-ids";
inline constexpr std::string_view kPipelineKey = "skippr.pipeline";

// One slice of one WAL segment.
struct SliceRef {
  uint64_t segment_id = 0;
  uint32_t ordinal = 0;
  friend auto operator<=>(const SliceRef&, const SliceRef&) = default;
};

// The slices of one namespace that land as one snapshot. The id depends only on the pipeline, the
// namespace and the slices, so the landing planned before a crash is recognised after it.
struct Landing {
  std::string landing_id;
  std::string namespace_name;
  std::vector<SliceRef> slices;  // sorted, unique
  // write_policy replace_table: the landing's rows replace every row of the table (an Iceberg
  // overwrite snapshot) instead of being appended.
  bool replaces_table = false;
};
Landing PlanLanding(std::string_view pipeline, std::string namespace_name,
                    std::vector<SliceRef> slices, bool replaces_table = false);

struct LakeOptions {
  std::string pipeline;
  std::string warehouse;  // file:///absolute/path
  std::string table_namespace = "default";
  std::string catalog_uri;  // empty: SQLite at {warehouse}/skippr_catalog.db
  // Table health. A commit that would leave more manifests than this merges them all into one
  // (the earlier data files as EXISTING entries), so a snapshot's metadata stays bounded.
  size_t manifests_before_merge = 16;
  // Snapshot expiry at every commit: snapshots older than this, beyond the newest
  // min_snapshots_to_keep, go, with the manifest lists and manifests only they referenced, and the
  // metadata files that fell out of the metadata log.
  int64_t max_snapshot_age_ms = 24 * 3600 * 1000;
  int32_t min_snapshots_to_keep = 100;
};

// Where a namespace's landed rows are: one snapshot of its table (snapshot_id 0: none yet).
struct LandedSnapshot {
  std::string metadata_location;
  int64_t snapshot_id = 0;
};

struct LandingOutcome {
  LandedSnapshot snapshot;  // the table's current snapshot, which holds this landing's rows
  bool was_landed_before = false;  // a replay: found in the table's history, nothing written
  int64_t rows = 0;
  int64_t data_file_bytes = 0;
};

class LakeWriter {
 public:
  static Result<std::unique_ptr<LakeWriter>> Open(LakeOptions options);
  ~LakeWriter();
  LakeWriter(const LakeWriter&) = delete;
  LakeWriter& operator=(const LakeWriter&) = delete;

  // Lands the landing's `batches` (its slices, in order; older schemas are projected onto the
  // namespace's current one) as one append snapshot, creating the table or evolving its schema
  // first; or, when a snapshot in the table's history carries the landing id, returns at once.
  // Durable when it returns: data file, manifests and metadata are synced before the catalog swap.
  Result<LandingOutcome> Land(const Landing& landing, const schema::NamespaceSchema& namespace_schema,
                              const std::vector<std::shared_ptr<const Batch>>& batches);

 private:
  LakeWriter() = default;
  struct TableWrite;
  Result<iceberg::ManifestList> BuildManifestList(const iceberg::TableMetadata& next,
                                                  const iceberg::Snapshot* parent,
                                                  bool replaces_table, iceberg::Manifest manifest,
                                                  const std::string& manifest_location,
                                                  const std::string& manifest_path,
                                                  int64_t snapshot_id);
  Result<int64_t> WriteDataFile(const Landing& landing,
                                const schema::NamespaceSchema& namespace_schema,
                                const std::vector<std::shared_ptr<const Batch>>& batches,
                                const std::string& path);

  LakeOptions options_;
  std::unique_ptr<iceberg::Catalog> catalog_;
  std::unique_ptr<query::Engine> engine_;  // DuckDB, for Parquet writing
};

// The local paths of the data files of a landed snapshot (empty for snapshot_id 0).
Result<std::vector<std::string>> DataFilesOf(const LandedSnapshot& snapshot);

}  // namespace skippr::lake
