// Reads skippr.yml into Config: root sections, the skippr: engine block, pipelines and transforms.
// Connector entries are read in connectors.cpp; scalar and mapping rules live in reader.cpp.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/depthguard.h>  // YAML::DeepRecursion
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <limits>
#include <set>
#include <sstream>

#include "config/reader.hpp"
#include "core/file.hpp"

namespace skippr::config {

using internal::IsIdentifier;
using internal::JoinPath;
using internal::Located;
using internal::Reader;

namespace {

constexpr uint64_t kMaxConfigFileBytes = 16 << 20;
const std::vector<std::string_view> kReservedPipelineNames = {"deadletters", "wal", "_skippr",
                                                              "skippr", "metadata"};

std::string TrimSpaces(const std::string& text) {
  const size_t begin = text.find_first_not_of(" \t");
  if (begin == std::string::npos) return "";
  const size_t end = text.find_last_not_of(" \t");
  return text.substr(begin, end - begin + 1);
}

std::vector<std::string> SplitCommaList(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream stream(text);
  std::string part;
  while (std::getline(stream, part, ',')) {
    part = TrimSpaces(part);
    if (!part.empty()) parts.push_back(part);
  }
  return parts;
}

// Where a missing key would have been: the parent's position, the key's path.
Located JoinedPlace(const Located& parent, std::string_view key) {
  return Located{YAML::Node(), parent.mark, JoinPath(parent.path, key)};
}

// A problem with an environment variable used as a fallback has no place in the file.
Located EnvironmentPlace(const std::string& variable) {
  return Located{YAML::Node(), {}, variable};
}

bool CheckEntryName(Reader& reader, const std::string& name, const Located& at) {
  if (name.empty()) {
    reader.Error(at, "entry names must not be empty");
    return false;
  }
  if (name.find('.') != std::string::npos) {
    reader.Error(at, fmt::format("entry name '{}' contains '.'; references are written "
                                 "<section>.<name>, so names cannot contain dots — use '_' instead",
                                 name));
    return false;
  }
  return true;
}

// ----- connector sections -------------------------------------------------------------------

struct Section {
  std::string name;                // "data_sources"
  std::set<std::string> declared;  // every entry written, including ones that failed to read
  std::map<std::string, ConnectorEntry> entries;
};

Section ReadSection(Reader& reader, const std::string& section_name,
                    const std::optional<Located>& at, ConnectorRole role) {
  Section section{section_name, {}, {}};
  if (!at) return section;
  for (const auto& [name, entry_at] : reader.Mapping(*at, {})) {
    if (!CheckEntryName(reader, name, entry_at)) continue;
    section.declared.insert(name);
    if (auto entry = internal::ReadConnectorEntry(reader, name, entry_at, role)) {
      section.entries.emplace(name, std::move(*entry));
    }
  }
  return section;
}

// A Duckdb sink is a DuckDB database (`database`, `schema`) or an Iceberg warehouse
// (`warehouse`, `table_namespace`): exactly one.
void CheckDuckdbForm(Reader& reader, const Located& at, const ConnectorConfig& connector) {
  const bool is_database = connector.Has("database");
  if (is_database == connector.Has("warehouse")) {
    reader.Error(at,
                 "Duckdb needs either 'database: /path/file.duckdb' (a DuckDB database) or "
                 "'warehouse: file:///path' (Iceberg tables), not both and not neither");
    return;
  }
  const std::string_view other = is_database ? "table_namespace" : "schema";
  if (connector.Has(std::string(other))) {
    reader.Error(at, fmt::format("Duckdb '{}' goes with '{}', not '{}'", other,
                                 is_database ? "warehouse" : "database",
                                 is_database ? "database" : "warehouse"));
  }
  if (!is_database) return;
  const std::string& database = connector.GetString("database");
  if (!reader.KeepsReference(at.path, database) && !database.starts_with('/')) {
    reader.Error(at, fmt::format("database '{}' must be an absolute path to a DuckDB file "
                                 "(/path/file.duckdb)",
                                 database));
  }
}

// A SkipprLake warehouse on S3: a bucket, and a catalog that can live beside it (the default
// SQLite file cannot). Refused here rather than at the first landing, after rows were read.
void CheckLakeOnS3(Reader& reader, const Located& at, const ConnectorConfig& connector,
                   const std::string& warehouse) {
  const std::string_view rest = std::string_view(warehouse).substr(5);
  if (rest.empty() || rest.front() == '/') {
    reader.Error(at, fmt::format("warehouse '{}' names no bucket; write it as s3://bucket/prefix",
                                 warehouse));
  }
  const bool has_table = connector.Has("catalog_table");
  const bool has_uri = connector.Has("catalog_uri");
  if (!has_table && !has_uri) {
    reader.Error(at, fmt::format("warehouse '{}' is on S3, so the catalog cannot be the default "
                                 "SQLite file beside it: set catalog_table (a DynamoDB table, "
                                 "created when absent) or catalog_uri (postgresql://...)",
                                 warehouse));
  } else if (has_table && has_uri) {
    reader.Error(at, "set one of catalog_table (DynamoDB) and catalog_uri (a database), not both");
  }
}

// Rules that span two settings of one entry.
void CheckConnectorEntries(Reader& reader, const Section& section) {
  for (const auto& [name, entry] : section.entries) {
    const ConnectorConfig& connector = entry.connector;
    const Located at{YAML::Node(), connector.mark,
                     JoinPath(JoinPath(section.name, name), connector.kind)};
    if (connector.kind == "Duckdb") CheckDuckdbForm(reader, at, connector);
    if (connector.Has("warehouse")) {
      const std::string& warehouse = connector.GetString("warehouse");
      if (reader.KeepsReference(at.path, warehouse) || warehouse.rfind("file:///", 0) == 0) {
        // an absolute local path: what this build lands
      } else if (warehouse.rfind("s3://", 0) == 0 && connector.kind == "SkipprLake") {
        CheckLakeOnS3(reader, at, connector, warehouse);
      } else if (warehouse.rfind("s3://", 0) == 0) {
        reader.Error(at, fmt::format("warehouse '{}': a {} warehouse must be an absolute "
                                     "file:///path (DuckDB reads its tables from local disk)",
                                     warehouse, connector.kind));
      } else {
        reader.Error(at, fmt::format("warehouse '{}' must be an absolute file:///path", warehouse));
      }
    }
    if (connector.kind == "Postgres" && section.name == "data_sources" &&
        !connector.Has("database") && !connector.Has("connection_string")) {
      reader.Error(at,
                   "Postgres needs 'database' (with host, port, user, password) or "
                   "'connection_string'");
    }
  }
}

// `data_source: data_sources.pg` → "pg", after checking the section and that the entry exists.
std::optional<std::string> ReadReference(Reader& reader, const Located& at,
                                         const Section& section) {
  std::optional<std::string> text = reader.NonEmptyString(at);
  if (!text) return std::nullopt;
  const std::string prefix = section.name + ".";
  if (text->rfind(prefix, 0) != 0 || text->size() == prefix.size()) {
    reader.Error(at, fmt::format("'{}' is not a reference into {}; write {}<name>", *text,
                                 section.name, prefix));
    return std::nullopt;
  }
  const std::string name = text->substr(prefix.size());
  if (section.declared.count(name) == 0) {
    const std::string defined = section.declared.empty()
                                    ? fmt::format("no {} are defined", section.name)
                                    : fmt::format("defined: {}", fmt::join(section.declared, ", "));
    reader.Error(
        at, fmt::format("references '{}', but '{}' is not defined ({})", *text, name, defined));
    return std::nullopt;
  }
  return name;
}

// ----- skippr: -------------------------------------------------------------------------------

// A setting of the skippr: block: the file's value wins over the environment fallback.
std::optional<std::string> EngineText(Reader& reader, const Reader::Fields& fields,
                                      std::string_view key, const std::string& env_fallback) {
  if (auto at = fields.Get(key); at && !reader.IsNull(*at)) return reader.NonEmptyString(*at);
  std::optional<std::string> value = reader.environment().Get(env_fallback);
  if (value && !value->empty()) return value;
  return std::nullopt;
}

// WAL_STORAGE is a property of the machine, not a YAML key (reference §3.2): an unknown value, or
// one this build cannot honour, fails startup — a WAL silently kept on local disk would be a trap
// on exactly the ephemeral hosts that ask for s3.
void ReadWalStorage(Reader& reader, EngineSettings& settings) {
  const std::optional<std::string> wal_storage = reader.environment().Get("WAL_STORAGE");
  if (!wal_storage || wal_storage->empty() || *wal_storage == "disk") return;
  const Located place = EnvironmentPlace("WAL_STORAGE");
  if (*wal_storage == "s3") {
    settings.wal_storage = WalStorage::kS3;
    if (!settings.wal_s3_bucket && !settings.skippr_s3_bucket) {
      reader.Error(place,
                   "'s3' needs a bucket for the segments: set SKIPPR_WAL_S3_BUCKET (or "
                   "skippr.wal_s3_bucket, or skippr.skippr_s3_bucket)");
    }
    return;
  }
  reader.Error(place, *wal_storage == "clustered"
                          ? "'clustered' is not available in this build: use disk (the default) "
                            "or s3"
                          : fmt::format("'{}' is not a WAL storage: use disk (the default) or s3",
                                        *wal_storage));
}

// The pipelines' store in a DynamoDB table, keyed as the reference's single-table layout.
void PlaceStores(Config& config) {
  const EngineSettings& engine = config.skippr;
  if (engine.store_type != "dynamodb" || !engine.store_name) return;
  for (auto& [name, pipeline] : config.pipelines) {
    pipeline.store_table = *engine.store_name;
    pipeline.store_key = fmt::format("{}#{}#{}", engine.tenant, engine.workspace, name);
    pipeline.store_lease_seconds = engine.store_lease_seconds;
  }
}

// The pipelines' WAL location under WAL_STORAGE=s3 (reference §3.2 keys).
void PlaceWals(Config& config) {
  const EngineSettings& engine = config.skippr;
  if (engine.wal_storage != WalStorage::kS3) return;
  const std::string bucket = engine.wal_s3_bucket.value_or(engine.skippr_s3_bucket.value_or(""));
  for (auto& [name, pipeline] : config.pipelines) {
    pipeline.wal_s3_uri =
        fmt::format("s3://{}/{}/{}/{}/segments", bucket, engine.tenant, engine.workspace, name);
  }
}

// skippr.store: where the Skippr Store lives (LMDB under DATA_DIR, or a DynamoDB table).
void ReadStoreSettings(Reader& reader, const Reader::Fields& fields, EngineSettings& settings) {
  const Located store_at = fields.Get("store").value_or(Located{YAML::Node(), {}, "skippr.store"});
  const Reader::Fields store = reader.Struct(store_at, {"type", "name", "table"});
  const auto type_at = store.Get("type");
  std::optional<std::string> type = EngineText(reader, store, "type", "SKIPPR_STORE_TYPE");
  // `table` is the name the DynamoDB store's issue uses; `name` the reference's.
  settings.store_name = store.Get("table") ? EngineText(reader, store, "table", "")
                                           : EngineText(reader, store, "name", "SKIPPR_STORE_NAME");
  if (type) {
    const Located place = type_at ? *type_at : EnvironmentPlace("SKIPPR_STORE_TYPE");
    if (*type == "lmdb" || *type == "sled") {
      settings.store_type = "lmdb";  // `sled` is the public product's name for its local store
    } else if (*type == "dynamodb") {
      settings.store_type = "dynamodb";
      if (!settings.store_name) {
        reader.Error(place,
                     "store type 'dynamodb' needs the table: set skippr.store.name (or "
                     "SKIPPR_STORE_NAME)");
      }
    } else {
      reader.Error(place, fmt::format("store type '{}' is not available in this build: use 'lmdb' "
                                      "(the default, under DATA_DIR) or 'dynamodb'",
                                      *type));
    }
  }
  if (std::optional<std::string> lease = reader.environment().Get("SKIPPR_STORE_LEASE_SECONDS")) {
    int64_t seconds = 0;
    const auto [end, error] =
        std::from_chars(lease->data(), lease->data() + lease->size(), seconds);
    if (error != std::errc() || end != lease->data() + lease->size() || seconds < 1 ||
        seconds > 3600) {
      reader.Error(
          EnvironmentPlace("SKIPPR_STORE_LEASE_SECONDS"),
          fmt::format("'{}' is not a lease period: use whole seconds from 1 to 3600", *lease));
    } else {
      settings.store_lease_seconds = seconds;
    }
  }
}

EngineSettings ReadEngineSettings(Reader& reader, const std::optional<Located>& at) {
  EngineSettings settings;
  const Located none{YAML::Node(), {}, "skippr"};
  const Reader::Fields fields =
      reader.Struct(at.value_or(none), {"workspace", "tenant", "skipprd_el_storage_mode",
                                        "skippr_s3_bucket", "wal_s3_bucket", "store"});
  if (auto v = EngineText(reader, fields, "workspace", "WORKSPACE_NAME")) settings.workspace = *v;
  if (auto v = EngineText(reader, fields, "tenant", "TENANT")) settings.tenant = *v;
  settings.skippr_s3_bucket = EngineText(reader, fields, "skippr_s3_bucket", "SKIPPR_S3_BUCKET");
  settings.wal_s3_bucket = EngineText(reader, fields, "wal_s3_bucket", "SKIPPR_WAL_S3_BUCKET");

  const auto mode_at = fields.Get("skipprd_el_storage_mode");
  const std::optional<std::string> mode =
      EngineText(reader, fields, "skipprd_el_storage_mode", "SKIPPRD_EL_STORAGE_MODE");
  if (mode && *mode != "local") {
    const Located place = mode_at ? *mode_at : EnvironmentPlace("SKIPPRD_EL_STORAGE_MODE");
    reader.Error(place,
                 fmt::format("'{}' is not available: this build keeps the pipeline schema in "
                             "the Skippr Store under DATA_DIR; use 'local'",
                             *mode));
  }

  ReadWalStorage(reader, settings);

  ReadStoreSettings(reader, fields, settings);
  return settings;
}

// ----- transform: ----------------------------------------------------------------------------

std::optional<std::vector<std::pair<std::string, std::string>>> ReadNamePairs(
    Reader& reader, const Located& at, std::string_view example) {
  auto entries = reader.Mapping(at, {}, fmt::format("a mapping such as {}", example));
  if (entries.empty()) {
    if (reader.IsEmptyMapping(at)) {
      reader.Error(at, fmt::format("needs at least one entry, for example {}", example));
    }
    return std::nullopt;
  }
  std::vector<std::pair<std::string, std::string>> pairs;
  bool ok = true;
  for (const auto& [name, value_at] : entries) {
    std::optional<std::string> value = reader.NonEmptyString(value_at);
    if (value) {
      pairs.emplace_back(name, *value);
    } else {
      ok = false;
    }
  }
  if (!ok) return std::nullopt;
  return pairs;
}

std::optional<TransformOp> ReadOp(Reader& reader, const Located& at) {
  static const std::vector<std::string_view> kOps = {"rename", "drop",   "select", "cast",
                                                     "filter", "derive", "hash",   "default"};
  auto entries = reader.Mapping(at, kOps, "an op such as 'drop: [field]'");
  if (entries.size() != 1) {
    if (entries.size() > 1) {
      reader.Error(at, fmt::format("holds {} ops ({} and {}); write one op per list item",
                                   entries.size(), entries[0].first, entries[1].first));
    } else if (reader.IsEmptyMapping(at)) {
      reader.Error(at, fmt::format("needs one op: {}", internal::JoinNames(kOps)));
    }
    return std::nullopt;
  }
  const auto& [name, value_at] = entries.front();
  TransformOp op;
  op.mark = at.mark;
  if (name == "rename" || name == "derive" || name == "default") {
    op.kind = name == "rename"   ? TransformOpKind::kRename
              : name == "derive" ? TransformOpKind::kDerive
                                 : TransformOpKind::kDefault;
    const std::string_view example = name == "rename"   ? "{old_name: new_name}"
                                     : name == "derive" ? "{total: \"price * quantity\"}"
                                                        : "{country: GB}";
    auto pairs = ReadNamePairs(reader, value_at, example);
    if (!pairs) return std::nullopt;
    op.pairs = std::move(*pairs);
  } else if (name == "cast") {
    op.kind = TransformOpKind::kCast;
    auto pairs = ReadNamePairs(reader, value_at, "{amount: double}");
    if (!pairs) return std::nullopt;
    for (const auto& [field, type_text] : *pairs) {
      Result<LogicalType> type = ParseLogicalType(type_text);
      if (!type.ok()) {
        reader.Error(Located{YAML::Node(), value_at.mark, JoinPath(value_at.path, field)},
                     type.status().message());
        return std::nullopt;
      }
      op.casts.emplace_back(field, *type);
    }
  } else if (name == "filter") {
    op.kind = TransformOpKind::kFilter;
    auto predicate = reader.NonEmptyString(value_at);
    if (!predicate) return std::nullopt;
    op.predicate = *predicate;
  } else {
    op.kind = name == "drop"     ? TransformOpKind::kDrop
              : name == "select" ? TransformOpKind::kSelect
                                 : TransformOpKind::kHash;
    auto fields = reader.StringList(value_at, /*allow_scalar=*/true);
    if (!fields) return std::nullopt;
    if (fields->empty()) {
      reader.Error(value_at,
                   fmt::format("needs at least one field, for example {}: [email]", name));
      return std::nullopt;
    }
    op.fields = std::move(*fields);
  }
  return op;
}

std::optional<AggregateMeasure> ReadMeasure(Reader& reader, const std::string& name,
                                            const Located& at) {
  static constexpr std::string_view kShape =
      "exactly one of sum: <field> or count: \"*\" | <field>";
  if (!IsIdentifier(name)) {
    reader.Error(at, fmt::format("measure name '{}' must be letters, digits and '_', not starting "
                                 "with a digit",
                                 name));
    return std::nullopt;
  }
  auto entries = reader.Mapping(at, {"sum", "count"}, fmt::format("{}", kShape));
  if (entries.size() != 1) {
    if (entries.size() > 1) {
      reader.Error(at, fmt::format("sets both sum and count; a measure is {}", kShape));
    } else if (reader.IsEmptyMapping(at)) {
      reader.Error(at, fmt::format("needs {}", kShape));
    }
    return std::nullopt;
  }
  const auto& [kind, field_at] = entries.front();
  std::optional<std::string> field = reader.NonEmptyString(field_at);
  if (!field) return std::nullopt;
  if (kind == "sum" && *field == "*") {
    reader.Error(field_at, "sum needs a field name; '*' only counts rows (count: \"*\")");
    return std::nullopt;
  }
  return AggregateMeasure{name, kind == "sum" ? MeasureKind::kSum : MeasureKind::kCount, *field};
}

std::optional<AggregateConfig> ReadAggregate(Reader& reader, const Located& at) {
  const Reader::Fields fields = reader.Struct(at, {"id", "key_fields", "measures"});
  AggregateConfig aggregate;
  aggregate.mark = at.mark;
  bool ok = true;

  if (auto id_at = fields.Get("id"); id_at && !reader.IsNull(*id_at)) {
    auto id = reader.NonEmptyString(*id_at);
    if (id && !IsIdentifier(*id)) {
      reader.Error(*id_at,
                   fmt::format("id '{}' must be letters, digits and '_', not starting with a "
                               "digit (it names stored state and must stay stable)",
                               *id));
      ok = false;
    } else if (id) {
      aggregate.id = *id;
    } else {
      ok = false;
    }
  } else {
    reader.Error(at, "needs an id: a stable name such as customer_invoice_totals");
    ok = false;
  }

  if (auto keys_at = fields.Get("key_fields"); keys_at && !reader.IsNull(*keys_at)) {
    auto keys = reader.StringList(*keys_at, /*allow_scalar=*/true);
    if (!keys) {
      ok = false;
    } else if (keys->empty()) {
      reader.Error(*keys_at, "needs at least one field to group by, for example [customer_id]");
      ok = false;
    } else {
      std::set<std::string> seen;
      for (const std::string& key : *keys) {
        if (!seen.insert(key).second) {
          reader.Error(*keys_at, fmt::format("names '{}' twice; each key field once", key));
          ok = false;
        }
      }
      aggregate.key_fields = std::move(*keys);
    }
  } else {
    reader.Error(JoinedPlace(at, "key_fields"),
                 "needs key_fields: at least one field to group by, for example [customer_id]");
    ok = false;
  }

  const auto measures_at = fields.Get("measures");
  const Located measures_place = measures_at ? *measures_at : JoinedPlace(at, "measures");
  auto measures =
      reader.Mapping(measures_place, {}, "a mapping of measure name to {sum|count: ...}");
  if (measures.empty()) {
    if (reader.IsEmptyMapping(measures_place)) {
      reader.Error(measures_place,
                   "needs at least one measure, for example invoice_total: {sum: amount}");
    }
    ok = false;
  }
  for (const auto& [name, measure_at] : measures) {
    auto measure = ReadMeasure(reader, name, measure_at);
    if (!measure) {
      ok = false;
      continue;
    }
    if (std::find(aggregate.key_fields.begin(), aggregate.key_fields.end(), name) !=
        aggregate.key_fields.end()) {
      reader.Error(measure_at, fmt::format("measure name '{}' is also a key field; the aggregate's "
                                           "columns must have distinct names",
                                           name));
      ok = false;
      continue;
    }
    aggregate.measures.push_back(std::move(*measure));
  }
  std::sort(aggregate.measures.begin(), aggregate.measures.end(),
            [](const AggregateMeasure& a, const AggregateMeasure& b) { return a.name < b.name; });
  if (!ok) return std::nullopt;
  return aggregate;
}

TransformConfig ReadTransform(Reader& reader, const std::optional<Located>& at,
                              const std::string& pipeline_path) {
  TransformConfig transform;
  const Located place =
      at.value_or(Located{YAML::Node(), {}, JoinPath(pipeline_path, "transform")});
  const Reader::Fields fields =
      reader.Struct(place, {"type", "ops", "namespace_fields", "flatten_events", "aggregates"});

  if (auto type_at = fields.Get("type"); type_at && !reader.IsNull(*type_at)) {
    auto type = reader.Choice(*type_at, {"default", "copy"});
    if (type && *type == "copy") transform.type = TransformType::kCopy;
  }

  if (auto ns_at = fields.Get("namespace_fields"); ns_at && !reader.IsNull(*ns_at)) {
    if (ns_at->node.IsScalar()) {
      if (auto text = reader.NonEmptyString(*ns_at))
        transform.namespace_fields = SplitCommaList(*text);
    } else if (auto list = reader.StringList(*ns_at)) {
      transform.namespace_fields = std::move(*list);
    }
  } else if (auto env = reader.environment().Get("TRANSFORM_NAMESPACE_FIELDS");
             env && !env->empty()) {
    transform.namespace_fields = SplitCommaList(*env);
  }

  if (auto flatten_at = fields.Get("flatten_events"); flatten_at && !reader.IsNull(*flatten_at)) {
    transform.flatten_events = reader.Boolean(*flatten_at).value_or(false);
  } else if (auto env = reader.environment().Get("TRANSFORM_FLATTEN_EVENTS");
             env && !env->empty()) {
    std::optional<bool> flag = internal::ParseFlag(*env);
    if (!flag) {
      reader.Error(EnvironmentPlace("TRANSFORM_FLATTEN_EVENTS"),
                   fmt::format("expected true or false, found '{}'", *env));
    }
    transform.flatten_events = flag.value_or(false);
  }

  const auto ops_at = fields.Get("ops");
  if (ops_at) {
    for (const Located& item : reader.Sequence(*ops_at, "a list of ops")) {
      if (auto op = ReadOp(reader, item)) transform.ops.push_back(std::move(*op));
    }
  }

  const auto aggregates_at = fields.Get("aggregates");
  if (aggregates_at) {
    std::map<std::string, size_t> index_by_id;
    size_t index = 0;
    for (const Located& item : reader.Sequence(*aggregates_at, "a list of aggregates")) {
      auto aggregate = ReadAggregate(reader, item);
      const size_t this_index = index++;
      if (!aggregate) continue;
      auto [previous, inserted] = index_by_id.emplace(aggregate->id, this_index);
      if (!inserted) {
        reader.Error(JoinedPlace(item, "id"),
                     fmt::format("aggregate id '{}' is already used by {}[{}]; ids must be unique",
                                 aggregate->id, aggregates_at->path, previous->second));
        continue;
      }
      transform.aggregates.push_back(std::move(*aggregate));
    }
  }

  if (transform.type == TransformType::kCopy) {
    if (ops_at && !reader.IsNull(*ops_at)) reader.Error(*ops_at, "type: copy cannot set ops");
    if (aggregates_at && !reader.IsNull(*aggregates_at)) {
      reader.Error(*aggregates_at, "type: copy cannot set aggregates");
    }
  }
  return transform;
}

// ----- pipelines -----------------------------------------------------------------------------

struct Sections {
  const Section& sources;
  const Section& sinks;
  const Section& deadletters;
};

// The disk backpressure keys; false after reporting an error.
bool ReadDiskSettings(Reader& reader, const Reader::Fields& fields, PipelineConfig& pipeline) {
  bool ok = true;
  const auto read = [&](const char* key, int64_t min_value, int64_t max_value,
                        std::optional<int64_t>& into) {
    if (auto value_at = fields.Get(key)) {
      into = reader.Integer(*value_at, min_value, max_value);
      ok = ok && into.has_value();
    }
  };
  read("disk_min_free_bytes", 0, Reader::kNoUpperBound, pipeline.disk_min_free_bytes);
  read("disk_pause_at_percent", 1, 100, pipeline.disk_pause_at_percent);
  read("disk_resume_at_percent", 0, 99, pipeline.disk_resume_at_percent);
  read("disk_wait_seconds", 0, Reader::kNoUpperBound, pipeline.disk_wait_seconds);
  if (pipeline.disk_pause_at_percent && pipeline.disk_resume_at_percent &&
      *pipeline.disk_resume_at_percent >= *pipeline.disk_pause_at_percent) {
    reader.Error(*fields.Get("disk_resume_at_percent"),
                 fmt::format("must be below disk_pause_at_percent ({}): reading resumes once usage "
                             "is back under the pause threshold",
                             *pipeline.disk_pause_at_percent));
    ok = false;
  }
  return ok;
}

// pipelines.<name>.deadletter_sink: an entry of deadletter_sinks — never the data sink — that is a
// SkipprLake sink (the kind deadletters land in; docs/formats/deadletters.md).
std::optional<std::string> ReadDeadletterSink(Reader& reader, const Located& at,
                                              const Sections& sections) {
  const std::optional<std::string> text = reader.NonEmptyString(at);
  if (!text) return std::nullopt;
  if (text->rfind(sections.sinks.name + ".", 0) == 0) {
    reader.Error(at, fmt::format("'{}' is a data sink; deadletters need a sink of their own: "
                                 "declare one under {} (a SkipprLake with its own "
                                 "table_namespace) and write {}.<name>",
                                 *text, sections.deadletters.name, sections.deadletters.name));
    return std::nullopt;
  }
  std::optional<std::string> name = ReadReference(reader, at, sections.deadletters);
  if (!name) return std::nullopt;
  auto entry = sections.deadletters.entries.find(*name);
  if (entry == sections.deadletters.entries.end()) return name;  // its own error is reported
  if (const std::string& kind = entry->second.connector.kind; kind != "SkipprLake") {
    reader.Error(at, fmt::format("{}.{} is a {} sink; deadletters land in a SkipprLake sink "
                                 "only (other kinds as they are built): make it SkipprLake",
                                 sections.deadletters.name, *name, kind));
    return std::nullopt;
  }
  return name;
}

std::optional<PipelineConfig> ReadPipeline(Reader& reader, const std::string& name,
                                           const Located& at, const Sections& sections) {
  const Reader::Fields fields = reader.Struct(
      at, {"data_source", "data_sink", "deadletter_sink", "transform", "sync_frequency_seconds",
           "data_dir", "buffer_threshold_bytes", "buffer_threshold_seconds", "disk_min_free_bytes",
           "disk_pause_at_percent", "disk_resume_at_percent", "disk_wait_seconds", "chaos_mode"});
  PipelineConfig pipeline;
  pipeline.name = name;
  pipeline.mark = at.mark;
  bool ok = true;

  if (auto source_at = fields.Get("data_source"); source_at && !reader.IsNull(*source_at)) {
    auto source = ReadReference(reader, *source_at, sections.sources);
    ok = ok && source.has_value();
    pipeline.data_source = source.value_or("");
  } else {
    reader.Error(at, "needs data_source: data_sources.<name>");
    ok = false;
  }
  if (auto sink_at = fields.Get("data_sink"); sink_at && !reader.IsNull(*sink_at)) {
    pipeline.data_sink = ReadReference(reader, *sink_at, sections.sinks);
    ok = ok && pipeline.data_sink.has_value();
  }
  if (auto dl_at = fields.Get("deadletter_sink"); dl_at && !reader.IsNull(*dl_at)) {
    pipeline.deadletter_sink = ReadDeadletterSink(reader, *dl_at, sections);
    pipeline.deadletter_sink_mark = dl_at->mark;
    ok = ok && pipeline.deadletter_sink.has_value();
  }

  if (auto at_frequency = fields.Get("sync_frequency_seconds")) {
    auto value = reader.Integer(*at_frequency, 1, Reader::kNoUpperBound);
    ok = ok && value.has_value();
    pipeline.sync_frequency_seconds = value.value_or(900);
  }
  if (auto dir_at = fields.Get("data_dir"); dir_at && !reader.IsNull(*dir_at)) {
    auto dir = reader.NonEmptyString(*dir_at);
    ok = ok && dir.has_value();
    pipeline.data_dir = dir.value_or("./data");
    pipeline.data_dir_origin = ValueOrigin::kFile;
  } else if (auto env = reader.environment().Get("DATA_DIR"); env && !env->empty()) {
    pipeline.data_dir = *env;
    pipeline.data_dir_origin = ValueOrigin::kEnvironment;
  }
  if (auto bytes_at = fields.Get("buffer_threshold_bytes")) {
    pipeline.buffer_threshold_bytes = reader.Integer(*bytes_at, 1, Reader::kNoUpperBound);
    ok = ok && pipeline.buffer_threshold_bytes.has_value();
  }
  if (auto seconds_at = fields.Get("buffer_threshold_seconds")) {
    pipeline.buffer_threshold_seconds = reader.Integer(*seconds_at, 1, Reader::kNoUpperBound);
    ok = ok && pipeline.buffer_threshold_seconds.has_value();
  }
  ok = ReadDiskSettings(reader, fields, pipeline) && ok;
  if (auto chaos_at = fields.Get("chaos_mode")) {
    auto chaos = reader.Boolean(*chaos_at);
    ok = ok && chaos.has_value();
    pipeline.chaos_mode = chaos.value_or(false);
  }
  pipeline.transform = ReadTransform(reader, fields.Get("transform"), at.path);
  if (!ok) return std::nullopt;
  return pipeline;
}

std::map<std::string, PipelineConfig> ReadPipelines(Reader& reader,
                                                    const std::optional<Located>& at,
                                                    const Sections& sections) {
  std::map<std::string, PipelineConfig> pipelines;
  if (!at) return pipelines;
  std::map<std::string, std::string> name_by_cleaned;
  for (const auto& [name, pipeline_at] : reader.Mapping(*at, {})) {
    // The name rule covers CheckEntryName's (no '.', not empty) and says more.
    if (Status valid = CheckPipelineName(name); !valid.ok()) {
      reader.Error(pipeline_at, valid.message());
      continue;
    }
    const std::string cleaned = CleanName(name);
    if (std::find(kReservedPipelineNames.begin(), kReservedPipelineNames.end(), cleaned) !=
        kReservedPipelineNames.end()) {
      reader.Error(pipeline_at,
                   fmt::format("Invalid pipeline name '{}': reserved ({} are used by skipprd "
                               "itself); choose another name",
                               name, internal::JoinNames(kReservedPipelineNames)));
      continue;
    }
    if (auto [other, inserted] = name_by_cleaned.emplace(cleaned, name); !inserted) {
      reader.Error(pipeline_at, fmt::format("pipeline names '{}' and '{}' both become '{}' on disk "
                                            "and in SQL; rename one",
                                            other->second, name, cleaned));
      continue;
    }
    if (auto pipeline = ReadPipeline(reader, name, pipeline_at, sections)) {
      pipelines.emplace(name, std::move(*pipeline));
    }
  }
  return pipelines;
}

// .env and .env.local beside the file, layered over the shell (reference §2.6):
// .env.local wins over everything, the shell wins over .env, .env fills what is unset or empty.
class LayeredEnvironment final : public Environment {
 public:
  LayeredEnvironment(const Environment& shell, std::map<std::string, std::string> dotenv,
                     std::map<std::string, std::string> dotenv_local)
      : shell_(shell), dotenv_(std::move(dotenv)), dotenv_local_(std::move(dotenv_local)) {}

