// Manifests and manifest lists (docs/formats/iceberg-manifests.md): their Avro schemas with
// Iceberg's field ids, header keys, the rules writers and readers check, and the mapping to and
// from records.
#include "iceberg/manifest.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/check.hpp"
#include "iceberg/avro_container.hpp"
#include "iceberg/avro_record.hpp"

namespace skippr::iceberg {

namespace {

using internal::AvroValue;
using internal::ContainerReader;
using internal::ContainerWriter;
using internal::RecordReader;
using internal::RecordWriter;
// Keeps the schema's keys in the order the spec shows them.
using ManifestJson = nlohmann::ordered_json;

constexpr std::string_view kFormatVersion = "2";

// ----- Avro schemas (Iceberg spec: "Manifests", "Manifest Lists", appendix A "Avro") -------------

ManifestJson Required(const std::string& name, ManifestJson type, int32_t field_id) {
  return ManifestJson{{"name", name}, {"type", std::move(type)}, {"field-id", field_id}};
}

// Optional: a union with null first, defaulting to null.
ManifestJson Optional(const std::string& name, ManifestJson type, int32_t field_id) {
  return ManifestJson{{"name", name},
                      {"type", ManifestJson::array({"null", std::move(type)})},
                      {"default", nullptr},
                      {"field-id", field_id}};
}

ManifestJson Record(const std::string& name, std::vector<ManifestJson> fields) {
  return ManifestJson{{"type", "record"}, {"name", name}, {"fields", std::move(fields)}};
}

ManifestJson List(ManifestJson element_type, int32_t element_id) {
  return ManifestJson{
      {"type", "array"}, {"items", std::move(element_type)}, {"element-id", element_id}};
}

// Avro maps need string keys, so Iceberg writes int-keyed maps as arrays of key/value records.
ManifestJson IntKeyedMap(int32_t key_id, int32_t value_id, ManifestJson value_type) {
  return ManifestJson{{"type", "array"},
                      {"logicalType", "map"},
                      {"items", Record(fmt::format("k{}_v{}", key_id, value_id),
                                       {Required("key", "int", key_id),
                                        Required("value", std::move(value_type), value_id)})}};
}

// The `partition` struct (field 102). Unpartitioned tables have no fields; a partitioned spec would
// add one optional field per partition field, named and numbered like it.
ManifestJson PartitionRecord() { return Record("r102", {}); }

// One field per line, in the order and with the ids of the spec's tables.
// clang-format off
const std::string& ManifestEntrySchemaJson() {
  static const std::string json =
      Record("manifest_entry",
             {Required("status", "int", 0),
              Optional("snapshot_id", "long", 1),
              Optional("sequence_number", "long", 3),
              Optional("file_sequence_number", "long", 4),
              Required("data_file",
                       Record("r2",
                              {Required("content", "int", 134),
                               Required("file_path", "string", 100),
                               Required("file_format", "string", 101),
                               Required("partition", PartitionRecord(), 102),
                               Required("record_count", "long", 103),
                               Required("file_size_in_bytes", "long", 104),
                               Optional("column_sizes", IntKeyedMap(117, 118, "long"), 108),
                               Optional("value_counts", IntKeyedMap(119, 120, "long"), 109),
                               Optional("null_value_counts", IntKeyedMap(121, 122, "long"), 110),
                               Optional("nan_value_counts", IntKeyedMap(138, 139, "long"), 137),
                               Optional("lower_bounds", IntKeyedMap(126, 127, "bytes"), 125),
                               Optional("upper_bounds", IntKeyedMap(129, 130, "bytes"), 128),
                               Optional("key_metadata", "bytes", 131),
                               Optional("split_offsets", List("long", 133), 132),
                               Optional("equality_ids", List("int", 136), 135),
                               Optional("sort_order_id", "int", 140),
                               Optional("referenced_data_file", "string", 143)}),
                       2)})
          .dump();
  return json;
}

const std::string& ManifestFileSchemaJson() {
  static const std::string json =
      Record("manifest_file",
             {Required("manifest_path", "string", 500),
              Required("manifest_length", "long", 501),
              Required("partition_spec_id", "int", 502),
              Required("content", "int", 517),
              Required("sequence_number", "long", 515),
              Required("min_sequence_number", "long", 516),
              Required("added_snapshot_id", "long", 503),
              Required("added_files_count", "int", 504),
              Required("existing_files_count", "int", 505),
              Required("deleted_files_count", "int", 506),
              Required("added_rows_count", "long", 512),
              Required("existing_rows_count", "long", 513),
              Required("deleted_rows_count", "long", 514),
              Optional("partitions",
                       List(Record("r508", {Required("contains_null", "boolean", 509),
                                            Optional("contains_nan", "boolean", 518),
                                            Optional("lower_bound", "bytes", 510),
                                            Optional("upper_bound", "bytes", 511)}),
                            508),
                       507),
              Optional("key_metadata", "bytes", 519)})
          .dump();
  return json;
}
// clang-format on

// ----- header keys -------------------------------------------------------------------------------

std::string PartitionFieldsJson(const PartitionSpec& spec) {
  ManifestJson fields = ManifestJson::array();
  for (const PartitionField& field : spec.fields) {
    fields.push_back(ManifestJson{{"name", field.name},
                                  {"transform", field.transform},
                                  {"source-id", field.source_id},
                                  {"field-id", field.field_id}});
  }
  return fields.dump();
}

std::string_view ContentName(ManifestContent content) {
  return content == ManifestContent::kDeletes ? "deletes" : "data";
}

std::vector<std::pair<std::string, std::string>> ManifestHeaderKeys(const ManifestHeader& header) {
  return {{"schema", header.table_schema_json},
          {"schema-id", std::to_string(header.schema_id)},
          {"partition-spec", PartitionFieldsJson(header.partition_spec)},
          {"partition-spec-id", std::to_string(header.partition_spec.spec_id)},
          {"format-version", std::string(kFormatVersion)},
          {"content", std::string(ContentName(header.content))}};
}

std::vector<std::pair<std::string, std::string>> ManifestListHeaderKeys(
    const ManifestListHeader& header) {
  // Iceberg's reference implementation writes "null" for a missing parent; so does skipprd.
  return {
      {"snapshot-id", std::to_string(header.snapshot_id)},
      {"parent-snapshot-id", header.parent_snapshot_id ? std::to_string(*header.parent_snapshot_id)
                                                       : std::string("null")},
      {"sequence-number", std::to_string(header.sequence_number)},
      {"format-version", std::string(kFormatVersion)}};
}

// Reads the Iceberg keys of a file's header; every failure is Corruption naming the file.
class HeaderKeys {
 public:
  explicit HeaderKeys(const ContainerReader& reader) : reader_(reader) {}

