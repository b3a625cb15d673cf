#include "lake/lake.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "core/check.hpp"
#include "core/crash.hpp"
#include "core/file.hpp"
#include "core/hash.hpp"
#include "iceberg/iceberg.hpp"
#include "query/query.hpp"

namespace skippr::lake {

namespace {

using query::QuoteIdentifier;
using query::QuoteLiteral;

constexpr std::string_view kLandingPipeline = "skippr_landing";  // the engine's table of a landing
constexpr int kCommitAttempts = 8;  // catalog conflicts retried (another writer of the table)

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// DuckDB's FIELD_IDS value for one field: its id, with its children's ids when it is nested
// (`{__duckdb_field_id: 4, element: 5}` for a list).
std::string FieldIdSpec(const Field& field) {
  const LogicalType& type = field.type;
  if (type.id() != TypeId::kStruct && type.id() != TypeId::kList && type.id() != TypeId::kMap) {
    return std::to_string(field.id);
  }
  std::string spec = fmt::format("{{__duckdb_field_id: {}", field.id);
  const std::vector<Field>& children = type.children();
  for (size_t i = 0; i < children.size(); ++i) {
    std::string name = QuoteIdentifier(children[i].name);
    if (type.id() == TypeId::kList) name = "element";
    if (type.id() == TypeId::kMap) name = i == 0 ? "key" : "value";
    spec += fmt::format(", {}: {}", name, FieldIdSpec(children[i]));
  }
  return spec + "}";
}

std::string FieldIdsClause(const std::vector<Field>& fields) {
  std::vector<std::string> parts;
  for (const Field& field : fields) {
    parts.push_back(fmt::format("{}: {}", QuoteIdentifier(field.name), FieldIdSpec(field)));
  }
  return fmt::format("{{{}}}", fmt::join(parts, ", "));
}

Status SyncFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, fmt::format("cannot open '{}'", path));
  const bool synced = fsync(fd) == 0;
  const int saved_errno = errno;
  close(fd);
  if (!synced) return ErrnoStatus(saved_errno, fmt::format("fsync of '{}' failed", path));
  return Status::OK();
}

// ----- column statistics ---------------------------------------------------------------------

// Whether a field of `type` gets lower/upper bounds (decimal, binary, uuid, time and nested types
// get counts only).
bool HasBounds(const LogicalType& type) {
  switch (type.id()) {
    case TypeId::kBoolean:
    case TypeId::kInt:
    case TypeId::kLong:
    case TypeId::kFloat:
    case TypeId::kDouble:
    case TypeId::kDate:
    case TypeId::kTimestamp:
    case TypeId::kTimestampTz:
    case TypeId::kString:
      return true;
    default:
      return false;
  }
}

// -0.0 before 0.0, so a bound is never the wrong zero.
bool DoubleBefore(double a, double b) {
  return a < b || (a == b && std::signbit(a) && !std::signbit(b));
}

// Value, null and NaN counts and bounds of one top-level primitive field over a landing's rows.
struct FieldStatistics {
  int64_t values = 0;
  int64_t nulls = 0;
  int64_t nans = 0;
  std::optional<int64_t> min_int, max_int;     // boolean, int, long, date, timestamps
  std::optional<double> min_double, max_double;  // float, double (NaN excluded)
  std::optional<std::string_view> min_bytes, max_bytes;  // string

  void AddNulls(int64_t count) {
    values += count;
    nulls += count;
  }
  void Add(const Column& column, const LogicalType& type, int64_t row) {
    ++values;
    if (!column.IsValid(row)) {
      ++nulls;
      return;
    }
    if (!HasBounds(type)) return;
    switch (PhysicalKindOf(type.id())) {
      case PhysicalKind::kBool:
      case PhysicalKind::kInt64: {
        const int64_t value = type.id() == TypeId::kBoolean ? column.BoolAt(row) : column.Int64At(row);
        if (!min_int || value < *min_int) min_int = value;
        if (!max_int || value > *max_int) max_int = value;
        return;
      }
      case PhysicalKind::kDouble: {
        // int and long batch columns of a field that widened to double read as doubles.
        const double value = PhysicalKindOf(column.type.id()) == PhysicalKind::kInt64
                                 ? static_cast<double>(column.Int64At(row))
                                 : column.DoubleAt(row);
        if (std::isnan(value)) {
          ++nans;
          return;
        }
        if (!min_double || DoubleBefore(value, *min_double)) min_double = value;
        if (!max_double || DoubleBefore(*max_double, value)) max_double = value;
        return;
      }
      case PhysicalKind::kBytes: {
        const std::string_view value = column.BytesAt(row);
        if (!min_bytes || value < *min_bytes) min_bytes = value;
        if (!max_bytes || value > *max_bytes) max_bytes = value;
        return;
      }
      default:
        return;
    }
  }
};

