// Iceberg table metadata, format version 2 (Apache Iceberg table spec: "Table Metadata",
// "Snapshots", "Snapshot References", Appendix C), and a table's metadata files on the local
// filesystem. What we write, field by field, and the file layout: docs/formats/iceberg-tables.md.
//
// The model keeps every v2 field we write and read; the optional `statistics` and
// `partition-statistics` lists are informational, read past, and not written again.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/env.hpp"
#include "core/status.hpp"
#include "core/types.hpp"
#include "iceberg/partition_spec.hpp"

namespace skippr::iceberg {

inline constexpr int kFormatVersion = 2;
// Partition field ids start at 1000, so a table that never had a partition field has assigned
// up to 999 (the reference implementation writes the same).
inline constexpr int32_t kUnpartitionedLastPartitionId = 999;
inline constexpr std::string_view kMainBranch = "main";
// How many earlier metadata files the metadata log remembers unless the table property
// `write.metadata.previous-versions-max` says otherwise (the reference implementation's default).
inline constexpr int kDefaultPreviousVersionsMax = 100;

struct TableSchema {
  int32_t schema_id = 0;
  std::vector<Field> fields;
  std::vector<int32_t> identifier_field_ids;  // optional in the spec; written only when non-empty

  friend bool operator==(const TableSchema&, const TableSchema&) = default;
};

struct SortField {
  std::string transform;
  int32_t source_id = 0;
  std::string direction;   // "asc" | "desc"
  std::string null_order;  // "nulls-first" | "nulls-last"

  friend bool operator==(const SortField&, const SortField&) = default;
};

struct SortOrder {
  int32_t order_id = 0;           // 0 is reserved for the unsorted order
  std::vector<SortField> fields;  // empty: unsorted

  friend bool operator==(const SortOrder&, const SortOrder&) = default;
};

// The snapshot summary's required `operation`.
enum class SnapshotOperation { kAppend, kReplace, kOverwrite, kDelete };
std::string_view SnapshotOperationName(SnapshotOperation operation);  // "append", ...

struct Snapshot {
  int64_t snapshot_id = 0;
  std::optional<int64_t> parent_snapshot_id;
  int64_t sequence_number = 0;
  int64_t timestamp_ms = 0;
  std::string manifest_list;  // location of the manifest list file
  SnapshotOperation operation = SnapshotOperation::kAppend;
  // The rest of the summary (string values): "added-records", "skippr.landing-id", ...
  std::map<std::string, std::string> summary;
  std::optional<int32_t> schema_id;

  friend bool operator==(const Snapshot&, const Snapshot&) = default;
};

struct SnapshotRef {
  int64_t snapshot_id = 0;
  std::string type = "branch";  // "branch" | "tag"
  // Retention overrides; absent means the defaults passed to ExpireSnapshots.
  std::optional<int32_t> min_snapshots_to_keep;  // branches only
  std::optional<int64_t> max_snapshot_age_ms;    // branches only
  std::optional<int64_t> max_ref_age_ms;         // never applies to main

  bool is_branch() const { return type == "branch"; }
  friend bool operator==(const SnapshotRef&, const SnapshotRef&) = default;
};

struct SnapshotLogEntry {
  int64_t timestamp_ms = 0;
  int64_t snapshot_id = 0;

  friend bool operator==(const SnapshotLogEntry&, const SnapshotLogEntry&) = default;
};

struct MetadataLogEntry {
  int64_t timestamp_ms = 0;  // last-updated-ms of that earlier metadata file
  std::string metadata_file;

