// SkipprLake (DESIGN.md §6): WAL slices landed exactly once in Apache Iceberg v2 tables, one table
// per namespace at {warehouse}/{table_namespace}/{namespace}. A landing writes one Parquet data
// file through DuckDB (Iceberg field ids, zstd, the `iceberg.schema` footer key), one manifest, a
// manifest list carrying the table's earlier manifests, and a new metadata version swapped in by
// compare-and-set in the catalog. The snapshot summary records the landing id, so a landing
// replayed after a crash finds itself in the table's history and changes nothing. A merge_by_key
// landing writes the last row per key and a position-delete file of the live rows of every key it
// touches, found by one scan of the table's key columns (docs/formats/landing.md).
#pragma once

#include <compare>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "aws/aws.hpp"
#include "core/batch.hpp"
#include "core/env.hpp"
#include "core/environment.hpp"
#include "core/status.hpp"
#include "query/query.hpp"
#include "schema/schema.hpp"

namespace skippr::iceberg {
class Catalog;
struct VersionedMetadata;
}

namespace skippr::lake {

// Snapshot summary keys skipprd adds to Iceberg's own.
inline constexpr std::string_view kLandingIdKey = "skippr.landing-id";
inline constexpr std::string_view kWalSegmentIdsKey = "skippr.wal-segment-ids";
inline constexpr std::string_view kPipelineKey = "skippr.pipeline";
// The instance id of the store that planned the landing (store::StoreIdentity): a pipeline whose
// DATA_DIR was wiped or replaced is another instance, and its landings are other landings.
inline constexpr std::string_view kPipelineInstanceKey = "skippr.pipeline-instance";
// On a landing of source changes (CDC): the greatest order token among them, in hex — the source
// position the table reflects once the snapshot is committed (for PostgreSQL, the commit LSN then
// the change's place in its transaction, 8 bytes each, big-endian).
inline constexpr std::string_view kSourcePositionKey = "skippr.source-position";
// On a maintenance snapshot (which carries no landing id and no WAL segment ids): what it did.
inline constexpr std::string_view kMaintenanceKey = "skippr.maintenance";

// What one landing commits (sinks::Landing as the lake needs it): its id, found in the table's
// history on a replay, and the WAL segments its rows came from, recorded beside it.
struct Landing {
  std::string landing_id;
  std::string namespace_name;
  std::vector<uint64_t> wal_segment_ids;  // sorted, unique
  // write_policy replace_table: the landing's rows replace every row of the table (an Iceberg
  // overwrite snapshot) instead of being appended.
  bool replaces_table = false;
  // write_policy merge_by_key: the top-level columns that identify a row. The landing upserts: per
  // key its last row in slice order (none after a CDC delete) replaces the table's rows of the key.
  std::vector<std::string> key_columns;
};

// OK when `key_columns` can key rows of a table with `fields`: at least one, none repeated, each a
// top-level primitive column other than float or double (NaN and -0.0 make equality ambiguous).
// Otherwise InvalidArgument naming the column, for the caller to prefix with where it was set.
Status CheckKeyColumns(const std::vector<std::string>& key_columns,
                       const std::vector<Field>& fields);

// How a warehouse on S3 is reached (unused for a file:/// one).
struct WarehouseAccess {
  aws::S3Options s3;
  aws::DynamoOptions dynamodb;  // the catalog_table's
  const Environment* environment = nullptr;  // AWS settings; nullptr: the process environment
  // A local directory for upload spools and the local copies of data files DuckDB writes and
  // reads (a cache: deleting it loses nothing).
  std::string local_directory;
};

// The Env a warehouse's files are reached through: `local` for file:///, an S3Env (with local
// copies under access.local_directory) for s3://.
Result<std::unique_ptr<Env>> OpenWarehouseEnv(const std::string& warehouse,
                                              const WarehouseAccess& access);
bool IsWarehouseOnS3(std::string_view warehouse);
// Where that Env keeps the local copy of `uri` (s3://bucket/key), under `local_directory`.
Result<std::string> LocalCopyPathOf(const std::string& local_directory, std::string_view uri);

struct LakeOptions {
  std::string pipeline;
  std::string pipeline_instance;  // the store's instance id, for the snapshot summary
  std::string warehouse;  // file:///absolute/path or s3://bucket/prefix
  std::string table_namespace = "default";
  // Empty: SQLite at {warehouse}/skippr_catalog.db (which an S3 warehouse cannot have).
  std::string catalog_uri;
  std::string catalog_table;  // set: the catalog is this DynamoDB table
  WarehouseAccess access;     // for a warehouse on S3 and a DynamoDB catalog
  // Table health. A commit that would leave more manifests than this merges them all into one
  // (the earlier data files as EXISTING entries), so a snapshot's metadata stays bounded.
  size_t manifests_before_merge = 16;
  // Snapshot expiry at every commit: snapshots older than this, beyond the newest
  // min_snapshots_to_keep, go, with the manifest lists and manifests only they referenced, and the
  // metadata files that fell out of the metadata log.
  int64_t max_snapshot_age_ms = 24 * 3600 * 1000;
  int32_t min_snapshots_to_keep = 100;
  // The lake's own file operations (metadata, manifests, directories, the fsync of the Parquet
  // files DuckDB writes) on a file:/// warehouse; DuckDB and the catalog database do their own
  // I/O. An s3:// warehouse gets its own Env (OpenWarehouseEnv).
  Env* env = Env::Default();
};

// Where a namespace's landed rows are: one snapshot of its table (snapshot_id 0: none yet).
struct LandedSnapshot {
  std::string metadata_location;
  int64_t snapshot_id = 0;
};

struct LandingOutcome {
  LandedSnapshot snapshot;  // the table's current snapshot, which holds this landing's rows
  bool was_landed_before = false;  // a replay: found in the table's history, nothing written
  int64_t rows = 0;                // in the landing's slices
  int64_t data_file_bytes = 0;
  int64_t rows_written = 0;  // in the data file: `rows`, or for merge_by_key one per live key
  // merge_by_key: the earlier rows its position deletes remove (for a table that takes equality
  // deletes instead, the keys deleted).
  int64_t rows_deleted = 0;
};

// When a table is rewritten (LakeWriter::Maintain).
struct MaintenancePolicy {
  // More delete files than this: every data file a delete applies to is rewritten
  // without the deleted rows, and the delete files go.
  int64_t max_delete_files = 16;
  // More data files smaller than `small_file_bytes` than this: they are rewritten as one.
  int64_t max_small_files = 16;
  int64_t small_file_bytes = 32 << 20;
  // The rewritten rows are written as files of about this many bytes each (the sink's
  // target_file_size_bytes).
  int64_t target_file_bytes = 128 << 20;
};

struct MaintenanceOutcome {
  bool committed = false;  // false: nothing needed doing, or another writer came first
  LandedSnapshot snapshot;  // the table's current snapshot, when committed
  int64_t data_files_rewritten = 0;
  int64_t data_files_written = 0;
  int64_t delete_files_removed = 0;
  int64_t rows_written = 0;
};

class LakeWriter {
 public:
  static Result<std::unique_ptr<LakeWriter>> Open(LakeOptions options);
  ~LakeWriter();
  LakeWriter(const LakeWriter&) = delete;
  LakeWriter& operator=(const LakeWriter&) = delete;