  std::optional<std::string> Get(const std::string& name) const override {
    if (auto it = dotenv_local_.find(name); it != dotenv_local_.end()) return it->second;
    std::optional<std::string> shell_value = shell_.Get(name);
    if (shell_value && !shell_value->empty()) return shell_value;
    if (auto it = dotenv_.find(name); it != dotenv_.end()) return it->second;
    return shell_value;
  }

  // What the files change compared with the shell.
  std::map<std::string, std::string> Overrides() const {
    std::map<std::string, std::string> overrides;
    for (const auto& [name, value] : dotenv_) {
      std::optional<std::string> shell_value = shell_.Get(name);
      if (!shell_value || shell_value->empty()) overrides[name] = value;
    }
    for (const auto& [name, value] : dotenv_local_) overrides[name] = value;
    return overrides;
  }

 private:
  const Environment& shell_;
  std::map<std::string, std::string> dotenv_;
  std::map<std::string, std::string> dotenv_local_;
};

std::string_view FileKind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  return "not a regular file";
}

// A configuration (or .env) file's text: a regular file of at most kMaxConfigFileBytes. Opened
// without blocking and checked before reading: a FIFO would wait forever, a directory reads as
// nothing, /dev/zero never ends.
Result<std::string> ReadConfigText(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return ErrnoStatus(errno, fmt::format("cannot open '{}'", path));
  struct FdCloser {
    int fd;
    ~FdCloser() { close(fd); }
  } closer{fd};
  struct stat info {};
  if (fstat(fd, &info) != 0) return ErrnoStatus(errno, fmt::format("cannot read '{}'", path));
  if (!S_ISREG(info.st_mode)) {
    return Status::InvalidConfig(
        fmt::format("'{}' is {}, not a configuration file; point to a YAML (or .env) text file",
                    path, FileKind(info.st_mode)));
  }
  if (static_cast<uint64_t>(info.st_size) > kMaxConfigFileBytes) {
    return Status::InvalidConfig(fmt::format(
        "'{}' is {} bytes; a configuration file is at most {} MiB — is it the right file?", path,
        info.st_size, kMaxConfigFileBytes >> 20));
  }
  std::string text(static_cast<size_t>(info.st_size), '\0');
  size_t filled = 0;
  while (filled < text.size()) {
    const ssize_t got = read(fd, text.data() + filled, text.size() - filled);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return ErrnoStatus(errno, fmt::format("cannot read '{}'", path));
    if (got == 0) break;  // the file shrank while it was read
    filled += static_cast<size_t>(got);
  }
  text.resize(filled);
  return text;
}

Result<std::map<std::string, std::string>> ReadDotenvIfPresent(const std::filesystem::path& path) {
  std::error_code error;
  if (!std::filesystem::exists(std::filesystem::symlink_status(path, error)) &&
      !std::filesystem::exists(path, error)) {
    return std::map<std::string, std::string>{};
  }
  SKIPPR_ASSIGN_OR_RETURN(std::string text, ReadConfigText(path.string()));
  return ParseDotenv(text, path.string());
}

}  // namespace
}  // namespace skippr::config

