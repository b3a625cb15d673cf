// Internal to pipeline/: landing committed WAL slices in the pipeline's sinks, exactly once, and
// reclaiming the segments behind them (DESIGN.md §6). The store's catalog family keeps
//   ("landing", namespace)              the landing planned and not yet recorded (JSON), so a crash
//                                       replays exactly the same slices under the same landing id;
//   ("landed", segment id, ordinal)     a landed slice of a segment not yet reclaimed;
//   ("sink_commit", namespace)          the sink's commit holding every landed row (JSON; stores
//                                       of format 1 kept ("lake_snapshot", namespace) instead).
// docs/formats/landing.md documents the keys and the protocol.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "pipeline/pipeline.hpp"
#include "sinks/sinks.hpp"
#include "transform/transform.hpp"

namespace skippr::pipeline::internal {

// How the pipeline's data sink lands: its entry's settings (sinks::LandingPolicyOf) and, for
// merge_by_key, the source's primary key.
sinks::LandingPolicy ResolveLandingPolicy(const config::Config& config,
                                          const config::PipelineConfig& pipeline);

// Where a pipeline's committed slices land (DESIGN.md §6, docs/formats/deadletters.md): data
// namespaces in the data sink, the deadletters namespace in the deadletter sink. Without a data
// writer the data slices stay in the WAL; without a deadletter writer the deadletter slices are
// discarded — recorded as landed, counted, logged — as each landing round meets them.
struct LandingSinks {
  sinks::Sink* data = nullptr;
  sinks::LandingPolicy data_policy;
  sinks::Sink* deadletters = nullptr;
  sinks::LandingPolicy deadletter_policy;  // always append; the deadletter sink's sizes
};

// The sinks a sync pass lands with, owned. No lander runs when neither is set: the WAL is then
// the dataset, deadletters included.
struct PipelineSinks {
  std::unique_ptr<sinks::Sink> data;
  sinks::LandingPolicy data_policy;
  std::unique_ptr<sinks::Sink> deadletters;
  sinks::LandingPolicy deadletter_policy;

  bool has_any() const { return data != nullptr || deadletters != nullptr; }
  LandingSinks view() const {
    return {data.get(), data_policy, deadletters.get(), deadletter_policy};
  }
};
// The data sink and the deadletter sink, when the pipeline has them, opened through
// sinks::OpenSink; context.pipeline_instance: the store's instance id, recorded with every
// landing. A data sink that cannot land the pipeline's write policy is refused here, before
// anything is read.
Result<PipelineSinks> OpenSinks(const config::Config& config,
                                const config::PipelineConfig& pipeline,
                                const sinks::SinkContext& context);

// Deadletters a pipeline has sent on: landed in its deadletter sink, or discarded without one.
// Kept in the catalog family (key Text("deadletter_totals"), deadletters.cpp), added to in the
// transaction that records the landing.
struct DeadletterTotals {
  uint64_t landed = 0;
  uint64_t discarded = 0;
};
Status AddDeadletterTotals(store::WriteTransaction& write, const DeadletterTotals& added);
// The totals plus the rows of the deadletter slices of `live_segments` not landed yet: every
// deadletter ever committed, and where it is.
Result<DeadletterCounts> ReadDeadletterCounts(const store::ReadTransaction& read,
                                              const std::vector<wal::SegmentEntry>& live_segments);

// OK unless the policy merges by key and a namespace of `schema` cannot be keyed by its columns
// (missing, nested, floating point): then InvalidConfig naming the column, the namespace and the
// primary_key setting.
Status CheckKeyColumns(const sinks::LandingPolicy& policy, const schema::PipelineSchema& schema);

// What the table of a keyed CDC namespace already reflects, across its landings
// (docs/formats/landing.md, "Final state"). The catalog family keeps, per namespace,
//   ("landed_key", namespace, business key)  the newest order token landed for the key (a
//                                             delete's too: a tombstone);
//   ("landed_truncate", namespace)            the newest truncate landed;
// written in the transaction that records the landing. A change at or before its key's token, or
// at or before the truncate, is one the table holds already (a replay, or an older change that a
// newer snapshot read holds): the landing leaves it out, so it never overwrites a newer row.
class LandedTokens {
 public:
  // Point reads, for query's view of the table: the newest token landed for `business_key`, and
  // the newest truncate landed (nullopt: none); whether the namespace has any key's token.
  static Result<std::optional<std::string>> ReadKey(const store::ReadTransaction& read,
                                                    const std::string& namespace_name,
                                                    std::string_view business_key);
  static Result<std::optional<std::string>> ReadTruncate(const store::ReadTransaction& read,
                                                         const std::string& namespace_name);
  static Result<bool> HasKeys(const store::ReadTransaction& read,
                              const std::string& namespace_name);
  // The tokens landed for the business keys `batches` hold (they must outlive this object).
  static Result<LandedTokens> Read(const store::ReadTransaction& read,
                                   const std::string& namespace_name,
                                   const std::vector<std::shared_ptr<const Batch>>& batches);
  // `batches` without the changes the table holds already; a batch is copied only when it loses
  // rows.
  std::vector<std::shared_ptr<const Batch>> NewChanges() const;
  // Stores the newest token of each key the batches change, and their newest truncate (which
  // clears the namespace's older keys).
  Status Record(store::WriteTransaction& write) const;

