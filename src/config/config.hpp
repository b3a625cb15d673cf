// skippr.yml: the one strict, friendly loader every command reads its configuration through
// (reference/skipprd-public-docs.md §2, docs/config.md). Unknown keys are refused at every level,
// `${NAME}` references resolve from the shell and the .env files beside the file, secrets refuse
// plaintext, references between sections must resolve, and every error names file:line:column, the
// key path, and what is allowed.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/environment.hpp"
#include "core/status.hpp"
#include "core/types.hpp"

namespace skippr::config {

// 1-based position in the configuration file; line 0 means "no position" (a default or env value).
struct SourceMark {
  int line = 0;
  int column = 0;
};

// ---------------------------------------------------------------------------------------------
// Connectors

enum class ConnectorRole { kSource, kSink };

using SettingValue = std::variant<std::string, int64_t, bool, std::vector<std::string>>;

// One `<Kind>: {...}` block, with defaults filled in and `${NAME}` references resolved.
struct ConnectorConfig {
  std::string kind;                    // "File", "Sample", "SkipprLake", ...
  std::optional<std::string> version;  // `version: x.y.z` pin, recorded as written
  std::map<std::string, SettingValue> settings;
  SourceMark mark;

  bool Has(const std::string& name) const { return settings.count(name) != 0; }
  // These abort when the setting is absent or of another type: the registry guarantees both.
  const std::string& GetString(const std::string& name) const;
  int64_t GetInteger(const std::string& name) const;
  bool GetBool(const std::string& name) const;
  const std::vector<std::string>& GetStringList(const std::string& name) const;
};

// A named entry of data_sources / data_sinks / deadletter_sinks.
struct ConnectorEntry {
  std::string name;
  ConnectorConfig connector;
  SourceMark mark;
};

// The connector kinds this build knows for a role, sorted ("File, Postgres, S3, Sample").
std::vector<std::string> ConnectorKinds(ConnectorRole role);

// One setting of a connector kind, as the registry defines it (the Python module generates its
// connector classes from these: one catalogue).
struct SettingDescription {
  std::string name;
  std::string type;  // "string", "integer", "boolean", "string_list" or "choice"
  bool required = false;
  bool secret = false;  // `${NAME}` only
  std::optional<SettingValue> default_value;
  std::vector<std::string> choices;  // for "choice"
  int64_t min_value = 0;             // for "integer"
  int64_t max_value = 0;             // for "integer"; INT64_MAX: no upper bound
};
// The settings of `kind` in `role`, in registry order; empty for an unknown kind.
std::vector<SettingDescription> DescribeSettings(ConnectorRole role, const std::string& kind);

// ---------------------------------------------------------------------------------------------
// Transform

enum class TransformType { kDefault, kCopy };

enum class TransformOpKind { kRename, kDrop, kSelect, kCast, kFilter, kDerive, kHash, kDefault };

// One entry of transform.ops, applied in order before the WAL commit.
//   rename: {old: new, ...}     drop: [f, ...]      select: [f, ...]     hash: [f, ...]
//   cast: {field: type, ...}    filter: "<SQL predicate>"
//   derive: {new_field: "<SQL expression>", ...}    default: {field: <value>, ...}
struct TransformOp {
  TransformOpKind kind = TransformOpKind::kRename;
  std::vector<std::pair<std::string, std::string>>
      pairs;  // rename, derive, default (value as text)
  std::vector<std::pair<std::string, LogicalType>> casts;  // cast
  std::vector<std::string> fields;                         // drop, select, hash
  std::string predicate;                                   // filter
  SourceMark mark;
};

std::string_view TransformOpName(TransformOpKind kind);

enum class MeasureKind { kSum, kCount };

struct AggregateMeasure {
  std::string name;
  MeasureKind kind = MeasureKind::kSum;
  std::string field;  // for count: "*" counts rows, a field name counts its non-null values
};

// One keyed running aggregate (seeds/materialised-views.txt).
struct AggregateConfig {
  std::string id;
  std::vector<std::string> key_fields;
  std::vector<AggregateMeasure> measures;  // sorted by name
  SourceMark mark;