namespace skippr::config {

std::string CleanName(const std::string& name) {
  std::string cleaned;
  cleaned.reserve(name.size());
  for (unsigned char c : name) {
    const char lower = static_cast<char>(std::tolower(c));
    cleaned.push_back((std::isalnum(c) || c == '_') && c < 128 ? lower : '_');
  }
  return cleaned;
}

Status CheckPipelineName(std::string_view name) {
  const auto is_name_char = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  };
  bool valid = !name.empty() && name.size() <= kMaxPipelineNameBytes && is_name_char(name[0]);
  for (char c : name) valid = valid && (is_name_char(c) || c == '-');
  if (valid) return Status::OK();
  return Status::InvalidConfig(fmt::format(
      "Invalid pipeline name '{}': a pipeline name is 1 to {} characters from A-Z, a-z, 0-9, '_' "
      "and '-', not starting with '-' (it names the directory <data_dir>/<name> and the SQL "
      "schema of its tables); for example 'rides_2024'",
      name, kMaxPipelineNameBytes));
}

std::string_view TransformOpName(TransformOpKind kind) {
  switch (kind) {
    case TransformOpKind::kRename:
      return "rename";
    case TransformOpKind::kDrop:
      return "drop";
    case TransformOpKind::kSelect:
      return "select";
    case TransformOpKind::kCast:
      return "cast";
    case TransformOpKind::kFilter:
      return "filter";
    case TransformOpKind::kDerive:
      return "derive";
    case TransformOpKind::kHash:
      return "hash";
    case TransformOpKind::kDefault:
      return "default";
  }
  return "unknown";
}

