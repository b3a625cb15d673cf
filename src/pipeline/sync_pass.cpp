// One sync pass: source → shaper → (ops) → WAL commit, with landing and the aggregates beside it.
#include "pipeline/sync_pass.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "core/check.hpp"
#include "core/crash.hpp"
#include "core/thread_priority.hpp"
#include "pipeline/disk_gate.hpp"
#include "pipeline/landing.hpp"
#include "pipeline/shaping.hpp"

namespace skippr::pipeline::internal {

namespace {

// Small source batches: their records are shaped into columns and freed while still in cache; the
// commit thresholds decide how much is buffered before a segment is written.
constexpr uint64_t kSourceBatchBytes = 1 << 20;
constexpr uint64_t kSourceBatchRecords = 4096;
// Reading and parsing overlap shaping and committing: a second core works while this one does.
constexpr size_t kSourceBatchesAhead = 8;
// The disk is checked every this many source batches.
constexpr uint64_t kBatchesPerDiskCheck = 16;

int64_t NowMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// When the sync thread asks for a landing round: at the smaller size and interval of the sinks
// the pipeline lands in.
sinks::LandingPolicy LandingTrigger(const PipelineSinks& sinks) {
  if (!sinks.data) return sinks.deadletter_policy;
  if (!sinks.deadletters) return sinks.data_policy;
  sinks::LandingPolicy trigger = sinks.data_policy;
  trigger.target_file_bytes =
      std::min(trigger.target_file_bytes, sinks.deadletter_policy.target_file_bytes);
  trigger.commit_interval_seconds =
      std::min(trigger.commit_interval_seconds, sinks.deadletter_policy.commit_interval_seconds);
  return trigger;
}

std::string PositionsJson(const sources::SourcePositions& positions) {
  nlohmann::json json = nlohmann::json::object();
  for (const auto& [partition, position] : positions) {
    json[partition] = {{"records_consumed", position.records_consumed},
                       {"is_closed", position.is_closed}};
  }
  // Partitions are file paths, which need not be UTF-8; this copy is for people to read.
  return json.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// What the sync thread seals for one WAL commit: the shaped batches, the source positions they
// reach and the namespaces whose schema changed (as they are at the seal).
struct SealedCommit {
  std::vector<Batch> batches;
  sources::SourcePositions positions;
  std::vector<schema::NamespaceChange> changes;
  std::vector<schema::NamespaceSchema> changed_schemas;  // parallel to `changes`
  // With transform.ops: the shaper's schemas that changed (`changes` are then the output's).
  std::vector<schema::NamespaceSchema> changed_input_schemas;
  uint64_t buffered_bytes = 0;  // what the batches weigh: SyncPass::BufferedBytesOf, summed
  int64_t deadletter_rows = 0;  // the rows of the last batch, when it is the deadletters one
};

// Commits sealed batches to the WAL on a thread of its own, in the order they were sealed, while
// the sync thread shapes the next ones: encoding, compression and the two fsyncs of a commit
// overlap shaping. At most one sealed commit waits; Submit blocks beyond that.
class Committer {
 public:
  // Runs on the committer thread after each commit; an error stops the committer.
  using OnCommitted = std::function<Status(SealedCommit&, const wal::CommitInfo&)>;

  Committer(wal::Wal& wal, OnCommitted on_committed)
      : wal_(wal), on_committed_(std::move(on_committed)), thread_([this] { Run(); }) {}
  ~Committer() {
    {
      std::lock_guard lock(mutex_);
      is_stopping_ = true;
    }
    changed_.notify_all();
    thread_.join();  // a commit in progress completes; one still waiting is dropped
  }
  Committer(const Committer&) = delete;
  Committer& operator=(const Committer&) = delete;

  // Hands `commit` over; returns the error that stopped the committer, if any.
  Status Submit(SealedCommit commit) {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [this] { return !waiting_ || !failure_.ok(); });
    SKIPPR_RETURN_IF_ERROR(failure_);
    waiting_ = std::move(commit);
    lock.unlock();
    changed_.notify_all();
    return Status::OK();
  }

  // Waits until everything handed over is committed; returns the first error.
  Status Drain() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [this] { return (!waiting_ && !is_committing_) || !failure_.ok(); });
    return failure_;
  }

