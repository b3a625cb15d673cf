// Destinations (DESIGN.md §6): where a pipeline's committed WAL slices land, exactly once. One
// `Sink` interface, one implementation per connector kind, chosen by OpenSink from the sink's
// config entry, whose settings each kind parses once:
//   SkipprLake, and Duckdb with `warehouse:`  Iceberg tables (lake/), read by query as Parquet;
//   Duckdb with `database:`                   tables of a native DuckDB database file;
//   Postgres                                  tables of a PostgreSQL schema (query shows the WAL).
// The landing protocol around a sink (plan in the store, Land, record and reclaim) lives in
// pipeline/; a sink only has to make a replayed landing id a no-op (docs/formats/landing.md).
#pragma once

#include <compare>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.hpp"
#include "core/batch.hpp"
#include "core/env.hpp"
#include "core/status.hpp"
#include "query/query.hpp"
#include "schema/schema.hpp"

namespace skippr::sinks {

// One slice of one WAL segment.
struct SliceRef {
  uint64_t segment_id = 0;
  uint32_t ordinal = 0;
  friend auto operator<=>(const SliceRef&, const SliceRef&) = default;
};

// The slices of one namespace that land as one commit of a sink. The id depends only on the
// pipeline, its store's instance id, the namespace, the slices and how they land, so the landing
// planned before a crash is recognised after it — and a landing of a new store (slice ids restart
// from 1 when DATA_DIR is lost) never matches one an earlier store committed.
struct Landing {
  std::string landing_id;
  std::string namespace_name;
  std::vector<SliceRef> slices;  // sorted, unique
  // write_policy replace_table: the landing's rows replace every row of the table.
  bool replaces_table = false;
  // merge_by_key, or a source's keyed change stream: the top-level columns that identify a row.
  // Per key the landing's last row in slice order (none after a CDC delete) replaces the table's.
  std::vector<std::string> key_columns;

  std::vector<uint64_t> SegmentIds() const;  // sorted, unique
};
Landing PlanLanding(std::string_view pipeline, std::string_view pipeline_instance,
                    std::string namespace_name, std::vector<SliceRef> slices,
                    bool replaces_table = false, std::vector<std::string> key_columns = {});

// What a sink committed last for a namespace, as the store records it with each landing
// ("sink_commit"): where readers find the landed rows. Lake tables: the metadata file and the
// snapshot id. A DuckDB database: the database file and the number of landings of the table.
struct CommitId {
  std::string location;
  int64_t version = 0;  // 0: nothing committed
  friend bool operator==(const CommitId&, const CommitId&) = default;
};

struct LandingOutcome {
  CommitId commit;                 // the sink's commit holding this landing's rows
  bool was_landed_before = false;  // a replay: the sink holds it already, nothing written
  int64_t rows = 0;                // in the landing's slices
  int64_t rows_written = 0;        // rows inserted: `rows`, or per key its last row
  int64_t rows_deleted = 0;        // earlier rows a merge or a CDC delete removed
};

struct MaintenanceOutcome {
  bool committed = false;  // false: nothing needed doing
  CommitId commit;         // when committed: the same rows, rewritten
  int64_t data_files_rewritten = 0;
  int64_t data_files_written = 0;
  int64_t delete_files_removed = 0;
  int64_t rows_written = 0;
};

enum class WritePolicy { kAppend, kReplaceTable, kMergeByKey };
std::string_view WritePolicyName(WritePolicy policy);

// What a kind of sink can do, checked when a pipeline opens it.
struct Capabilities {
  std::vector<WritePolicy> write_policies;
  // Lands a source's keyed change stream (PostgreSQL CDC) as the source's current rows.
  bool lands_final_state = false;
  // WriteStream / LandStreamed: an append landing written while its slices are still being
  // committed; `streams_replacing`: a landing that replaces the table too.
  bool streams = false;
  bool streams_replacing = false;
  // A landing commits atomically with its landing id (a replay finds it).
  bool is_transactional = true;
  bool Supports(WritePolicy policy) const;
};

// How a pipeline lands in a sink: its entry's landing settings and the source's key.
struct LandingPolicy {
  WritePolicy write_policy = WritePolicy::kAppend;
  uint64_t target_file_bytes = 128 << 20;  // of uncompressed column data per landing
  double commit_interval_seconds = 60;
  // merge_by_key: the source's primary_key columns, and where they are set
  // ("data_sources.<name>.<Kind>.primary_key"), for messages.
  std::vector<std::string> key_columns;
  std::string key_columns_setting;
  bool replaces_table() const { return write_policy == WritePolicy::kReplaceTable; }
};

class Sink {
 public:
  virtual ~Sink() = default;
  virtual const Capabilities& capabilities() const = 0;