std::string PipelineConfig::StateDir() const {
  return (std::filesystem::path(data_dir) / name).string();
}

const PipelineConfig* Config::FindPipeline(const std::string& name) const {
  auto it = pipelines.find(name);
  return it == pipelines.end() ? nullptr : &it->second;
}

Result<Config> ParseConfig(const std::string& yaml_text, const std::string& display_name,
                           const Environment& environment, ReferenceMode references,
                           const std::vector<std::string>& resolved_key_paths) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::DeepRecursion& error) {
    const SourceMark mark = internal::ToMark(error.mark);
    return Status::InvalidConfig(fmt::format(
        "{}:{}:{}: YAML nested {} levels deep; a configuration nests a few levels, so this is "
        "not a skippr.yml",
        display_name, mark.line, mark.column, error.depth()));
  } catch (const YAML::ParserException& error) {
    const SourceMark mark = internal::ToMark(error.mark);
    return Status::InvalidConfig(fmt::format(
        "{}:{}:{}: YAML syntax error: {} (quote values that "
        "start with '*', '&', '!', '{{' or '[')",
        display_name, mark.line, mark.column, internal::EscapeControlCharacters(error.msg)));
  } catch (const YAML::Exception& error) {
    const SourceMark mark = internal::ToMark(error.mark);
    return Status::InvalidConfig(fmt::format("{}:{}:{}: cannot read the YAML: {}", display_name,
                                             mark.line, mark.column,
                                             internal::EscapeControlCharacters(error.msg)));
  }
  internal::Diagnostics diagnostics(display_name);
  Reader reader(diagnostics, environment, references, resolved_key_paths);
  const Located root_at{root, {1, 1}, ""};
  const Reader::Fields fields = reader.Struct(
      root_at, {"skippr", "pipelines", "data_sources", "data_sinks", "deadletter_sinks"});

  Config config;
  config.path = display_name;
  config.skippr = ReadEngineSettings(reader, fields.Get("skippr"));
  const Section sources =
      ReadSection(reader, "data_sources", fields.Get("data_sources"), ConnectorRole::kSource);
  const Section sinks =
      ReadSection(reader, "data_sinks", fields.Get("data_sinks"), ConnectorRole::kSink);
  const Section deadletters =
      ReadSection(reader, "deadletter_sinks", fields.Get("deadletter_sinks"), ConnectorRole::kSink);
  for (const Section* section : {&sources, &sinks, &deadletters})
    CheckConnectorEntries(reader, *section);
  config.pipelines =
      ReadPipelines(reader, fields.Get("pipelines"), Sections{sources, sinks, deadletters});
  PlaceWals(config);
  PlaceStores(config);
  config.data_sources = sources.entries;
  config.data_sinks = sinks.entries;
  config.deadletter_sinks = deadletters.entries;

  if (diagnostics.has_errors()) {
    return Status::InvalidConfig(fmt::format("{}", fmt::join(diagnostics.errors(), "\n")));
  }
  return config;
}