  // SHA-256 over a canonical form of id, key_fields (in order) and measures (sorted by name): the
  // same for any YAML formatting or mapping-key order, different when any of those three change.
  std::string ConfigHash() const;
};

struct TransformConfig {
  TransformType type = TransformType::kDefault;
  std::vector<TransformOp> ops;
  std::vector<std::string> namespace_fields;
  bool flatten_events = false;
  std::vector<AggregateConfig> aggregates;
};

// ---------------------------------------------------------------------------------------------
// Pipelines and the whole file

enum class ValueOrigin { kFile, kEnvironment, kDefault };

struct PipelineConfig {
  std::string name;
  std::string data_source;               // entry name in data_sources
  std::optional<std::string> data_sink;  // entry name in data_sinks; none: the WAL is the dataset
  std::optional<std::string> deadletter_sink;  // entry name in deadletter_sinks (a SkipprLake)
  SourceMark deadletter_sink_mark;             // where deadletter_sink is set
  TransformConfig transform;
  int64_t sync_frequency_seconds = 900;
  std::string data_dir =
      "./data";  // pipeline data_dir → DATA_DIR → ./data (state lives in <data_dir>/<name>)
  ValueOrigin data_dir_origin = ValueOrigin::kDefault;
  // With WAL_STORAGE=s3: s3://<WAL bucket>/<tenant>/<workspace>/<pipeline>/segments, where the
  // pipeline's segments live (below it, a directory per store instance). Empty: <state dir>/wal.
  std::string wal_s3_uri;
  // With skippr.store.type dynamodb: the table holding the pipeline's store, and the pipeline's key
  // in it ("{tenant}#{workspace}#{pipeline}"). Empty table: the store is LMDB in the state dir.
  std::string store_table;
  std::string store_key;
  int64_t store_lease_seconds = 30;
  std::optional<int64_t> buffer_threshold_bytes;
  std::optional<int64_t> buffer_threshold_seconds;
  // Disk backpressure (pipeline setting → SKIPPR_DISK_* environment → the seed's default; see
  // pipeline::ResolveDiskRule and docs/config.md).
  std::optional<int64_t> disk_min_free_bytes;
  std::optional<int64_t> disk_pause_at_percent;
  std::optional<int64_t> disk_resume_at_percent;
  std::optional<int64_t> disk_wait_seconds;
  bool chaos_mode = false;
  SourceMark mark;

  std::string StateDir() const;  // <data_dir>/<name>
};

enum class StorageMode { kLocal, kS3 };
// Where WAL segments live (WAL_STORAGE, a property of the machine, not a YAML key).
enum class WalStorage { kDisk, kS3 };

struct EngineSettings {
  std::string workspace = "default";
  std::string tenant = "default";
  StorageMode storage_mode = StorageMode::kLocal;
  std::optional<std::string> skippr_s3_bucket;
  std::optional<std::string> wal_s3_bucket;
  WalStorage wal_storage = WalStorage::kDisk;
  std::string store_type = "lmdb";  // or "dynamodb"
  std::optional<std::string> store_name;  // the DynamoDB table
  // How long a dynamodb store's writer lease outlives its holder's last heartbeat
  // (SKIPPR_STORE_LEASE_SECONDS; the reference's 30 s).
  int64_t store_lease_seconds = 30;
};

struct Config {
  std::string path;  // the file loaded; empty when none was found (an empty configuration)
  EngineSettings skippr;
  std::map<std::string, PipelineConfig> pipelines;
  std::map<std::string, ConnectorEntry> data_sources;
  std::map<std::string, ConnectorEntry> data_sinks;
  std::map<std::string, ConnectorEntry> deadletter_sinks;
  // Variables that .env / .env.local beside the file contribute over the shell: the CLI exports
  // them so that DATA_DIR and friends set there apply to the whole run.
  std::map<std::string, std::string> dotenv_overrides;