 private:
  bool IsLanded(std::string_view business_key, std::string_view order_token) const;

  std::string namespace_name_;
  const std::vector<std::shared_ptr<const Batch>>* batches_ = nullptr;
  std::string landed_truncate_;  // empty: none
  std::unordered_map<std::string_view, std::string> landed_;  // by business key; absent: none
};

// What one sync pass has landed so far: with replace_table, each namespace's first landing of the
// pass replaces the table and the later ones append to it.
struct PassLandings {
  std::set<std::string> namespaces_landed;
  // The batches this pass committed and has not landed yet, by slice: a landing takes them from
  // here instead of decoding the segment again (the segment, not this cache, is what a replay after
  // a crash reads).
  std::map<sinks::SliceRef, std::shared_ptr<const Batch>> committed_batches;
  // The newest segment a landing round may land from; unset: the newest live at the round's start.
  std::optional<uint64_t> last_segment_id;
  // Slices a round leaves alone: a stream (LandStream) will land them.
  std::set<sinks::SliceRef> reserved;
};

struct LandingPassResult {
  uint64_t landings = 0;     // data sink snapshots committed (replays included)
  int64_t rows_landed = 0;   // of data namespaces
  uint64_t segments_reclaimed = 0;
  DeadletterTotals deadletters;  // sent on this pass
};

// Lands every committed slice not landed yet (pending landings first), one snapshot per namespace
// per at most its policy's target_file_bytes, recording each in the store and reclaiming fully
// landed segments. Deadletter slices go to `sinks.deadletters`, or are discarded without one.
Result<LandingPassResult> LandCommittedSlices(PipelineState& state,
                                              const config::PipelineConfig& pipeline,
                                              const LandingSinks& sinks, PassLandings& pass);
// The same with a data sink only (deadletters discarded).
Result<LandingPassResult> LandCommittedSlices(PipelineState& state,
                                              const config::PipelineConfig& pipeline,
                                              sinks::Sink& writer,
                                              const sinks::LandingPolicy& policy,
                                              PassLandings& pass);

// One committed slice handed to a stream, with its batch.
struct StreamedSlice {
  sinks::SliceRef slice;
  std::shared_ptr<const Batch> batch;
};
// The next slice of a stream, waiting for it to be committed; nullopt ends the stream.
using NextStreamedSlice = std::function<Result<std::optional<StreamedSlice>>()>;

// Lands the slices `next` hands out — committed, of one data namespace whose sink appends or
// replaces the table, each batch of `namespace_schema` (the saved one) — as one landing whose data
// file is written while they come, as ingest commits them (LakeWriter::WriteStream). The landing
// is planned and recorded when the stream ends, then committed and recorded as any other: a crash
// before the plan leaves only a file no snapshot names, and the slices land in a later round.
Result<LandingPassResult> LandStream(PipelineState& state, const config::PipelineConfig& pipeline,
                                     const LandingSinks& sinks,
                                     const schema::NamespaceSchema& namespace_schema,
                                     const NextStreamedSlice& next, PassLandings& pass);

// What readers need from one store snapshot: the slices already landed, each namespace's sink
// commit, and the landings planned and not recorded yet.
struct LandingState {
  std::set<sinks::SliceRef> landed;
  std::map<std::string, sinks::CommitId> commits;
  std::vector<sinks::Landing> pending;
};
Result<LandingState> ReadLandingState(const store::ReadTransaction& read);

// A thread another thread directs: asks it for work (Request), to do what was asked and end
// (Finish), or to end as soon as it can (the destructor), and reads how it ended. The signals are
// flags under one mutex, with which the owner may also guard state of its own; each signal wakes
// the thread's waits on changed(). RoundThread and BackgroundLander run on one.
class WorkerThread {
 public:
  struct Signals {
    bool is_requested = false;
    bool is_finishing = false;
    bool is_stopping = false;
    bool has_stopped = false;  // the thread ended (or never started), with `failure`
    Status failure;
  };