  friend bool operator==(const MetadataLogEntry&, const MetadataLogEntry&) = default;
};

struct TableMetadata {
  std::string table_uuid;
  std::string location;  // the table's base location, e.g. file:///warehouse/ns/table
  int64_t last_sequence_number = 0;
  int64_t last_updated_ms = 0;
  int32_t last_column_id = 0;  // highest field id ever assigned; ids are never reused
  std::vector<TableSchema> schemas;
  int32_t current_schema_id = 0;
  std::vector<PartitionSpec> partition_specs;
  int32_t default_spec_id = 0;
  int32_t last_partition_id = kUnpartitionedLastPartitionId;
  std::vector<SortOrder> sort_orders;
  int32_t default_sort_order_id = 0;
  std::map<std::string, std::string> properties;
  std::optional<int64_t> current_snapshot_id;  // written as -1 when absent, as v2 writers do
  std::vector<Snapshot> snapshots;
  std::vector<SnapshotLogEntry> snapshot_log;  // oldest first
  std::vector<MetadataLogEntry> metadata_log;  // oldest first
  std::map<std::string, SnapshotRef> refs;

  const TableSchema* FindSchema(int32_t schema_id) const;
  const TableSchema& CurrentSchema() const;  // valid metadata always has one
  const Snapshot* FindSnapshot(int64_t snapshot_id) const;
  const Snapshot* CurrentSnapshot() const;  // nullptr for a table without snapshots
  // The sequence number the next snapshot gets (its manifests and manifest list carry it).
  int64_t NextSequenceNumber() const { return last_sequence_number + 1; }