  // NotSupported unless the file says it is format version 2.
  Status CheckFormatVersion() const {
    const auto it = reader_.metadata().find("format-version");
    if (it != reader_.metadata().end() && it->second == kFormatVersion) return Status::OK();
    return Status::NotSupported(
        fmt::format("'{}' is an Iceberg format version {} file; skipprd reads format version 2",
                    reader_.file_label(),
                    it == reader_.metadata().end() ? "1 (no 'format-version' key)" : it->second));
  }

  Result<std::string> Text(const std::string& key) const {
    const auto it = reader_.metadata().find(key);
    if (it == reader_.metadata().end()) return Corrupt(key, "is missing");
    return it->second;
  }

  template <typename Integer>
  Result<Integer> Number(const std::string& key) const {
    SKIPPR_ASSIGN_OR_RETURN(const std::string text, Text(key));
    Integer value = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc() || end != text.data() + text.size()) {
      return Corrupt(key, fmt::format("is '{}', not an integer", text));
    }
    return value;
  }

  Result<ManifestJson> JsonValue(const std::string& key) const {
    SKIPPR_ASSIGN_OR_RETURN(const std::string text, Text(key));
    ManifestJson parsed = ManifestJson::parse(text, nullptr, /*allow_exceptions=*/false);
    if (parsed.is_discarded()) return Corrupt(key, "is not JSON");
    return parsed;
  }