  // Lands the landing's `batches` (its slices, in order; older schemas are projected onto the
  // namespace's current one) as one snapshot — an append, or an overwrite when it replaces the
  // table or merges by key — creating the table or evolving its schema first; or, when a snapshot
  // in the table's history carries the landing id, returns at once. Durable when it returns: data
  // and delete files, manifests and metadata are synced before the catalog swap.
  Result<LandingOutcome> Land(const Landing& landing, const schema::NamespaceSchema& namespace_schema,
                              const std::vector<std::shared_ptr<const Batch>>& batches);

  // Whether the namespace's table has a snapshot in its current history carrying `landing_id`
  // (false when there is no table).
  Result<bool> HoldsLanding(const std::string& namespace_name, const std::string& landing_id);

  // Streaming landing, for an append or a table replace: the data file is written while its
  // batches are still being committed to the WAL, before the landing they make up is known.
  // WriteStream writes every batch `next` hands out (each of `namespace_schema`'s current schema;
  // nullptr ends the stream) to a synced Parquet file no snapshot names, and returns its rows.
  // LandStreamed then lands `landing`, whose slices are exactly the streamed batches (`rows` rows
  // in all, checked against the file), by committing that file as Land would have written it (a
  // replay of the landing after a crash writes it again). Nothing holds a batch once DuckDB has
  // read it, so a stream's memory is its batches in flight, not the landing. A stream that never
  // lands leaves a file that the next stream of the pipeline overwrites.
  using StreamedBatches = std::function<Result<std::shared_ptr<const Batch>>()>;
  Result<int64_t> WriteStream(const schema::NamespaceSchema& namespace_schema,
                              StreamedBatches next);
  Result<LandingOutcome> LandStreamed(const Landing& landing,
                                      const schema::NamespaceSchema& namespace_schema,
                                      int64_t rows);