Result<Config> LoadConfigFile(const std::string& path, const Environment& shell) {
  SKIPPR_ASSIGN_OR_RETURN(std::string text, ReadConfigText(path));
  return ParseConfigAt(text, path, shell);
}

Result<Config> ParseConfigAt(const std::string& text, const std::string& path,
                             const Environment& shell,
                             const std::vector<std::string>& resolved_key_paths) {
  const std::filesystem::path directory = std::filesystem::path(path).parent_path();
  SKIPPR_ASSIGN_OR_RETURN(auto dotenv, ReadDotenvIfPresent(directory / ".env"));
  SKIPPR_ASSIGN_OR_RETURN(auto dotenv_local, ReadDotenvIfPresent(directory / ".env.local"));
  LayeredEnvironment environment(shell, std::move(dotenv), std::move(dotenv_local));
  SKIPPR_ASSIGN_OR_RETURN(Config config, ParseConfig(text, path, environment,
                                                     ReferenceMode::kResolve, resolved_key_paths));
  config.dotenv_overrides = environment.Overrides();
  return config;
}

std::vector<std::string> PipelineKeyPaths(const Config& config, const std::string& pipeline_name) {
  const PipelineConfig* pipeline = config.FindPipeline(pipeline_name);
  if (pipeline == nullptr) return {};
  std::vector<std::string> paths = {"skippr", "pipelines." + pipeline_name,
                                    "data_sources." + pipeline->data_source};
  if (pipeline->data_sink) paths.push_back("data_sinks." + *pipeline->data_sink);
  if (pipeline->deadletter_sink) paths.push_back("deadletter_sinks." + *pipeline->deadletter_sink);
  return paths;
}

