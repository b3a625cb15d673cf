// Pipeline actions: the lifecycle steps that tie config, store, schema and sources together
// (discover today; sync as the WAL arrives). The CLI and the Python module both call these.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "core/disk.hpp"
#include "core/status.hpp"
#include "query/query.hpp"
#include "schema/schema.hpp"
#include "sources/sources.hpp"
#include "store/store.hpp"
#include "transform/transform.hpp"
#include "wal/wal.hpp"

namespace skippr::pipeline {

// A pipeline's state on disk: <data_dir>/<pipeline>/ holds writer.lock, store/, wal/ and spill/.
class PipelineState {
 public:
  // Takes the writer lease, then opens (creating) the store. A second writer gets
  // "pipeline writer lease unavailable ...". `env` does the files skipprd writes itself: the
  // lease, the WAL segments, the lake's files (tests pass a fault-injecting one).
  static Result<PipelineState> OpenForWriting(const config::PipelineConfig& pipeline,
                                              Env* env = Env::Default());
  // Opens the store without the lease (readers never block the writer). NotFound, saying to run
  // discover or sync first, when the pipeline has no state yet.
  static Result<PipelineState> OpenForReading(const config::PipelineConfig& pipeline,
                                              Env* env = Env::Default());

  store::Store& store() { return *store_; }
  Env& env() const { return *env_; }
  const std::string& directory() const { return directory_; }
  // Where the WAL segments are, and the Env they are read and written through: <state dir>/wal
  // through `env`, or with WAL_STORAGE=s3 a directory of the bucket per store instance (a store
  // rebuilt from nothing never touches an earlier one's segments) through an S3Env.
  std::string wal_directory() const;
  Env& wal_env() const { return wal_s3_env_ ? *wal_s3_env_ : *env_; }
  // Where a source spills what it cannot commit yet; only this process's, emptied as it starts.
  std::string scratch_directory() const { return directory_ + "/spill"; }
  // The sinks' local scratch files (sinks::SinkContext::local_directory): a cache, deletable.
  std::string sink_directory() const { return directory_ + "/sink"; }

 private:
  Status OpenWalEnv(const config::PipelineConfig& pipeline);