 private:
  void Run() {
    while (true) {
      SealedCommit commit;
      {
        std::unique_lock lock(mutex_);
        changed_.wait(lock, [this] { return waiting_.has_value() || is_stopping_; });
        if (is_stopping_) return;
        commit = std::move(*waiting_);
        waiting_.reset();
        is_committing_ = true;
      }
      changed_.notify_all();
      Status status = CommitOne(commit);
      {
        std::lock_guard lock(mutex_);
        is_committing_ = false;
        if (!status.ok()) failure_ = std::move(status);
      }
      changed_.notify_all();
      if (!failure().ok()) return;
    }
  }

  Status CommitOne(SealedCommit& commit) {
    CrashPoint("sync.before_commit");
    SKIPPR_ASSIGN_OR_RETURN(
        wal::CommitInfo info,
        wal_.Commit(commit.batches, PositionsJson(commit.positions),
                    [&](store::WriteTransaction& write) {
                      SKIPPR_RETURN_IF_ERROR(sources::SavePositions(write, commit.positions));
                      for (const schema::NamespaceSchema& changed : commit.changed_schemas) {
                        SKIPPR_RETURN_IF_ERROR(schema::SaveNamespace(write, changed));
                      }
                      for (const schema::NamespaceSchema& changed : commit.changed_input_schemas) {
                        SKIPPR_RETURN_IF_ERROR(schema::SaveInputNamespace(write, changed));
                      }
                      return Status::OK();
                    }));
    CrashPoint("sync.after_commit");
    return on_committed_(commit, info);
  }

  Status failure() {
    std::lock_guard lock(mutex_);
    return failure_;
  }

  wal::Wal& wal_;
  const OnCommitted on_committed_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::optional<SealedCommit> waiting_;
  bool is_committing_ = false;
  bool is_stopping_ = false;
  Status failure_;
  std::thread thread_;  // last: starts once the members above exist
};

// Replaces the sealed (input) batches by the ops' output; the output schemas that changed become
// the commit's changes. Batches the ops empty (filter) are left out.
Status ApplyOps(transform::OpsRunner& ops, SealedCommit& sealed,
                std::vector<transform::RowOrigins>& origins) {
  SKIPPR_CHECK(origins.size() == sealed.batches.size());
  std::vector<Batch> outputs;
  sealed.changes.clear();
  sealed.changed_schemas.clear();
  for (size_t i = 0; i < sealed.batches.size(); ++i) {
    std::optional<schema::NamespaceChange> change;
    SKIPPR_ASSIGN_OR_RETURN(Batch output,
                            ops.Apply(std::move(sealed.batches[i]), &origins[i], &change));
    if (change) {
      sealed.changed_schemas.push_back(ops.output_schema().namespaces.at(change->namespace_name));
      sealed.changes.push_back(std::move(*change));
    }
    if (output.num_rows > 0) outputs.push_back(std::move(output));
  }
  sealed.batches = std::move(outputs);
  return Status::OK();
}

// One pass, step by step. Threads: this one reads, shapes and seals; the Committer writes the
// WAL and calls OnCommitted; the lander and the aggregator work on their own.
class SyncPass {
 public:
  SyncPass(const config::Config& config, const config::PipelineConfig& pipeline,
           PipelineState& state, const std::function<void(const SyncProgress&)>& on_progress,
           const SyncOptions& options)
      : config_(config),
        pipeline_(pipeline),
        state_(state),
        on_progress_(on_progress),
        options_(options) {}

