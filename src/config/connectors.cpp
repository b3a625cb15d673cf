// The connector kinds this build knows, their settings, and how an entry is read. Adding a
// connector means adding its spec here and its implementation in sources/ or sinks/.
#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "config/reader.hpp"

namespace skippr::config {

namespace {

enum class SettingType { kString, kInteger, kBoolean, kStringList, kChoice };


struct SettingSpec {
  std::string_view name;
  SettingType type = SettingType::kString;
  bool required = false;
  bool secret = false;  // passwords, tokens, keys, connection strings: `${NAME}` only
  std::optional<SettingValue> default_value;
  std::vector<std::string_view> choices;
  int64_t min_value = 0;
  int64_t max_value = internal::Reader::kNoUpperBound;
};

struct ConnectorSpec {
  std::string_view kind;
  ConnectorRole role;
  std::vector<SettingSpec> settings;
};

SettingSpec Spec(std::string_view name, SettingType type) {
  SettingSpec spec;
  spec.name = name;
  spec.type = type;
  return spec;
}
SettingSpec Text(std::string_view name, std::optional<std::string> default_value = std::nullopt) {
  SettingSpec spec = Spec(name, SettingType::kString);
  if (default_value) spec.default_value = *default_value;
  return spec;
}
SettingSpec RequiredText(std::string_view name) {
  SettingSpec spec = Spec(name, SettingType::kString);
  spec.required = true;
  return spec;
}
SettingSpec Secret(std::string_view name) {
  SettingSpec spec = Spec(name, SettingType::kString);
  spec.secret = true;
  return spec;
}
SettingSpec Number(std::string_view name, std::optional<int64_t> default_value,
                   int64_t min_value = 0, int64_t max_value = internal::Reader::kNoUpperBound) {
  SettingSpec spec = Spec(name, SettingType::kInteger);
  if (default_value) spec.default_value = *default_value;
  spec.min_value = min_value;
  spec.max_value = max_value;
  return spec;
}
SettingSpec Names(std::string_view name) { return Spec(name, SettingType::kStringList); }
SettingSpec OneOf(std::string_view name, std::vector<std::string_view> choices,
                  std::optional<std::string> default_value) {
  SettingSpec spec = Spec(name, SettingType::kChoice);
  spec.choices = std::move(choices);
  if (default_value) spec.default_value = *default_value;
  return spec;
}

const std::vector<ConnectorSpec>& Registry() {
  static const std::vector<ConnectorSpec> kRegistry = {
      // Sources (reference §10).
      {"Sample",
       ConnectorRole::kSource,
       {Number("rows", 1000), Number("seed", 42), Number("batch_size_rows", 100000, 1)}},
      {"File",
       ConnectorRole::kSource,
       {RequiredText("path"), OneOf("format", {"json", "csv", "parquet"}, std::nullopt),
        Number("batch_size_bytes", std::nullopt, 1), Number("batch_size_seconds", std::nullopt, 1),
        // The columns that identify a row in every namespace the source produces; a SkipprLake
        // sink with write_policy merge_by_key upserts by them.
        Names("primary_key")}},
      {"Postgres",
       ConnectorRole::kSource,
       {Text("host", "localhost"), Number("port", 5432, 1, 65535), Text("user", "postgres"),
        Secret("password"), Text("database"), Secret("connection_string"), Names("tables"),
        OneOf("cdc_mode", {"snapshot", "snapshot_then_cdc", "cdc_only"}, "snapshot"),
        Text("replication_slot_name", "skippr_slot"),
        Text("publication_name", "skippr_publication"),
        Number("cdc_idle_timeout_seconds", std::nullopt), Number("batch_size_rows", 10000, 1),
        // Beyond the reference: TLS, the connections a snapshot reads with, and heartbeats that
        // let an idle slot be confirmed.
        OneOf("sslmode", {"disable", "prefer", "require", "verify-ca", "verify-full"}, "prefer"),
        Text("sslrootcert"), Number("snapshot_parallelism", 1, 1, 64),
        Number("heartbeat_interval_seconds", std::nullopt, 1, 86400)}},
      {"S3",
       ConnectorRole::kSource,
       {RequiredText("s3_bucket"), RequiredText("s3_prefix"), Text("region"), Text("endpoint_url"),
        OneOf("format", {"json", "csv", "parquet"}, std::nullopt), Text("s3_delimiter", "/"),
        Number("s3_prefix_ordered_depth", 0), Number("batch_size_bytes", 1024000, 1),
        Number("batch_size_seconds", 600, 1), Names("primary_key")}},
      // Sinks (data and deadletter).
      {"SkipprLake",
       ConnectorRole::kSink,
       // A warehouse on S3 (s3://bucket/prefix) needs catalog_table or catalog_uri; region and
       // endpoint_url are its bucket's (and the table's region).
       {RequiredText("warehouse"), Text("table_namespace", "default"), Secret("catalog_uri"),
        Text("catalog_table"), Text("region"), Text("endpoint_url"),
        OneOf("write_policy", {"append", "merge_by_key", "replace_table"}, "append"),
        // A landing writes one data file of about this many (uncompressed WAL) bytes at most.
        Number("target_file_size_bytes", 128 << 20, 1 << 20),
        // Landing runs at the end of every sync pass, and during one every this many seconds.
        Number("commit_interval_seconds", 60, 1),
        // Snapshot expiry: older than this and beyond the newest min_snapshots_to_keep.
        Number("max_snapshot_age_seconds", 86400, 0), Number("min_snapshots_to_keep", 100, 1)}},
      // Two forms: `warehouse` (file:///...; Iceberg tables DuckDB's iceberg_scan reads) with
      // `table_namespace`, or `database` (a DuckDB database file) with `schema`.
      {"Duckdb",
       ConnectorRole::kSink,
       {Text("warehouse"), Text("table_namespace"), Text("database"), Text("schema"),
        OneOf("write_policy", {"append", "merge_by_key", "replace_table"}, "append"),
        Number("target_file_size_bytes", 128 << 20, 1 << 20),
        Number("commit_interval_seconds", 60, 1)}},
      {"Postgres",
       ConnectorRole::kSink,
       {Text("host", "localhost"), Number("port", 5432, 1, 65535), RequiredText("user"),
        Secret("password"), RequiredText("database"), Text("schema", "public"),
        OneOf("sslmode", {"disable", "prefer", "require"}, "prefer"),
        OneOf("write_policy", {"append", "merge_by_key", "replace_table"}, "append"),
        Number("target_file_size_bytes", 128 << 20, 1 << 20),
        Number("commit_interval_seconds", 60, 1)}},
  };
  return kRegistry;
}

const ConnectorSpec* FindSpec(ConnectorRole role, const std::string& kind) {
  for (const ConnectorSpec& spec : Registry()) {
    if (spec.role == role && spec.kind == kind) return &spec;
  }
  return nullptr;
}

std::string_view RoleNoun(ConnectorRole role) {
  return role == ConnectorRole::kSource ? "data source" : "sink";
}

// x.y.z: three runs of digits joined by dots.
bool IsVersion(std::string_view text) {
  int parts = 0;
  size_t digits = 0;
  for (char c : text) {
    if (c >= '0' && c <= '9') {
      ++digits;
    } else if (c == '.' && digits > 0 && parts < 2) {
      ++parts;
      digits = 0;
    } else {
      return false;
    }
  }
  return parts == 2 && digits > 0;
}

std::optional<SettingValue> ReadSetting(internal::Reader& reader, const SettingSpec& spec,
                                        const internal::Located& at) {
  switch (spec.type) {
    case SettingType::kString: {
      auto value = reader.String(at, spec.secret);
      if (value) return SettingValue(*value);
      return std::nullopt;
    }
    case SettingType::kInteger: {
      auto value = reader.Integer(at, spec.min_value, spec.max_value);
      if (value) return SettingValue(*value);
      return std::nullopt;
    }
    case SettingType::kBoolean: {
      auto value = reader.Boolean(at);
      if (value) return SettingValue(*value);
      return std::nullopt;
    }
    case SettingType::kStringList: {
      auto value = reader.StringList(at, /*allow_scalar=*/true);
      if (value) return SettingValue(*value);
      return std::nullopt;
    }
    case SettingType::kChoice: {
      auto value = reader.Choice(at, spec.choices);
      if (value) return SettingValue(*value);
      return std::nullopt;
    }
  }
  return std::nullopt;
}

std::optional<ConnectorConfig> ReadConnectorBlock(internal::Reader& reader,
                                                  const ConnectorSpec& spec,
                                                  const internal::Located& at) {
  std::vector<std::string_view> allowed{"version"};
  for (const SettingSpec& setting : spec.settings) allowed.push_back(setting.name);
  auto fields = reader.Struct(at, allowed);

  ConnectorConfig connector;
  connector.kind = std::string(spec.kind);
  connector.mark = at.mark;
  bool ok = true;
  if (auto version = fields.Get("version")) {
    connector.version = reader.String(*version);
    if (connector.version && !IsVersion(*connector.version)) {
      reader.Error(*version, fmt::format("'{}' is not a version; write x.y.z, for example 1.2.3",
                                         *connector.version));
      ok = false;
    }
  }
  for (const SettingSpec& setting : spec.settings) {
    auto located = fields.Get(setting.name);
    if (!located || reader.IsNull(*located)) {
      if (setting.required) {
        reader.Error(at, fmt::format("{} needs '{}'", spec.kind, setting.name));
        ok = false;
      } else if (setting.default_value) {
        connector.settings.emplace(setting.name, *setting.default_value);
      }
      continue;
    }
    std::optional<SettingValue> value = ReadSetting(reader, setting, *located);
    if (!value) {
      ok = false;
      continue;
    }
    connector.settings.emplace(setting.name, std::move(*value));
  }
  if (!ok) return std::nullopt;
  return connector;
}

template <typename T>
const T& SettingAs(const ConnectorConfig& connector, const std::string& name) {
  auto it = connector.settings.find(name);
  if (it == connector.settings.end() || !std::holds_alternative<T>(it->second)) {
    fmt::print(stderr, "skipprd: internal error: {} setting '{}' read with the wrong type\n",
               connector.kind, name);
    std::abort();
  }
  return std::get<T>(it->second);
}

}  // namespace

const std::string& ConnectorConfig::GetString(const std::string& name) const {
  return SettingAs<std::string>(*this, name);
}
int64_t ConnectorConfig::GetInteger(const std::string& name) const {
  return SettingAs<int64_t>(*this, name);
}
bool ConnectorConfig::GetBool(const std::string& name) const {
  return SettingAs<bool>(*this, name);
}
const std::vector<std::string>& ConnectorConfig::GetStringList(const std::string& name) const {
  return SettingAs<std::vector<std::string>>(*this, name);
}

std::vector<SettingDescription> DescribeSettings(ConnectorRole role, const std::string& kind) {
  static constexpr std::string_view kTypeNames[] = {"string", "integer", "boolean", "string_list",
                                                    "choice"};
  std::vector<SettingDescription> settings;
  const ConnectorSpec* spec = FindSpec(role, kind);
  if (spec == nullptr) return settings;
  for (const SettingSpec& setting : spec->settings) {
    SettingDescription& description = settings.emplace_back();
    description.name = setting.name;
    description.type = kTypeNames[static_cast<size_t>(setting.type)];
    description.required = setting.required;
    description.secret = setting.secret;
    description.default_value = setting.default_value;
    description.choices.assign(setting.choices.begin(), setting.choices.end());
    description.min_value = setting.min_value;
    description.max_value = setting.max_value;
  }
  return settings;
}

std::vector<std::string> ConnectorKinds(ConnectorRole role) {
  std::vector<std::string> kinds;
  for (const ConnectorSpec& spec : Registry()) {
    if (spec.role == role) kinds.emplace_back(spec.kind);
  }
  std::sort(kinds.begin(), kinds.end());
  return kinds;
}

namespace internal {

std::optional<ConnectorEntry> ReadConnectorEntry(Reader& reader, const std::string& name,
                                                 const Located& at, ConnectorRole role) {
  std::vector<std::string> kinds = ConnectorKinds(role);
  const std::string kinds_text = fmt::format("{}", fmt::join(kinds, ", "));
  auto blocks = reader.Mapping(at, {}, "a connector block such as 'File: {path: ...}'");
  if (blocks.empty()) {
    if (at.node && !at.node.IsNull() && !at.node.IsMap()) return std::nullopt;  // already reported
    reader.Error(at,
                 fmt::format("needs one connector block, for example '{}: {{...}}'; {} kinds: {}",
                             kinds.front(), RoleNoun(role), kinds_text));
    return std::nullopt;
  }
  if (blocks.size() > 1) {
    reader.Error(
        blocks[1].second,
        fmt::format("'{}' has two connector blocks ({} and {}); an entry holds exactly one", name,
                    blocks[0].first, blocks[1].first));
    return std::nullopt;
  }
  const auto& [kind, block] = blocks.front();
  const ConnectorSpec* spec = FindSpec(role, kind);
  if (spec == nullptr) {
    reader.Error(block, fmt::format("unknown {} kind '{}'; {} kinds: {}", RoleNoun(role), kind,
                                    RoleNoun(role), kinds_text));
    return std::nullopt;
  }
  std::optional<ConnectorConfig> connector = ReadConnectorBlock(reader, *spec, block);
  if (!connector) return std::nullopt;
  return ConnectorEntry{name, std::move(*connector), at.mark};
}

}  // namespace internal
}  // namespace skippr::config
