// Iceberg manifests and manifest lists (table format version 2) as Avro object container files, and
// the binary single-value form of column bounds (Iceberg spec, appendix D). The bytes are
// documented in docs/formats/iceberg-manifests.md; other Iceberg readers must be able to read every
// file written here, so the Avro schemas carry Iceberg's field ids exactly as the spec lists them.
//
// Encode*/Decode* work on bytes in memory (for object stores later); Write*/Read* on local files.
// Writers check the model first (InvalidArgument); readers check the same rules on what they decode
// (Corruption), so a file that does not follow them is never written nor trusted.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/env.hpp"
#include "core/status.hpp"
#include "core/types.hpp"
#include "iceberg/partition_spec.hpp"

namespace skippr::iceberg {

// ----- single values (spec appendix D) -----------------------------------------------------------

// The unscaled value of a decimal: 128-bit two's complement in two halves, like core/batch.hpp's
// decimal columns.
struct Decimal128 {
  uint64_t low = 0;
  int64_t high = 0;  // the upper half, sign-extended

  static Decimal128 FromInt64(int64_t unscaled) {
    return {static_cast<uint64_t>(unscaled), unscaled < 0 ? -1 : 0};
  }
  friend bool operator==(const Decimal128&, const Decimal128&) = default;
};

// One primitive value. The alternative each type takes:
//   boolean → bool;  int, date (days since 1970-01-01) → int32_t;
//   long, time (µs since midnight), timestamp, timestamptz (µs since the epoch) → int64_t;
//   float → float;  double → double;  decimal(p, s) → Decimal128 (the unscaled value);
//   string (UTF-8), binary, uuid (16 bytes, most significant first) → std::string.
using PrimitiveValue = std::variant<bool, int32_t, int64_t, float, double, Decimal128, std::string>;

// Iceberg's binary single-value serialization: little-endian fixed widths, strings and binary as
// their bytes, decimals as minimal big-endian two's complement. InvalidArgument when the
// alternative does not match the type, for NaN (never a bound) and for a uuid that is not 16 bytes;
// NotSupported for struct, list and map.
Result<std::string> EncodeSingleValue(const LogicalType& type, const PrimitiveValue& value);

// The inverse. Corruption when the length does not fit the type (a decimal longer than 16 bytes).
Result<PrimitiveValue> DecodeSingleValue(const LogicalType& type, std::string_view bytes);

// String and binary bounds are truncated like Iceberg's default metrics mode, truncate(16), so one
// long value cannot bloat every manifest that lists the file.
inline constexpr size_t kDefaultBoundTruncateLength = 16;

// A lower bound from an encoded minimum: strings keep their first `length` code points, binary its
// first `length` bytes (a prefix never sorts after the value); other types are returned unchanged.
std::string TruncateLowerBound(const LogicalType& type, std::string encoded_min,
                               size_t length = kDefaultBoundTruncateLength);

// An upper bound from an encoded maximum: truncated like the lower bound, then the last code point
// (byte) that can be incremented is, and the ones after it are dropped. nullopt when none can be
// (all U+10FFFF, all 0xFF): then the file must carry no upper bound for the column.
std::optional<std::string> TruncateUpperBound(const LogicalType& type, std::string encoded_max,
                                              size_t length = kDefaultBoundTruncateLength);

// ----- manifests ---------------------------------------------------------------------------------

enum class ManifestContent : int32_t { kData = 0, kDeletes = 1 };
enum class EntryStatus : int32_t { kExisting = 0, kAdded = 1, kDeleted = 2 };
enum class FileContent : int32_t { kData = 0, kPositionDeletes = 1, kEqualityDeletes = 2 };

// A data file's partition values, one per spec field in spec order (nullopt: null). Empty when the
// table is unpartitioned.
using PartitionTuple = std::vector<std::optional<PrimitiveValue>>;

// `data_file` (spec "Data File Fields"). Maps are keyed by table field id; an empty map or list is
// written as null (Iceberg reads both as "no information") and read back empty.
struct DataFile {
  FileContent content = FileContent::kData;
  std::string file_path;  // full URI or absolute path
  std::string file_format = "PARQUET";
  PartitionTuple partition;
  int64_t record_count = 0;        // rows; for position/equality deletes, the deletes
  int64_t file_size_in_bytes = 0;  // exact: readers use it to find the Parquet footer
  std::map<int32_t, int64_t> column_sizes;
  std::map<int32_t, int64_t> value_counts;  // including nulls and NaNs
  std::map<int32_t, int64_t> null_value_counts;
  std::map<int32_t, int64_t> nan_value_counts;
  std::map<int32_t, std::string> lower_bounds;  // EncodeSingleValue bytes
  std::map<int32_t, std::string> upper_bounds;
  std::optional<std::string> key_metadata;          // encryption; never set by skipprd
  std::vector<int64_t> split_offsets;               // ascending (Parquet row group offsets)
  std::vector<int32_t> equality_ids;                // equality deletes only, required there:
                                                    // the key's field ids, each once
  std::optional<int32_t> sort_order_id;             // never set on position deletes
  std::optional<std::string> referenced_data_file;  // position deletes of a single data file

  friend bool operator==(const DataFile&, const DataFile&) = default;
};

// `manifest_entry`. Null snapshot id and sequence numbers are inherited from the manifest list when
// the manifest is read (new ADDED entries are written with null sequence numbers, so a manifest can
// be reused when a commit is retried); EXISTING and DELETED entries must carry both.
struct ManifestEntry {
  EntryStatus status = EntryStatus::kAdded;
  std::optional<int64_t> snapshot_id;
  std::optional<int64_t> sequence_number;       // data sequence number
  std::optional<int64_t> file_sequence_number;  // sequence number of the snapshot that added it
  DataFile data_file;