ConfigLocation FindConfigFile(const std::optional<std::string>& explicit_path,
                              const Environment& shell, const std::string& working_dir) {
  namespace fs = std::filesystem;
  ConfigLocation location;
  std::error_code error;
  std::vector<std::string> candidates;
  if (explicit_path && !explicit_path->empty()) candidates.push_back(*explicit_path);
  if (auto from_env = shell.Get("SKIPPR_CONFIG_FILE"); from_env && !from_env->empty()) {
    candidates.push_back(*from_env);
  }
  for (const char* name : {"skippr.yml", "skippr.yaml"}) {
    candidates.push_back(working_dir.empty() ? name : (fs::path(working_dir) / name).string());
  }
  if (explicit_path && !explicit_path->empty() && !fs::is_regular_file(*explicit_path, error)) {
    location.fell_back_from = *explicit_path;
  }
  for (const std::string& candidate : candidates) {
    if (fs::is_regular_file(candidate, error)) {
      location.path = candidate;
      return location;
    }
  }
  return location;
}

std::vector<ConfigProblem> CheckWholeConfig(const Config& config) {
  std::vector<ConfigProblem> problems;
  // Two lake sinks writing one (warehouse, table_namespace) would commit over each other's tables.
  std::map<std::string, std::string> owner_by_location;
  const auto check_section = [&](const std::map<std::string, ConnectorEntry>& entries,
                                 const std::string& section) {
    for (const auto& [name, entry] : entries) {
      const ConnectorConfig& connector = entry.connector;
      if (connector.kind != "SkipprLake" && connector.kind != "Duckdb") continue;
      const bool is_database = connector.Has("database");
      std::string warehouse =
          TrimSpaces(connector.GetString(is_database ? "database" : "warehouse"));
      while (warehouse.size() > 1 && warehouse.back() == '/') warehouse.pop_back();
      const std::string setting = is_database ? "schema" : "table_namespace";
      const std::string table_namespace = connector.Has(setting)
                                              ? connector.GetString(setting)
                                              : std::string(is_database ? "main" : "default");
      const std::string here = JoinPath(section, name);
      auto [owner, inserted] = owner_by_location.emplace(warehouse + "\n" + table_namespace, here);
      if (inserted) continue;
      problems.push_back({fmt::format(
          "{}:{}:{}: {}: uses {} '{}' and {} '{}' like {}; two sinks on one namespace would "
          "overwrite each other's tables — give each its own {}",
          config.path, entry.mark.line, entry.mark.column, here,
          is_database ? "database" : "warehouse", warehouse, setting, table_namespace,
          owner->second, setting)});
    }
  };
  check_section(config.data_sinks, "data_sinks");
  check_section(config.deadletter_sinks, "deadletter_sinks");
  // A deadletter sink holds one table, {table_namespace}.deadletters: two pipelines landing there
  // would each read the other's deadletters as their own.
  std::map<std::string, std::string> pipeline_by_deadletter_sink;
  for (const auto& [name, pipeline] : config.pipelines) {
    if (!pipeline.deadletter_sink) continue;
    auto sink = config.deadletter_sinks.find(*pipeline.deadletter_sink);
    auto [owner, inserted] = pipeline_by_deadletter_sink.emplace(*pipeline.deadletter_sink, name);
    if (inserted || sink == config.deadletter_sinks.end()) continue;
    problems.push_back({fmt::format(
        "{}:{}:{}: pipelines.{}.deadletter_sink: deadletter_sinks.{} is already the deadletter "
        "sink of pipeline {}, and both would land in its one table {}.deadletters — give each "
        "pipeline a deadletter sink of its own (its own table_namespace)",
        config.path, pipeline.deadletter_sink_mark.line, pipeline.deadletter_sink_mark.column, name,
        *pipeline.deadletter_sink, owner->second,
        sink->second.connector.GetString("table_namespace"))});
  }
  return problems;
}

}  // namespace skippr::config