std::optional<iceberg::PrimitiveValue> AsPrimitive(const LogicalType& type,
                                                   const FieldStatistics& stats, bool is_min) {
  const auto& int_bound = is_min ? stats.min_int : stats.max_int;
  const auto& double_bound = is_min ? stats.min_double : stats.max_double;
  const auto& bytes_bound = is_min ? stats.min_bytes : stats.max_bytes;
  switch (type.id()) {
    case TypeId::kBoolean:
      if (int_bound) return iceberg::PrimitiveValue(*int_bound != 0);
      break;
    case TypeId::kInt:
    case TypeId::kDate:
      if (int_bound) return iceberg::PrimitiveValue(static_cast<int32_t>(*int_bound));
      break;
    case TypeId::kLong:
    case TypeId::kTimestamp:
    case TypeId::kTimestampTz:
      if (int_bound) return iceberg::PrimitiveValue(*int_bound);
      break;
    case TypeId::kFloat:
      if (double_bound) return iceberg::PrimitiveValue(static_cast<float>(*double_bound));
      break;
    case TypeId::kDouble:
      if (double_bound) return iceberg::PrimitiveValue(*double_bound);
      break;
    case TypeId::kString:
      if (bytes_bound) return iceberg::PrimitiveValue(std::string(*bytes_bound));
      break;
    default:
      break;
  }
  return std::nullopt;
}

// Value, null and NaN counts and bounds of the top-level primitive columns, computed from the
// batches the data file was written from (older schemas projected as the scan projects them: a
// missing column is NULL, int/long read as double where the field widened).
Status AddColumnStatistics(const std::vector<Field>& fields,
                           const std::vector<std::shared_ptr<const Batch>>& batches,
                           iceberg::DataFile& file) {
  for (const Field& field : fields) {
    const TypeId id = field.type.id();
    if (id == TypeId::kStruct || id == TypeId::kList || id == TypeId::kMap) continue;
    FieldStatistics stats;
    for (const auto& batch : batches) {
      const Column* column = nullptr;
      for (size_t c = 0; c < batch->fields.size(); ++c) {
        if (batch->fields[c].id == field.id) column = &batch->columns[c];
      }
      if (column == nullptr) {
        stats.AddNulls(batch->num_rows);
        continue;
      }
      SKIPPR_CHECK_MSG(column->length == batch->num_rows, "a batch column has another row count");
      for (int64_t row = 0; row < batch->num_rows; ++row) stats.Add(*column, field.type, row);
    }
    SKIPPR_CHECK_MSG(stats.values == file.record_count, "statistics cover another row count");
    file.value_counts[field.id] = stats.values;
    file.null_value_counts[field.id] = stats.nulls;
    if (id == TypeId::kFloat || id == TypeId::kDouble) file.nan_value_counts[field.id] = stats.nans;
    if (auto min = AsPrimitive(field.type, stats, /*is_min=*/true)) {
      SKIPPR_ASSIGN_OR_RETURN(std::string encoded, iceberg::EncodeSingleValue(field.type, *min));
      file.lower_bounds[field.id] = iceberg::TruncateLowerBound(field.type, std::move(encoded));
    }
    if (auto max = AsPrimitive(field.type, stats, /*is_min=*/false)) {
      SKIPPR_ASSIGN_OR_RETURN(std::string encoded, iceberg::EncodeSingleValue(field.type, *max));
      if (auto upper = iceberg::TruncateUpperBound(field.type, std::move(encoded))) {
        file.upper_bounds[field.id] = std::move(*upper);
      }
    }
  }
  return Status::OK();
}