  Status Corrupt(const std::string& key, std::string_view problem) const {
    return Status::Corruption(
        fmt::format("'{}': the Iceberg header key '{}' {}; the file is damaged "
                    "or was not written as an Iceberg v2 metadata file",
                    reader_.file_label(), key, problem));
  }

 private:
  const ContainerReader& reader_;
};

Result<PartitionSpec> ReadPartitionSpec(const HeaderKeys& keys) {
  PartitionSpec spec;
  SKIPPR_ASSIGN_OR_RETURN(spec.spec_id, keys.Number<int32_t>("partition-spec-id"));
  SKIPPR_ASSIGN_OR_RETURN(const ManifestJson fields, keys.JsonValue("partition-spec"));
  if (!fields.is_array()) return keys.Corrupt("partition-spec", "is not a JSON array");
  for (const ManifestJson& field : fields) {
    const auto text = [&](const char* name) {
      return field.is_object() && field.contains(name) && field[name].is_string();
    };
    const auto number = [&](const char* name) {
      return field.is_object() && field.contains(name) && field[name].is_number_integer();
    };
    if (!text("name") || !text("transform") || !number("source-id") || !number("field-id")) {
      return keys.Corrupt("partition-spec",
                          "has a field without name, transform, source-id and field-id");
    }
    spec.fields.push_back({field["source-id"].get<int32_t>(), field["field-id"].get<int32_t>(),
                           field["name"].get<std::string>(),
                           field["transform"].get<std::string>()});
  }
  return spec;
}

Result<ManifestHeader> ReadManifestHeader(const ContainerReader& reader) {
  const HeaderKeys keys(reader);
  SKIPPR_RETURN_IF_ERROR(keys.CheckFormatVersion());
  ManifestHeader header;
  SKIPPR_ASSIGN_OR_RETURN(const ManifestJson schema, keys.JsonValue("schema"));
  if (!schema.is_object()) return keys.Corrupt("schema", "is not a JSON object");
  SKIPPR_ASSIGN_OR_RETURN(header.table_schema_json, keys.Text("schema"));
  SKIPPR_ASSIGN_OR_RETURN(header.schema_id, keys.Number<int32_t>("schema-id"));
  SKIPPR_ASSIGN_OR_RETURN(header.partition_spec, ReadPartitionSpec(keys));
  SKIPPR_ASSIGN_OR_RETURN(const std::string content, keys.Text("content"));
  if (content != "data" && content != "deletes") {
    return keys.Corrupt("content", fmt::format("is '{}', neither 'data' nor 'deletes'", content));
  }
  header.content = content == "data" ? ManifestContent::kData : ManifestContent::kDeletes;
  return header;
}

Result<ManifestListHeader> ReadManifestListHeader(const ContainerReader& reader) {
  const HeaderKeys keys(reader);
  SKIPPR_RETURN_IF_ERROR(keys.CheckFormatVersion());
  ManifestListHeader header;
  SKIPPR_ASSIGN_OR_RETURN(header.snapshot_id, keys.Number<int64_t>("snapshot-id"));
  SKIPPR_ASSIGN_OR_RETURN(const std::string parent, keys.Text("parent-snapshot-id"));
  if (parent != "null") {
    SKIPPR_ASSIGN_OR_RETURN(header.parent_snapshot_id, keys.Number<int64_t>("parent-snapshot-id"));
  }
  SKIPPR_ASSIGN_OR_RETURN(header.sequence_number, keys.Number<int64_t>("sequence-number"));
  return header;
}

// ----- the rules both sides check ----------------------------------------------------------------

Status CheckUnpartitioned(const PartitionSpec& spec, std::string_view file_label) {
  if (spec.fields.empty()) return Status::OK();
  return Status::NotSupported(fmt::format(
      "{}: partition spec {} has {} fields; skipprd writes and reads unpartitioned manifests only",
      file_label, spec.spec_id, spec.fields.size()));
}

// Empty when `file` follows the spec's rules for a `content` manifest; otherwise what does not.
std::string FindDataFileProblem(const DataFile& file, ManifestContent content) {
  const bool is_delete = file.content != FileContent::kData;
  if (is_delete != (content == ManifestContent::kDeletes)) {
    return fmt::format("a {} file in a {} manifest", is_delete ? "delete" : "data",
                       ContentName(content));
  }
  if (file.file_path.empty()) return "an empty file_path";
  if (file.file_format.empty()) return "an empty file_format";
  if (file.record_count < 0 || file.file_size_in_bytes < 0) {
    return "a negative record count or size";
  }
  if (!file.partition.empty()) return "partition values, but the spec has no fields";
  const bool is_equality_delete = file.content == FileContent::kEqualityDeletes;
  if (is_equality_delete == file.equality_ids.empty()) {
    return "equality_ids must be set for equality deletes and only for them";
  }
  // A reader compares the listed columns of each delete row: an id twice, or one that names no
  // field, makes that comparison meaningless.
  for (size_t i = 0; i < file.equality_ids.size(); ++i) {
    const int32_t id = file.equality_ids[i];
    if (id <= 0 || std::count(file.equality_ids.begin(), file.equality_ids.begin() + i, id) > 0) {
      return fmt::format("equality_ids listing {} (each must be a field id, once)", id);
    }
  }
  if (file.content == FileContent::kPositionDeletes && file.sort_order_id) {
    return "a sort_order_id on position deletes (they are always sorted by file and position)";
  }
  if (file.referenced_data_file && file.content != FileContent::kPositionDeletes) {
    return "a referenced_data_file on a file that is not position deletes";
  }
  if (!std::is_sorted(file.split_offsets.begin(), file.split_offsets.end())) {
    return "split_offsets not in ascending order";
  }
  for (const auto* counts :
       {&file.column_sizes, &file.value_counts, &file.null_value_counts, &file.nan_value_counts}) {
    for (const auto& [field_id, count] : *counts) {
      if (count < 0) return fmt::format("a negative count for field {}", field_id);
    }
  }
  return {};
}

std::string FindManifestProblem(const Manifest& manifest) {
  for (size_t i = 0; i < manifest.entries.size(); ++i) {
    const ManifestEntry& entry = manifest.entries[i];
    std::string problem;
    if (entry.status != EntryStatus::kAdded &&
        (!entry.sequence_number || !entry.file_sequence_number)) {
      problem = "null sequence numbers on an EXISTING or DELETED entry (only ADDED ones inherit)";
    } else if (entry.sequence_number.value_or(0) < 0 ||
               entry.file_sequence_number.value_or(0) < 0) {
      problem = "a negative sequence number";
    } else {
      problem = FindDataFileProblem(entry.data_file, manifest.header.content);
    }
    if (!problem.empty()) {
      return fmt::format("entry {} ('{}') has {}", i, entry.data_file.file_path, problem);
    }
  }
  return {};
}

std::string FindManifestListProblem(const ManifestList& list) {
  if (list.header.sequence_number < 0) return "a negative sequence-number";
  for (size_t i = 0; i < list.manifests.size(); ++i) {
    const ManifestFile& file = list.manifests[i];
    std::string problem;
    if (file.manifest_path.empty()) {
      problem = "an empty manifest_path";
    } else if (file.manifest_length <= 0) {
      problem = fmt::format("manifest_length {}", file.manifest_length);
    } else if (file.min_sequence_number < 0 || file.min_sequence_number > file.sequence_number ||
               file.sequence_number > list.header.sequence_number) {
      problem = fmt::format(
          "sequence numbers out of order: min_sequence_number {} <= sequence_number {} <= the "
          "snapshot's {} must hold",
          file.min_sequence_number, file.sequence_number, list.header.sequence_number);
    } else if (file.added_files_count < 0 || file.existing_files_count < 0 ||
               file.deleted_files_count < 0 || file.added_rows_count < 0 ||
               file.existing_rows_count < 0 || file.deleted_rows_count < 0) {
      problem = "a negative file or row count";
    }
    if (!problem.empty()) {
      return fmt::format("manifest {} ('{}') has {}", i, file.manifest_path, problem);
    }
  }
  return {};
}

Status CheckTableSchemaJson(const ManifestHeader& header) {
  const ManifestJson schema =
      ManifestJson::parse(header.table_schema_json, nullptr, /*allow_exceptions=*/false);
  if (!schema.is_object() || schema.value("type", "") != "struct") {
    return Status::InvalidArgument(
        "the manifest's table schema must be an Iceberg schema JSON object "
        "({\"type\":\"struct\",...})");
  }
  if (schema.contains("schema-id") && (!schema["schema-id"].is_number_integer() ||
                                       schema["schema-id"].get<int64_t>() != header.schema_id)) {
    return Status::InvalidArgument(
        fmt::format("the table schema JSON has schema-id {}, the header {}",
                    schema["schema-id"].dump(), header.schema_id));
  }
  return Status::OK();
}

// ----- records -----------------------------------------------------------------------------------

void FillDataFile(const DataFile& file, RecordWriter& out) {
  out.Int("content", static_cast<int32_t>(file.content));
  out.String("file_path", file.file_path);
  out.String("file_format", file.file_format);
  out.Record("partition");  // no fields while only unpartitioned tables are written
  out.Long("record_count", file.record_count);
  out.Long("file_size_in_bytes", file.file_size_in_bytes);
  out.OptionalIdToLongMap("column_sizes", file.column_sizes);
  out.OptionalIdToLongMap("value_counts", file.value_counts);
  out.OptionalIdToLongMap("null_value_counts", file.null_value_counts);
  out.OptionalIdToLongMap("nan_value_counts", file.nan_value_counts);
  out.OptionalIdToBytesMap("lower_bounds", file.lower_bounds);
  out.OptionalIdToBytesMap("upper_bounds", file.upper_bounds);
  out.OptionalBytes("key_metadata", file.key_metadata);
  out.OptionalLongList("split_offsets", file.split_offsets);
  out.OptionalIntList("equality_ids", file.equality_ids);
  out.OptionalInt("sort_order_id", file.sort_order_id);
  out.OptionalString("referenced_data_file", file.referenced_data_file);
}

void FillEntry(const ManifestEntry& entry, RecordWriter& out) {
  out.Int("status", static_cast<int32_t>(entry.status));
  out.OptionalLong("snapshot_id", entry.snapshot_id);
  out.OptionalLong("sequence_number", entry.sequence_number);
  out.OptionalLong("file_sequence_number", entry.file_sequence_number);
  RecordWriter data_file = out.Record("data_file");
  FillDataFile(entry.data_file, data_file);
}

void FillManifestFile(const ManifestFile& file, RecordWriter& out) {
  out.String("manifest_path", file.manifest_path);
  out.Long("manifest_length", file.manifest_length);
  out.Int("partition_spec_id", file.partition_spec_id);
  out.Int("content", static_cast<int32_t>(file.content));
  out.Long("sequence_number", file.sequence_number);
  out.Long("min_sequence_number", file.min_sequence_number);
  out.Long("added_snapshot_id", file.added_snapshot_id);
  out.Int("added_files_count", file.added_files_count);
  out.Int("existing_files_count", file.existing_files_count);
  out.Int("deleted_files_count", file.deleted_files_count);
  out.Long("added_rows_count", file.added_rows_count);
  out.Long("existing_rows_count", file.existing_rows_count);
  out.Long("deleted_rows_count", file.deleted_rows_count);
  out.OptionalRecordList("partitions", file.partitions.size(), [&](size_t i, RecordWriter& item) {
    const PartitionFieldSummary& summary = file.partitions[i];
    item.Bool("contains_null", summary.contains_null);
    item.OptionalBool("contains_nan", summary.contains_nan);
    item.OptionalBytes("lower_bound", summary.lower_bound);
    item.OptionalBytes("upper_bound", summary.upper_bound);
  });
  out.OptionalBytes("key_metadata", file.key_metadata);
}

// An enum from its stored int; Corruption outside [0, max].
template <typename Enum>
Result<Enum> EnumFromInt(int32_t value, int32_t max, std::string_view field) {
  if (value < 0 || value > max) {
    return Status::Corruption(fmt::format("field '{}' is {}, not one of 0..{}", field, value, max));
  }
  return static_cast<Enum>(value);
}

Result<DataFile> ReadDataFile(RecordReader& in, Status& error) {
  DataFile file;
  const int32_t content = in.Int("content");
  file.file_path = in.String("file_path");
  file.file_format = in.String("file_format");
  const size_t partition_fields = in.Record("partition").FieldCount();
  file.record_count = in.Long("record_count");
  file.file_size_in_bytes = in.Long("file_size_in_bytes");
  file.column_sizes = in.IdToLongMap("column_sizes");
  file.value_counts = in.IdToLongMap("value_counts");
  file.null_value_counts = in.IdToLongMap("null_value_counts");
  file.nan_value_counts = in.IdToLongMap("nan_value_counts");
  file.lower_bounds = in.IdToBytesMap("lower_bounds");
  file.upper_bounds = in.IdToBytesMap("upper_bounds");
  file.key_metadata = in.OptionalBytes("key_metadata");
  file.split_offsets = in.LongList("split_offsets");
  file.equality_ids = in.IntList("equality_ids");
  file.sort_order_id = in.OptionalInt("sort_order_id");
  file.referenced_data_file = in.OptionalString("referenced_data_file");
  SKIPPR_RETURN_IF_ERROR(error);
  if (partition_fields != 0) {
    return Status::Corruption(
        fmt::format("the partition struct has {} fields but the header's partition spec has none",
                    partition_fields));
  }
  SKIPPR_ASSIGN_OR_RETURN(file.content, EnumFromInt<FileContent>(content, 2, "data_file.content"));
  return file;
}

Result<ManifestEntry> ReadEntry(avro_value_t record) {
  Status error;
  RecordReader in(record, "manifest_entry", &error);
  ManifestEntry entry;
  const int32_t status = in.Int("status");
  entry.snapshot_id = in.OptionalLong("snapshot_id");
  entry.sequence_number = in.OptionalLong("sequence_number");
  entry.file_sequence_number = in.OptionalLong("file_sequence_number");
  RecordReader data_file = in.Record("data_file");
  SKIPPR_ASSIGN_OR_RETURN(entry.data_file, ReadDataFile(data_file, error));
  SKIPPR_ASSIGN_OR_RETURN(entry.status, EnumFromInt<EntryStatus>(status, 2, "status"));
  return entry;
}

Result<ManifestFile> ReadManifestFile(avro_value_t record) {
  Status error;
  RecordReader in(record, "manifest_file", &error);
  ManifestFile file;
  file.manifest_path = in.String("manifest_path");
  file.manifest_length = in.Long("manifest_length");
  file.partition_spec_id = in.Int("partition_spec_id");
  const int32_t content = in.Int("content");
  file.sequence_number = in.Long("sequence_number");
  file.min_sequence_number = in.Long("min_sequence_number");
  file.added_snapshot_id = in.Long("added_snapshot_id");
  file.added_files_count = in.Int("added_files_count");
  file.existing_files_count = in.Int("existing_files_count");
  file.deleted_files_count = in.Int("deleted_files_count");
  file.added_rows_count = in.Long("added_rows_count");
  file.existing_rows_count = in.Long("existing_rows_count");
  file.deleted_rows_count = in.Long("deleted_rows_count");
  for (RecordReader& item : in.RecordList("partitions")) {
    PartitionFieldSummary summary;
    summary.contains_null = item.Bool("contains_null");
    summary.contains_nan = item.OptionalBool("contains_nan");
    summary.lower_bound = item.OptionalBytes("lower_bound");
    summary.upper_bound = item.OptionalBytes("upper_bound");
    file.partitions.push_back(std::move(summary));
  }
  file.key_metadata = in.OptionalBytes("key_metadata");
  SKIPPR_RETURN_IF_ERROR(error);
  SKIPPR_ASSIGN_OR_RETURN(file.content, EnumFromInt<ManifestContent>(content, 1, "content"));
  return file;
}

// Encodes `records` with `fill`, each into one container record.
template <typename Item, typename Fill>
Result<std::string> EncodeContainer(const std::string& schema_json,
                                    const std::vector<std::pair<std::string, std::string>>& header,
                                    const std::vector<Item>& records, const Fill& fill,
                                    const AvroWriteOptions& options) {
  SKIPPR_ASSIGN_OR_RETURN(std::unique_ptr<ContainerWriter> writer,
                          ContainerWriter::Create(schema_json, header, options));
  for (const Item& item : records) {
    Status error;
    RecordWriter record(*writer->record(), &error);
    fill(item, record);
    SKIPPR_RETURN_IF_ERROR(error);
    SKIPPR_RETURN_IF_ERROR(writer->Append());
  }
  return writer->Finish();
}

// Decodes what was just encoded and compares it with the input: the same checks a reader makes,
// before the bytes reach a disk.
template <typename Model, typename Decode>
Status CheckReadsBack(const std::string& bytes, const Model& written, const Decode& decode,
                      std::string_view what) {
  Result<Model> decoded = decode(bytes, fmt::format("the {} being written", what));
  if (!decoded.ok()) {
    return Status::Internal(fmt::format("the {} just encoded does not read back: {}", what,
                                        decoded.status().message()));
  }
  if (!(*decoded == written)) {
    return Status::Internal(fmt::format("the {} just encoded reads back different values", what));
  }
  return Status::OK();
}

}  // namespace

