// transform/: the only header other modules include from this module.
//
// transform.ops (ops.cpp) reshape batches before the WAL commit; transform.aggregates
// (aggregates.cpp) keep keyed running sums and counts over committed WAL slices in the store's
// stream_state family, in the same transaction as the processor's WAL cursor
// (seeds/materialised-views.txt, DESIGN.md §8).
#pragma once

#include <cstdint>
#include <memory>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "core/batch.hpp"
#include "core/status.hpp"
#include "query/query.hpp"
#include "schema/schema.hpp"
#include "store/store.hpp"
#include "wal/wal.hpp"

namespace skippr::transform {

// ===== transform.ops (ops.cpp) ================================================================
//
// The ops of one pipeline, run as ONE DuckDB statement per batch: each op is a SELECT over the
// previous one (rename/drop/select/cast/hash/default/derive: a column list; filter: WHERE), so
// DuckDB evaluates them vectorised. An op naming a field the batch does not have is skipped for
// that batch (schemas evolve: the field may arrive later), except that select and drop may not
// leave a batch without fields.
//
// The output schema is what readers see (schema::LoadSchema); the shaper keeps evolving the input
// schema (schema::LoadInputSchema). Output fields keep their ids by name: a field whose type
// changes by an Iceberg promotion keeps its id, one that changes otherwise gets a new id (its old
// values read NULL under the new one), new fields take ids after the namespace's last_field_id.

// Where each row of an input batch came from, parallel to its rows (Shaper keep_origins).
using RowOrigins = std::vector<schema::RecordOrigin>;

class OpsRunner {
 public:
  // `output` is the saved output schema whose field ids and schema ids the outputs continue;
  // `config_path` (skippr.yml) is named in errors beside each op's line.
  static Result<std::unique_ptr<OpsRunner>> Open(const config::PipelineConfig& pipeline,
                                                 schema::PipelineSchema output,
                                                 std::string config_path);
  ~OpsRunner();
  OpsRunner(const OpsRunner&) = delete;
  OpsRunner& operator=(const OpsRunner&) = delete;

  // Evolves the output schema of `input`'s namespace to what the ops make of `input`'s fields,
  // without rows (discover). Returns the change when the output schema changed.
  Result<std::optional<schema::NamespaceChange>> Evolve(const schema::NamespaceSchema& input);

  // Runs the ops over `input` (its namespace's output schema evolves as with Evolve; `change`
  // receives the change when it did). The result carries the output schema's fields and id; it
  // may hold fewer rows (filter), or none. A CDC sidecar is carried over (NotSupported with a
  // filter op, which could drop a change). A failure names the op (index, kind, config place) and,
  // when the op fails on a value, the first record it fails on (from `origins` when given).
  Result<Batch> Apply(Batch input, const RowOrigins* origins,
                      std::optional<schema::NamespaceChange>* change);

  // The output schema as evolved so far (every namespace seen, and those saved before).
  const schema::PipelineSchema& output_schema() const { return output_; }

 private:
  OpsRunner() = default;
  struct Stage;
  Result<std::vector<Stage>> PlanStages(const Batch& input) const;
  Status Register(const std::string& namespace_name, std::shared_ptr<const Batch> batch);
  Status DescribeFailure(const std::vector<Stage>& stages,
                         const std::shared_ptr<const Batch>& input, const RowOrigins* origins,
                         const Status& failure);
  Result<std::optional<schema::NamespaceChange>> ConformOutput(const std::string& namespace_name,
                                                               Batch& output);
  std::string OpPlace(size_t index) const;
  bool HasFilter() const;

  std::string pipeline_name_;
  std::string config_path_;
  std::vector<config::TransformOp> ops_;
  schema::PipelineSchema output_;
  std::unique_ptr<query::Engine> engine_;
};

// ===== end transform.ops ======================================================================

// =============================================================================================
// BEGIN transform.aggregates (aggregates.cpp) — materialised views. Layout in stream_state:
// docs/formats/aggregates.md.

// Where an aggregate's processor has got to: every row of every live segment before
// (segment_id, slice_ordinal, row_index) is applied. slice_ordinal == the segment's slice count
// means the whole segment is applied (the cursor has passed it).
struct AggregateCursor {
  uint64_t sequence = 0;  // the commit sequence number of segment_id
  uint64_t segment_id = 0;
  uint32_t slice_ordinal = 0;
  uint32_t row_index = 0;
};

// True when `cursor` has passed `segment` (every row of it is applied).
bool HasPassed(const std::optional<AggregateCursor>& cursor, const wal::SegmentEntry& segment);

// The cursor stored for `aggregate_id`; nullopt when the processor has applied nothing yet.
Result<std::optional<AggregateCursor>> ReadCursor(const store::ReadTransaction& read,
                                                  const std::string& aggregate_id);
Result<std::optional<AggregateCursor>> ReadCursor(const store::WriteTransaction& write,
                                                  const std::string& aggregate_id);

// Reclaim gating (DESIGN.md §6): true when every configured aggregate's cursor has passed
// `segment` (true when there are no aggregates). Read in the reclaiming transaction.
Result<bool> AggregatesHavePassed(const store::WriteTransaction& write,
                                  const std::vector<config::AggregateConfig>& aggregates,
                                  const wal::SegmentEntry& segment);

// How far an aggregate is behind the live WAL (`skipprd status`).
struct AggregateLag {
  std::string aggregate_id;
  uint64_t segments = 0;  // live segments not passed
  int64_t rows = 0;       // rows of those not applied yet
  uint64_t bytes = 0;     // file bytes of those segments
};
Result<AggregateLag> ReadLag(const store::ReadTransaction& read,
                             const config::AggregateConfig& aggregate);

// One group of an aggregate as `skipprd aggregates show` prints it: key values and measure values
// as text (NULL as nullopt), in the order of key_fields and of the measures (sorted by name).
// Integer and decimal sums are exact ("1234", "12.30"); double sums print the shortest text that
// reads back as the same double.
struct AggregateGroup {
  std::vector<std::optional<std::string>> keys;
  std::vector<std::optional<std::string>> measures;
  int64_t rows = 0;  // rows in the group now (what count("*") would say)
};

struct AggregateSnapshot {
  std::string aggregate_id;
  bool is_current = false;  // the stored config hash equals the configured one
  std::optional<AggregateCursor> cursor;
  std::vector<AggregateGroup> groups;  // in key order
};

// Reads an aggregate's groups from one snapshot.
Result<AggregateSnapshot> ReadAggregate(const store::ReadTransaction& read,
                                        const config::AggregateConfig& aggregate);

// An aggregate's groups in key order, read a chunk at a time from one snapshot: what `aggregates
// verify` scans as a table, holding one chunk and the first key of each, never the aggregate.
class AggregateGroupChunks {
 public:
  // One pass over the group keys (values not decoded) counts them and notes where each chunk of
  // `groups_per_chunk` starts. `read` must outlive the result.
  static Result<AggregateGroupChunks> Open(const store::ReadTransaction& read,
                                           const config::AggregateConfig& aggregate,
                                           int64_t groups_per_chunk);

