#include "lake/lake.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "core/check.hpp"
#include "core/crash.hpp"
#include "core/file.hpp"
#include "core/hash.hpp"
#include "iceberg/iceberg.hpp"
#include "lake/internal/expiry.hpp"
#include "lake/internal/statistics.hpp"
#include "query/query.hpp"

namespace skippr::lake {

using internal::AddColumnStatisticsFromBatches;
using internal::AddColumnStatisticsFromFile;
using internal::CheckRowCount;
using internal::ColumnStatisticsOf;
using internal::FileStatistics;
using internal::RowCountOf;

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

// Iceberg's own summary totals, carried forward from the parent snapshot.
int64_t SummaryNumber(const iceberg::Snapshot* snapshot, const std::string& key) {
  if (snapshot == nullptr) return 0;
  auto it = snapshot->summary.find(key);
  if (it == snapshot->summary.end()) return 0;
  return std::strtoll(it->second.c_str(), nullptr, 10);
}

bool HasDataFiles(const iceberg::Snapshot* snapshot) {
  return snapshot != nullptr && SummaryNumber(snapshot, "total-data-files") > 0;
}

// `rows` with every file's Env path replaced by a local path DuckDB can read (for a table on S3,
// a local copy of the object).
Result<query::LandedRows> LocalCopiesOf(query::LandedRows rows, Env& env) {
  auto localise = [&](std::string& path) -> Status {
    SKIPPR_ASSIGN_OR_RETURN(path, env.LocalPathForReading(path));
    return Status::OK();
  };
  for (query::LandedFile& file : rows.data_files) SKIPPR_RETURN_IF_ERROR(localise(file.path));
  for (query::EqualityDeleteFile& file : rows.equality_delete_files) {
    SKIPPR_RETURN_IF_ERROR(localise(file.path));
  }
  for (query::PositionDeleteFile& file : rows.position_delete_files) {
    SKIPPR_RETURN_IF_ERROR(localise(file.path));
  }
  return rows;
}

// The live data and delete files of the table's snapshot `snapshot_id`, as Env paths
// (LandedRowsOf).
Result<query::LandedRows> LiveFilesOf(const iceberg::TableMetadata& metadata, int64_t snapshot_id,
                                      Env* env);

std::string SegmentIdList(const std::vector<uint64_t>& segment_ids) {
  return fmt::format("{}", fmt::join(segment_ids, ","));
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

// ----- manifests ---------------------------------------------------------------------------------

// A manifest this landing adds (data or deletes), with where it is written; an empty one is not.
struct AddedManifest {
  iceberg::Manifest manifest;
  std::string location;  // the URI the manifest list names
  std::string path;      // its Env path
};

// Which of the parent's live files a new snapshot lists as DELETED: none (an append or a merge),
// all of them (a table replace), or every delete file and the data files named (a maintenance
// rewrite). What it removed is counted as it goes, for the summary.
struct Removal {
  bool all = false;
  bool delete_files = false;
  std::set<std::string> data_files;  // Env paths

  static Removal All() { return Removal{.all = true}; }
  bool any() const { return all || delete_files || !data_files.empty(); }
  Result<bool> Removes(const iceberg::DataFile& file) const {
    if (all) return true;
    if (file.content != iceberg::FileContent::kData) return delete_files;
    if (data_files.empty()) return false;
    SKIPPR_ASSIGN_OR_RETURN(const std::string path, iceberg::EnvPathOfUri(file.file_path));
    return data_files.contains(path);
  }
};
struct RemovedTotals {
  int64_t data_files = 0;
  int64_t records = 0;
  int64_t position_delete_files = 0;
  int64_t position_deletes = 0;
  int64_t equality_delete_files = 0;
  int64_t equality_deletes = 0;
  int64_t bytes = 0;
  int64_t delete_files() const { return position_delete_files + equality_delete_files; }
  void Add(const iceberg::DataFile& file) {
    bytes += file.file_size_in_bytes;
    switch (file.content) {
      case iceberg::FileContent::kData:
        data_files += 1;
        records += file.record_count;
        return;
      case iceberg::FileContent::kPositionDeletes:
        position_delete_files += 1;
        position_deletes += file.record_count;
        return;
      case iceberg::FileContent::kEqualityDeletes:
        equality_delete_files += 1;
        equality_deletes += file.record_count;
        return;
    }
  }
};

// Appends the live entries of the parent's manifest `listed` to the added manifest of the same
// content, as EXISTING — or, for those `removal` names, as DELETED by this snapshot.
Status MergeInto(Env& env, const iceberg::ManifestFile& listed,
                 const std::map<int32_t, LogicalType>& current_types, const Removal& removal,
                 int64_t snapshot_id, std::vector<iceberg::ManifestEntry>& merged,
                 RemovedTotals& removed) {
  SKIPPR_ASSIGN_OR_RETURN(const std::string path, iceberg::EnvPathOfUri(listed.manifest_path));
  SKIPPR_ASSIGN_OR_RETURN(iceberg::Manifest old,
                          iceberg::ReadManifest(path, listed.manifest_length, &env));
  SKIPPR_ASSIGN_OR_RETURN(
      std::vector<Field> written_fields,
      schema::FieldsFromIcebergJson(nlohmann::json::parse(old.header.table_schema_json)));
  const std::map<int32_t, LogicalType> written_types = TopLevelTypes(written_fields);
  for (iceberg::ManifestEntry& entry : old.entries) {
    if (entry.status == iceberg::EntryStatus::kDeleted) continue;
    merged.push_back(AsExistingEntry(std::move(entry), listed));
    DropStaleBounds(merged.back().data_file, written_types, current_types);
    SKIPPR_ASSIGN_OR_RETURN(const bool removes, removal.Removes(merged.back().data_file));
    if (removes) {
      merged.back().status = iceberg::EntryStatus::kDeleted;
      merged.back().snapshot_id = snapshot_id;
      removed.Add(merged.back().data_file);
    }
  }
  return Status::OK();
}

// The new snapshot's manifest list: the parent's manifests plus the added ones. When that would
// exceed `manifests_before_merge` (or the snapshot removes files) the parent's entries are
// merged into the added manifests instead, data into data and deletes into deletes (a manifest
// holds one content), so a snapshot lists at most one manifest of each beyond the threshold.
Result<iceberg::ManifestList> BuildManifestList(Env& env, const iceberg::TableMetadata& next,
                                                const iceberg::Snapshot* parent,
                                                const Removal& removal,
                                                size_t manifests_before_merge,
                                                AddedManifest added[2], int64_t snapshot_id,
                                                RemovedTotals& removed) {
  const int64_t sequence_number = next.NextSequenceNumber();
  iceberg::ManifestList list;
  list.header = {snapshot_id, parent ? std::optional<int64_t>(parent->snapshot_id) : std::nullopt,
                 sequence_number};
  std::vector<iceberg::ManifestFile> previous;
  if (parent != nullptr) {
    SKIPPR_ASSIGN_OR_RETURN(const std::string parent_list,
                            iceberg::EnvPathOfUri(parent->manifest_list));
    SKIPPR_ASSIGN_OR_RETURN(iceberg::ManifestList parent_manifests,
                            iceberg::ReadManifestList(parent_list, &env));
    previous = std::move(parent_manifests.manifests);
  }
  size_t added_count = 0;
  for (int i = 0; i < 2; ++i) added_count += added[i].manifest.entries.empty() ? 0 : 1;
  if (removal.any() || previous.size() + added_count > manifests_before_merge) {
    const std::map<int32_t, LogicalType> current_types = TopLevelTypes(next.CurrentSchema().fields);
    std::vector<iceberg::ManifestEntry> merged[2];  // by ManifestContent
    for (const iceberg::ManifestFile& listed : previous) {
      SKIPPR_RETURN_IF_ERROR(MergeInto(env, listed, current_types, removal, snapshot_id,
                                       merged[static_cast<size_t>(listed.content)], removed));
    }
    for (int i = 0; i < 2; ++i) {
      SKIPPR_CHECK(added[i].manifest.header.content == static_cast<iceberg::ManifestContent>(i));
      std::vector<iceberg::ManifestEntry>& entries = added[i].manifest.entries;
      merged[i].insert(merged[i].end(), entries.begin(), entries.end());
      entries = std::move(merged[i]);
    }
    previous.clear();
  }
  list.manifests = std::move(previous);
  for (int i = 0; i < 2; ++i) {
    if (added[i].manifest.entries.empty()) continue;
    SKIPPR_ASSIGN_OR_RETURN(const int64_t manifest_bytes,
                            iceberg::WriteManifest(added[i].path, added[i].manifest, {}, &env));
    list.manifests.push_back(iceberg::DescribeNewManifest(
        added[i].manifest, added[i].location, manifest_bytes, snapshot_id, sequence_number));
  }
  return list;
}

// ----- snapshot summary --------------------------------------------------------------------------

// Iceberg's summary totals after a snapshot that adds `data_files` and `delete_file` (which may
// be absent) to the parent's and removes the `removed` ones.
std::map<std::string, std::string> SummaryTotals(
    const iceberg::Snapshot* parent, const RemovedTotals& removed,
    const std::vector<iceberg::DataFile>& data_files,
    const std::optional<iceberg::DataFile>& delete_file) {
  int64_t data_records = 0;
  int64_t bytes = delete_file ? delete_file->file_size_in_bytes : 0;
  for (const iceberg::DataFile& file : data_files) {
    data_records += file.record_count;
    bytes += file.file_size_in_bytes;
  }
  const auto added_files = static_cast<int64_t>(data_files.size());
  const bool adds_positions =
      delete_file && delete_file->content == iceberg::FileContent::kPositionDeletes;
  const int64_t deletes = delete_file ? delete_file->record_count : 0;
  const int64_t position_deletes = adds_positions ? deletes : 0;
  const int64_t equality_deletes = adds_positions ? 0 : deletes;
  const auto total = [&](const char* key, int64_t added, int64_t gone) {
    return std::to_string(SummaryNumber(parent, key) + added - gone);
  };
  std::map<std::string, std::string> summary = {
      {"added-data-files", std::to_string(added_files)},
      {"added-records", std::to_string(data_records)},
      {"added-files-size", std::to_string(bytes)},
      {"total-data-files", total("total-data-files", added_files, removed.data_files)},
      {"total-records", total("total-records", data_records, removed.records)},
      {"total-files-size", total("total-files-size", bytes, removed.bytes)},
      {"total-delete-files", total("total-delete-files", delete_file ? 1 : 0,
                                   removed.delete_files())},
      {"total-position-deletes", total("total-position-deletes", position_deletes,
                                       removed.position_deletes)},
      {"total-equality-deletes", total("total-equality-deletes", equality_deletes,
                                       removed.equality_deletes)}};
  if (delete_file) {
    const std::string kind = adds_positions ? "position" : "equality";
    summary["added-delete-files"] = "1";
    summary[fmt::format("added-{}-delete-files", kind)] = "1";
    summary[fmt::format("added-{}-deletes", kind)] = std::to_string(deletes);
  }
  if (removed.data_files > 0 || removed.delete_files() > 0) {
    summary["deleted-data-files"] = std::to_string(removed.data_files);
    summary["deleted-records"] = std::to_string(removed.records);
    summary["removed-files-size"] = std::to_string(removed.bytes);
  }
  if (removed.delete_files() > 0) {
    summary["removed-delete-files"] = std::to_string(removed.delete_files());
  }
  if (removed.position_delete_files > 0) {
    summary["removed-position-delete-files"] = std::to_string(removed.position_delete_files);
    summary["removed-position-deletes"] = std::to_string(removed.position_deletes);
  }
  if (removed.equality_delete_files > 0) {
    summary["removed-equality-delete-files"] = std::to_string(removed.equality_delete_files);
    summary["removed-equality-deletes"] = std::to_string(removed.equality_deletes);
  }
  return summary;
}

iceberg::SnapshotOperation OperationOf(const Landing& landing, bool truncates_table) {
  // A merge removes rows (through its deletes) as well as adding some: Iceberg's "overwrite".
  return landing.replaces_table || truncates_table || !landing.key_columns.empty()
             ? iceberg::SnapshotOperation::kOverwrite
             : iceberg::SnapshotOperation::kAppend;
}

iceberg::Manifest NewManifest(const iceberg::TableMetadata& next, iceberg::ManifestContent content,
                              const std::vector<iceberg::DataFile>& files, int64_t snapshot_id) {
  iceberg::Manifest manifest;
  manifest.header.table_schema_json =
      schema::FieldsToIcebergJson(next.CurrentSchema().fields, next.current_schema_id).dump();
  manifest.header.schema_id = next.current_schema_id;
  manifest.header.content = content;
  for (const iceberg::DataFile& file : files) {
    manifest.entries.push_back(
        {.status = iceberg::EntryStatus::kAdded, .snapshot_id = snapshot_id, .data_file = file});
  }
  return manifest;
}

const Field* FindField(const std::vector<Field>& fields, std::string_view name) {
  for (const Field& field : fields) {
    if (field.name == name) return &field;
  }
  return nullptr;
}

// The name a delete file's equality id has: in the current schema, else the newest schema that
// has it (a column dropped since still keys the deletes written before).
Result<std::string> EqualityColumnName(const iceberg::TableMetadata& metadata, int32_t field_id,
                                       const std::string& delete_file) {
  const auto in = [&](const std::vector<Field>& fields) -> const Field* {
    for (const Field& field : fields) {
      if (field.id == field_id) return &field;
    }
    return nullptr;
  };
  if (const Field* field = in(metadata.CurrentSchema().fields)) return field->name;
  for (auto schema = metadata.schemas.rbegin(); schema != metadata.schemas.rend(); ++schema) {
    if (const Field* field = in(schema->fields)) return field->name;
  }
  return Status::Corruption(fmt::format(
      "equality-delete file '{}' is keyed by field id {}, which no schema of its table has",
      delete_file, field_id));
}

// ----- landing files -----------------------------------------------------------------------------

// A landing file not written or not made durable: nothing was committed, and the next run
// replays the landing, rewriting the file under the same name.
Status LandingFileFailed(const std::string& path, const Status& failure) {
  return Status(failure.code(),
                fmt::format("writing Parquet file '{}' of the landing failed: {}; nothing was "
                            "committed to the table (check the disk under the warehouse, then run "
                            "again: the landing is replayed)",
                            path, failure.message()));
}

// zstd level 1 rather than DuckDB's default 3: on bench/lake's rides a quarter less of the
// writer's compression time for files 3% larger.
constexpr int kParquetZstdLevel = 1;
// DuckDB's writer holds a row group in memory until it has 122,880 rows; wide rows end it at this
// many bytes instead, so that the rows' width does not decide the lander's memory. Narrow rows
// (bench/lake's rides: about 20 MB a full group) are not cut.
constexpr std::string_view kParquetRowGroupBytes = "32MB";

// The COPY options of every Parquet file SkipprLake writes: zstd, the fields' Iceberg ids, and the
// `iceberg.schema` key, which lets readers that match columns by name (rather than by field id)
// find them; DuckDB writes the field ids into the Parquet schema itself.
std::string ParquetCopyOptions(const std::vector<Field>& fields, int32_t schema_id) {
  const std::string schema_json = schema::FieldsToIcebergJson(fields, schema_id).dump();
  return fmt::format("FORMAT parquet, COMPRESSION zstd, COMPRESSION_LEVEL {}, "
                     "ROW_GROUP_SIZE_BYTES '{}', FIELD_IDS {}, KV_METADATA {{'iceberg.schema': {}}}",
                     kParquetZstdLevel, kParquetRowGroupBytes, FieldIdsClause(fields),
                     QuoteLiteral(schema_json));
}

// The rows COPY reports it wrote.
int64_t CopiedRows(const query::QueryResult& copied) {
  SKIPPR_CHECK_MSG(copied.rows.size() == 1 && copied.rows[0].size() == 1 && copied.rows[0][0],
                   "COPY reports the rows it wrote");
  return std::stoll(*copied.rows[0][0]);
}

// Writes the rows of `select_sql` to a Parquet file at the Env path `path` (ParquetCopyOptions),
// synced with its directory; sets `file`'s record count and size. DuckDB writes the file itself,
// at the local path `env` gives it, which is returned for reading the file back; the fsync (for S3,
// the upload), and the directory's, go through `env`.
Result<std::string> CopyToParquet(Env& env, query::Engine& engine, const std::string& select_sql,
                                  const std::vector<Field>& fields, int32_t schema_id,
                                  const std::string& path, iceberg::DataFile& file) {
  Result<std::string> local_path = env.LocalPathForWriting(path);
  if (!local_path.ok()) return LandingFileFailed(path, local_path.status());
  Result<query::QueryResult> copied =
      engine.Run(fmt::format("COPY ({}) TO {} ({})", select_sql, QuoteLiteral(*local_path),
                             ParquetCopyOptions(fields, schema_id)));
  if (!copied.ok()) return LandingFileFailed(path, copied.status());
  file.record_count = CopiedRows(*copied);
  if (Status synced = env.SyncFile(path); !synced.ok()) return LandingFileFailed(path, synced);
  if (Status synced = env.SyncDirectory(DirectoryOf(path)); !synced.ok()) {
    return LandingFileFailed(path, synced);
  }
  SKIPPR_ASSIGN_OR_RETURN(const uint64_t bytes, env.FileSize(path));
  file.file_size_in_bytes = static_cast<int64_t>(bytes);
  return *local_path;
}

// A Parquet file written into a directory of several.
struct WrittenFile {
  std::string path;        // its Env path
  std::string local_path;  // where DuckDB wrote it, to read it back
  iceberg::DataFile file;  // record count and size set
};

// Removes every file in the local directory DuckDB writes into, when it is not the Env's own.
Status EmptyLocalDirectory(const std::string& local_directory) {
  std::error_code error;
  std::filesystem::create_directories(local_directory, error);
  for (const auto& entry : std::filesystem::directory_iterator(local_directory, error)) {
    std::filesystem::remove(entry.path(), error);
    if (error) break;
  }
  if (error) {
    return Status::IOError(fmt::format("emptying {}: {}", local_directory, error.message()));
  }
  return Status::OK();
}

// Writes the rows of `select_sql` as the Parquet files part-0.parquet, part-1.parquet, ... in
// `directory` (ParquetCopyOptions), DuckDB starting the next file at the first row group end past
// `target_file_bytes`; each file and the directory synced. The directory is emptied first: what is
// in it is what an attempt that never committed left. No rows: no file.
Result<std::vector<WrittenFile>> CopyToParquetFiles(Env& env, query::Engine& engine,
                                                    const std::string& select_sql,
                                                    const std::vector<Field>& fields,
                                                    int32_t schema_id, const std::string& directory,
                                                    int64_t target_file_bytes) {
  SKIPPR_RETURN_IF_ERROR(CreateDirectoriesDurably(env, directory));
  SKIPPR_ASSIGN_OR_RETURN(const std::vector<std::string> leftovers, env.ListDirectory(directory));
  for (const std::string& name : leftovers) {
    SKIPPR_RETURN_IF_ERROR(env.RemoveFile(directory + "/" + name));
  }
  Result<std::string> local_directory = env.LocalPathForWriting(directory);
  if (!local_directory.ok()) return LandingFileFailed(directory, local_directory.status());
  if (*local_directory != directory) SKIPPR_RETURN_IF_ERROR(EmptyLocalDirectory(*local_directory));
  Result<query::QueryResult> copied = engine.Run(fmt::format(
      "COPY ({}) TO {} ({}, FILE_SIZE_BYTES {}, FILENAME_PATTERN 'part-{{i}}')", select_sql,
      QuoteLiteral(*local_directory), ParquetCopyOptions(fields, schema_id),
      std::max<int64_t>(target_file_bytes, 1)));
  if (!copied.ok()) return LandingFileFailed(directory, copied.status());
  const int64_t rows = CopiedRows(*copied);
  std::vector<WrittenFile> written;
  int64_t rows_in_files = 0;
  for (size_t index = 0;; ++index) {
    const std::string name = fmt::format("part-{}.parquet", index);
    const std::string local_path = *local_directory + "/" + name;
    std::error_code error;
    if (!std::filesystem::exists(local_path, error)) break;
    const std::string path = directory + "/" + name;
    if (Status synced = env.SyncFile(path); !synced.ok()) return LandingFileFailed(path, synced);
    WrittenFile& added = written.emplace_back(WrittenFile{path, local_path, {}});
    SKIPPR_ASSIGN_OR_RETURN(const uint64_t bytes, env.FileSize(path));
    added.file.file_size_in_bytes = static_cast<int64_t>(bytes);
    SKIPPR_ASSIGN_OR_RETURN(added.file.record_count, RowCountOf(engine, local_path));
    rows_in_files += added.file.record_count;
  }
  SKIPPR_CHECK_MSG(rows_in_files == rows, "the files hold every row COPY wrote");
  if (Status synced = env.SyncDirectory(directory); !synced.ok()) {
    return LandingFileFailed(directory, synced);
  }
  return written;
}

// data/<landing id>.parquet: the rows of the landing's table in `engine` (all `rows` of them, or
// per key the last); nullopt when a merge leaves no row. The name derives from the landing id, so
// a retry rewrites the same file.
Result<std::optional<iceberg::DataFile>> WriteDataFile(
    Env& env, query::Engine& engine, const Landing& landing,
    const schema::NamespaceSchema& namespace_schema,
    const std::vector<std::shared_ptr<const Batch>>& batches, int64_t rows,
    const std::string& location, const std::string& table_path) {
  const std::string name = fmt::format("data/{}.parquet", landing.landing_id);
  const std::string path = table_path + "/" + name;
  iceberg::DataFile file;
  SKIPPR_ASSIGN_OR_RETURN(
      const std::string local_path,
      CopyToParquet(env, engine,
                    fmt::format("SELECT * FROM {}.{}", QuoteIdentifier(kLandingPipeline),
                                QuoteIdentifier(landing.namespace_name)),
                    namespace_schema.fields, namespace_schema.schema_id, path, file));
  if (landing.key_columns.empty()) {
    SKIPPR_CHECK_MSG(file.record_count == rows, "the data file holds every landed row");
  }
  if (file.record_count == 0) {
    // Every key's last change was a delete: the snapshot adds deletes only.
    if (Status removed = env.RemoveFile(path);
        !removed.ok() && removed.code() != StatusCode::kNotFound) {
      return removed;
    }
    return std::optional<iceberg::DataFile>();
  }
  file.file_path = location + "/" + name;
  if (landing.key_columns.empty()) {
    // Every batch row is in the file: statistics from the batches, which are in memory.
    SKIPPR_RETURN_IF_ERROR(CheckRowCount(engine, local_path, rows));
    SKIPPR_RETURN_IF_ERROR(AddColumnStatisticsFromBatches(namespace_schema.fields, batches, file));
  } else {
    SKIPPR_RETURN_IF_ERROR(
        AddColumnStatisticsFromFile(engine, namespace_schema.fields, local_path, file));
  }
  return std::optional<iceberg::DataFile>(std::move(file));
}

// data/<landing id>-deletes.parquet: an equality-delete file of every distinct key among the
// landing's `rows` (the key columns only, with their field ids).
Result<iceberg::DataFile> WriteEqualityDeleteFile(Env& env, query::Engine& engine, const Landing& landing,
                                          const schema::NamespaceSchema& namespace_schema,
                                          int64_t rows, const std::string& location,
                                          const std::string& table_path) {
  std::vector<Field> key_fields;
  std::vector<std::string> quoted_keys;
  for (const std::string& column : landing.key_columns) {
    key_fields.push_back(*FindField(namespace_schema.fields, column));
    quoted_keys.push_back(QuoteIdentifier(column));
  }
  const std::string name = fmt::format("data/{}-deletes.parquet", landing.landing_id);
  const std::string path = table_path + "/" + name;
  iceberg::DataFile file;
  SKIPPR_ASSIGN_OR_RETURN(const std::string local_path, CopyToParquet(
      env, engine,
      fmt::format("SELECT DISTINCT {} FROM wal_scan({}, {})", fmt::join(quoted_keys, ", "),
                  QuoteLiteral(kLandingPipeline), QuoteLiteral(landing.namespace_name)),
      key_fields, namespace_schema.schema_id, path, file));
  SKIPPR_CHECK_MSG(file.record_count >= 1 && file.record_count <= rows,
                   "a merge deletes between one key and one key per row");
  file.content = iceberg::FileContent::kEqualityDeletes;
  file.file_path = location + "/" + name;
  for (const Field& field : key_fields) file.equality_ids.push_back(field.id);
  SKIPPR_RETURN_IF_ERROR(AddColumnStatisticsFromFile(engine, key_fields, local_path, file));
  return file;
}

// Iceberg's reserved field ids of a position-delete file's columns.
const std::vector<Field>& PositionDeleteFields() {
  static const std::vector<Field> fields = {
      Field{2147483546, "file_path", LogicalType::String(), false},
      Field{2147483545, "pos", LogicalType::Long(), false}};
  return fields;
}

// data/<landing id>-deletes.parquet: a position-delete file of every row of `table_rows` (the
// table's live rows when the landing was written) whose key is among the landing's keys, sorted by
// file and position as the spec asks; nullopt when no such row is live.
Result<std::optional<iceberg::DataFile>> WritePositionDeleteFile(
    Env& env, query::Engine& engine, const Landing& landing, const query::LandedRows& table_rows,
    const std::string& location, const std::string& table_path) {
  std::vector<std::string> quoted_keys;
  for (const std::string& key : landing.key_columns) quoted_keys.push_back(QuoteIdentifier(key));
  const std::string landing_keys =
      fmt::format("SELECT DISTINCT {} FROM wal_scan({}, {})", fmt::join(quoted_keys, ", "),
                  QuoteLiteral(kLandingPipeline), QuoteLiteral(landing.namespace_name));
  const std::string name = fmt::format("data/{}-deletes.parquet", landing.landing_id);
  const std::string path = table_path + "/" + name;
  iceberg::DataFile file;
  SKIPPR_ASSIGN_OR_RETURN(const std::string local_path, CopyToParquet(
      env, engine,
      fmt::format("SELECT __skippr_file AS file_path, __skippr_position AS pos FROM ({}) "
                  "ORDER BY ALL",
                  query::LandedRowPositionsQuery(table_rows, landing.key_columns, landing_keys)),
      PositionDeleteFields(), /*schema_id=*/0, path, file));
  if (file.record_count == 0) {
    SKIPPR_RETURN_IF_ERROR(env.RemoveFile(path));
    return std::optional<iceberg::DataFile>();
  }
  file.content = iceberg::FileContent::kPositionDeletes;
  file.file_path = location + "/" + name;
  SKIPPR_RETURN_IF_ERROR(
      AddColumnStatisticsFromFile(engine, PositionDeleteFields(), local_path, file));
  return std::optional<iceberg::DataFile>(std::move(file));
}

// Whether rows of the table can be position-deleted: DuckDB reads a row's position as the
// virtual column `file_row_number`, which a column of that name in a data file would hide. Any
// schema the table ever had counts — its older files may hold such a column.
bool AllowsPositionDeletes(const iceberg::TableMetadata& metadata) {
  for (const iceberg::TableSchema& schema : metadata.schemas) {
    if (FindField(schema.fields, "file_row_number") != nullptr) return false;
  }
  return true;
}

}  // namespace

namespace {

// What a new snapshot adds and removes, and what skipprd says of it beside Iceberg's totals.
struct SnapshotChange {
  std::string name;  // of its manifests and manifest list: the landing id, or "maintenance-<id>"
  std::vector<iceberg::DataFile> data_files;
  std::optional<iceberg::DataFile> delete_file;
  Removal removal;
  std::map<std::string, std::string> summary;
  iceberg::SnapshotOperation operation = iceberg::SnapshotOperation::kAppend;
  std::string_view crash_point_before;
  std::string_view crash_point_after;
};

// Commits `change` as the next snapshot of `base` (`next`: its next version, schema evolved):
// writes the manifests and the manifest list, expires snapshots, swaps the metadata in by
// compare-and-set (Conflict when another writer committed first), then removes what expiry let go.
Result<LandedSnapshot> CommitChange(const LakeOptions& options, iceberg::Catalog& catalog,
                                    const iceberg::TableIdentifier& table,
                                    const std::string& location, const std::string& table_path,
                                    const iceberg::VersionedMetadata& base,
                                    iceberg::TableMetadata next, SnapshotChange change) {
  const iceberg::Snapshot* parent = base.metadata.CurrentSnapshot();
  SKIPPR_ASSIGN_OR_RETURN(const int64_t snapshot_id, iceberg::NewSnapshotId(next));
  SKIPPR_RETURN_IF_ERROR(CreateDirectoriesDurably(*options.env, table_path + "/metadata"));
  AddedManifest added[2];
  for (const iceberg::ManifestContent content :
       {iceberg::ManifestContent::kData, iceberg::ManifestContent::kDeletes}) {
    const auto index = static_cast<size_t>(content);
    const std::string name = fmt::format("metadata/{}-m{}.avro", change.name, index);
    std::vector<iceberg::DataFile> deletes;
    if (change.delete_file) deletes.push_back(*change.delete_file);
    added[index] = {NewManifest(next, content, index == 0 ? change.data_files : deletes,
                                snapshot_id),
                    location + "/" + name, table_path + "/" + name};
  }
  RemovedTotals removed;
  SKIPPR_ASSIGN_OR_RETURN(iceberg::ManifestList list,
                          BuildManifestList(*options.env, next, parent, change.removal,
                                            options.manifests_before_merge, added, snapshot_id,
                                            removed));
  const std::string list_name = fmt::format("metadata/snap-{}-{}.avro", snapshot_id, change.name);
  SKIPPR_RETURN_IF_ERROR(
      iceberg::WriteManifestList(table_path + "/" + list_name, list, {}, options.env)
          .status());

  std::map<std::string, std::string> summary =
      SummaryTotals(parent, removed, change.data_files, change.delete_file);
  summary.merge(change.summary);
  summary[std::string(kPipelineKey)] = options.pipeline;
  summary[std::string(kPipelineInstanceKey)] = options.pipeline_instance;
  SKIPPR_RETURN_IF_ERROR(iceberg::AddSnapshot(next, {snapshot_id, NowMs(),
                                                     location + "/" + list_name, change.operation,
                                                     std::move(summary)}));
  const std::vector<iceberg::Snapshot> expired =
      iceberg::ExpireSnapshots(next, {.now_ms = NowMs(),
                                      .max_snapshot_age_ms = options.max_snapshot_age_ms,
                                      .min_snapshots_to_keep = options.min_snapshots_to_keep});
  std::vector<std::string> dropped_metadata_files;
  std::set<std::string> logged;
  for (const iceberg::MetadataLogEntry& entry : next.metadata_log) logged.insert(entry.metadata_file);
  for (const iceberg::MetadataLogEntry& entry : base.metadata.metadata_log) {
    if (!logged.contains(entry.metadata_file)) dropped_metadata_files.push_back(entry.metadata_file);
  }
  CrashPoint(change.crash_point_before);
  SKIPPR_ASSIGN_OR_RETURN(iceberg::VersionedMetadata committed,
                          iceberg::CommitTableMetadata(catalog, table, base, next));
  CrashPoint(change.crash_point_after);
  // Best effort: a file left behind by a failure here is garbage, never a wrong answer.
  if (Status cleaned = internal::RemoveUnreferencedFiles(*options.env, next, expired,
                                                         dropped_metadata_files);
      !cleaned.ok()) {
    spdlog::warn("lake {}: could not remove files of expired snapshots: {}", table.ToString(),
                 cleaned.message());
  }
  return LandedSnapshot{committed.location, snapshot_id};
}

}  // namespace

Status CheckKeyColumns(const std::vector<std::string>& key_columns,
                       const std::vector<Field>& fields) {
  if (key_columns.empty()) return Status::InvalidArgument("names no column");
  std::set<std::string> seen;
  for (const std::string& column : key_columns) {
    if (!seen.insert(column).second) {
      return Status::InvalidArgument(fmt::format("names column '{}' twice", column));
    }
    const Field* field = FindField(fields, column);
    if (field == nullptr) {
      std::vector<std::string> names;
      for (const Field& candidate : fields) names.push_back(candidate.name);
      return Status::InvalidArgument(fmt::format("column '{}' is not in the schema (columns: {})",
                                                 column, fmt::join(names, ", ")));
    }
    const TypeId type = field->type.id();
    if (type == TypeId::kStruct || type == TypeId::kList || type == TypeId::kMap) {
      return Status::InvalidArgument(fmt::format(
          "column '{}' is a {}; key columns must be top-level primitive columns (not struct, list "
          "or map)",
          column, field->type.ToString()));
    }
    if (type == TypeId::kFloat || type == TypeId::kDouble) {
      return Status::InvalidArgument(fmt::format(
          "column '{}' is a {}; a key cannot be a float or double (NaN and -0.0 make equality "
          "ambiguous; Iceberg refuses them as identifier fields)",
          column, field->type.ToString()));
    }
  }
  return Status::OK();
}

// The data file WriteStream wrote, synced, not yet a landing's.
struct LakeWriter::StreamedFile {
  std::string namespace_name;
  int32_t schema_id = 0;
  std::string path;  // its Env path
  iceberg::DataFile file;  // record count and size set; path and statistics at LandStreamed
  // Gathered as the batches were handed to DuckDB (by its scan threads, one batch at a time),
  // rather than after the stream, when nothing else would overlap with it.
  std::shared_ptr<FileStatistics> statistics;
};

LakeWriter::~LakeWriter() = default;

bool IsWarehouseOnS3(std::string_view warehouse) { return warehouse.starts_with("s3://"); }

namespace {
std::string LocalCopiesDirectory(const std::string& local_directory) {
  return local_directory + "/objects";
}
}  // namespace

Result<std::string> LocalCopyPathOf(const std::string& local_directory, std::string_view uri) {
  SKIPPR_ASSIGN_OR_RETURN(const auto parts, aws::ParseS3Uri(uri));
  return fmt::format("{}/{}/{}", LocalCopiesDirectory(local_directory), parts.first, parts.second);
}

Result<std::unique_ptr<Env>> OpenWarehouseEnv(const std::string& warehouse,
                                              const WarehouseAccess& access) {
  SKIPPR_CHECK_MSG(IsWarehouseOnS3(warehouse), "only a warehouse on S3 needs an Env of its own");
  if (access.local_directory.empty()) {
    return Status::InvalidArgument(
        fmt::format("warehouse {} is on S3: the lake needs a local directory for the files DuckDB "
                    "writes and reads",
                    warehouse));
  }
  static const ProcessEnvironment kProcessEnvironment;
  const Environment& environment =
      access.environment != nullptr ? *access.environment : kProcessEnvironment;
  SKIPPR_ASSIGN_OR_RETURN(
      std::unique_ptr<aws::S3Env> env,
      aws::S3Env::Open(access.s3, environment, access.local_directory + "/spool",
                       {.directory = LocalCopiesDirectory(access.local_directory)}));
  return std::unique_ptr<Env>(std::move(env));
}

Result<std::unique_ptr<LakeWriter>> LakeWriter::Open(LakeOptions options) {
  std::unique_ptr<LakeWriter> writer(new LakeWriter());
  if (IsWarehouseOnS3(options.warehouse)) {
    SKIPPR_ASSIGN_OR_RETURN(writer->warehouse_env_,
                            OpenWarehouseEnv(options.warehouse, options.access));
    options.env = writer->warehouse_env_.get();
  }
  SKIPPR_ASSIGN_OR_RETURN(writer->catalog_,
                          iceberg::OpenCatalog({.warehouse = options.warehouse,
                                                .uri = options.catalog_uri,
                                                .dynamodb_table = options.catalog_table,
                                                .dynamodb = options.access.dynamodb,
                                                .environment = options.access.environment,
                                                .env = options.env}));
  SKIPPR_ASSIGN_OR_RETURN(writer->engine_, query::Engine::Open());
  // A data file's row order means nothing: DuckDB may then write it from several threads.
  SKIPPR_RETURN_IF_ERROR(writer->engine_->Run("SET preserve_insertion_order = false").status());
  writer->options_ = std::move(options);
  return writer;
}

Result<bool> LakeWriter::HoldsLanding(const std::string& namespace_name,
                                      const std::string& landing_id) {
  const iceberg::TableIdentifier table{options_.table_namespace, namespace_name};
  Result<iceberg::VersionedMetadata> current = iceberg::LoadTableForCommit(*catalog_, table);
  if (!current.ok() && current.status().code() == StatusCode::kNotFound) return false;
  SKIPPR_RETURN_IF_ERROR(current.status());
  return iceberg::FindAncestorWithSummary(current->metadata, kLandingIdKey, landing_id) != nullptr;
}

struct LakeWriter::LandingFiles {
  std::optional<iceberg::DataFile> data_file;  // none when a merge leaves no row
  // merge_by_key: the positions of the live rows of every key the landing touches (none when no
  // such row is live), or for a table that cannot take those, an equality delete of the keys.
  std::optional<iceberg::DataFile> delete_file;
  // The landing's changes hold a CDC truncate: its rows (those after the truncate) replace the
  // table, whatever the write policy.
  bool truncates_table = false;
  // The snapshot the files were written against (0: none): a merge's deletes name its rows.
  int64_t base_snapshot_id = 0;
  // The greatest order token of the landing's source changes, hex (kSourcePositionKey); empty
  // when its batches carry none.
  std::string source_position;
};


namespace {

// Which change rows a landing can apply: updates, deletes and truncates need a key to merge by —
// appended, a delete would land as a row and an update as a second version. Under a key a landing
// is the source's final state: per key the newest change, and a TRUNCATE replaces the table at its
// place in the stream.
Status CheckChangesLandable(const Landing& landing, const Batch& batch) {
  if (!batch.cdc || !landing.key_columns.empty()) return Status::OK();
  for (const Mutation mutation : batch.cdc->mutations) {
    if (mutation == Mutation::kUpdate || mutation == Mutation::kDelete ||
        mutation == Mutation::kTruncate) {
      return Status::NotSupported(fmt::format(
          "namespace '{}' holds updates, deletes or truncates from its source, and has no key to "
          "apply them by (appended, a delete would land as a row); give the source table a "
          "primary key, or sync this pipeline without a data_sink (the WAL is then the dataset)",
          landing.namespace_name));
    }
  }
  return Status::OK();
}

// The greatest order token among `batch`'s source changes, or `greatest` when none is greater.
std::string GreatestOrderToken(const Batch& batch, std::string greatest) {
  if (!batch.cdc) return greatest;
  for (size_t row = 0; row < batch.cdc->order_tokens.size(); ++row) {
    const std::string_view token = batch.cdc->order_tokens[row];
    if (token > greatest) greatest = std::string(token);
  }
  return greatest;
}

bool HoldsTruncate(const Batch& batch) {
  if (!batch.cdc) return false;
  return std::find(batch.cdc->mutations.begin(), batch.cdc->mutations.end(),
                   Mutation::kTruncate) != batch.cdc->mutations.end();
}

}  // namespace

Result<LakeWriter::LandingFiles> LakeWriter::WriteLandingFiles(
    const Landing& landing, const schema::NamespaceSchema& namespace_schema,
    const std::vector<std::shared_ptr<const Batch>>& batches, const TableLocations& locations,
    const iceberg::VersionedMetadata& base) {
  const std::string& location = locations.location;
  const std::string& table_path = locations.path;
  if (Status keys = CheckKeyColumns(landing.key_columns, namespace_schema.fields);
      !landing.key_columns.empty() && !keys.ok()) {
    return Status::InvalidArgument(
        fmt::format("landing {} of namespace '{}' merges by a key that {}", landing.landing_id,
                    landing.namespace_name, keys.message()));
  }
  int64_t rows = 0;
  LandingFiles files;
  std::string greatest_token;
  for (const auto& batch : batches) {
    rows += batch->num_rows;
    SKIPPR_RETURN_IF_ERROR(CheckChangesLandable(landing, *batch));
    files.truncates_table = files.truncates_table || HoldsTruncate(*batch);
    greatest_token = GreatestOrderToken(*batch, std::move(greatest_token));
  }
  files.source_position = HexEncode(greatest_token);
  // The engine's view of the landing does the merge: per key the last row, CDC deletes dropped.
  query::TableSource source;
  source.pipeline = std::string(kLandingPipeline);
  source.namespace_name = landing.namespace_name;
  source.fields = namespace_schema.fields;
  source.batches = query::BatchList::InMemory(batches);
  source.key_columns = landing.key_columns;
  SKIPPR_RETURN_IF_ERROR(engine_->RegisterTable(std::move(source)));
  SKIPPR_RETURN_IF_ERROR(CreateDirectoriesDurably(*options_.env, table_path + "/data"));
  SKIPPR_ASSIGN_OR_RETURN(files.data_file,
                          WriteDataFile(*options_.env, *engine_, landing, namespace_schema,
                                        batches, rows, location, table_path));
  // Deletes apply to earlier files only: none when the table has none, or when this landing
  // replaces them all.
  const iceberg::Snapshot* parent = base.metadata.CurrentSnapshot();
  files.base_snapshot_id = parent != nullptr ? parent->snapshot_id : 0;
  if (landing.key_columns.empty() || !HasDataFiles(parent) || landing.replaces_table ||
      files.truncates_table) {
    return files;
  }
  if (!AllowsPositionDeletes(base.metadata)) {
    SKIPPR_ASSIGN_OR_RETURN(files.delete_file,
                            WriteEqualityDeleteFile(*options_.env, *engine_, landing,
                                                    namespace_schema, rows, location,
                                                    table_path));
    return files;
  }
  SKIPPR_ASSIGN_OR_RETURN(query::LandedRows table_rows,
                          LiveFilesOf(base.metadata, parent->snapshot_id, options_.env));
  SKIPPR_ASSIGN_OR_RETURN(table_rows, LocalCopiesOf(std::move(table_rows), *options_.env));
  SKIPPR_ASSIGN_OR_RETURN(files.delete_file,
                          WritePositionDeleteFile(*options_.env, *engine_, landing, table_rows,
                                                  location, table_path));
  return files;
}

Result<LandingOutcome> LakeWriter::Land(const Landing& landing,
                                        const schema::NamespaceSchema& namespace_schema,
                                        const std::vector<std::shared_ptr<const Batch>>& batches) {
  int64_t rows = 0;
  for (const auto& batch : batches) rows += batch->num_rows;
  return Commit(landing, namespace_schema, rows,
                [&](const TableLocations& locations, const iceberg::VersionedMetadata& base) {
                  return WriteLandingFiles(landing, namespace_schema, batches, locations, base);
                });
}

Result<LakeWriter::TableLocations> LakeWriter::LocationsOf(const std::string& namespace_name) const {
  TableLocations locations;
  SKIPPR_ASSIGN_OR_RETURN(
      locations.location,
      iceberg::TableLocation(options_.warehouse, options_.table_namespace, namespace_name));
  SKIPPR_ASSIGN_OR_RETURN(locations.path, iceberg::EnvPathOfUri(locations.location));
  return locations;
}

Result<int64_t> LakeWriter::WriteStream(const schema::NamespaceSchema& namespace_schema,
                                        StreamedBatches next) {
  streamed_.reset();
  SKIPPR_ASSIGN_OR_RETURN(const TableLocations locations, LocationsOf(namespace_schema.name));
  SKIPPR_RETURN_IF_ERROR(CreateDirectoriesDurably(*options_.env, locations.path + "/data"));
  query::TableSource source;
  source.pipeline = std::string(kLandingPipeline);
  source.namespace_name = namespace_schema.name;
  source.fields = namespace_schema.fields;
  // One stream at a time per pipeline instance: a stream that did not land (a crash, a failed
  // commit) leaves a file the next one overwrites. The name is not the landing's, which is known
  // only once the stream ends; the leading underscore hides it from engines that list directories
  // (Spark, Hive).
  auto streamed = std::make_unique<StreamedFile>();
  streamed->namespace_name = namespace_schema.name;
  streamed->schema_id = namespace_schema.schema_id;
  streamed->statistics = std::make_shared<FileStatistics>(namespace_schema.fields);
  streamed->path = fmt::format("{}/data/_streaming-{}.parquet", locations.path,
                                     options_.pipeline_instance);
  // As each batch is taken, what DuckDB has written of the file so far starts going to disk: the
  // sync after the stream, which the lander waits for, then writes only its last row groups.
  source.batches = query::BatchList::Streaming(
      [next = std::move(next), statistics = streamed->statistics, env = options_.env,
       path = streamed->path]() -> Result<std::shared_ptr<const Batch>> {
        SKIPPR_ASSIGN_OR_RETURN(std::shared_ptr<const Batch> batch, next());
        if (batch != nullptr) statistics->Add(*batch);
        env->StartWriteBack(path);
        return batch;
      });
  SKIPPR_RETURN_IF_ERROR(engine_->RegisterTable(std::move(source)));
  SKIPPR_RETURN_IF_ERROR(
      CopyToParquet(*options_.env, *engine_,
                    fmt::format("SELECT * FROM {}.{}", QuoteIdentifier(kLandingPipeline),
                                QuoteIdentifier(namespace_schema.name)),
                    namespace_schema.fields, namespace_schema.schema_id, streamed->path,
                    streamed->file)
          .status());
  const int64_t rows = streamed->file.record_count;
  streamed_ = std::move(streamed);
  return rows;
}

Result<LandingOutcome> LakeWriter::LandStreamed(
    const Landing& landing, const schema::NamespaceSchema& namespace_schema, int64_t rows) {
  SKIPPR_CHECK_MSG(streamed_ != nullptr && streamed_->namespace_name == landing.namespace_name &&
                       streamed_->schema_id == namespace_schema.schema_id,
                   "LandStreamed lands the stream WriteStream last wrote, under its schema");
  SKIPPR_CHECK_MSG(landing.key_columns.empty(), "a streamed landing appends or replaces");
  std::unique_ptr<StreamedFile> streamed = std::move(streamed_);
  SKIPPR_CHECK_MSG(rows == streamed->file.record_count, "the stream wrote every landed row");
  Result<LandingOutcome> outcome = Commit(
      landing, namespace_schema, rows,
      [&](const TableLocations& locations,
          const iceberg::VersionedMetadata&) -> Result<LandingFiles> {
        const std::string name = fmt::format("data/{}.parquet", landing.landing_id);
        const std::string path = locations.path + "/" + name;
        // Under the landing's name, as a replay of the landing would write it.
        if (Status renamed = options_.env->RenameFile(streamed->path, path); !renamed.ok()) {
          return LandingFileFailed(path, renamed);
        }
        if (Status synced = options_.env->SyncDirectory(DirectoryOf(path)); !synced.ok()) {
          return LandingFileFailed(path, synced);
        }
        Result<std::string> local_path = options_.env->LocalPathForReading(path);
        if (!local_path.ok()) return LandingFileFailed(path, local_path.status());
        SKIPPR_RETURN_IF_ERROR(CheckRowCount(*engine_, *local_path, rows));
        LandingFiles files;
        files.data_file = std::move(streamed->file);
        files.data_file->file_path = locations.location + "/" + name;
        SKIPPR_RETURN_IF_ERROR(streamed->statistics->WriteTo(*files.data_file));
        return files;
      });
  if (outcome.ok() && outcome->was_landed_before) {
    // Not reached by a landing planned after its stream; the file would only be garbage.
    (void)options_.env->RemoveFile(streamed->path);
  }
  return outcome;
}

Result<LandingOutcome> LakeWriter::Commit(const Landing& landing,
                                          const schema::NamespaceSchema& namespace_schema,
                                          int64_t rows, const WriteFiles& write_files) {
  const iceberg::TableIdentifier table{options_.table_namespace, landing.namespace_name};
  SKIPPR_ASSIGN_OR_RETURN(const TableLocations locations, LocationsOf(landing.namespace_name));
  const std::string& location = locations.location;
  const std::string& table_path = locations.path;

  std::optional<LandingFiles> files;
  for (int attempt = 1;; ++attempt) {
    Result<iceberg::VersionedMetadata> base = iceberg::LoadTableForCommit(*catalog_, table);
    if (!base.ok() && base.status().code() == StatusCode::kNotFound) {
      SKIPPR_ASSIGN_OR_RETURN(iceberg::TableMetadata created,
                              iceberg::NewTableMetadata(location, namespace_schema.fields, NowMs(),
                                                        namespace_schema.last_field_id));
      base = iceberg::CreateTableWithMetadata(*catalog_, table, created);
      // Raced with another writer's create: load what it made (bounded, like commit conflicts).
      if (!base.ok() && base.status().code() == StatusCode::kConflict &&
          attempt < kCommitAttempts) {
        continue;
      }
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
    // A merge's deletes name the rows of the snapshot they were written against: another
    // writer has committed since.
    if (files && !landing.key_columns.empty() &&
        files->base_snapshot_id != (parent != nullptr ? parent->snapshot_id : 0)) {
      files.reset();
    }
    if (!files) {
      SKIPPR_ASSIGN_OR_RETURN(files, write_files(locations, *base));
      CrashPoint("lake.after_data_file");
    }

    SnapshotChange change{.name = landing.landing_id,
                          .delete_file = files->delete_file,
                          .operation = OperationOf(landing, files->truncates_table),
                          .crash_point_before = "lake.before_catalog_commit",
                          .crash_point_after = "lake.after_catalog_commit"};
    if (files->data_file) change.data_files.push_back(*files->data_file);
    if (landing.replaces_table || files->truncates_table) change.removal = Removal::All();
    change.summary[std::string(kLandingIdKey)] = landing.landing_id;
    change.summary[std::string(kWalSegmentIdsKey)] = SegmentIdList(landing.wal_segment_ids);
    if (!files->source_position.empty()) {
      change.summary[std::string(kSourcePositionKey)] = files->source_position;
    }
    Result<LandedSnapshot> committed = CommitChange(options_, *catalog_, table, location,
                                                    table_path, *base, std::move(next),
                                                    std::move(change));
    if (committed.ok()) {
      return LandingOutcome{
          .snapshot = *committed,
          .rows = rows,
          .data_file_bytes = files->data_file ? files->data_file->file_size_in_bytes : 0,
          .rows_written = files->data_file ? files->data_file->record_count : 0,
          .rows_deleted = files->delete_file ? files->delete_file->record_count : 0};
    }
    if (committed.status().code() != StatusCode::kConflict || attempt >= kCommitAttempts) {
      return committed.status();
    }
    spdlog::info("lake {}: another writer committed first; retrying landing {}", table.ToString(),
                 landing.landing_id);
  }
}

namespace {

Result<query::LandedRows> LiveFilesOf(const iceberg::TableMetadata& metadata, int64_t snapshot_id,
                                      Env* env) {
  query::LandedRows rows;
  const iceberg::Snapshot* snapshot = metadata.FindSnapshot(snapshot_id);
  SKIPPR_CHECK_MSG(snapshot != nullptr, "the live files of a snapshot the table has");
  SKIPPR_ASSIGN_OR_RETURN(const std::string list_path,
                          iceberg::EnvPathOfUri(snapshot->manifest_list));
  SKIPPR_ASSIGN_OR_RETURN(iceberg::ManifestList list, iceberg::ReadManifestList(list_path, env));
  for (const iceberg::ManifestFile& manifest_file : list.manifests) {
    SKIPPR_ASSIGN_OR_RETURN(const std::string manifest_path,
                            iceberg::EnvPathOfUri(manifest_file.manifest_path));
    SKIPPR_ASSIGN_OR_RETURN(iceberg::Manifest manifest,
                            iceberg::ReadManifest(manifest_path, manifest_file.manifest_length, env));
    for (const iceberg::ManifestEntry& entry : manifest.entries) {
      if (entry.status == iceberg::EntryStatus::kDeleted) continue;
      const iceberg::DataFile& file = entry.data_file;
      SKIPPR_ASSIGN_OR_RETURN(std::string path, iceberg::EnvPathOfUri(file.file_path));
      // ADDED entries written without one inherit the manifest's sequence number.
      const int64_t sequence_number = entry.sequence_number.value_or(manifest_file.sequence_number);
      if (file.content == iceberg::FileContent::kData) {
        rows.data_files.push_back({std::move(path), sequence_number,
                                   ColumnStatisticsOf(file, metadata.CurrentSchema()),
                                   file.file_path});
        continue;
      }
      if (file.content == iceberg::FileContent::kPositionDeletes) {
        rows.position_delete_files.push_back({std::move(path), sequence_number});
        continue;
      }
      query::EqualityDeleteFile deletes{std::move(path), sequence_number, {}};
      for (const int32_t field_id : file.equality_ids) {
        SKIPPR_ASSIGN_OR_RETURN(std::string name,
                                EqualityColumnName(metadata, field_id, file.file_path));
        deletes.key_columns.push_back(std::move(name));
      }
      rows.equality_delete_files.push_back(std::move(deletes));
    }
  }
  return rows;
}

}  // namespace

Result<query::LandedRows> LandedRowsOf(const LandedSnapshot& landed, Env* env) {
  if (landed.snapshot_id == 0) return query::LandedRows{};
  SKIPPR_ASSIGN_OR_RETURN(iceberg::TableMetadata metadata,
                          iceberg::ReadMetadataFile(landed.metadata_location, env));
  if (metadata.FindSnapshot(landed.snapshot_id) == nullptr) {
    return Status::Corruption(fmt::format("Iceberg metadata '{}' has no snapshot {}",
                                          landed.metadata_location, landed.snapshot_id));
  }
  SKIPPR_ASSIGN_OR_RETURN(query::LandedRows rows, LiveFilesOf(metadata, landed.snapshot_id, env));
  return LocalCopiesOf(std::move(rows), *env);
}

namespace {

// `[path, ...]` as a DuckDB list literal.
std::string PathList(const std::vector<const query::LandedFile*>& files) {
  std::vector<std::string> paths;
  for (const query::LandedFile* file : files) paths.push_back(QuoteLiteral(file->path));
  return fmt::format("[{}]", fmt::join(paths, ", "));
}

// The data files of `live` some equality delete applies to: a row whose key a delete file of a
// greater sequence number holds (NULL equal to NULL, as Iceberg compares). One query: each
// sequence number's files read with their names, the deletes reduced to each key's greatest
// sequence number.
Result<std::set<std::string>> FilesWithDeletedRows(query::Engine& engine,
                                                   const query::LandedRows& live,
                                                   const std::vector<std::string>& keys) {
  std::vector<std::string> quoted;
  std::vector<std::string> equal;
  for (const std::string& key : keys) {
    quoted.push_back(QuoteIdentifier(key));
    equal.push_back(fmt::format("l.{0} IS NOT DISTINCT FROM x.{0}", QuoteIdentifier(key)));
  }
  const std::string key_list = fmt::format("{}", fmt::join(quoted, ", "));
  std::map<int64_t, std::vector<const query::LandedFile*>> by_sequence;
  for (const query::LandedFile& file : live.data_files) {
    by_sequence[file.sequence_number].push_back(&file);
  }
  std::vector<std::string> data;
  for (const auto& [sequence_number, files] : by_sequence) {
    data.push_back(fmt::format(
        "SELECT {}, filename AS __skippr_file, CAST({} AS BIGINT) AS __skippr_sequence FROM "
        "read_parquet({}, filename = true, union_by_name = true)",
        key_list, sequence_number, PathList(files)));
  }
  std::vector<std::string> deletes;
  for (const query::EqualityDeleteFile& file : live.equality_delete_files) {
    deletes.push_back(fmt::format("SELECT {}, CAST({} AS BIGINT) AS __skippr_sequence FROM "
                                  "read_parquet({})",
                                  key_list, file.sequence_number, QuoteLiteral(file.path)));
  }
  SKIPPR_ASSIGN_OR_RETURN(
      const query::QueryResult result,
      engine.Run(fmt::format(
          "SELECT DISTINCT l.__skippr_file FROM ({}) l SEMI JOIN (SELECT {}, "
          "max(__skippr_sequence) AS __skippr_sequence FROM ({}) GROUP BY ALL) x ON {} AND "
          "x.__skippr_sequence > l.__skippr_sequence",
          fmt::join(data, " UNION ALL "), key_list, fmt::join(deletes, " UNION ALL "),
          fmt::join(equal, " AND "))));
  std::set<std::string> files;
  for (const auto& row : result.rows) {
    SKIPPR_CHECK_MSG(row.size() == 1 && row[0], "a file name per affected file");
    files.insert(*row[0]);
  }
  return files;
}

// The Env paths of the data files `delete_files` name.
Result<std::set<std::string>> FilesWithDeletedPositions(
    query::Engine& engine, const std::vector<query::PositionDeleteFile>& delete_files) {
  std::set<std::string> files;
  if (delete_files.empty()) return files;
  std::vector<std::string> paths;
  for (const query::PositionDeleteFile& file : delete_files) paths.push_back(QuoteLiteral(file.path));
  SKIPPR_ASSIGN_OR_RETURN(
      const query::QueryResult result,
      engine.Run(fmt::format("SELECT DISTINCT file_path FROM read_parquet([{}])",
                             fmt::join(paths, ", "))));
  for (const auto& row : result.rows) {
    SKIPPR_CHECK_MSG(row.size() == 1 && row[0], "a position delete names its data file");
    SKIPPR_ASSIGN_OR_RETURN(std::string path, iceberg::EnvPathOfUri(*row[0]));
    files.insert(std::move(path));
  }
  return files;
}

}  // namespace

Result<MaintenanceOutcome> LakeWriter::Maintain(const schema::NamespaceSchema& namespace_schema,
                                                const MaintenancePolicy& policy) {
  const iceberg::TableIdentifier table{options_.table_namespace, namespace_schema.name};
  SKIPPR_ASSIGN_OR_RETURN(const TableLocations locations, LocationsOf(namespace_schema.name));
  Result<iceberg::VersionedMetadata> base = iceberg::LoadTableForCommit(*catalog_, table);
  if (!base.ok() && base.status().code() == StatusCode::kNotFound) return MaintenanceOutcome{};
  SKIPPR_RETURN_IF_ERROR(base.status());
  const iceberg::Snapshot* parent = base->metadata.CurrentSnapshot();
  if (parent == nullptr || base->metadata.CurrentSchema().fields != namespace_schema.fields) {
    return MaintenanceOutcome{};
  }
  SKIPPR_ASSIGN_OR_RETURN(const query::LandedRows live,
                          LiveFilesOf(base->metadata, parent->snapshot_id, options_.env));
  std::vector<const query::LandedFile*> small_files;
  for (const query::LandedFile& file : live.data_files) {
    SKIPPR_ASSIGN_OR_RETURN(const uint64_t bytes, options_.env->FileSize(file.path));
    if (static_cast<int64_t>(bytes) < policy.small_file_bytes) small_files.push_back(&file);
  }
  const auto delete_files = static_cast<int64_t>(live.equality_delete_files.size() +
                                                 live.position_delete_files.size());
  if (delete_files <= policy.max_delete_files &&
      static_cast<int64_t>(small_files.size()) <= policy.max_small_files) {
    return MaintenanceOutcome{};
  }
  // DuckDB reads the local copies; `live` keeps the Env paths the removal is made of.
  SKIPPR_ASSIGN_OR_RETURN(const query::LandedRows local, LocalCopiesOf(live, *options_.env));
  std::map<std::string, std::string> env_path_of_local;
  for (size_t i = 0; i < live.data_files.size(); ++i) {
    env_path_of_local[local.data_files[i].path] = live.data_files[i].path;
  }
  Removal removal{.delete_files = true};
  SKIPPR_ASSIGN_OR_RETURN(removal.data_files,
                          FilesWithDeletedPositions(*engine_, local.position_delete_files));
  if (!live.equality_delete_files.empty()) {
    const std::vector<std::string>& keys = live.equality_delete_files.front().key_columns;
    for (const query::EqualityDeleteFile& file : live.equality_delete_files) {
      if (file.key_columns != keys) {
        spdlog::warn("lake {}: delete files of different keys; maintenance skipped",
                     table.ToString());
        return MaintenanceOutcome{};
      }
    }
    SKIPPR_ASSIGN_OR_RETURN(const std::set<std::string> with_deleted_keys,
                            FilesWithDeletedRows(*engine_, local, keys));
    for (const std::string& local_path : with_deleted_keys) {
      removal.data_files.insert(env_path_of_local.at(local_path));
    }
  }
  // Small files go along when there are several: bin-packed into the one file written anyway.
  if (small_files.size() > 1) {
    for (const query::LandedFile* file : small_files) removal.data_files.insert(file->path);
  }

  // The rewritten files' rows, deletes applied, as files of about the target size in a directory
  // named after the snapshot it rewrites: a retry after a crash writes them again there.
  const std::string id =
      Sha256Hex(fmt::format("skippr-maintenance-v1\n{}\n{}\n", base->location, parent->snapshot_id))
          .substr(0, 32);
  const std::string directory_name = fmt::format("data/maintenance-{}", id);
  const std::string directory = locations.path + "/" + directory_name;
  std::vector<iceberg::DataFile> data_files;
  if (!removal.data_files.empty()) {
    query::TableSource source;
    source.pipeline = std::string(kLandingPipeline);
    source.namespace_name = namespace_schema.name;
    source.fields = namespace_schema.fields;
    source.batches = query::BatchList::InMemory({});
    for (size_t i = 0; i < live.data_files.size(); ++i) {
      if (removal.data_files.contains(live.data_files[i].path)) {
        source.landed.data_files.push_back(local.data_files[i]);
      }
    }
    source.landed.equality_delete_files = local.equality_delete_files;
    source.landed.position_delete_files = local.position_delete_files;
    SKIPPR_RETURN_IF_ERROR(engine_->RegisterTable(std::move(source)));
    SKIPPR_ASSIGN_OR_RETURN(
        std::vector<WrittenFile> written,
        CopyToParquetFiles(*options_.env, *engine_,
                           fmt::format("SELECT * FROM {}.{}", QuoteIdentifier(kLandingPipeline),
                                       QuoteIdentifier(namespace_schema.name)),
                           namespace_schema.fields, namespace_schema.schema_id, directory,
                           policy.target_file_bytes));
    for (WrittenFile& file : written) {
      SKIPPR_RETURN_IF_ERROR(
          AddColumnStatisticsFromFile(*engine_, namespace_schema.fields, file.local_path,
                                      file.file));
      file.file.file_path = locations.location + file.path.substr(locations.path.size());
      data_files.push_back(std::move(file.file));
    }
  }
  CrashPoint("lake.maintenance.after_data_file");

  MaintenanceOutcome outcome{.data_files_rewritten = static_cast<int64_t>(removal.data_files.size()),
                             .data_files_written = static_cast<int64_t>(data_files.size()),
                             .delete_files_removed = delete_files};
  for (const iceberg::DataFile& file : data_files) outcome.rows_written += file.record_count;
  SnapshotChange change{.name = "maintenance-" + id,
                        .data_files = data_files,
                        .removal = std::move(removal),
                        .operation = iceberg::SnapshotOperation::kReplace,
                        .crash_point_before = "lake.maintenance.before_commit",
                        .crash_point_after = "lake.maintenance.after_commit"};
  change.summary[std::string(kMaintenanceKey)] =
      fmt::format("rewrote {} data files into {}, removed {} delete files",
                  outcome.data_files_rewritten, outcome.data_files_written,
                  outcome.delete_files_removed);
  Result<LandedSnapshot> committed = CommitChange(
      options_, *catalog_, table, locations.location, locations.path, *base,
      iceberg::NextVersion(base->metadata, base->location, NowMs()), std::move(change));
  if (!committed.ok() && committed.status().code() == StatusCode::kConflict) {
    // The table changed under us: what was rewritten may be stale. The next maintenance redoes it.
    spdlog::info("lake {}: another writer committed first; maintenance left for later",
                 table.ToString());
    for (const iceberg::DataFile& file : data_files) {
      Result<std::string> path = iceberg::EnvPathOfUri(file.file_path);
      if (path.ok()) (void)options_.env->RemoveFile(*path);
    }
    return MaintenanceOutcome{};
  }
  SKIPPR_RETURN_IF_ERROR(committed.status());
  outcome.committed = true;
  outcome.snapshot = *committed;
  return outcome;
}

}  // namespace skippr::lake