ManifestFile DescribeNewManifest(const Manifest& manifest, std::string manifest_path,
                                 int64_t manifest_length, int64_t snapshot_id,
                                 int64_t sequence_number) {
  SKIPPR_CHECK_MSG(
      manifest.header.partition_spec.fields.empty(),
      "partition summaries are not computed: only unpartitioned manifests are written");
  ManifestFile file;
  file.manifest_path = std::move(manifest_path);
  file.manifest_length = manifest_length;
  file.partition_spec_id = manifest.header.partition_spec.spec_id;
  file.content = manifest.header.content;
  file.sequence_number = sequence_number;
  file.min_sequence_number = sequence_number;
  file.added_snapshot_id = snapshot_id;
  int64_t files[3] = {0, 0, 0};  // by EntryStatus
  int64_t rows[3] = {0, 0, 0};
  for (const ManifestEntry& entry : manifest.entries) {
    const auto status = static_cast<size_t>(entry.status);
    ++files[status];
    rows[status] += entry.data_file.record_count;
    if (entry.status != EntryStatus::kDeleted) {
      file.min_sequence_number =
          std::min(file.min_sequence_number, entry.sequence_number.value_or(sequence_number));
    }
  }
  for (const int64_t count : files) SKIPPR_CHECK(count <= std::numeric_limits<int32_t>::max());
  file.existing_files_count = static_cast<int32_t>(files[0]);
  file.added_files_count = static_cast<int32_t>(files[1]);
  file.deleted_files_count = static_cast<int32_t>(files[2]);
  file.existing_rows_count = rows[0];
  file.added_rows_count = rows[1];
  file.deleted_rows_count = rows[2];
  return file;
}