  Result<SyncResult> Run() {
    SKIPPR_RETURN_IF_ERROR(RecoverAndStartBackgroundWork());
    // The sinks open (a DuckDB instance, their tables' metadata) on a thread of their own while
    // the schema is prepared (a first sync discovers it) and the source starts reading: neither
    // needs them. A sink that cannot open is still the error reported first. The thread takes
    // landing's lower priority first: DuckDB's workers, started as it opens, inherit it.
    std::future<Result<PipelineSinks>> sinks = std::async(std::launch::async, [this] {
      LowerThisThreadsPriority();
      return OpenSinks(config_, pipeline_,
                       {pipeline_.name, state_.store().identity().instance_id, &state_.env(),
                        state_.sink_directory()});
    });
    landing_policy_ = ResolveLandingPolicy(config_, pipeline_);
    Status prepared = PrepareShaping();
    if (prepared.ok()) prepared = OpenSource();
    SKIPPR_RETURN_IF_ERROR(StartLanding(sinks.get()));
    SKIPPR_RETURN_IF_ERROR(prepared);
    SKIPPR_RETURN_IF_ERROR(Ingest());
    SKIPPR_RETURN_IF_ERROR(Finish());
    return std::move(result_);
  }

 private:
  // The WAL recovered and the aggregates started beside ingest, which never waits for them.
  // Landing starts with the sinks (StartLanding); its first round lands what an earlier run
  // committed and did not land.
  Status RecoverAndStartBackgroundWork() {
    SKIPPR_ASSIGN_OR_RETURN(const DiskRule disk_rule, ResolveDiskRule(pipeline_));
    disk_gate_.emplace(pipeline_.name, pipeline_.data_dir, disk_rule);
    SKIPPR_ASSIGN_OR_RETURN(wal_, wal::Wal::Open(state_.wal_directory(), pipeline_.name,
                                                 state_.store(), &result_.recovery,
                                                 {.env = &state_.wal_env()}));
    if (!pipeline_.transform.aggregates.empty()) {
      SKIPPR_ASSIGN_OR_RETURN(aggregator_, BackgroundAggregator::Start(state_, config_, pipeline_));
    }
    return Status::OK();
  }

  // Landing starts with the sinks open, before the first commit it may be asked for.
  Status StartLanding(Result<PipelineSinks> opened) {
    SKIPPR_ASSIGN_OR_RETURN(PipelineSinks sinks, std::move(opened));
    SKIPPR_CHECK(sinks.data_policy.key_columns == landing_policy_.key_columns);
    landing_trigger_ = LandingTrigger(sinks);
    if (sinks.has_any()) lander_.emplace(state_, pipeline_, std::move(sinks));
    last_landing_ = std::chrono::steady_clock::now();
    return Status::OK();
  }

  // The schema the shaper evolves (discover first when there is none), the ops, the positions.
  Status PrepareShaping() {
    schema::PipelineSchema saved;
    {
      SKIPPR_ASSIGN_OR_RETURN(store::ReadTransaction read, state_.store().BeginRead());
      SKIPPR_ASSIGN_OR_RETURN(saved, LoadShaperSchema(pipeline_, read));
      SKIPPR_ASSIGN_OR_RETURN(positions_, sources::LoadPositions(read));
    }
    if (saved.namespaces.empty()) {
      spdlog::info("sync {}: no schema yet, running discover first", pipeline_.name);
      SKIPPR_ASSIGN_OR_RETURN(DiscoverResult discovered,
                              Discover(config_, pipeline_, state_, nullptr,
                                       kSyncDiscoverSampleRecordsPerPartition));
      result_.ran_discover = true;
      saved = std::move(discovered.schema);
    }
    {
      // Discover returned the schema readers see; with ops the shaper starts from the input one.
      SKIPPR_ASSIGN_OR_RETURN(store::ReadTransaction read, state_.store().BeginRead());
      if (result_.ran_discover) {
        SKIPPR_ASSIGN_OR_RETURN(saved, LoadShaperSchema(pipeline_, read));
      }
      SKIPPR_ASSIGN_OR_RETURN(ops_, OpenOps(config_, pipeline_, read));
    }
    // A primary key the schema cannot carry fails now, before the source is read.
    if (!landing_policy_.key_columns.empty()) {
      SKIPPR_RETURN_IF_ERROR(
          CheckKeyColumns(landing_policy_, ops_ ? ops_->output_schema() : saved));
    }
    schema::ShaperOptions shaper_options =
        ShaperOptionsFor(config_, pipeline_, ShapingPurpose::kSync);
    shaper_options.keep_origins = ops_ != nullptr;  // a failing op names the record
    shaper_.emplace(std::move(saved), std::move(shaper_options));
    layouts_.Publish(shaper_->TypedLayout({}));
    return Status::OK();
  }