// The row count in the written file's footer: what readers will see, checked against the rows
// handed to DuckDB.
Status CheckRowCount(query::Engine& engine, const std::string& path, int64_t expected_rows) {
  SKIPPR_ASSIGN_OR_RETURN(
      query::QueryResult result,
      engine.Run(fmt::format("SELECT num_rows FROM parquet_file_metadata({})", QuoteLiteral(path))));
  SKIPPR_CHECK(result.rows.size() == 1 && result.rows[0].size() == 1 && result.rows[0][0]);
  SKIPPR_CHECK_MSG(std::stoll(*result.rows[0][0]) == expected_rows,
                   "the data file holds another row count");
  return Status::OK();
}

// Iceberg's own summary totals, carried forward from the parent snapshot.
int64_t SummaryNumber(const iceberg::Snapshot* snapshot, const std::string& key) {
  if (snapshot == nullptr) return 0;
  auto it = snapshot->summary.find(key);
  if (it == snapshot->summary.end()) return 0;
  return std::strtoll(it->second.c_str(), nullptr, 10);
}

std::string SegmentIdList(const std::vector<SliceRef>& slices) {
  std::set<uint64_t> ids;
  for (const SliceRef& slice : slices) ids.insert(slice.segment_id);
  return fmt::format("{}", fmt::join(ids, ","));
}


// A manifest entry as it reads once the manifest list's values are inherited (spec: null snapshot
// id and sequence numbers of ADDED entries come from the manifest that lists them), kept as
// EXISTING: the form a merged manifest carries it in.
iceberg::ManifestEntry AsExistingEntry(iceberg::ManifestEntry entry,
                                       const iceberg::ManifestFile& listed_in) {
  entry.status = iceberg::EntryStatus::kExisting;
  entry.snapshot_id = entry.snapshot_id.value_or(listed_in.added_snapshot_id);
  entry.sequence_number = entry.sequence_number.value_or(listed_in.sequence_number);
  entry.file_sequence_number = entry.file_sequence_number.value_or(listed_in.sequence_number);
  return entry;
}

// Bounds are encoded in their field's type at write time; a field promoted since (int → long)
// would be misread, so a merged entry drops the bounds of fields whose type changed.
void DropStaleBounds(iceberg::DataFile& file, const std::map<int32_t, LogicalType>& written_types,
                     const std::map<int32_t, LogicalType>& current_types) {
  for (auto* bounds : {&file.lower_bounds, &file.upper_bounds}) {
    std::erase_if(*bounds, [&](const auto& bound) {
      auto written = written_types.find(bound.first);
      auto current = current_types.find(bound.first);
      return written == written_types.end() || current == current_types.end() ||
             !(written->second == current->second);
    });
  }
}

std::map<int32_t, LogicalType> TopLevelTypes(const std::vector<Field>& fields) {
  std::map<int32_t, LogicalType> types;
  for (const Field& field : fields) types.emplace(field.id, field.type);
  return types;
}

Status DeleteIfPresent(const std::string& uri) {
  SKIPPR_ASSIGN_OR_RETURN(const std::string path, iceberg::LocalPathOfUri(uri));
  if (unlink(path.c_str()) != 0 && errno != ENOENT) {
    return ErrnoStatus(errno, fmt::format("cannot delete '{}'", path));
  }
  return Status::OK();
}

// After a commit that expired snapshots: their manifest lists, the manifests no kept snapshot
// lists, and the metadata files that fell out of the metadata log. Data files stay: every landed
// file is still in the table (appends never remove one).
Status RemoveUnreferencedFiles(const iceberg::TableMetadata& committed,
                               const std::vector<iceberg::Snapshot>& expired,
                               const std::vector<std::string>& dropped_metadata_files) {
  for (const std::string& file : dropped_metadata_files) SKIPPR_RETURN_IF_ERROR(DeleteIfPresent(file));
  if (expired.empty()) return Status::OK();
  std::set<std::string> kept_manifests;
  for (const iceberg::Snapshot& snapshot : committed.snapshots) {
    SKIPPR_ASSIGN_OR_RETURN(const std::string path, iceberg::LocalPathOfUri(snapshot.manifest_list));
    SKIPPR_ASSIGN_OR_RETURN(iceberg::ManifestList list, iceberg::ReadManifestList(path));
    for (const iceberg::ManifestFile& manifest : list.manifests) {
      kept_manifests.insert(manifest.manifest_path);
    }
  }
  for (const iceberg::Snapshot& snapshot : expired) {
    SKIPPR_ASSIGN_OR_RETURN(const std::string path, iceberg::LocalPathOfUri(snapshot.manifest_list));
    Result<iceberg::ManifestList> list = iceberg::ReadManifestList(path);
    if (!list.ok() && list.status().code() == StatusCode::kNotFound) continue;  // removed before
    SKIPPR_RETURN_IF_ERROR(list.status());
    for (const iceberg::ManifestFile& manifest : list->manifests) {
      if (!kept_manifests.contains(manifest.manifest_path)) {
        SKIPPR_RETURN_IF_ERROR(DeleteIfPresent(manifest.manifest_path));
      }
    }
    SKIPPR_RETURN_IF_ERROR(DeleteIfPresent(snapshot.manifest_list));
  }
  return Status::OK();
}

}  // namespace