Result<std::string> EncodeManifest(const Manifest& manifest, const AvroWriteOptions& options) {
  SKIPPR_RETURN_IF_ERROR(
      CheckUnpartitioned(manifest.header.partition_spec, "cannot write a manifest"));
  SKIPPR_RETURN_IF_ERROR(CheckTableSchemaJson(manifest.header));
  if (std::string problem = FindManifestProblem(manifest); !problem.empty()) {
    return Status::InvalidArgument("cannot write an Iceberg manifest: " + problem);
  }
  SKIPPR_ASSIGN_OR_RETURN(std::string bytes, EncodeContainer(ManifestEntrySchemaJson(),
                                                             ManifestHeaderKeys(manifest.header),
                                                             manifest.entries, FillEntry, options));
  SKIPPR_RETURN_IF_ERROR(CheckReadsBack(bytes, manifest, DecodeManifest, "manifest"));
  return bytes;
}

Result<std::string> EncodeManifestList(const ManifestList& list, const AvroWriteOptions& options) {
  if (std::string problem = FindManifestListProblem(list); !problem.empty()) {
    return Status::InvalidArgument("cannot write an Iceberg manifest list: " + problem);
  }
  SKIPPR_ASSIGN_OR_RETURN(
      std::string bytes,
      EncodeContainer(ManifestFileSchemaJson(), ManifestListHeaderKeys(list.header), list.manifests,
                      FillManifestFile, options));
  SKIPPR_RETURN_IF_ERROR(CheckReadsBack(bytes, list, DecodeManifestList, "manifest list"));
  return bytes;
}

