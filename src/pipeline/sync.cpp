// The sync pass: source → shaper → WAL commit (with positions and schema in one transaction).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "core/redact.hpp"
#include "core/check.hpp"
#include "core/crash.hpp"
#include "core/disk.hpp"
#include "pipeline/disk_gate.hpp"
#include "pipeline/landing.hpp"
#include "pipeline/pipeline.hpp"
#include "pipeline/shaping.hpp"

namespace skippr::pipeline {

namespace {

constexpr uint64_t kSourceBatchBytes = 1 << 20;
constexpr uint64_t kSourceBatchRecords = 4096;
constexpr size_t kSourceBatchesAhead = 8;

std::optional<double> EnvNumber(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || value[0] == '\0') return std::nullopt;
  char* end = nullptr;
  const double number = std::strtod(value, &end);
  // NaN, infinities and numbers past 2^62 would make the conversions to integers below undefined.
  constexpr double kMaxSetting = 4.6e18;
  if (end == value || *end != '\0' || !std::isfinite(number) || number <= 0 ||
      number > kMaxSetting) {
    spdlog::warn("ignoring {}='{}': expected a positive number up to {}", name, value, kMaxSetting);
    return std::nullopt;
  }
  return number;
}

bool ChaosRequested(const config::PipelineConfig& pipeline) {
  if (pipeline.chaos_mode) return true;
  const char* value = std::getenv("SKIPPR_CHAOS_MODE");
  if (value == nullptr) return false;
  const std::string text(value);
  return text == "yes" || text == "true" || text == "1" || text == "YES" || text == "TRUE";
}

int64_t NowMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// When the sync thread asks for a landing round: at the smaller size and interval of the sinks
// the pipeline lands in.
internal::LakePolicy LandingTrigger(const internal::PipelineSinks& sinks) {
  if (!sinks.data) return sinks.deadletter_policy;
  if (!sinks.deadletters) return sinks.data_policy;
  internal::LakePolicy trigger = sinks.data_policy;
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

}  // namespace

BufferThresholds ResolveBufferThresholds(const config::PipelineConfig& pipeline) {
  BufferThresholds thresholds;
  if (pipeline.buffer_threshold_bytes) {
    thresholds.bytes = static_cast<uint64_t>(*pipeline.buffer_threshold_bytes);
  } else if (auto bytes = EnvNumber("BUFFER_THRESHOLD_BYTES")) {
    thresholds.bytes = static_cast<uint64_t>(*bytes);
  }
  if (pipeline.buffer_threshold_seconds) {
    thresholds.seconds = static_cast<double>(*pipeline.buffer_threshold_seconds);
  } else if (auto seconds = EnvNumber("BUFFER_THRESHOLD_SECONDS")) {
    thresholds.seconds = *seconds;
  }
  constexpr uint64_t kMinSegmentBytes = 4 << 20;
  constexpr uint64_t kMaxSegmentBytes = 64 << 20;
  const uint64_t segment_bytes = std::clamp<uint64_t>(
      static_cast<uint64_t>(
          EnvNumber("WAL_BYTES_PER_FILE").value_or(static_cast<double>(thresholds.bytes))),
      kMinSegmentBytes, kMaxSegmentBytes);
  thresholds.bytes = std::min(thresholds.bytes, segment_bytes);
  thresholds.seconds =
      std::min(thresholds.seconds, EnvNumber("WAL_MAX_DELAY_SECONDS").value_or(60));
  return thresholds;
}

namespace {
std::string LastRunKey() { return store::KeyBuilder().Text("last_run").key(); }

// Best effort: a pass that failed because the store itself failed cannot record that.
void RecordLastRun(PipelineState& state, const Result<SyncResult>& result) {
  nlohmann::json json = {
      {"format_version", 1},
      {"ok", result.ok()},
      {"finished_unix_micros", std::chrono::duration_cast<std::chrono::microseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count()}};
  if (result.ok()) {
    json["records_read"] = result->records_read;
    json["rows_committed"] = result->rows_committed;
    json["segments_committed"] = result->segments_committed;
    json["deadletters"] = result->deadletter_count;
  } else {
    json["error"] = Redact(result.status().message());  // read by `status`, by other users too
  }
  Result<store::WriteTransaction> write = state.store().BeginWrite();
  if (!write.ok()) return;
  // The error names files, whose paths need not be UTF-8.
  const std::string text = json.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (write->Put(store::Family::kCatalog, LastRunKey(), text).ok()) (void)write->Commit();
}

Result<SyncResult> RunPass(const config::Config& config, const config::PipelineConfig& pipeline,
                           PipelineState& state,
                           const std::function<void(const SyncProgress&)>& on_progress);
}  // namespace

Result<SyncResult> SyncOnce(const config::Config& config, const config::PipelineConfig& pipeline,
                            const std::function<void(const SyncProgress&)>& on_progress) {
  SKIPPR_ASSIGN_OR_RETURN(PipelineState state, PipelineState::OpenForWriting(pipeline));
  if (ChaosRequested(pipeline)) StartChaosMode();
  Result<SyncResult> result = RunPass(config, pipeline, state, on_progress);
  RecordLastRun(state, result);
  return result;
}

Result<PipelineStatus> ReadStatus(const config::PipelineConfig& pipeline) {
  PipelineStatus status;
  status.pipeline = pipeline.name;
  status.has_sink = pipeline.data_sink.has_value();
  SKIPPR_ASSIGN_OR_RETURN(status.disk_rule, ResolveDiskRule(pipeline));
  status.deadletter_sink = pipeline.deadletter_sink;
  if (Result<DiskUsage> usage = MeasureDisk(pipeline.data_dir); usage.ok()) {
    status.disk = *usage;
    const DiskPressure pressure =
        EvaluateDiskPressure(*usage, /*is_paused=*/false, status.disk_rule.thresholds);
    status.is_under_disk_pressure = pressure != DiskPressure::kNone;
    status.disk_pressure = DescribeDiskPressure(pressure, *usage, status.disk_rule.thresholds);
  }
  Result<PipelineState> state = PipelineState::OpenForReading(pipeline);
  if (!state.ok()) {
    if (state.status().code() == StatusCode::kNotFound) return status;
    return state.status();
  }
  status.has_state = true;
  status.instance_id = state->store().identity().instance_id;
  SKIPPR_ASSIGN_OR_RETURN(store::ReadTransaction read, state->store().BeginRead());
  SKIPPR_ASSIGN_OR_RETURN(std::vector<wal::SegmentEntry> segments, wal::LiveSegments(read));
  SKIPPR_ASSIGN_OR_RETURN(status.deadletters, internal::ReadDeadletterCounts(read, segments));
  for (const wal::SegmentEntry& entry : segments) {
    ++status.live_segments;
    status.live_bytes += entry.file_bytes;
    for (const wal::SliceSummary& slice : entry.slices) {
      if (slice.namespace_name != schema::kDeadlettersNamespace) status.live_rows += slice.rows;
    }
    if (!status.oldest_live_unix_micros ||
        entry.created_unix_micros < *status.oldest_live_unix_micros) {
      status.oldest_live_unix_micros = entry.created_unix_micros;
    }
  }
  SKIPPR_ASSIGN_OR_RETURN(status.positions, sources::LoadPositions(read));
  for (const config::AggregateConfig& aggregate : pipeline.transform.aggregates) {
    SKIPPR_ASSIGN_OR_RETURN(transform::AggregateLag lag, transform::ReadLag(read, aggregate));
    status.aggregate_lags.push_back(std::move(lag));
  }
  SKIPPR_ASSIGN_OR_RETURN(std::optional<std::string> last_run,
                          read.Get(store::Family::kCatalog, LastRunKey()));
  if (last_run) {
    try {
      const nlohmann::json json = nlohmann::json::parse(*last_run);
      LastRun run;
      run.ok = json.at("ok").get<bool>();
      run.finished_unix_micros = json.at("finished_unix_micros").get<int64_t>();
      run.records_read = json.value("records_read", uint64_t{0});
      run.rows_committed = json.value("rows_committed", uint64_t{0});
      run.segments_committed = json.value("segments_committed", uint64_t{0});
      run.deadletters = json.value("deadletters", uint64_t{0});
      run.error = Redact(json.value("error", std::string()));  // also records written before
      status.last_run = run;
    } catch (const nlohmann::json::exception& error) {
      return Status::Corruption(std::string("the last run record is unreadable: ") + error.what());
    }
  }
  return status;
}

namespace {

// What the sync thread seals for one WAL commit: the shaped batches, the source positions they
// reach and the namespaces whose schema changed (as they are at the seal).
struct SealedCommit {
  std::vector<Batch> batches;
  sources::SourcePositions positions;
  std::vector<schema::NamespaceChange> changes;
  std::vector<schema::NamespaceSchema> changed_schemas;  // parallel to `changes`
  // With transform.ops: the shaper's schemas that changed (`changes` are then the output's).
  std::vector<schema::NamespaceSchema> changed_input_schemas;
  uint64_t source_bytes = 0;
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

Result<SyncResult> RunPass(const config::Config& config, const config::PipelineConfig& pipeline,
                           PipelineState& state,
                           const std::function<void(const SyncProgress&)>& on_progress) {
  SyncResult result;
  SKIPPR_ASSIGN_OR_RETURN(const DiskRule disk_rule, ResolveDiskRule(pipeline));
  internal::DiskGate disk_gate(pipeline.name, pipeline.data_dir, disk_rule);
  SKIPPR_ASSIGN_OR_RETURN(
      std::unique_ptr<wal::Wal> wal,
      wal::Wal::Open(state.wal_directory(), pipeline.name, state.store(), &result.recovery,
                     {.env = &state.env()}));
  SKIPPR_ASSIGN_OR_RETURN(internal::PipelineSinks sinks,
                          internal::OpenSinks(config, pipeline,
                                              state.store().identity().instance_id, &state.env()));
  const internal::LakePolicy lake_policy = sinks.data_policy;
  const internal::LakePolicy landing_trigger = LandingTrigger(sinks);
  // Landing runs beside ingest; its first round lands what an earlier run committed and did not
  // land (a crash, a failed landing).
  std::optional<internal::BackgroundLander> lander;
  if (sinks.has_any()) lander.emplace(state, pipeline, std::move(sinks));
  // transform.aggregates apply committed slices on their own thread; ingest never waits for them.
  std::unique_ptr<internal::BackgroundAggregator> aggregator;
  if (!pipeline.transform.aggregates.empty()) {
    SKIPPR_ASSIGN_OR_RETURN(aggregator, internal::BackgroundAggregator::Start(state, pipeline));
  }
  uint64_t unlanded_bytes = 0;  // source bytes committed since landing was last asked for
  auto last_landing = std::chrono::steady_clock::now();

  schema::PipelineSchema saved;  // what the shaper evolves (the ops' input, with ops)
  sources::SourcePositions positions;
  {
    SKIPPR_ASSIGN_OR_RETURN(store::ReadTransaction read, state.store().BeginRead());
    SKIPPR_ASSIGN_OR_RETURN(saved, internal::LoadShaperSchema(pipeline, read));
    SKIPPR_ASSIGN_OR_RETURN(positions, sources::LoadPositions(read));
  }
  if (saved.namespaces.empty()) {
    spdlog::info("sync {}: no schema yet, running discover first", pipeline.name);
    SKIPPR_ASSIGN_OR_RETURN(
        DiscoverResult discovered,
        Discover(config, pipeline, state, nullptr, kSyncDiscoverSampleRecordsPerPartition));
    result.ran_discover = true;
    saved = std::move(discovered.schema);
  }
  // Discover returned the schema readers see; with ops the shaper starts from the input one.
  std::unique_ptr<transform::OpsRunner> ops;
  {
    SKIPPR_ASSIGN_OR_RETURN(store::ReadTransaction read, state.store().BeginRead());
    if (result.ran_discover) {
      SKIPPR_ASSIGN_OR_RETURN(saved, internal::LoadShaperSchema(pipeline, read));
    }
    SKIPPR_ASSIGN_OR_RETURN(ops, internal::OpenOps(config, pipeline, read));
  }
  // A primary key the schema cannot carry fails now, before the source is read.
  if (!lake_policy.key_columns.empty()) {
    SKIPPR_RETURN_IF_ERROR(
        internal::CheckKeyColumns(lake_policy, ops ? ops->output_schema() : saved));
  }

  const config::ConnectorConfig& connector = config.data_sources.at(pipeline.data_source).connector;
  SKIPPR_ASSIGN_OR_RETURN(std::unique_ptr<sources::Source> inner_source,
                          sources::MakeSource(connector, pipeline.data_source));
  // Reading and parsing overlap shaping and committing: a second core works while this one does.
  std::unique_ptr<sources::Source> source =
      sources::ReadAhead(std::move(inner_source), kSourceBatchesAhead);
  const BufferThresholds thresholds = ResolveBufferThresholds(pipeline);
  sources::ReadOptions options;
  // Small source batches: their records are shaped into columns and freed while still in cache;
  // the commit thresholds decide how much is buffered before a segment is written.
  options.max_bytes_per_batch = std::clamp<uint64_t>(thresholds.bytes, 1, kSourceBatchBytes);
  options.max_records_per_batch = kSourceBatchRecords;
  SKIPPR_RETURN_IF_ERROR(source->Open(positions, options));

  schema::ShaperOptions shaper_options =
      internal::ShaperOptionsFor(config, pipeline, internal::ShapingPurpose::kSync);
  shaper_options.keep_origins = ops != nullptr;  // a failing op names the record
  schema::Shaper shaper(std::move(saved), std::move(shaper_options));

  SyncProgress progress;
  sources::SourcePositions
      pending_positions;  // reached by what the shaper holds, not committed yet
  uint64_t buffered_bytes = 0;
  auto buffer_started = std::chrono::steady_clock::now();

  // The deadletters read since the last commit, as rows of the deadletters namespace: they are
  // committed in the same segment as the batch they came from.
  schema::DeadletterRows pending_deadletters;

  // Runs on the committer thread: the sync thread reads `result`'s commit fields only after
  // Drain, and `progress`'s through the atomics.
  std::atomic<uint64_t> rows_committed{0};
  std::atomic<uint64_t> segments_committed{0};
  const auto on_committed = [&](SealedCommit& commit, const wal::CommitInfo& info) -> Status {
    // Only now may a change stream let its server forget what this commit holds.
    source->Acknowledge(commit.positions);
    for (const Batch& batch : commit.batches) {
      if (batch.namespace_name == schema::kDeadlettersNamespace) continue;
      result.rows_by_namespace[batch.namespace_name] += batch.num_rows;
    }
    if (lander && info.segment_id != 0) {
      lander->AddCommittedBatches(info.segment_id, std::move(commit.batches), commit.source_bytes);
    }
    for (schema::NamespaceChange& change : commit.changes) {
      spdlog::info("sync {}: namespace {} {}: {}", pipeline.name, change.namespace_name,
                   change.is_new_namespace ? "discovered" : "evolved",
                   fmt::join(change.changes, "; "));
      result.changes.push_back(std::move(change));
    }
    result.rows_committed += info.rows - commit.deadletter_rows;
    result.deadletters_committed += commit.deadletter_rows;
    result.segments_committed += info.segment_id != 0 ? 1 : 0;
    rows_committed = result.rows_committed;
    segments_committed = result.segments_committed;
    if (aggregator) {
      SKIPPR_RETURN_IF_ERROR(aggregator->failure());
      if (info.segment_id != 0) aggregator->RequestProcessing();
    }
    if (!lander) return Status::OK();
    SKIPPR_RETURN_IF_ERROR(lander->failure());
    unlanded_bytes += commit.source_bytes;
    const double since_landing_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - last_landing).count();
    if (unlanded_bytes >= landing_trigger.target_file_bytes ||
        since_landing_seconds >= landing_trigger.commit_interval_seconds) {
      lander->RequestLanding();
      unlanded_bytes = 0;
      last_landing = std::chrono::steady_clock::now();
    }
    return Status::OK();
  };
  Committer committer(*wal, on_committed);