  WorkerThread() = default;
  ~WorkerThread();  // signals is_stopping and joins
  WorkerThread(const WorkerThread&) = delete;
  WorkerThread& operator=(const WorkerThread&) = delete;

  // Runs `body` on the thread; what it returns ends the thread (failure, has_stopped).
  void Start(std::function<Status()> body);
  // Changes the signals under the mutex, then wakes the thread.
  void Signal(const std::function<void(Signals&)>& change);
  void Request();
  // Signals is_finishing, waits for the thread to end and returns its failure.
  Status Finish();
  Status failure() const;  // the error that ended the thread, or OK

  std::mutex& mutex() const { return mutex_; }
  std::condition_variable& changed() { return changed_; }
  Signals& signals() { return signals_; }  // with mutex() held

 private:
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  Signals signals_;
  std::thread thread_;
};

// A thread that runs `round` whenever asked — requests arriving during a round collapse into one
// more round, since what they ask for may postdate the running round's snapshot — and once more,
// last, on Finish. The first error stops it. The background aggregator is built on it.
class RoundThread {
 public:
  // Starts the thread; the first round runs at once (it picks up what an earlier run left).
  explicit RoundThread(std::function<Status()> round);
  RoundThread(const RoundThread&) = delete;
  RoundThread& operator=(const RoundThread&) = delete;

  void Request() { worker_.Request(); }                // returns at once
  Status failure() const { return worker_.failure(); }  // what stopped the thread, or OK
  // Runs a last round after everything requested so far, stops the thread; the first error.
  Status Finish() { return worker_.Finish(); }

 private:
  Status Run();

  const std::function<Status()> round_;
  // Last: destroying it stops the thread after the round in progress, before round_ goes.
  WorkerThread worker_;
};

// Lands on a thread of its own, so ingest goes on while DuckDB writes Parquet. The sync thread
// hands over each committed segment's batches; the lander streams a data namespace's batches into
// its sink as they come (LandStream: a landing per target_file_bytes of column data, commit
// interval or schema change), and lands the rest — deadletters, batches of an older schema,
// merge_by_key, what did not fit the memory budget, what an earlier run left — in
// LandCommittedSlices rounds: at the start, when asked, and at the end. Landing stays exactly once
// (the protocol is in the store, not in this object); what it adds up to comes back from Finish.
class BackgroundLander {
 public:
  // Starts the thread, which lands whatever an earlier run committed and did not land at once.
  BackgroundLander(PipelineState& state, const config::PipelineConfig& pipeline,
                   PipelineSinks sinks);
  ~BackgroundLander();  // stops the round or stream in progress (the WAL keeps what did not land)
  BackgroundLander(const BackgroundLander&) = delete;
  BackgroundLander& operator=(const BackgroundLander&) = delete;

  // The batches of a just-committed segment, in commit order, to land from memory; `bytes`, what
  // the commit buffer counted for them: the larger of their input bytes and their column bytes,
  // so that a compressed input's batches are not kept by its small size. Kept only within a
  // memory budget; beyond it a round reads the segment back. While the lander works (it will get
  // to the queue), a segment whose batches all stream and would overflow it waits for room (up to
  // kRoomWait): reading it back would cost the lander, already the slower stage, more. Others
  // (deadletters, merges) go to a round as before.
  void AddCommittedBatches(uint64_t segment_id, std::vector<Batch> batches, uint64_t bytes);
  // Asks for a landing round (returns at once; rounds asked for while one runs collapse into one).
  void RequestLanding();
  // The error that stopped the lander, or OK while it runs.
  Status failure() const;
  // Tells the lander that ingest has ended: it lands what is left, on its thread, and stops.
  // Returns at once; Finish waits.
  void BeginFinishing();
  // Lands everything committed so far, waits for it, stops the thread and returns the totals.
  Result<LandingPassResult> Finish();