Landing PlanLanding(std::string_view pipeline, std::string namespace_name,
                    std::vector<SliceRef> slices, bool replaces_table) {
  std::sort(slices.begin(), slices.end());
  slices.erase(std::unique(slices.begin(), slices.end()), slices.end());
  std::string identity = fmt::format("skippr-landing-v1\n{}\n{}\n", pipeline, namespace_name);
  for (const SliceRef& slice : slices) {
    identity += fmt::format("{}/{}\n", slice.segment_id, slice.ordinal);
  }
  if (replaces_table) identity += "replace\n";
  return Landing{Sha256Hex(identity).substr(0, 32), std::move(namespace_name), std::move(slices),
                 replaces_table};
}

LakeWriter::~LakeWriter() = default;

Result<std::unique_ptr<LakeWriter>> LakeWriter::Open(LakeOptions options) {
  std::unique_ptr<LakeWriter> writer(new LakeWriter());
  SKIPPR_ASSIGN_OR_RETURN(writer->catalog_,
                          iceberg::OpenCatalog({.warehouse = options.warehouse,
                                                .uri = options.catalog_uri}));
  SKIPPR_ASSIGN_OR_RETURN(writer->engine_, query::Engine::Open());
  // A data file's row order means nothing: DuckDB may then write it from several threads.
  SKIPPR_RETURN_IF_ERROR(writer->engine_->Run("SET preserve_insertion_order = false").status());
  writer->options_ = std::move(options);
  return writer;
}

Result<int64_t> LakeWriter::WriteDataFile(const Landing& landing,
                                          const schema::NamespaceSchema& namespace_schema,
                                          const std::vector<std::shared_ptr<const Batch>>& batches,
                                          const std::string& path) {
  query::TableSource source;
  source.pipeline = std::string(kLandingPipeline);
  source.namespace_name = landing.namespace_name;
  source.fields = namespace_schema.fields;
  source.batches = [batches]() -> Result<std::vector<std::shared_ptr<const Batch>>> {
    return batches;
  };
  source.allows_parallel_scan = true;  // a data file's row order means nothing
  SKIPPR_RETURN_IF_ERROR(engine_->RegisterTable(std::move(source)));
  const std::string schema_json =
      schema::FieldsToIcebergJson(namespace_schema.fields, namespace_schema.schema_id).dump();
  // The `iceberg.schema` key lets readers that match columns by name (rather than by field id)
  // find them; DuckDB writes the field ids into the Parquet schema itself.
  SKIPPR_RETURN_IF_ERROR(
      engine_
          ->Run(fmt::format("COPY (SELECT * FROM {}.{}) TO {} (FORMAT parquet, COMPRESSION zstd, "
                            "FIELD_IDS {}, KV_METADATA {{'iceberg.schema': {}}})",
                            QuoteIdentifier(kLandingPipeline),
                            QuoteIdentifier(landing.namespace_name), QuoteLiteral(path),
                            FieldIdsClause(namespace_schema.fields), QuoteLiteral(schema_json)))
          .status());
  SKIPPR_RETURN_IF_ERROR(SyncFile(path));
  SKIPPR_RETURN_IF_ERROR(FsyncDirectory(std::filesystem::path(path).parent_path().string()));
  std::error_code error;
  const uintmax_t bytes = std::filesystem::file_size(path, error);
  if (error) return Status::IOError(fmt::format("cannot stat '{}': {}", path, error.message()));
  return static_cast<int64_t>(bytes);
}