Result<Manifest> DecodeManifest(std::string_view bytes, std::string_view file_label) {
  SKIPPR_ASSIGN_OR_RETURN(std::unique_ptr<ContainerReader> reader,
                          ContainerReader::Open(bytes, std::string(file_label)));
  Manifest manifest;
  SKIPPR_ASSIGN_OR_RETURN(manifest.header, ReadManifestHeader(*reader));
  SKIPPR_RETURN_IF_ERROR(
      CheckUnpartitioned(manifest.header.partition_spec, fmt::format("'{}'", file_label)));
  SKIPPR_RETURN_IF_ERROR(reader->ForEachRecord([&](avro_value_t record, const auto&) -> Status {
    SKIPPR_ASSIGN_OR_RETURN(ManifestEntry entry, ReadEntry(record));
    manifest.entries.push_back(std::move(entry));
    return Status::OK();
  }));
  if (std::string problem = FindManifestProblem(manifest); !problem.empty()) {
    return Status::Corruption(fmt::format("Iceberg manifest '{}': {}", file_label, problem));
  }
  return manifest;
}

Result<ManifestList> DecodeManifestList(std::string_view bytes, std::string_view file_label) {
  SKIPPR_ASSIGN_OR_RETURN(std::unique_ptr<ContainerReader> reader,
                          ContainerReader::Open(bytes, std::string(file_label)));
  ManifestList list;
  SKIPPR_ASSIGN_OR_RETURN(list.header, ReadManifestListHeader(*reader));
  SKIPPR_RETURN_IF_ERROR(reader->ForEachRecord([&](avro_value_t record, const auto&) -> Status {
    SKIPPR_ASSIGN_OR_RETURN(ManifestFile file, ReadManifestFile(record));
    list.manifests.push_back(std::move(file));
    return Status::OK();
  }));
  if (std::string problem = FindManifestListProblem(list); !problem.empty()) {
    return Status::Corruption(fmt::format("Iceberg manifest list '{}': {}", file_label, problem));
  }
  return list;
}