  friend bool operator==(const ManifestEntry&, const ManifestEntry&) = default;
};

// The Iceberg keys of a manifest's Avro header. `format-version` is always "2".
struct ManifestHeader {
  std::string table_schema_json;  // `schema`: the table schema as Iceberg JSON (appendix C)
  int32_t schema_id = 0;          // must equal the JSON's "schema-id" when it has one
  PartitionSpec partition_spec;
  ManifestContent content = ManifestContent::kData;

  friend bool operator==(const ManifestHeader&, const ManifestHeader&) = default;
};

struct Manifest {
  ManifestHeader header;
  std::vector<ManifestEntry> entries;

  friend bool operator==(const Manifest&, const Manifest&) = default;
};

// ----- manifest lists ----------------------------------------------------------------------------

// `field_summary`: one per partition field of the manifest's spec.
struct PartitionFieldSummary {
  bool contains_null = false;
  std::optional<bool> contains_nan;
  std::optional<std::string> lower_bound;  // EncodeSingleValue bytes of the partition type
  std::optional<std::string> upper_bound;

  friend bool operator==(const PartitionFieldSummary&, const PartitionFieldSummary&) = default;
};

// `manifest_file`: one manifest of a snapshot. Every field is required in v2 except the ones kept
// optional here.
struct ManifestFile {
  std::string manifest_path;
  int64_t manifest_length = 0;  // bytes
  int32_t partition_spec_id = 0;
  ManifestContent content = ManifestContent::kData;
  int64_t sequence_number = 0;      // of the snapshot that added the manifest
  int64_t min_sequence_number = 0;  // lowest data sequence number of its live entries
  int64_t added_snapshot_id = 0;
  int32_t added_files_count = 0;
  int32_t existing_files_count = 0;
  int32_t deleted_files_count = 0;
  int64_t added_rows_count = 0;
  int64_t existing_rows_count = 0;
  int64_t deleted_rows_count = 0;
  std::vector<PartitionFieldSummary> partitions;  // empty for unpartitioned manifests
  std::optional<std::string> key_metadata;

  friend bool operator==(const ManifestFile&, const ManifestFile&) = default;
};

// The Iceberg keys of a manifest list's Avro header. `format-version` is always "2".
struct ManifestListHeader {
  int64_t snapshot_id = 0;
  std::optional<int64_t> parent_snapshot_id;  // written "null" for a table's first snapshot
  int64_t sequence_number = 0;

  friend bool operator==(const ManifestListHeader&, const ManifestListHeader&) = default;
};

struct ManifestList {
  ManifestListHeader header;
  std::vector<ManifestFile> manifests;

  friend bool operator==(const ManifestList&, const ManifestList&) = default;
};

// The manifest list entry for a manifest that snapshot `snapshot_id` (sequence number
// `sequence_number`) adds: file and row counts per status, and the lowest data sequence number of
// its live (not DELETED) entries, null ones counting as `sequence_number` since they inherit it.
ManifestFile DescribeNewManifest(const Manifest& manifest, std::string manifest_path,
                                 int64_t manifest_length, int64_t snapshot_id,
                                 int64_t sequence_number);

// ----- files -------------------------------------------------------------------------------------

enum class AvroCodec : uint8_t { kNull, kDeflate };

struct AvroWriteOptions {
  AvroCodec codec = AvroCodec::kDeflate;  // what Iceberg's reference implementation writes
  // Records are grouped into blocks of about this many bytes before compression.
  size_t block_target_bytes = 64 * 1024;
};

// The complete file bytes. Encoding decodes the result back and compares it with the input before
// returning it (Internal if they differ: a bug, never a file).
Result<std::string> EncodeManifest(const Manifest& manifest, const AvroWriteOptions& options = {});
Result<std::string> EncodeManifestList(const ManifestList& list,
                                       const AvroWriteOptions& options = {});

// `file_label` names the file in error messages. Corruption for damaged bytes (bad magic, a sync
// marker that differs, a block running past the end, records that do not decode or break the
// rules above); NotSupported for another format version, an unknown codec or a partitioned
// manifest.
Result<Manifest> DecodeManifest(std::string_view bytes, std::string_view file_label);
Result<ManifestList> DecodeManifestList(std::string_view bytes, std::string_view file_label);

// Writes the file atomically and durably: a temporary file beside `path`, fsync, rename over
// `path` (replacing any file there), fsync of the directory (which must exist). Returns the file's
// length in bytes (the manifest list's `manifest_length`). IOError/NoSpace/NotFound name the path.
// A failure removes the temporary file; `path` then holds what it held before, except after a
// failed directory fsync (the new file is in place but may not survive a crash).
Result<int64_t> WriteManifest(const std::string& path, const Manifest& manifest,
                              const AvroWriteOptions& options = {}, Env* env = Env::Default());
Result<int64_t> WriteManifestList(const std::string& path, const ManifestList& list,
                                  const AvroWriteOptions& options = {}, Env* env = Env::Default());

// NotFound when the file does not exist; otherwise as Decode*. An Avro file can end cleanly after
// any block, so a manifest cut short there only shows in its length: pass the manifest list's
// `manifest_length` as `expected_length_bytes` to have it checked (Corruption when it differs).
Result<Manifest> ReadManifest(const std::string& path,
                              std::optional<int64_t> expected_length_bytes = std::nullopt,
                              Env* env = Env::Default());
Result<ManifestList> ReadManifestList(const std::string& path, Env* env = Env::Default());

}  // namespace skippr::iceberg