Result<iceberg::ManifestList> LakeWriter::BuildManifestList(const iceberg::TableMetadata& next,
                                                            const iceberg::Snapshot* parent,
                                                            bool replaces_table,
                                                            iceberg::Manifest manifest,
                                                            const std::string& manifest_location,
                                                            const std::string& manifest_path,
                                                            int64_t snapshot_id) {
  const int64_t sequence_number = next.NextSequenceNumber();
  iceberg::ManifestList list;
  list.header = {snapshot_id, parent ? std::optional<int64_t>(parent->snapshot_id) : std::nullopt,
                 sequence_number};
  std::vector<iceberg::ManifestFile> previous;
  if (parent != nullptr) {
    SKIPPR_ASSIGN_OR_RETURN(const std::string parent_list,
                            iceberg::LocalPathOfUri(parent->manifest_list));
    SKIPPR_ASSIGN_OR_RETURN(iceberg::ManifestList parent_manifests,
                            iceberg::ReadManifestList(parent_list));
    previous = std::move(parent_manifests.manifests);
  }
  if (replaces_table || previous.size() + 1 > options_.manifests_before_merge) {
    // Merge: one manifest with every live data file of the parent plus the new one; a replacing
    // landing lists the parent's files as DELETED by this snapshot instead.
    const std::map<int32_t, LogicalType> current_types =
        TopLevelTypes(next.CurrentSchema().fields);
    std::vector<iceberg::ManifestEntry> merged;
    for (const iceberg::ManifestFile& listed : previous) {
      SKIPPR_ASSIGN_OR_RETURN(const std::string path,
                              iceberg::LocalPathOfUri(listed.manifest_path));
      SKIPPR_ASSIGN_OR_RETURN(iceberg::Manifest old,
                              iceberg::ReadManifest(path, listed.manifest_length));
      SKIPPR_ASSIGN_OR_RETURN(
          std::vector<Field> written_fields,
          schema::FieldsFromIcebergJson(nlohmann::json::parse(old.header.table_schema_json)));
      const std::map<int32_t, LogicalType> written_types = TopLevelTypes(written_fields);
      for (iceberg::ManifestEntry& entry : old.entries) {
        if (entry.status == iceberg::EntryStatus::kDeleted) continue;
        merged.push_back(AsExistingEntry(std::move(entry), listed));
        DropStaleBounds(merged.back().data_file, written_types, current_types);
        if (replaces_table) {
          merged.back().status = iceberg::EntryStatus::kDeleted;
          merged.back().snapshot_id = snapshot_id;
        }
      }
    }
    merged.insert(merged.end(), manifest.entries.begin(), manifest.entries.end());
    manifest.entries = std::move(merged);
    previous.clear();
  }
  SKIPPR_ASSIGN_OR_RETURN(const int64_t manifest_bytes,
                          iceberg::WriteManifest(manifest_path, manifest));
  list.manifests = std::move(previous);
  list.manifests.push_back(iceberg::DescribeNewManifest(manifest, manifest_location, manifest_bytes,
                                                        snapshot_id, sequence_number));
  return list;
}

