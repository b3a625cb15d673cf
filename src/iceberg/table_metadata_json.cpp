// Table metadata ↔ Iceberg v2 JSON (spec Appendix C). Both directions check the same invariants:
// before writing (a violation is our bug) and after reading (a violation is a damaged file).
#include <fmt/format.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>

#include "iceberg/internal/random.hpp"
#include "iceberg/table_metadata.hpp"
#include "schema/schema.hpp"

namespace skippr::iceberg {
namespace {

using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;  // keeps the spec's field order, for people reading it

// $.a.b, or $.summary["skippr.landing-id"] for a key that would read ambiguously.
std::string JsonChildPath(std::string_view parent_path, std::string_view key) {
  const bool is_plain = !key.empty() && key.find_first_not_of(
                                            "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                            "0123456789_-") == std::string_view::npos;
  if (is_plain) return fmt::format("{}.{}", parent_path, key);
  return fmt::format("{}[{}]", parent_path, Json(std::string(key)).dump());
}

// ----- Invariants --------------------------------------------------------------------------------

struct Violation {
  std::string json_path;
  std::string problem;
};

void CollectIds(const std::vector<Field>& fields, std::vector<int32_t>& ids) {
  for (const Field& field : fields) {
    ids.push_back(field.id);
    CollectIds(field.type.children(), ids);
  }
}

std::optional<Violation> CheckSchemas(const TableMetadata& metadata) {
  if (metadata.schemas.empty()) return Violation{"$.schemas", "a table needs at least one schema"};
  std::set<int32_t> schema_ids;
  for (size_t i = 0; i < metadata.schemas.size(); ++i) {
    const TableSchema& schema = metadata.schemas[i];
    const std::string path = fmt::format("$.schemas[{}]", i);
    if (!schema_ids.insert(schema.schema_id).second) {
      return Violation{path + ".schema-id",
                       fmt::format("schema id {} is used twice", schema.schema_id)};
    }
    std::vector<int32_t> field_ids;
    CollectIds(schema.fields, field_ids);
    std::set<int32_t> unique_ids(field_ids.begin(), field_ids.end());
    if (unique_ids.size() != field_ids.size()) {
      return Violation{path, "a field id is used twice in this schema"};
    }
    if (!unique_ids.empty() && *unique_ids.rbegin() > metadata.last_column_id) {
      return Violation{path, fmt::format("field id {} is above last-column-id {}",
                                         *unique_ids.rbegin(), metadata.last_column_id)};
    }
  }
  if (metadata.FindSchema(metadata.current_schema_id) == nullptr) {
    return Violation{"$.current-schema-id",
                     fmt::format("schema {} is not in $.schemas", metadata.current_schema_id)};
  }
  return std::nullopt;
}

std::optional<Violation> CheckSpecsAndOrders(const TableMetadata& metadata) {
  bool has_default_spec = false;
  for (size_t i = 0; i < metadata.partition_specs.size(); ++i) {
    const PartitionSpec& spec = metadata.partition_specs[i];
    has_default_spec |= spec.spec_id == metadata.default_spec_id;
    for (size_t j = 0; j < spec.fields.size(); ++j) {
      if (spec.fields[j].field_id > metadata.last_partition_id) {
        return Violation{fmt::format("$.partition-specs[{}].fields[{}].field-id", i, j),
                         fmt::format("partition field id {} is above last-partition-id {}",
                                     spec.fields[j].field_id, metadata.last_partition_id)};
      }
    }
  }
  if (!has_default_spec) {
    return Violation{"$.default-spec-id", fmt::format("partition spec {} is not in "
                                                      "$.partition-specs",
                                                      metadata.default_spec_id)};
  }
  for (const SortOrder& order : metadata.sort_orders) {
    if (order.order_id == metadata.default_sort_order_id) return std::nullopt;
  }
  return Violation{"$.default-sort-order-id", fmt::format("sort order {} is not in $.sort-orders",
                                                          metadata.default_sort_order_id)};
}

std::optional<Violation> CheckSnapshots(const TableMetadata& metadata) {
  std::set<int64_t> snapshot_ids;
  for (size_t i = 0; i < metadata.snapshots.size(); ++i) {
    const Snapshot& snapshot = metadata.snapshots[i];
    const std::string path = fmt::format("$.snapshots[{}]", i);
    if (!snapshot_ids.insert(snapshot.snapshot_id).second) {
      return Violation{path + ".snapshot-id",
                       fmt::format("snapshot id {} is used twice", snapshot.snapshot_id)};
    }
    if (snapshot.sequence_number > metadata.last_sequence_number) {
      return Violation{path + ".sequence-number",
                       fmt::format("sequence number {} is above last-sequence-number {}",
                                   snapshot.sequence_number, metadata.last_sequence_number)};
    }
  }
  return std::nullopt;
}

std::optional<Violation> CheckRefs(const TableMetadata& metadata) {
  for (const auto& [name, ref] : metadata.refs) {
    const std::string path = JsonChildPath("$.refs", name);
    if (metadata.FindSnapshot(ref.snapshot_id) == nullptr) {
      return Violation{path + ".snapshot-id",
                       fmt::format("snapshot {} is not in $.snapshots", ref.snapshot_id)};
    }
    if (ref.type != "branch" && ref.type != "tag") {
      return Violation{path + ".type", fmt::format("'{}' is neither branch nor tag", ref.type)};
    }
  }
  const auto main = metadata.refs.find(std::string(kMainBranch));
  if (metadata.current_snapshot_id.has_value() != (main != metadata.refs.end()) ||
      (metadata.current_snapshot_id && main->second.snapshot_id != *metadata.current_snapshot_id)) {
    return Violation{"$.current-snapshot-id",
                     "must name the snapshot of the main branch in $.refs"};
  }
  if (metadata.current_snapshot_id && !metadata.snapshot_log.empty() &&
      metadata.snapshot_log.back().snapshot_id != *metadata.current_snapshot_id) {
    return Violation{"$.snapshot-log", "the last entry is not the current snapshot"};
  }
  return std::nullopt;
}

std::optional<Violation> FindInvariantViolation(const TableMetadata& metadata) {
  if (!internal::IsUuid(metadata.table_uuid)) {
    return Violation{"$.table-uuid", fmt::format("'{}' is not a UUID", metadata.table_uuid)};
  }
  if (metadata.location.empty()) return Violation{"$.location", "must not be empty"};
  if (auto violation = CheckSchemas(metadata)) return violation;
  if (auto violation = CheckSpecsAndOrders(metadata)) return violation;
  if (auto violation = CheckSnapshots(metadata)) return violation;
  return CheckRefs(metadata);
}

// ----- Writing -----------------------------------------------------------------------------------

OrderedJson SchemaToJson(const TableSchema& schema) {
  const Json iceberg_schema = schema::FieldsToIcebergJson(schema.fields, schema.schema_id);
  OrderedJson json = {{"type", "struct"}, {"schema-id", schema.schema_id}};
  if (!schema.identifier_field_ids.empty()) {
    json["identifier-field-ids"] = schema.identifier_field_ids;
  }
  json["fields"] = OrderedJson(iceberg_schema.at("fields"));
  return json;
}

OrderedJson PartitionSpecToJson(const PartitionSpec& spec) {
  OrderedJson fields = OrderedJson::array();
  for (const PartitionField& field : spec.fields) {
    fields.push_back({{"name", field.name},
                      {"transform", field.transform},
                      {"source-id", field.source_id},
                      {"field-id", field.field_id}});
  }
  return {{"spec-id", spec.spec_id}, {"fields", std::move(fields)}};
}

OrderedJson SortOrderToJson(const SortOrder& order) {
  OrderedJson fields = OrderedJson::array();
  for (const SortField& field : order.fields) {
    fields.push_back({{"transform", field.transform},
                      {"source-id", field.source_id},
                      {"direction", field.direction},
                      {"null-order", field.null_order}});
  }
  return {{"order-id", order.order_id}, {"fields", std::move(fields)}};
}

OrderedJson SnapshotToJson(const Snapshot& snapshot) {
  OrderedJson json = {{"snapshot-id", snapshot.snapshot_id}};
  if (snapshot.parent_snapshot_id) json["parent-snapshot-id"] = *snapshot.parent_snapshot_id;
  json["sequence-number"] = snapshot.sequence_number;
  json["timestamp-ms"] = snapshot.timestamp_ms;
  json["manifest-list"] = snapshot.manifest_list;
  OrderedJson summary = {{"operation", SnapshotOperationName(snapshot.operation)}};
  for (const auto& [key, value] : snapshot.summary) summary[key] = value;
  json["summary"] = std::move(summary);
  if (snapshot.schema_id) json["schema-id"] = *snapshot.schema_id;
  return json;
}

OrderedJson RefToJson(const SnapshotRef& ref) {
  OrderedJson json = {{"snapshot-id", ref.snapshot_id}, {"type", ref.type}};
  if (ref.min_snapshots_to_keep) json["min-snapshots-to-keep"] = *ref.min_snapshots_to_keep;
  if (ref.max_snapshot_age_ms) json["max-snapshot-age-ms"] = *ref.max_snapshot_age_ms;
  if (ref.max_ref_age_ms) json["max-ref-age-ms"] = *ref.max_ref_age_ms;
  return json;
}

template <typename T, typename ToJson>
OrderedJson ListToJson(const std::vector<T>& items, ToJson to_json) {
  OrderedJson list = OrderedJson::array();
  for (const T& item : items) list.push_back(to_json(item));
  return list;
}

OrderedJson MetadataToJson(const TableMetadata& metadata) {
  OrderedJson json = {
      {"format-version", kFormatVersion},
      {"table-uuid", metadata.table_uuid},
      {"location", metadata.location},
      {"last-sequence-number", metadata.last_sequence_number},
      {"last-updated-ms", metadata.last_updated_ms},
      {"last-column-id", metadata.last_column_id},
      {"current-schema-id", metadata.current_schema_id},
      {"schemas", ListToJson(metadata.schemas, SchemaToJson)},
      {"default-spec-id", metadata.default_spec_id},
      {"partition-specs", ListToJson(metadata.partition_specs, PartitionSpecToJson)},
      {"last-partition-id", metadata.last_partition_id},
      {"default-sort-order-id", metadata.default_sort_order_id},
      {"sort-orders", ListToJson(metadata.sort_orders, SortOrderToJson)},
      {"properties", OrderedJson::object()}};
  for (const auto& [key, value] : metadata.properties) json["properties"][key] = value;
  // v2 writers write -1 for "no current snapshot"; v2 readers accept it, and null only since v3.
  json["current-snapshot-id"] = metadata.current_snapshot_id.value_or(-1);
  json["refs"] = OrderedJson::object();
  for (const auto& [name, ref] : metadata.refs) json["refs"][name] = RefToJson(ref);
  json["snapshots"] = ListToJson(metadata.snapshots, SnapshotToJson);
  json["snapshot-log"] = ListToJson(metadata.snapshot_log, [](const SnapshotLogEntry& entry) {
    return OrderedJson{{"timestamp-ms", entry.timestamp_ms}, {"snapshot-id", entry.snapshot_id}};
  });
  json["metadata-log"] = ListToJson(metadata.metadata_log, [](const MetadataLogEntry& entry) {
    return OrderedJson{{"timestamp-ms", entry.timestamp_ms},
                       {"metadata-file", entry.metadata_file}};
  });
  return json;
}

// ----- Reading -----------------------------------------------------------------------------------

// A value inside a metadata file with its JSON path, so every error names the file and the place.
class Node {
 public:
  Node(const Json& value, std::string path, std::string_view file_name)
      : value_(&value), path_(std::move(path)), file_name_(file_name) {}

  const Json& value() const { return *value_; }

  Status Invalid(std::string_view problem, const std::string& path) const {
    return Status::Corruption(
        fmt::format("malformed Iceberg table metadata in {} at {}: {}", file_name_, path, problem));
  }
  Status Invalid(std::string_view problem) const { return Invalid(problem, path_); }

  Result<Node> Field(std::string_view key) const {
    SKIPPR_ASSIGN_OR_RETURN(std::optional<Node> field, OptionalField(key));
    if (!field) return Invalid("missing required field", ChildPath(key));
    return std::move(*field);
  }
  // nullopt when the key is absent or null.
  Result<std::optional<Node>> OptionalField(std::string_view key) const {
    if (!value_->is_object()) return Invalid(Expected("an object"));
    const auto it = value_->find(key);
    if (it == value_->end() || it->is_null()) return std::optional<Node>();
    return std::optional<Node>(Node(*it, ChildPath(key), file_name_));
  }

  Result<int64_t> AsLong() const {
    if (value_->is_number_unsigned() && value_->get<uint64_t>() <= uint64_t{INT64_MAX}) {
      return static_cast<int64_t>(value_->get<uint64_t>());
    }
    if (value_->is_number_integer() && !value_->is_number_unsigned()) return value_->get<int64_t>();
    return Invalid(Expected("a 64-bit integer"));
  }
  Result<int32_t> AsInt() const {
    Result<int64_t> number = AsLong();
    if (!number.ok() || *number < INT32_MIN || *number > INT32_MAX) {
      return Invalid(Expected("a 32-bit integer"));
    }
    return static_cast<int32_t>(*number);
  }
  Result<std::string> AsString() const {
    if (!value_->is_string()) return Invalid(Expected("a string"));
    return value_->get<std::string>();
  }
  Result<std::vector<Node>> AsArray() const {
    if (!value_->is_array()) return Invalid(Expected("an array"));
    std::vector<Node> items;
    for (size_t i = 0; i < value_->size(); ++i) {
      items.emplace_back((*value_)[i], fmt::format("{}[{}]", path_, i), file_name_);
    }
    return items;
  }
  // An object's members in key order.
  Result<std::vector<std::pair<std::string, Node>>> AsMembers() const {
    if (!value_->is_object()) return Invalid(Expected("an object"));
    std::vector<std::pair<std::string, Node>> members;
    for (const auto& [key, item] : value_->items()) {
      members.emplace_back(key, Node(item, ChildPath(key), file_name_));
    }
    return members;
  }

  Result<int64_t> Long(std::string_view key) const { return Required(key, &Node::AsLong); }
  Result<int32_t> Int(std::string_view key) const { return Required(key, &Node::AsInt); }
  Result<std::string> String(std::string_view key) const { return Required(key, &Node::AsString); }
  Result<std::optional<int64_t>> OptionalLong(std::string_view key) const {
    return Optional(key, &Node::AsLong);
  }
  Result<std::optional<int32_t>> OptionalInt(std::string_view key) const {
    return Optional(key, &Node::AsInt);
  }

 private:
  template <typename T>
  Result<T> Required(std::string_view key, Result<T> (Node::*as)() const) const {
    SKIPPR_ASSIGN_OR_RETURN(Node field, Field(key));
    return (field.*as)();
  }
  template <typename T>
  Result<std::optional<T>> Optional(std::string_view key, Result<T> (Node::*as)() const) const {
    SKIPPR_ASSIGN_OR_RETURN(std::optional<Node> field, OptionalField(key));
    if (!field) return std::optional<T>();
    SKIPPR_ASSIGN_OR_RETURN(T value, ((*field).*as)());
    return std::optional<T>(std::move(value));
  }

  std::string ChildPath(std::string_view key) const { return JsonChildPath(path_, key); }
  std::string Expected(std::string_view what) const {
    std::string found = value_->dump();
    if (found.size() > 60) found = found.substr(0, 57) + "...";
    return fmt::format("expected {}, found {} {}", what, value_->type_name(), found);
  }

  const Json* value_;
  std::string path_;
  std::string_view file_name_;
};

template <typename T>
using ParseFn = Result<T> (*)(const Node&);

template <typename T>
Result<std::vector<T>> ParseList(const Node& parent, std::string_view key, bool is_required,
                                 ParseFn<T> parse_item) {
  SKIPPR_ASSIGN_OR_RETURN(std::optional<Node> list, parent.OptionalField(key));
  if (!list) {
    if (is_required) return parent.Field(key).status();
    return std::vector<T>();
  }
  SKIPPR_ASSIGN_OR_RETURN(std::vector<Node> items, list->AsArray());
  std::vector<T> parsed;
  for (const Node& item : items) {
    SKIPPR_ASSIGN_OR_RETURN(T value, parse_item(item));
    parsed.push_back(std::move(value));
  }
  return parsed;
}

Result<int32_t> ParseInt(const Node& node) { return node.AsInt(); }

Result<TableSchema> ParseSchema(const Node& node) {
  TableSchema schema;
  SKIPPR_ASSIGN_OR_RETURN(schema.schema_id, node.Int("schema-id"));
  SKIPPR_ASSIGN_OR_RETURN(schema.identifier_field_ids,
                          ParseList<int32_t>(node, "identifier-field-ids", false, ParseInt));
  Result<std::vector<Field>> fields = schema::FieldsFromIcebergJson(node.value());
  if (!fields.ok()) return node.Invalid(fields.status().message());
  schema.fields = std::move(fields).value();
  return schema;
}

Result<PartitionField> ParsePartitionField(const Node& node) {
  PartitionField field;
  SKIPPR_ASSIGN_OR_RETURN(field.source_id, node.Int("source-id"));
  SKIPPR_ASSIGN_OR_RETURN(field.field_id, node.Int("field-id"));
  SKIPPR_ASSIGN_OR_RETURN(field.name, node.String("name"));
  SKIPPR_ASSIGN_OR_RETURN(field.transform, node.String("transform"));
  return field;
}

Result<PartitionSpec> ParsePartitionSpec(const Node& node) {
  PartitionSpec spec;
  SKIPPR_ASSIGN_OR_RETURN(spec.spec_id, node.Int("spec-id"));
  SKIPPR_ASSIGN_OR_RETURN(spec.fields,
                          ParseList<PartitionField>(node, "fields", true, ParsePartitionField));
  return spec;
}

Result<SortField> ParseSortField(const Node& node) {
  SortField field;
  SKIPPR_ASSIGN_OR_RETURN(field.transform, node.String("transform"));
  SKIPPR_ASSIGN_OR_RETURN(field.source_id, node.Int("source-id"));
  SKIPPR_ASSIGN_OR_RETURN(field.direction, node.String("direction"));
  SKIPPR_ASSIGN_OR_RETURN(field.null_order, node.String("null-order"));
  return field;
}

Result<SortOrder> ParseSortOrder(const Node& node) {
  SortOrder order;
  SKIPPR_ASSIGN_OR_RETURN(order.order_id, node.Int("order-id"));
  SKIPPR_ASSIGN_OR_RETURN(order.fields, ParseList<SortField>(node, "fields", true, ParseSortField));
  return order;
}

Result<SnapshotOperation> ParseOperation(const Node& node) {
  SKIPPR_ASSIGN_OR_RETURN(std::string name, node.AsString());
  for (SnapshotOperation operation : {SnapshotOperation::kAppend, SnapshotOperation::kReplace,
                                      SnapshotOperation::kOverwrite, SnapshotOperation::kDelete}) {
    if (name == SnapshotOperationName(operation)) return operation;
  }
  return node.Invalid(
      fmt::format("unknown operation '{}' (append, replace, overwrite, delete)", name));
}

Status ParseSummary(const Node& node, Snapshot& snapshot) {
  SKIPPR_ASSIGN_OR_RETURN(Node summary, node.Field("summary"));
  SKIPPR_ASSIGN_OR_RETURN(Node operation, summary.Field("operation"));
  SKIPPR_ASSIGN_OR_RETURN(snapshot.operation, ParseOperation(operation));
  SKIPPR_ASSIGN_OR_RETURN(auto members, summary.AsMembers());
  for (const auto& [key, value] : members) {
    if (key == "operation") continue;
    SKIPPR_ASSIGN_OR_RETURN(snapshot.summary[key], value.AsString());
  }
  return Status::OK();
}

Result<Snapshot> ParseSnapshot(const Node& node) {
  Snapshot snapshot;
  SKIPPR_ASSIGN_OR_RETURN(snapshot.snapshot_id, node.Long("snapshot-id"));
  SKIPPR_ASSIGN_OR_RETURN(snapshot.parent_snapshot_id, node.OptionalLong("parent-snapshot-id"));
  SKIPPR_ASSIGN_OR_RETURN(snapshot.sequence_number, node.Long("sequence-number"));
  SKIPPR_ASSIGN_OR_RETURN(snapshot.timestamp_ms, node.Long("timestamp-ms"));
  SKIPPR_ASSIGN_OR_RETURN(snapshot.manifest_list, node.String("manifest-list"));
  SKIPPR_RETURN_IF_ERROR(ParseSummary(node, snapshot));
  SKIPPR_ASSIGN_OR_RETURN(snapshot.schema_id, node.OptionalInt("schema-id"));
  return snapshot;
}

Result<SnapshotRef> ParseRef(const Node& node) {
  SnapshotRef ref;
  SKIPPR_ASSIGN_OR_RETURN(ref.snapshot_id, node.Long("snapshot-id"));
  SKIPPR_ASSIGN_OR_RETURN(ref.type, node.String("type"));
  SKIPPR_ASSIGN_OR_RETURN(ref.min_snapshots_to_keep, node.OptionalInt("min-snapshots-to-keep"));
  SKIPPR_ASSIGN_OR_RETURN(ref.max_snapshot_age_ms, node.OptionalLong("max-snapshot-age-ms"));
  SKIPPR_ASSIGN_OR_RETURN(ref.max_ref_age_ms, node.OptionalLong("max-ref-age-ms"));
  return ref;
}

Result<SnapshotLogEntry> ParseSnapshotLogEntry(const Node& node) {
  SnapshotLogEntry entry;
  SKIPPR_ASSIGN_OR_RETURN(entry.timestamp_ms, node.Long("timestamp-ms"));
  SKIPPR_ASSIGN_OR_RETURN(entry.snapshot_id, node.Long("snapshot-id"));
  return entry;
}

Result<MetadataLogEntry> ParseMetadataLogEntry(const Node& node) {
  MetadataLogEntry entry;
  SKIPPR_ASSIGN_OR_RETURN(entry.timestamp_ms, node.Long("timestamp-ms"));
  SKIPPR_ASSIGN_OR_RETURN(entry.metadata_file, node.String("metadata-file"));
  return entry;
}

Status ParseFormatVersion(const Node& root) {
  SKIPPR_ASSIGN_OR_RETURN(int32_t format_version, root.Int("format-version"));
  if (format_version == kFormatVersion) return Status::OK();
  Status invalid = root.Invalid(
      fmt::format("format version {} is not supported: skipprd reads and writes Iceberg format "
                  "version {} tables",
                  format_version, kFormatVersion),
      "$.format-version");
  return Status::NotSupported(invalid.message());
}

Status ParseStringMap(const Node& root, std::string_view key,
                      std::map<std::string, std::string>& out) {
  SKIPPR_ASSIGN_OR_RETURN(std::optional<Node> map, root.OptionalField(key));
  if (!map) return Status::OK();
  SKIPPR_ASSIGN_OR_RETURN(auto members, map->AsMembers());
  for (const auto& [name, value] : members) {
    SKIPPR_ASSIGN_OR_RETURN(out[name], value.AsString());
  }
  return Status::OK();
}

Status ParseRefs(const Node& root, TableMetadata& metadata) {
  SKIPPR_ASSIGN_OR_RETURN(std::optional<Node> refs, root.OptionalField("refs"));
  if (refs) {
    SKIPPR_ASSIGN_OR_RETURN(auto members, refs->AsMembers());
    for (const auto& [name, value] : members) {
      SKIPPR_ASSIGN_OR_RETURN(metadata.refs[name], ParseRef(value));
    }
  }
  // "There is always a main branch reference pointing to the current-snapshot-id even if the refs
  // map is null."
  if (metadata.current_snapshot_id && metadata.refs.count(std::string(kMainBranch)) == 0) {
    metadata.refs[std::string(kMainBranch)] = SnapshotRef{*metadata.current_snapshot_id, "branch"};
  }
  return Status::OK();
}

Status ParseTableFields(const Node& root, TableMetadata& metadata) {
  SKIPPR_ASSIGN_OR_RETURN(metadata.table_uuid, root.String("table-uuid"));
  SKIPPR_ASSIGN_OR_RETURN(metadata.location, root.String("location"));
  SKIPPR_ASSIGN_OR_RETURN(metadata.last_sequence_number, root.Long("last-sequence-number"));
  SKIPPR_ASSIGN_OR_RETURN(metadata.last_updated_ms, root.Long("last-updated-ms"));
  SKIPPR_ASSIGN_OR_RETURN(metadata.last_column_id, root.Int("last-column-id"));
  SKIPPR_ASSIGN_OR_RETURN(metadata.schemas,
                          ParseList<TableSchema>(root, "schemas", true, ParseSchema));
  SKIPPR_ASSIGN_OR_RETURN(metadata.current_schema_id, root.Int("current-schema-id"));
  SKIPPR_ASSIGN_OR_RETURN(
      metadata.partition_specs,
      ParseList<PartitionSpec>(root, "partition-specs", true, ParsePartitionSpec));
  SKIPPR_ASSIGN_OR_RETURN(metadata.default_spec_id, root.Int("default-spec-id"));
  SKIPPR_ASSIGN_OR_RETURN(metadata.last_partition_id, root.Int("last-partition-id"));
  SKIPPR_ASSIGN_OR_RETURN(metadata.sort_orders,
                          ParseList<SortOrder>(root, "sort-orders", true, ParseSortOrder));
  SKIPPR_ASSIGN_OR_RETURN(metadata.default_sort_order_id, root.Int("default-sort-order-id"));
  return ParseStringMap(root, "properties", metadata.properties);
}

Status ParseSnapshotFields(const Node& root, TableMetadata& metadata) {
  SKIPPR_ASSIGN_OR_RETURN(std::optional<int64_t> current, root.OptionalLong("current-snapshot-id"));
  if (current && *current != -1) metadata.current_snapshot_id = current;  // -1: none (v1/v2)
  SKIPPR_ASSIGN_OR_RETURN(metadata.snapshots,
                          ParseList<Snapshot>(root, "snapshots", false, ParseSnapshot));
  SKIPPR_ASSIGN_OR_RETURN(
      metadata.snapshot_log,
      ParseList<SnapshotLogEntry>(root, "snapshot-log", false, ParseSnapshotLogEntry));
  SKIPPR_ASSIGN_OR_RETURN(
      metadata.metadata_log,
      ParseList<MetadataLogEntry>(root, "metadata-log", false, ParseMetadataLogEntry));
  return ParseRefs(root, metadata);
}

Result<TableMetadata> ParseDocument(const Json& document, std::string_view file_name) {
  const Node root(document, "$", file_name);
  if (!document.is_object()) return root.Invalid("expected a JSON object");
  SKIPPR_RETURN_IF_ERROR(ParseFormatVersion(root));
  TableMetadata metadata;
  SKIPPR_RETURN_IF_ERROR(ParseTableFields(root, metadata));
  SKIPPR_RETURN_IF_ERROR(ParseSnapshotFields(root, metadata));
  if (std::optional<Violation> violation = FindInvariantViolation(metadata)) {
    return root.Invalid(violation->problem, violation->json_path);
  }
  return metadata;
}

}  // namespace

Result<std::string> TableMetadataToJson(const TableMetadata& metadata) {
  if (std::optional<Violation> violation = FindInvariantViolation(metadata)) {
    return Status::Internal(fmt::format(
        "refusing to write Iceberg metadata for table {}: {}: {}; this is a bug in skipprd",
        metadata.location, violation->json_path, violation->problem));
  }
  try {
    return MetadataToJson(metadata).dump();  // strict: throws on text that is not UTF-8
  } catch (const nlohmann::json::exception& error) {
    return Status::InvalidArgument(fmt::format(
        "Iceberg metadata for table {} holds text that is not valid UTF-8 (a field name, property "
        "or summary value): {}",
        metadata.location, error.what()));
  }
}

Result<TableMetadata> ParseTableMetadata(std::string_view json_text, std::string_view file_name) {
  try {
    const Json document = Json::parse(json_text);
    return ParseDocument(document, file_name);
  } catch (const nlohmann::json::parse_error& error) {
    return Status::Corruption(
        fmt::format("malformed Iceberg table metadata in {} at $: not valid JSON (byte {}): {}",
                    file_name, error.byte, error.what()));
  } catch (const nlohmann::json::exception& error) {
    return Status::Corruption(
        fmt::format("malformed Iceberg table metadata in {}: {}", file_name, error.what()));
  }
}

}  // namespace skippr::iceberg