Result<int64_t> WriteManifest(const std::string& path, const Manifest& manifest,
                              const AvroWriteOptions& options, Env* env) {
  SKIPPR_ASSIGN_OR_RETURN(const std::string bytes, EncodeManifest(manifest, options));
  SKIPPR_RETURN_IF_ERROR(internal::WriteFileAtomically(*env, path, bytes, "Iceberg manifest"));
  return static_cast<int64_t>(bytes.size());
}

Result<int64_t> WriteManifestList(const std::string& path, const ManifestList& list,
                                  const AvroWriteOptions& options, Env* env) {
  SKIPPR_ASSIGN_OR_RETURN(const std::string bytes, EncodeManifestList(list, options));
  SKIPPR_RETURN_IF_ERROR(
      internal::WriteFileAtomically(*env, path, bytes, "Iceberg manifest list"));
  return static_cast<int64_t>(bytes.size());
}

Result<Manifest> ReadManifest(const std::string& path,
                              std::optional<int64_t> expected_length_bytes, Env* env) {
  SKIPPR_ASSIGN_OR_RETURN(const std::string bytes,
                          internal::ReadFileBytes(*env, path, "Iceberg manifest"));
  if (expected_length_bytes && static_cast<int64_t>(bytes.size()) != *expected_length_bytes) {
    return Status::Corruption(fmt::format(
        "Iceberg manifest '{}' has {} bytes but its manifest list says {}: the file was cut short "
        "or replaced (Avro files can end cleanly after any block, so only the length shows it)",
        path, bytes.size(), *expected_length_bytes));
  }
  return DecodeManifest(bytes, path);
}

Result<ManifestList> ReadManifestList(const std::string& path, Env* env) {
  SKIPPR_ASSIGN_OR_RETURN(const std::string bytes,
                          internal::ReadFileBytes(*env, path, "Iceberg manifest list"));
  return DecodeManifestList(bytes, path);
}

}  // namespace skippr::iceberg