Result<LandingOutcome> LakeWriter::Land(const Landing& landing,
                                        const schema::NamespaceSchema& namespace_schema,
                                        const std::vector<std::shared_ptr<const Batch>>& batches) {
  const iceberg::TableIdentifier table{options_.table_namespace, landing.namespace_name};
  SKIPPR_ASSIGN_OR_RETURN(
      const std::string location,
      iceberg::TableLocation(options_.warehouse, options_.table_namespace, landing.namespace_name));
  SKIPPR_ASSIGN_OR_RETURN(const std::string local_location, iceberg::LocalPathOfUri(location));
  int64_t rows = 0;
  for (const auto& batch : batches) rows += batch->num_rows;

  // The data file and manifest names derive from the landing id: a retry rewrites the same files.
  const std::string data_name = fmt::format("data/{}.parquet", landing.landing_id);
  const std::string manifest_name = fmt::format("metadata/{}-m0.avro", landing.landing_id);
  bool data_file_written = false;
  iceberg::DataFile data_file;
  for (int attempt = 1;; ++attempt) {
    Result<iceberg::VersionedMetadata> base = iceberg::LoadTableForCommit(*catalog_, table);
    if (!base.ok() && base.status().code() == StatusCode::kNotFound) {
      SKIPPR_ASSIGN_OR_RETURN(iceberg::TableMetadata created,
                              iceberg::NewTableMetadata(location, namespace_schema.fields, NowMs(),
                                                        namespace_schema.last_field_id));
      base = iceberg::CreateTableWithMetadata(*catalog_, table, created);
      if (!base.ok() && base.status().code() == StatusCode::kConflict) continue;  // raced: load
    }
    SKIPPR_RETURN_IF_ERROR(base.status());
    const iceberg::Snapshot* parent = base->metadata.CurrentSnapshot();
    if (iceberg::FindAncestorWithSummary(base->metadata, kLandingIdKey, landing.landing_id)) {
      return LandingOutcome{{base->location, parent->snapshot_id}, true, rows, 0};
    }
    if (rows == 0) {
      return LandingOutcome{{base->location, parent ? parent->snapshot_id : 0}, false, 0, 0};
    }

    iceberg::TableMetadata next = iceberg::NextVersion(base->metadata, base->location, NowMs());
    if (next.CurrentSchema().fields != namespace_schema.fields) {
      SKIPPR_RETURN_IF_ERROR(
          iceberg::AddSchema(next, namespace_schema.fields, namespace_schema.last_field_id)
              .status());
    }
    if (!data_file_written) {
      SKIPPR_RETURN_IF_ERROR(CreateDirectoriesDurably(local_location + "/data"));
      const std::string path = local_location + "/" + data_name;
      SKIPPR_ASSIGN_OR_RETURN(data_file.file_size_in_bytes,
                              WriteDataFile(landing, namespace_schema, batches, path));
      data_file.file_path = location + "/" + data_name;
      data_file.record_count = rows;
      SKIPPR_RETURN_IF_ERROR(CheckRowCount(*engine_, path, rows));
      SKIPPR_RETURN_IF_ERROR(AddColumnStatistics(namespace_schema.fields, batches, data_file));
      data_file_written = true;
      CrashPoint("lake.after_data_file");
    }

    SKIPPR_ASSIGN_OR_RETURN(const int64_t snapshot_id, iceberg::NewSnapshotId(next));
    iceberg::Manifest manifest;
    manifest.header.table_schema_json =
        schema::FieldsToIcebergJson(next.CurrentSchema().fields, next.current_schema_id).dump();
    manifest.header.schema_id = next.current_schema_id;
    manifest.entries.push_back({.status = iceberg::EntryStatus::kAdded,
                                .snapshot_id = snapshot_id,
                                .data_file = data_file});
    SKIPPR_RETURN_IF_ERROR(CreateDirectoriesDurably(local_location + "/metadata"));
    SKIPPR_ASSIGN_OR_RETURN(
        iceberg::ManifestList list,
        BuildManifestList(next, parent, landing.replaces_table, std::move(manifest),
                          location + "/" + manifest_name,
                          local_location + "/" + manifest_name, snapshot_id));
    const std::string list_name =
        fmt::format("metadata/snap-{}-{}.avro", snapshot_id, landing.landing_id);
    SKIPPR_RETURN_IF_ERROR(
        iceberg::WriteManifestList(local_location + "/" + list_name, list).status());

    // A replacing landing starts the totals afresh (the parent's files are deleted).
    const iceberg::Snapshot* totals_from = landing.replaces_table ? nullptr : parent;
    std::map<std::string, std::string> summary = {
        {"added-data-files", "1"},
        {"added-records", std::to_string(rows)},
        {"added-files-size", std::to_string(data_file.file_size_in_bytes)},
        {"total-data-files", std::to_string(SummaryNumber(totals_from, "total-data-files") + 1)},
        {"total-records", std::to_string(SummaryNumber(totals_from, "total-records") + rows)},
        {"total-files-size", std::to_string(SummaryNumber(totals_from, "total-files-size") +
                                            data_file.file_size_in_bytes)},
        {"total-delete-files", "0"},
        {"total-position-deletes", "0"},
        {"total-equality-deletes", "0"},
        {std::string(kLandingIdKey), landing.landing_id},
        {std::string(kWalSegmentIdsKey), SegmentIdList(landing.slices)},
        {std::string(kPipelineKey), options_.pipeline}};
    if (landing.replaces_table && parent != nullptr) {
      summary["deleted-data-files"] = std::to_string(SummaryNumber(parent, "total-data-files"));
      summary["deleted-records"] = std::to_string(SummaryNumber(parent, "total-records"));
    }
    SKIPPR_RETURN_IF_ERROR(iceberg::AddSnapshot(
        next, {snapshot_id, NowMs(), location + "/" + list_name,
               landing.replaces_table ? iceberg::SnapshotOperation::kOverwrite
                                      : iceberg::SnapshotOperation::kAppend,
               std::move(summary)}));
    const std::vector<iceberg::Snapshot> expired = iceberg::ExpireSnapshots(
        next, {.now_ms = NowMs(),
               .max_snapshot_age_ms = options_.max_snapshot_age_ms,
               .min_snapshots_to_keep = options_.min_snapshots_to_keep});
    std::vector<std::string> dropped_metadata_files;
    std::set<std::string> logged;
    for (const iceberg::MetadataLogEntry& entry : next.metadata_log) logged.insert(entry.metadata_file);
    for (const iceberg::MetadataLogEntry& entry : base->metadata.metadata_log) {
      if (!logged.contains(entry.metadata_file)) dropped_metadata_files.push_back(entry.metadata_file);
    }
    CrashPoint("lake.before_catalog_commit");
    Result<iceberg::VersionedMetadata> committed =
        iceberg::CommitTableMetadata(*catalog_, table, *base, next);
    if (committed.ok()) {
      CrashPoint("lake.after_catalog_commit");
      // Best effort: a file left behind by a failure here is garbage, never a wrong answer.
      if (Status cleaned = RemoveUnreferencedFiles(next, expired, dropped_metadata_files);
          !cleaned.ok()) {
        spdlog::warn("lake {}: could not remove files of expired snapshots: {}", table.ToString(),
                     cleaned.message());
      }
      return LandingOutcome{{committed->location, snapshot_id}, false, rows,
                            data_file.file_size_in_bytes};
    }
    if (committed.status().code() != StatusCode::kConflict || attempt >= kCommitAttempts) {
      return committed.status();
    }
    spdlog::info("lake {}: another writer committed first; retrying landing {}", table.ToString(),
                 landing.landing_id);
  }
}