  friend bool operator==(const TableMetadata&, const TableMetadata&) = default;
};

// ----- Building and editing ----------------------------------------------------------------------

// A new table without snapshots: a random table-uuid, `fields` as schema 0, unpartitioned,
// unsorted. last-column-id is the highest field id, or `last_column_id` when that is higher (pass
// the namespace's last assigned id so ids it retired stay retired).
Result<TableMetadata> NewTableMetadata(std::string location, std::vector<Field> fields,
                                       int64_t now_ms, int32_t last_column_id = 0);

// The starting point of the next metadata version: a copy of `base` whose metadata log gains
// `base_location` (trimmed to write.metadata.previous-versions-max) and whose last-updated-ms is
// `now_ms`.
TableMetadata NextVersion(const TableMetadata& base, const std::string& base_location,
                          int64_t now_ms);

// Schema evolution: makes `fields` the current schema and returns its id. An identical earlier
// schema is reused; otherwise the schema gets the highest id + 1. last-column-id grows to cover the
// new ids (and `last_column_id`). InvalidArgument for duplicate or non-positive field ids.
Result<int32_t> AddSchema(TableMetadata& metadata, std::vector<Field> fields,
                          int32_t last_column_id = 0);

// A fresh positive snapshot id, unused in `metadata` (random, as the spec recommends).
Result<int64_t> NewSnapshotId(const TableMetadata& metadata);

struct NewSnapshot {
  int64_t snapshot_id = 0;  // from NewSnapshotId()
  int64_t timestamp_ms = 0;
  std::string manifest_list;
  SnapshotOperation operation = SnapshotOperation::kAppend;
  std::map<std::string, std::string> summary;  // everything but "operation"
};

// Commits `snapshot` to the main branch: its parent is the current snapshot, its sequence number
// NextSequenceNumber(), its schema the current schema; current-snapshot-id, refs.main, the
// snapshot log, last-sequence-number and last-updated-ms follow. InvalidArgument for a used or
// non-positive id, an empty manifest list, or an "operation" key in `summary`.
Status AddSnapshot(TableMetadata& metadata, NewSnapshot snapshot);

// The newest snapshot in the current snapshot's ancestry (itself included) whose summary maps
// `key` to `value`, or nullptr. A landing looks for its `skippr.landing-id` here: found means the
// landing already committed, and replaying it must be a no-op.
const Snapshot* FindAncestorWithSummary(const TableMetadata& metadata, std::string_view key,
                                        std::string_view value);

// The table defaults of the spec's snapshot retention policy; a ref's own settings win.
struct SnapshotRetention {
  int64_t now_ms = 0;
  int64_t max_snapshot_age_ms = 0;    // history.expire.max-snapshot-age-ms
  int32_t min_snapshots_to_keep = 1;  // history.expire.min-snapshots-to-keep
  int64_t max_ref_age_ms = std::numeric_limits<int64_t>::max();  // history.expire.max-ref-age-ms
};

// Expires snapshots per the spec's "Snapshot Retention Policy": every branch keeps its head and
// ancestors until one is both older than now - max_snapshot_age_ms and beyond the newest
// min_snapshots_to_keep; tags keep their snapshot; refs other than main older than max_ref_age_ms
// are dropped; unreferenced snapshots go once older than the age limit. The snapshot log loses the
// entries up to the last expired one. Returns the removed snapshots (oldest first) so the caller
// can delete the files no kept snapshot references.
std::vector<Snapshot> ExpireSnapshots(TableMetadata& metadata, const SnapshotRetention& retention);

// ----- JSON --------------------------------------------------------------------------------------

// The metadata as Iceberg v2 JSON (compact, UTF-8). Internal when `metadata` breaks an invariant
// ParseTableMetadata checks (a bug in the caller); InvalidArgument for text that is not UTF-8.
Result<std::string> TableMetadataToJson(const TableMetadata& metadata);

// Parses and checks v2 metadata. Errors name `file_name` and the JSON path of the problem
// ("$.snapshots[2].summary.operation"): Corruption for malformed metadata, NotSupported for
// another format version.
Result<TableMetadata> ParseTableMetadata(std::string_view json_text, std::string_view file_name);

// ----- Metadata files, through an Env -----------------------------------------------------------

// The Env path of a table file's URI: the local path of a file:// URI ("file:///abs/path", or
// Hadoop's "file:/abs/path"); an s3://bucket/key URI as it is (an S3Env's path), without a
// trailing '/'. NotSupported for other schemes, InvalidArgument for relative paths.
Result<std::string> EnvPathOfUri(std::string_view uri);

// {warehouse}/{table_namespace}/{table_name}. The names become directory names: InvalidArgument
// when one is empty, ".", "..", or contains '/' or a NUL.
Result<std::string> TableLocation(std::string_view warehouse_uri, std::string_view table_namespace,
                                  std::string_view table_name);

// {table_location}/metadata/v{version}.metadata.json
std::string MetadataFileLocation(std::string_view table_location, int64_t version);

// N for a location ending in v{N}.metadata.json, else nullopt.
std::optional<int64_t> MetadataFileVersion(std::string_view metadata_location);

// The highest N of the v{N}.metadata.json files in the table's metadata/ directory; 0 for none.
Result<int64_t> HighestMetadataVersion(std::string_view table_location,
                                       Env* env = Env::Default());

// Writes metadata/v{version}.metadata.json under metadata.location: a temporary file, fdatasync,
// an atomic no-replace rename, fsync of the directory. A version that exists already is never
// replaced: Conflict (another writer won that version). Returns the new file's location.
Result<std::string> WriteMetadataFile(const TableMetadata& metadata, int64_t version,
                                      Env* env = Env::Default());

// Points metadata/version-hint.text at `version` (the decimal number, no newline) for readers
// without a catalog; written durably and replaced atomically.
Status WriteVersionHint(std::string_view table_location, int64_t version,
                        Env* env = Env::Default());

// Reads and parses one metadata file. NotFound when it does not exist.
Result<TableMetadata> ReadMetadataFile(std::string_view metadata_location,
                                       Env* env = Env::Default());

struct VersionedMetadata {
  int64_t version = 0;  // N of v{N}.metadata.json; 0 for a file named otherwise
  std::string location;
  TableMetadata metadata;
};

// The table's newest metadata file as a catalog-less reader finds it: the version in
// version-hint.text (the highest v{N}.metadata.json when the hint is missing or unreadable), then
// any later versions that exist. NotFound when the table has no metadata file.
Result<VersionedMetadata> ReadCurrentMetadata(std::string_view table_location,
                                              Env* env = Env::Default());

}  // namespace skippr::iceberg