  Status OpenSource() {
    const config::ConnectorConfig& connector =
        config_.data_sources.at(pipeline_.data_source).connector;
    SKIPPR_ASSIGN_OR_RETURN(std::unique_ptr<sources::Source> inner,
                            sources::MakeSource(connector, pipeline_.data_source));
    source_ = sources::ReadAhead(std::move(inner), kSourceBatchesAhead);
    thresholds_ = ResolveBufferThresholds(pipeline_);
    sources::ReadOptions options;
    options.max_bytes_per_batch = std::clamp<uint64_t>(thresholds_.bytes, 1, kSourceBatchBytes);
    options.max_records_per_batch = kSourceBatchRecords;
    // Rows a source decodes into columns are compact: a batch of them may fill a whole commit.
    options.max_typed_bytes_per_batch = std::max<uint64_t>(thresholds_.bytes, 1);
    options.follows_changes = options_.follows_changes;
    options.stop_requested = options_.stop_requested;
    options.scratch_directory = state_.scratch_directory();
    options.layouts = &layouts_;
    SKIPPR_RETURN_IF_ERROR(source_->Open(positions_, options));
    committer_.emplace(*wal_, [this](SealedCommit& commit, const wal::CommitInfo& info) {
      return OnCommitted(commit, info);
    });
    buffer_started_ = std::chrono::steady_clock::now();
    return Status::OK();
  }