Result<std::vector<std::string>> DataFilesOf(const LandedSnapshot& landed) {
  std::vector<std::string> paths;
  if (landed.snapshot_id == 0) return paths;
  SKIPPR_ASSIGN_OR_RETURN(iceberg::TableMetadata metadata,
                          iceberg::ReadMetadataFile(landed.metadata_location));
  const iceberg::Snapshot* snapshot = metadata.FindSnapshot(landed.snapshot_id);
  if (snapshot == nullptr) {
    return Status::Corruption(fmt::format("Iceberg metadata '{}' has no snapshot {}",
                                          landed.metadata_location, landed.snapshot_id));
  }
  SKIPPR_ASSIGN_OR_RETURN(const std::string list_path,
                          iceberg::LocalPathOfUri(snapshot->manifest_list));
  SKIPPR_ASSIGN_OR_RETURN(iceberg::ManifestList list, iceberg::ReadManifestList(list_path));
  for (const iceberg::ManifestFile& manifest_file : list.manifests) {
    if (manifest_file.content != iceberg::ManifestContent::kData) continue;
    SKIPPR_ASSIGN_OR_RETURN(const std::string manifest_path,
                            iceberg::LocalPathOfUri(manifest_file.manifest_path));
    SKIPPR_ASSIGN_OR_RETURN(iceberg::Manifest manifest,
                            iceberg::ReadManifest(manifest_path, manifest_file.manifest_length));
    for (const iceberg::ManifestEntry& entry : manifest.entries) {
      if (entry.status == iceberg::EntryStatus::kDeleted) continue;
      SKIPPR_ASSIGN_OR_RETURN(std::string path, iceberg::LocalPathOfUri(entry.data_file.file_path));
      paths.push_back(std::move(path));
    }
  }
  return paths;
}

}  // namespace skippr::lake