  const PipelineConfig* FindPipeline(const std::string& name) const;
};

// ---------------------------------------------------------------------------------------------
// Loading

// The search order: explicit path (--config), SKIPPR_CONFIG_FILE, then ./skippr.yml, ./skippr.yaml
// in `working_dir` (empty: the process's, and paths stay relative so messages read
// "skippr.yml:3:5"). An explicit path that does not exist falls back to the search (as the public
// product does) and `fell_back_from` says so. nullopt `path`: no file anywhere (an empty
// configuration).
struct ConfigLocation {
  std::optional<std::string> path;
  std::optional<std::string> fell_back_from;
};
ConfigLocation FindConfigFile(const std::optional<std::string>& explicit_path,
                              const Environment& shell, const std::string& working_dir);

// Loads and validates a file: its .env and .env.local (beside it) layer over `shell`.
Result<Config> LoadConfigFile(const std::string& path, const Environment& shell);
// The same for text that is (or will be) the file at `path` — the Python module's Session, whose
// Config may hold changes not saved yet — resolving the references under `resolved_key_paths`
// (empty: all), as ParseConfig does.
Result<Config> ParseConfigAt(const std::string& text, const std::string& path,
                             const Environment& shell,
                             const std::vector<std::string>& resolved_key_paths = {});

// The key paths one pipeline runs with: the skippr: block, the pipeline, its source and its sinks
// ("skippr", "pipelines.orders", "data_sources.pg", ...). A pipeline the config does not have
// yields none.
std::vector<std::string> PipelineKeyPaths(const Config& config, const std::string& pipeline);

// What the loader does with a `${NAME}` reference.
enum class ReferenceMode {
  kResolve,  // replace it by the variable's value; unset or empty is an error
  // Keep it unresolved, checking only its grammar, as if every variable were set: a file checked
  // before it is saved (the Python module's Config.save), whose variables belong to the machine
  // that will run it. A setting that is a number, flag or choice reads a placeholder (its least
  // allowed value), so such a Config is for checking only, never for running.
  kKeep,
};

// Parses YAML text (tests, and files already read). `display_name` prefixes every error;
// `environment` is the complete view (.env layering already applied). With kResolve and
// `resolved_key_paths` not empty, only the references at or under those key paths
// ("pipelines.orders", "data_sources.pg") are resolved; the others are kept as kKeep keeps them.
Result<Config> ParseConfig(const std::string& yaml_text, const std::string& display_name,
                           const Environment& environment,
                           ReferenceMode references = ReferenceMode::kResolve,
                           const std::vector<std::string>& resolved_key_paths = {});

// One problem found across entries (for doctor, which reports them as failed checks, and for sync,
// which refuses to start): two lake sinks on one (warehouse, table_namespace), and the like.
struct ConfigProblem {
  std::string message;  // "skippr.yml:12:5: data_sinks.b: ..." — already names the place
};
std::vector<ConfigProblem> CheckWholeConfig(const Config& config);

// Parses a .env file's text: NAME=value lines, `export ` prefixes, # comments, single or double
// quotes. Errors name display_name:line.
Result<std::map<std::string, std::string>> ParseDotenv(const std::string& text,
                                                       const std::string& display_name);

// Pipeline names are 1 to kMaxPipelineNameBytes characters of [A-Za-z0-9_-], not starting with
// '-': a name is a directory under DATA_DIR and a SQL schema, so no '/', '.', '..' or spaces can
// put state outside DATA_DIR or nest one pipeline inside another. InvalidConfig saying the rule.
// Names that differ only in case (or in '-' against '_') are refused by the loader too (CleanName).
inline constexpr size_t kMaxPipelineNameBytes = 64;
Status CheckPipelineName(std::string_view name);

// Reserved pipeline names (deadletters, wal, _skippr, skippr, metadata) are compared after
// cleaning: lowercase, anything outside [a-z0-9_] becomes '_'.
std::string CleanName(const std::string& name);

}  // namespace skippr::config