  // Reads until the source has nothing more, sealing a commit whenever the buffer is full or old.
  Status Ingest() {
    uint64_t batches_read = 0;
    while (!IsStopRequested()) {
      if (batches_read++ % kBatchesPerDiskCheck == 0) {
        SKIPPR_RETURN_IF_ERROR(disk_gate_->WaitUntilReadable(progress_, on_progress_));
      }
      SKIPPR_ASSIGN_OR_RETURN(std::optional<sources::SourceBatch> batch, source_->Next());
      if (!batch) break;
      CrashPoint("sync.after_source_read");
      if (Status absorbed = Absorb(*batch); !absorbed.ok()) {
        // The batch cannot be taken (its source changed a column's type): what came before it
        // is sound and is committed, so that the pass stops exactly at the batch.
        SKIPPR_RETURN_IF_ERROR(SealAndSubmit());
        SKIPPR_RETURN_IF_ERROR(committer_->Drain());
        return absorbed;
      }
      const double buffered_seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - buffer_started_)
              .count();
      // A change stream that has caught up commits what it sent: its changes become queryable
      // now, not at the buffer threshold.
      if (batch->is_caught_up || buffered_bytes_ >= thresholds_.bytes ||
          buffered_seconds >= thresholds_.seconds) {
        SKIPPR_RETURN_IF_ERROR(SealAndSubmit());
      }
      progress_.rows_committed = rows_committed_;
      progress_.segments_committed = segments_committed_;
      if (on_progress_) on_progress_(progress_);
    }
    return SealAndSubmit();
  }

  bool IsStopRequested() const {
    return options_.stop_requested != nullptr &&
           options_.stop_requested->load(std::memory_order_relaxed);
  }

  Status Absorb(sources::SourceBatch& batch) {
    const uint64_t records = batch.record_count();  // before the shaper takes the columns
    const uint64_t buffered_bytes = BufferedBytesOf(batch);
    SKIPPR_RETURN_IF_ERROR(
        AbsorbBatch(*shaper_, batch, result_.deadletter_count, result_.deadletters));
    if (!batch.deadletters.empty()) pending_deadletters_.Append(batch.deadletters, NowMicros());
    result_.records_read += records;
    pending_positions_[batch.partition] = batch.position;
    buffered_bytes_ += buffered_bytes;
    progress_.records_read = result_.records_read;
    progress_.bytes_read += batch.bytes_read;
    progress_.deadletters = result_.deadletter_count;
    return Status::OK();
  }

  // What a batch adds to the commit buffer: its input bytes, or what its columns weigh where that
  // is more (a Parquet file's bytes are compressed; wide rows compress well). The records of a
  // source that cannot tell their bytes (the sample, Parquet) count a nominal 256 each at least.
  static uint64_t BufferedBytesOf(const sources::SourceBatch& batch) {
    const uint64_t column_bytes = batch.columns ? batch.columns->DataBytes() : 0;
    const uint64_t nominal_bytes = batch.bytes_read == 0 ? batch.record_count() * 256 : 0;
    return std::max({batch.bytes_read, column_bytes, nominal_bytes});
  }

  // Seals what the shaper holds into one commit and hands it to the committer.
  Status SealAndSubmit() {
    if (pending_positions_.empty()) return Status::OK();
    SealedCommit sealed;
    sealed.changes = shaper_->Seal();
    // The source decodes what follows into the schema as it now stands.
    if (!sealed.changes.empty()) layouts_.Publish(shaper_->TypedLayout({}));
    std::vector<transform::RowOrigins> origins;
    sealed.batches = shaper_->TakeBatches(ops_ ? &origins : nullptr);
    for (const schema::NamespaceChange& change : sealed.changes) {
      sealed.changed_schemas.push_back(shaper_->schema().namespaces.at(change.namespace_name));
    }
    if (ops_) {
      // On this thread, before the hand-over: a failing op fails the pass with nothing of this
      // batch committed, so the source positions stay where they were.
      sealed.changed_input_schemas = std::move(sealed.changed_schemas);
      SKIPPR_RETURN_IF_ERROR(ApplyOps(*ops_, sealed, origins));
    }
    if (pending_deadletters_.rows() > 0) {  // last: the ops never see them
      sealed.deadletter_rows = pending_deadletters_.rows();
      sealed.batches.push_back(pending_deadletters_.Take());
    }
    sealed.positions = std::move(pending_positions_);
    sealed.buffered_bytes = buffered_bytes_;
    pending_positions_.clear();
    buffered_bytes_ = 0;
    buffer_started_ = std::chrono::steady_clock::now();
    return committer_->Submit(std::move(sealed));
  }

  // On the committer thread, after each commit: the sync thread reads `result_`'s commit fields
  // only after Drain, and the progress through the atomics.
  Status OnCommitted(SealedCommit& commit, const wal::CommitInfo& info) {
    // Only now may a change stream let its server forget what this commit holds.
    source_->Acknowledge(commit.positions);
    for (const Batch& batch : commit.batches) {
      if (batch.namespace_name == schema::kDeadlettersNamespace) continue;
      result_.rows_by_namespace[batch.namespace_name] += batch.num_rows;
    }
    if (lander_ && info.segment_id != 0) {
      lander_->AddCommittedBatches(info.segment_id, std::move(commit.batches),
                                   commit.buffered_bytes);
    }
    for (schema::NamespaceChange& change : commit.changes) {
      spdlog::info("sync {}: namespace {} {}: {}", pipeline_.name, change.namespace_name,
                   change.is_new_namespace ? "discovered" : "evolved",
                   fmt::join(change.changes, "; "));
      result_.changes.push_back(std::move(change));
    }
    result_.rows_committed += info.rows - commit.deadletter_rows;
    result_.deadletters_committed += commit.deadletter_rows;
    result_.segments_committed += info.segment_id != 0 ? 1 : 0;
    rows_committed_ = result_.rows_committed;
    segments_committed_ = result_.segments_committed;
    if (aggregator_) {
      SKIPPR_RETURN_IF_ERROR(aggregator_->failure());
      if (info.segment_id != 0) aggregator_->RequestProcessing();
    }
    if (!lander_) return Status::OK();
    SKIPPR_RETURN_IF_ERROR(lander_->failure());
    RequestLandingWhenDue(commit.buffered_bytes);
    return Status::OK();
  }

  // Landing during the pass: at the sinks' file size or commit interval, whichever comes first.
  void RequestLandingWhenDue(uint64_t committed_bytes) {
    unlanded_bytes_ += committed_bytes;
    const double since_landing_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - last_landing_).count();
    if (unlanded_bytes_ >= landing_trigger_.target_file_bytes ||
        since_landing_seconds >= landing_trigger_.commit_interval_seconds) {
      lander_->RequestLanding();
      unlanded_bytes_ = 0;
      last_landing_ = std::chrono::steady_clock::now();
    }
  }

  // Every commit made, then the processor drains while the lander lands the rest: neither waits
  // for the other (the lander's last round would otherwise sit idle behind the processor's
  // backlog). A landing reclaims only what the processor has passed, so once both have ended,
  // what it passed after the lander's last round is reclaimed here.
  Status Finish() {
    SKIPPR_RETURN_IF_ERROR(committer_->Drain());
    progress_.rows_committed = result_.rows_committed;
    progress_.segments_committed = result_.segments_committed;
    if (lander_) lander_->BeginFinishing();
    Result<int64_t> aggregated = aggregator_ ? aggregator_->Finish() : Result<int64_t>(0);
    Result<LandingPassResult> landed = lander_ ? lander_->Finish() : LandingPassResult{};
    SKIPPR_RETURN_IF_ERROR(aggregated.status());
    result_.rows_aggregated = *aggregated;
    if (lander_) {
      SKIPPR_RETURN_IF_ERROR(landed.status());
      result_.landings = landed->landings;
      result_.rows_landed = landed->rows_landed;
      result_.segments_reclaimed = landed->segments_reclaimed;
      result_.deadletters_landed = landed->deadletters.landed;
      result_.deadletters_discarded = landed->deadletters.discarded;
      // The lander's thread has ended: this one is now the only one that lands.
      SKIPPR_ASSIGN_OR_RETURN(const uint64_t reclaimed, ReclaimLandedSegments(state_, pipeline_));
      result_.segments_reclaimed += reclaimed;
    }
    if (on_progress_) on_progress_(progress_);
    if (result_.deadletters_committed > 0 && !lander_) {
      spdlog::info("sync {}: {} deadletter record(s) committed to the WAL (no sink: the WAL keeps "
                   "them); query them as {}.deadletters",
                   pipeline_.name, result_.deadletters_committed, pipeline_.name);
    }
    return Status::OK();
  }

  const config::Config& config_;
  const config::PipelineConfig& pipeline_;
  PipelineState& state_;
  const std::function<void(const SyncProgress&)>& on_progress_;
  const SyncOptions options_;

  SyncResult result_;
  SyncProgress progress_;
  std::optional<DiskGate> disk_gate_;
  std::unique_ptr<wal::Wal> wal_;
  sinks::LandingPolicy landing_policy_;
  sinks::LandingPolicy landing_trigger_;
  std::optional<BackgroundLander> lander_;
  std::unique_ptr<BackgroundAggregator> aggregator_;
  uint64_t unlanded_bytes_ = 0;  // source bytes committed since landing was last asked for
  std::chrono::steady_clock::time_point last_landing_;

  std::optional<schema::Shaper> shaper_;
  std::unique_ptr<transform::OpsRunner> ops_;
  sources::SourcePositions positions_;  // committed, where the source starts
  BufferThresholds thresholds_;
  // Declared after the lander and the aggregator, which its callbacks use, and destroyed before
  // them; the source before the committer, whose callback acknowledges to it.
  // The layout the source decodes records into (before source_: the source's thread reads it).
  sources::LayoutBoard layouts_;
  std::unique_ptr<sources::Source> source_;

  // What the shaper holds and has not sealed: the positions it reaches, the input bytes, the
  // deadletters (committed in the same segment as the batch they came from).
  sources::SourcePositions pending_positions_;
  uint64_t buffered_bytes_ = 0;
  std::chrono::steady_clock::time_point buffer_started_;
  schema::DeadletterRows pending_deadletters_;
  std::atomic<uint64_t> rows_committed_{0};
  std::atomic<uint64_t> segments_committed_{0};
  std::optional<Committer> committer_;  // last: joined first
};

}  // namespace

Result<SyncResult> RunSyncPass(const config::Config& config,
                               const config::PipelineConfig& pipeline, PipelineState& state,
                               const std::function<void(const SyncProgress&)>& on_progress,
                               const SyncOptions& options) {
  return SyncPass(config, pipeline, state, on_progress, options).Run();
}

}  // namespace skippr::pipeline::internal