  const auto commit = [&]() -> Status {
    if (pending_positions.empty()) return Status::OK();
    SealedCommit sealed;
    sealed.changes = shaper.Seal();
    std::vector<transform::RowOrigins> origins;
    sealed.batches = shaper.TakeBatches(ops ? &origins : nullptr);
    for (const schema::NamespaceChange& change : sealed.changes) {
      sealed.changed_schemas.push_back(shaper.schema().namespaces.at(change.namespace_name));
    }
    if (ops) {
      // On this thread, before the hand-over: a failing op fails the pass with nothing of this
      // batch committed, so the source positions stay where they were.
      sealed.changed_input_schemas = std::move(sealed.changed_schemas);
      SKIPPR_RETURN_IF_ERROR(ApplyOps(*ops, sealed, origins));
    }
    if (pending_deadletters.rows() > 0) {  // last: the ops never see them
      sealed.deadletter_rows = pending_deadletters.rows();
      sealed.batches.push_back(pending_deadletters.Take());
    }
    sealed.positions = std::move(pending_positions);
    sealed.source_bytes = buffered_bytes;
    pending_positions.clear();
    buffered_bytes = 0;
    buffer_started = std::chrono::steady_clock::now();
    return committer.Submit(std::move(sealed));
  };

  uint64_t batches_read = 0;
  while (true) {
    if (batches_read++ % 16 == 0) {
      SKIPPR_RETURN_IF_ERROR(disk_gate.WaitUntilReadable(progress, on_progress));
    }
    SKIPPR_ASSIGN_OR_RETURN(std::optional<sources::SourceBatch> batch, source->Next());
    if (!batch) break;
    CrashPoint("sync.after_source_read");
    internal::AbsorbBatch(shaper, *batch, result.deadletter_count, result.deadletters);
    if (!batch->deadletters.empty()) pending_deadletters.Append(batch->deadletters, NowMicros());
    result.records_read += batch->records.size();
    pending_positions[batch->partition] = batch->position;
    // Sources that cannot tell their bytes (the sample, Parquet) count a nominal 256 per record.
    buffered_bytes += batch->bytes_read > 0 ? batch->bytes_read : batch->records.size() * 256;
    progress.records_read = result.records_read;
    progress.bytes_read += batch->bytes_read;
    progress.deadletters = result.deadletter_count;
    const double buffered_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - buffer_started).count();
    if (buffered_bytes >= thresholds.bytes || buffered_seconds >= thresholds.seconds) {
      SKIPPR_RETURN_IF_ERROR(commit());
    }
    progress.rows_committed = rows_committed;
    progress.segments_committed = segments_committed;
    if (on_progress) on_progress(progress);
  }
  SKIPPR_RETURN_IF_ERROR(commit());
  SKIPPR_RETURN_IF_ERROR(committer.Drain());
  progress.rows_committed = result.rows_committed;
  progress.segments_committed = result.segments_committed;
  // The processor drains before the last landing round, which then reclaims what it has passed.
  if (aggregator) {
    SKIPPR_ASSIGN_OR_RETURN(result.rows_aggregated, aggregator->Finish());
  }
  if (lander) {
    SKIPPR_ASSIGN_OR_RETURN(const internal::LandingPassResult landed, lander->Finish());
    result.landings = landed.landings;
    result.rows_landed = landed.rows_landed;
    result.segments_reclaimed = landed.segments_reclaimed;
    result.deadletters_landed = landed.deadletters.landed;
    result.deadletters_discarded = landed.deadletters.discarded;
  }
  if (on_progress) on_progress(progress);
  if (result.deadletters_committed > 0 && !lander) {
    spdlog::info("sync {}: {} deadletter record(s) committed to the WAL (no sink: the WAL keeps "
                 "them); query them as {}.deadletters",
                 pipeline.name, result.deadletters_committed, pipeline.name);
  }
  return result;
}
}  // namespace

}  // namespace skippr::pipeline