  bool is_current() const { return is_current_; }  // the stored config hash is the configured one
  int64_t group_count() const { return group_count_; }
  const std::vector<int64_t>& chunk_sizes() const { return chunk_sizes_; }
  // The groups of chunk `index`. Uses the read transaction: one thread at a time.
  Result<std::vector<AggregateGroup>> Read(size_t index) const;

 private:
  AggregateGroupChunks(const store::ReadTransaction& read, const config::AggregateConfig& aggregate)
      : read_(&read), aggregate_(&aggregate) {}

  const store::ReadTransaction* read_;
  const config::AggregateConfig* aggregate_;
  bool is_current_ = false;
  std::string prefix_;
  int64_t group_count_ = 0;
  std::vector<std::string> chunk_starts_;
  std::vector<int64_t> chunk_sizes_;
};

// Where an aggregate rebuilt after the WAL was reclaimed starts (DESIGN.md §8): the rows of the
// landed tables, as inserts (snapshot changes for keyed namespaces), and the live slices those
// tables already hold (the replay skips them) — both from one store snapshot. The pipeline
// supplies it; it reads the lake.
struct LandedBaseline {
  // Hands the landed rows to `consume` a bounded batch at a time (namespace_name set), stopping
  // at the first error: a table is streamed, never held.
  using BatchConsumer = std::function<Status(const Batch&)>;
  std::function<Status(const BatchConsumer& consume)> for_each_batch;
  std::set<std::pair<uint64_t, uint32_t>> landed_slices;  // (segment id, slice ordinal)
};
using LandedBaselineProvider = std::function<Result<LandedBaseline>()>;

struct ProcessorOptions {
  // A store transaction (which also writes the cursor) ends after this many rows, or once its
  // rows touched this many groups and entities, whichever comes first. Tests use a few rows to
  // commit, and crash, often.
  int64_t rows_per_transaction = 1'048'576;
  size_t keys_per_transaction = 262'144;
  Env* wal_env = Env::Default();  // the segment files' I/O (an S3Env with WAL_STORAGE=s3)
};

// The single worker that applies committed WAL slices to every aggregate of a pipeline. Not
// thread-safe: one thread calls it. It writes only its aggregates' stream_state prefixes.
class AggregateProcessor {
 public:
  // `wal_directory` holds the pipeline's segment files. Aggregates whose config hash changed are
  // reset (their prefix deleted) and rebuilt from the start of the WAL — or, once the WAL was
  // reclaimed behind a landing, from `landed_baseline` and then the live WAL (NotSupported
  // without one); state of aggregates no longer configured is deleted.
  static Result<std::unique_ptr<AggregateProcessor>> Open(
      store::Store& store, std::string wal_directory,
      std::vector<config::AggregateConfig> aggregates, ProcessorOptions options = {},
      LandedBaselineProvider landed_baseline = {});

  // Applies every committed row after each aggregate's cursor, in bounded store transactions that
  // each write the state and the cursor. Returns the rows applied. Safe to call again at any time,
  // and after a crash at any point: a replay starts at the cursor.
  Result<int64_t> ProcessCommitted();

  const std::vector<config::AggregateConfig>& aggregates() const { return aggregates_; }

 private:
  AggregateProcessor(store::Store& store, std::string wal_directory,
                     std::vector<config::AggregateConfig> aggregates, ProcessorOptions options)
      : store_(store),
        wal_directory_(std::move(wal_directory)),
        aggregates_(std::move(aggregates)),
        options_(options) {}
  Status ResetChangedAggregates();
  // Applies the landed baseline of every aggregate whose rebuild is pending (its reset marked it).
  Status LoadPendingBaselines();
  Result<int64_t> ProcessAggregate(const config::AggregateConfig& aggregate);

  store::Store& store_;
  std::string wal_directory_;
  std::vector<config::AggregateConfig> aggregates_;
  ProcessorOptions options_;
  LandedBaselineProvider landed_baseline_;
};

// END transform.aggregates
// =============================================================================================

}  // namespace skippr::transform