 private:
  struct Queued {
    std::shared_ptr<const Batch> batch;
    bool streams = false;  // a stream may take it; otherwise a round lands it
  };
  using Queue = std::map<sinks::SliceRef, Queued>;
  enum class Work { kStream, kRound, kFinish, kStop };
  // What a stream may still take.
  struct StreamBudget {
    uint64_t bytes_left = 0;  // of column data
    std::chrono::steady_clock::time_point deadline;
  };

  // On the lander thread.
  Status LandUntilFinished();
  Work WaitForWork(std::string& stream_namespace);
  Work NextWork(std::string& stream_namespace);  // with worker_.mutex() held, once there is work
  void SetBusy(bool is_busy);                     // with worker_.mutex() held
  Status LandRound();
  Status Stream(const std::string& namespace_name);
  Result<std::optional<StreamedSlice>> NextStreamed(const schema::NamespaceSchema& namespace_schema,
                                                    StreamBudget& budget);
  void AddToTotals(const LandingPassResult& landed);
  // With worker_.mutex() held.
  Queue::iterator FirstStreamable(const std::string* namespace_name);
  void ForgetLandedSegments();
  bool MayStream(const Batch& batch) const;
  uint64_t LargestLandingBytes() const;  // the target file size of the sink that lands most

  PipelineState& state_;
  const config::PipelineConfig& pipeline_;
  const PipelineSinks sinks_;
  PassLandings pass_;          // the lander thread's own
  LandingPassResult totals_;   // the lander thread's own; read after Finish

  Queue queue_;  // handed over, not landed yet
  // The bytes (AddCommittedBatches) of the segments with batches in queue_, by segment.
  std::map<uint64_t, uint64_t> kept_bytes_by_segment_;
  uint64_t kept_bytes_ = 0;
  bool is_busy_ = false;  // the lander is in a stream or a round: it will get to queue_
  // The newest segment committed: live when the pass started, or handed over since. A round
  // lands no segment after it, which it might otherwise land before its batches are handed over.
  uint64_t last_committed_segment_id_ = 0;
  // Last: stopped and joined before the members above go; its mutex guards the queue and the
  // segment accounting.
  WorkerThread worker_;
};

// Reclaims the live segments whose slices are all landed and which every aggregate's cursor has
// passed (segments a landing could not reclaim because an aggregate processor lagged). Call only
// from the thread that lands.
Result<uint64_t> ReclaimLandedSegments(PipelineState& state,
                                       const config::PipelineConfig& pipeline);

// Runs the transform.aggregates processor on a thread of its own: the sync thread asks for a
// round after each commit and never waits for one; Finish applies everything committed so far.
class BackgroundAggregator {
 public:
  // Opens the processor (resetting aggregates whose config changed) and starts the thread, whose
  // first round applies what an earlier run committed and did not apply.
  static Result<std::unique_ptr<BackgroundAggregator>> Start(
      PipelineState& state, const config::Config& config, const config::PipelineConfig& pipeline);
  ~BackgroundAggregator();  // stops after the round in progress (the cursor keeps the rest)
  BackgroundAggregator(const BackgroundAggregator&) = delete;
  BackgroundAggregator& operator=(const BackgroundAggregator&) = delete;

  void RequestProcessing();  // returns at once; requests during a round collapse into one
  Status failure() const;    // the error that stopped the processor, or OK
  // Applies everything committed so far, stops the thread, returns the rows applied this pass.
  Result<int64_t> Finish();

 private:
  BackgroundAggregator(std::string pipeline_name,
                       std::unique_ptr<transform::AggregateProcessor> processor);
  Status ProcessRound();  // on the processor thread

  const std::string pipeline_name_;
  std::unique_ptr<transform::AggregateProcessor> processor_;
  int64_t rows_applied_ = 0;  // the processor thread's own; read after Finish
  RoundThread rounds_;        // last: its first round starts at construction
};

}  // namespace skippr::pipeline::internal