  // Lands `batches` (the landing's slices in order; older schemas are projected onto the
  // namespace's current one, a field the table lacks added first) as one atomic commit, or
  // returns at once when the sink holds the landing id already. Durable when it returns.
  virtual Result<LandingOutcome> Land(const Landing& landing,
                                      const schema::NamespaceSchema& namespace_schema,
                                      const std::vector<std::shared_ptr<const Batch>>& batches) = 0;
  // Whether the sink holds `landing_id` for the namespace.
  virtual Result<bool> IsLanded(const std::string& namespace_name,
                                const std::string& landing_id) = 0;

  // Streaming (capabilities().streams): WriteStream writes every batch `next` hands out (nullptr
  // ends) where no reader sees it and returns their rows; LandStreamed commits them as `landing`,
  // whose slices they are. A replay after a crash lands through Land.
  using StreamedBatches = std::function<Result<std::shared_ptr<const Batch>>()>;
  virtual Result<int64_t> WriteStream(const schema::NamespaceSchema& namespace_schema,
                                      StreamedBatches next);
  virtual Result<LandingOutcome> LandStreamed(const Landing& landing,
                                              const schema::NamespaceSchema& namespace_schema,
                                              int64_t rows);

  // Keeps a merged table fast to read; the default has nothing to do.
  virtual Result<MaintenanceOutcome> Maintain(const schema::NamespaceSchema& namespace_schema,
                                              const LandingPolicy& policy);
};

// Who opens a sink: the pipeline (recorded with its landings) and the files it may touch.
struct SinkContext {
  std::string pipeline;
  std::string pipeline_instance;  // the store's instance id
  Env* env = Env::Default();
  // A local directory of the pipeline's for a sink's scratch files (a lake on S3 keeps its upload
  // spools and the local copies of its data files there). Deleting it loses nothing.
  std::string local_directory;
};

// The sink a config entry describes; `setting` names the entry for messages
// ("data_sinks.<name>.<Kind>"). NotSupported names a kind this build cannot land in.
Result<std::unique_ptr<Sink>> OpenSink(const SinkContext& context,
                                       const config::ConnectorConfig& entry,
                                       const std::string& setting);
// The entry's landing settings and the capabilities of its kind, without opening it.
LandingPolicy LandingPolicyOf(const config::ConnectorConfig& entry);
Result<Capabilities> CapabilitiesOf(const config::ConnectorConfig& entry,
                                    const std::string& setting);
// Whether query reads what the entry's sink landed (Iceberg tables, a DuckDB database) beside
// the live WAL; otherwise its view is the live WAL only (reference §8.1).
bool IsReadBack(const config::ConnectorConfig& entry);

// What `doctor` says of a sink entry: each check that holds, or fails and what to do. A kind
// without a server to reach says whether this build lands in it.
struct SinkCheck {
  bool ok = false;
  std::string message;
};
std::vector<SinkCheck> CheckSink(const config::ConnectorConfig& entry, const std::string& setting);

// What query reads of a namespace the entry's sink landed up to `commit` (version 0: nothing).
Result<query::LandedRows> ReadLanded(const SinkContext& context,
                                     const config::ConnectorConfig& entry,
                                     const std::string& namespace_name, const CommitId& commit);

// Whether what ReadLanded reads is the sink's current state (a DuckDB database's tables) rather
// than the commit recorded in the store: a reader then also needs to know which landings planned
// in its store snapshot the sink holds already (HoldsLanding), and must read the sink's state
// before it pins the store (query attaches the database first).
bool ReadsCurrentState(const config::ConnectorConfig& entry);
// The database file such a sink keeps (empty for others).
std::string DatabasePathOf(const config::ConnectorConfig& entry);
// Whether the entry's sink holds `landing_id` for the namespace, read without writing anything.
Result<bool> HoldsLanding(const config::ConnectorConfig& entry, const std::string& namespace_name,
                          const std::string& landing_id);

// OK when `key_columns` can key rows of a table with `fields`: at least one, none repeated, each a
// top-level primitive column other than float or double (NaN and -0.0 make equality ambiguous).
// Otherwise InvalidArgument naming the column, for the caller to prefix with where it was set.
Status CheckKeyColumns(const std::vector<std::string>& key_columns,
                       const std::vector<Field>& fields);

}  // namespace skippr::sinks