  std::string directory_;
  Env* env_ = Env::Default();
  std::string wal_s3_uri_;
  std::unique_ptr<Env> wal_s3_env_;
  std::optional<store::WriterLease> lease_;
  std::unique_ptr<store::Store> store_;
};

// Records read per file (partition) when discover samples a source.
inline constexpr uint64_t kDiscoverSampleRecordsPerPartition = 100'000;
// The smaller sample of the discover that sync runs first on a pipeline without a schema: sync
// evolves the schema with every record it reads anyway, so this pass only names the first shape
// (DuckDB's read_json samples 20,480 records the same way).
inline constexpr uint64_t kSyncDiscoverSampleRecordsPerPartition = 20'480;
// Deadletters described one by one in results and logs; the rest are counted.
inline constexpr size_t kDeadlettersDescribed = 100;

struct DiscoverProgress {
  uint64_t records = 0;
  uint64_t deadletters = 0;
  uint64_t bytes = 0;
};

struct DiscoverResult {
  std::vector<schema::NamespaceChange> changes;  // namespaces discovered or evolved by this run
  schema::PipelineSchema schema;                 // the whole schema after the run
  uint64_t records = 0;
  uint64_t bytes = 0;
  uint64_t deadletter_count = 0;
  std::vector<schema::Deadletter> deadletters;  // the first kDeadlettersDescribed
};

// Samples the pipeline's source, infers every field (nested included), and saves the evolved
// schema in the store. Never writes to a destination; re-runnable, adding what is new.
Result<DiscoverResult> Discover(const config::Config& config,
                                const config::PipelineConfig& pipeline,
                                const std::function<void(const DiscoverProgress&)>& on_progress);
// The same, on a pipeline whose lease and store the caller already holds (sync runs it first).
Result<DiscoverResult> Discover(
    const config::Config& config, const config::PipelineConfig& pipeline, PipelineState& state,
    const std::function<void(const DiscoverProgress&)>& on_progress,
    uint64_t sample_records_per_partition = kDiscoverSampleRecordsPerPartition);

// When sync commits what it has buffered (pipeline setting → environment → default):
//   bytes   BUFFER_THRESHOLD_BYTES (10 MiB), capped by the target segment size WAL_BYTES_PER_FILE
//           (default: the buffer size, clamped to 4–64 MiB), since one commit writes one segment;
//   seconds BUFFER_THRESHOLD_SECONDS (60), capped by WAL_MAX_DELAY_SECONDS (60), the age after
//   which
//           an undersized segment is committed anyway.
struct BufferThresholds {
  uint64_t bytes = 10 << 20;
  double seconds = 60;
};
BufferThresholds ResolveBufferThresholds(const config::PipelineConfig& pipeline);

// Disk backpressure for a pipeline (seeds: pause below 5 GB free or at 90 % used, resume at 80 %):
// each value from the pipeline setting, else its environment variable, else the default —
//   disk_min_free_bytes     SKIPPR_DISK_MIN_FREE_BYTES     5000000000
//   disk_pause_at_percent   SKIPPR_DISK_PAUSE_AT_PERCENT   90
//   disk_resume_at_percent  SKIPPR_DISK_RESUME_AT_PERCENT  80
//   disk_wait_seconds       SKIPPR_DISK_WAIT_SECONDS       600: how long one sync pass waits for
//                           pressure to clear before it fails (exit 1); 0 fails at once.
struct DiskRule {
  DiskThresholds thresholds;
  double max_wait_seconds = 600;
};
// InvalidConfig naming the variable when an environment value is not a number in range, or the
// resume threshold is not below the pause threshold.
Result<DiskRule> ResolveDiskRule(const config::PipelineConfig& pipeline);

struct SyncProgress {
  uint64_t records_read = 0;
  uint64_t rows_committed = 0;
  uint64_t bytes_read = 0;
  uint64_t segments_committed = 0;
  uint64_t deadletters = 0;
  bool is_paused_for_disk = false;
  std::string disk_pressure;  // while paused: the rule that holds (DescribeDiskPressure)
  double paused_seconds = 0;  // how long this pause has lasted
};

struct SyncResult {
  bool ran_discover = false;
  std::vector<schema::NamespaceChange> changes;       // namespaces that evolved during the run
  std::map<std::string, uint64_t> rows_by_namespace;  // rows committed to the WAL this run
  uint64_t records_read = 0;
  uint64_t rows_committed = 0;
  uint64_t segments_committed = 0;
  uint64_t deadletter_count = 0;
  std::vector<schema::Deadletter> deadletters;  // the first kDeadlettersDescribed
  wal::RecoveryReport recovery;
  uint64_t landings = 0;  // data sink snapshots committed (or found committed) this run
  int64_t rows_landed = 0;
  uint64_t deadletters_committed = 0;  // to the WAL, as rows of <pipeline>.deadletters
  uint64_t deadletters_landed = 0;     // in the deadletter sink (this run's, and earlier runs')
  uint64_t deadletters_discarded = 0;  // without a deadletter sink, as their segments landed
  uint64_t segments_reclaimed = 0;
  int64_t rows_aggregated = 0;  // rows the transform.aggregates processor applied (all aggregates)
};

struct SyncOptions {
  // A change stream (the Postgres source's CDC) follows the source instead of ending when caught
  // up: committing each time it is, until cdc_idle_timeout_seconds of idleness (forever without).
  // `sync` without --once sets it when it runs one pipeline.
  bool follows_changes = false;
  // Set from another thread to end the pass early and cleanly (the Python module's Ctrl-C): the
  // source stops being read between batches — a change stream at the next transaction boundary —
  // what was read is committed, and the pass finishes as if the source had ended.
  const std::atomic<bool>* stop_requested = nullptr;
};

// One pass: recover the WAL, run discover when no schema exists, read the source from its committed
// positions, commit batches to the WAL (with their positions and schema changes in the same store
// transaction) whenever the buffer threshold is reached (or a change stream has caught up), until
// the source has nothing more.
Result<SyncResult> SyncOnce(const config::Config& config, const config::PipelineConfig& pipeline,
                            const std::function<void(const SyncProgress&)>& on_progress,
                            const SyncOptions& options = {});

// Replaces one namespace's top-level fields (`skipprd metadata apply`): fields keep their ids by
// name, new names get new ids, the schema id advances.
Result<schema::NamespaceSchema> ApplyNamespaceFields(const config::PipelineConfig& pipeline,
                                                     const std::string& namespace_name,
                                                     std::vector<Field> fields);

// The saved schema (empty when discover has not run).
Result<schema::PipelineSchema> ReadSchema(const config::PipelineConfig& pipeline);

// The last sync pass's outcome, recorded in the catalog family (key Text("last_run")).
struct LastRun {
  bool ok = false;
  int64_t finished_unix_micros = 0;
  uint64_t records_read = 0;
  uint64_t rows_committed = 0;
  uint64_t segments_committed = 0;
  uint64_t deadletters = 0;
  std::string error;
};

// Every deadletter a pipeline committed: still in the WAL, landed in its deadletter sink, or
// discarded (a data sink and no deadletter sink). committed = live + landed + discarded.
struct DeadletterCounts {
  uint64_t committed = 0;
  uint64_t live = 0;
  uint64_t landed = 0;
  uint64_t discarded = 0;
};

struct PipelineStatus {
  std::string pipeline;
  bool has_state = false;  // false: never discovered or synced
  std::string instance_id;  // the store's pipeline-instance id (store::StoreIdentity)
  bool has_sink = false;
  std::optional<std::string> deadletter_sink;  // the deadletter_sinks entry
  DeadletterCounts deadletters;
  size_t live_segments = 0;
  uint64_t live_bytes = 0;
  int64_t live_rows = 0;  // data rows; deadletters are counted apart
  std::optional<int64_t>
      oldest_live_unix_micros;  // the oldest batch not landed (all, without a sink)
  sources::SourcePositions positions;
  std::optional<DiskUsage> disk;
  DiskRule disk_rule;
  bool is_under_disk_pressure = false;
  std::string disk_pressure;  // the rule that holds, when under pressure
  std::optional<LastRun> last_run;
  std::vector<transform::AggregateLag> aggregate_lags;  // per transform.aggregates entry
};

// What `skipprd status` shows, read from one snapshot without taking the lease.
Result<PipelineStatus> ReadStatus(const config::PipelineConfig& pipeline);

// One finding of `skipprd doctor`.
struct DoctorCheck {
  bool ok = true;
  std::string message;
  std::optional<std::string> suggested_fix_command;  // a shell command that fixes it
};

// Everything `skipprd doctor` checks of a configuration: pipelines, sources and their servers,
// whole-configuration rules, and each data directory (writable, disk space). `default_data_dir` is
// checked when no pipeline names one.
std::vector<DoctorCheck> RunDoctorChecks(const config::Config& config,
                                         const std::string& default_data_dir);

// The query schema of aggregates' stored groups: `_skippr` is a reserved pipeline name, so no
// pipeline's tables are there.
inline constexpr std::string_view kAggregateGroupsSchema = "_skippr";

// Registers an aggregate's stored groups in `engine` as the table _skippr."<aggregate id>":
// key_<i> and measure_<j> as text, as the store holds them (sums exact), a chunk of groups read
// from `chunks`' pinned snapshot each time a scan reaches it. `chunks` (and the read transaction
// it reads) must stay open while statements read the table.
Status RegisterAggregateGroups(query::Engine& engine, const config::AggregateConfig& aggregate,
                               std::shared_ptr<const transform::AggregateGroupChunks> chunks);

// What SQL in `skipprd query` may touch besides the pipelines' tables.
struct QueryAccess {
  // false (the default): only the tables — DuckDB's external access off, the configuration
  // locked, only the SkipprLake sinks' table data directories readable (query::EngineOptions).
  // true: `--allow-file-access`, DuckDB as it comes.
  bool allows_file_access = false;
};

// A query engine with every namespace of every synced pipeline as the table <pipeline>.<namespace>:
// in one pinned store snapshot per pipeline, the rows of the landed Iceberg snapshot recorded there
// plus the live WAL slices not landed in it, projected onto the current schema. Opening lists the
// tables; each is bound when a statement first reads it (query::TableBinder), so a table that
// cannot be read (a damaged segment, an unreadable landed snapshot, columns DuckDB refuses) fails
// only the statements that read it, naming it.
Result<std::unique_ptr<query::Engine>> OpenQueryEngine(const config::Config& config,
                                                       const QueryAccess& access = {});

}  // namespace skippr::pipeline