  // Keeps reads of a merged table fast (docs/formats/landing.md, "Maintenance"): past the
  // policy's limits, rewrites the data files the deletes apply to (without the deleted
  // rows) and the small data files into files of the target size, and drops every delete file —
  // one snapshot of
  // operation "replace" with the same rows, carrying kMaintenanceKey and no landing id. Nothing is
  // done while the table's schema differs from `namespace_schema` (the next landing evolves it).
  // A crash before the commit leaves only files no snapshot names, in a directory of the rewrite's
  // own that the next maintenance of the same snapshot empties first; another writer's commit
  // first leaves the table as it was.
  Result<MaintenanceOutcome> Maintain(const schema::NamespaceSchema& namespace_schema,
                                      const MaintenancePolicy& policy = {});

 private:
  LakeWriter() = default;
  struct LandingFiles;
  struct StreamedFile;
  struct TableLocations {
    std::string location;  // the table's URI
    std::string path;      // its directory's Env path (iceberg::EnvPathOfUri)
  };
  Result<TableLocations> LocationsOf(const std::string& namespace_name) const;
  // Commits `landing` (of `rows` rows) as one snapshot, writing its files with `write_files` once
  // the table (`base`, its current metadata) is known to lack it; retries a conflicting commit,
  // writing the files again when a merge's deletes were written against another snapshot.
  using WriteFiles = std::function<Result<LandingFiles>(
      const TableLocations& locations, const iceberg::VersionedMetadata& base)>;
  Result<LandingOutcome> Commit(const Landing& landing,
                                const schema::NamespaceSchema& namespace_schema, int64_t rows,
                                const WriteFiles& write_files);
  Result<LandingFiles> WriteLandingFiles(const Landing& landing,
                                         const schema::NamespaceSchema& namespace_schema,
                                         const std::vector<std::shared_ptr<const Batch>>& batches,
                                         const TableLocations& locations,
                                         const iceberg::VersionedMetadata& base);

  LakeOptions options_;
  std::unique_ptr<Env> warehouse_env_;  // for a warehouse on S3; options_.env points at it
  std::unique_ptr<iceberg::Catalog> catalog_;
  std::unique_ptr<query::Engine> engine_;  // DuckDB, for Parquet writing
  std::unique_ptr<StreamedFile> streamed_;  // WriteStream's file, until LandStreamed takes it
};

// The live data and delete files of a landed snapshot, as local paths DuckDB reads (for a table
// on S3, local copies `env` fetches) with their data sequence numbers, delete key columns named as
// in the table's current schema (nothing for snapshot_id 0). `env`: OpenWarehouseEnv's.
Result<query::LandedRows> LandedRowsOf(const LandedSnapshot& snapshot, Env* env = Env::Default());

}  // namespace skippr::lake
