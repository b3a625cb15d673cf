// WorkerThread, RoundThread and BackgroundLander (landing.hpp): landing and aggregate rounds on
// threads of their own.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "core/thread_priority.hpp"
#include "pipeline/landing.hpp"

namespace skippr::pipeline::internal {

namespace {
// Batches kept for landing, in the commit buffer's bytes, as a multiple of the landing size: enough
// for the lander to take whole landings from memory while the next one is being committed.
constexpr uint64_t kKeptLandings = 2;
// The longest a committed segment waits for room in the lander's queue while the lander works
// (a landing commits in about a second); past it the segment is read back instead.
constexpr std::chrono::seconds kRoomWait{5};

// Test seam: SKIPPR_LANDING_STREAM_DELAY_MS=<n> makes a stream take each slice n ms late, a lander
// slower than ingest (tests prove ingest then keeps pace with it).
void DelayForTestSeam() {
  if (const char* delay = std::getenv("SKIPPR_LANDING_STREAM_DELAY_MS"); delay != nullptr) {
    std::this_thread::sleep_for(std::chrono::milliseconds(std::atoll(delay)));
  }
}
}  // namespace

// ----- WorkerThread --------------------------------------------------------------------------

WorkerThread::~WorkerThread() {
  Signal([](Signals& signals) { signals.is_stopping = true; });
  if (thread_.joinable()) thread_.join();
}

void WorkerThread::Start(std::function<Status()> body) {
  SKIPPR_CHECK(!thread_.joinable());
  thread_ = std::thread([this, body = std::move(body)] {
    Status status = body();
    Signal([&status](Signals& signals) {
      signals.failure = std::move(status);
      signals.has_stopped = true;
    });
  });
}

void WorkerThread::Signal(const std::function<void(Signals&)>& change) {
  {
    std::lock_guard lock(mutex_);
    change(signals_);
  }
  changed_.notify_all();
}

void WorkerThread::Request() {
  Signal([](Signals& signals) { signals.is_requested = true; });
}

Status WorkerThread::Finish() {
  Signal([](Signals& signals) { signals.is_finishing = true; });
  if (thread_.joinable()) thread_.join();
  return failure();
}

Status WorkerThread::failure() const {
  std::lock_guard lock(mutex_);
  return signals_.failure;
}

// ----- RoundThread ---------------------------------------------------------------------------

RoundThread::RoundThread(std::function<Status()> round) : round_(std::move(round)) {
  worker_.Request();  // the first round runs at once
  worker_.Start([this] { return Run(); });
}

Status RoundThread::Run() {
  WorkerThread::Signals& signals = worker_.signals();
  while (true) {
    bool is_last_round = false;
    {
      std::unique_lock lock(worker_.mutex());
      worker_.changed().wait(lock, [&] {
        return signals.is_requested || signals.is_finishing || signals.is_stopping;
      });
      if (signals.is_stopping) return Status::OK();
      // A request arriving during this round runs another: what it asks for may be committed
      // after this round read its snapshot.
      signals.is_requested = false;
      is_last_round = signals.is_finishing;
    }
    SKIPPR_RETURN_IF_ERROR(round_());
    if (is_last_round) return Status::OK();
  }
}

// ----- BackgroundLander ----------------------------------------------------------------------

namespace {
Result<uint64_t> NewestLiveSegmentId(PipelineState& state) {
  SKIPPR_ASSIGN_OR_RETURN(store::ReadTransaction read, state.store().BeginRead());
  SKIPPR_ASSIGN_OR_RETURN(const std::vector<wal::SegmentEntry> live, wal::LiveSegments(read));
  uint64_t newest = 0;
  for (const wal::SegmentEntry& entry : live) newest = std::max(newest, entry.segment_id);
  return newest;
}
}  // namespace

BackgroundLander::BackgroundLander(PipelineState& state, const config::PipelineConfig& pipeline,
                                   PipelineSinks sinks)
    : state_(state), pipeline_(pipeline), sinks_(std::move(sinks)) {
  // Read before any commit of this pass: everything up to it was committed by earlier runs.
  Result<uint64_t> newest = NewestLiveSegmentId(state_);
  if (!newest.ok()) {
    worker_.Signal([&newest](WorkerThread::Signals& signals) {
      signals.failure = newest.status();
      signals.has_stopped = true;
    });
    return;
  }
  last_committed_segment_id_ = *newest;
  worker_.Start([this] {
    LowerThisThreadsPriority();  // landing has slack; ingest does not (thread_priority.hpp)
    Status status = LandUntilFinished();
    std::lock_guard lock(worker_.mutex());
    queue_.clear();  // nothing lands from memory any more
    return status;
  });
}

BackgroundLander::~BackgroundLander() = default;

// Of the sinks the pipeline has (a policy without its sink is only defaults).
uint64_t BackgroundLander::LargestLandingBytes() const {
  uint64_t bytes = 0;
  if (sinks_.data) bytes = sinks_.data_policy.target_file_bytes;
  if (sinks_.deadletters) bytes = std::max(bytes, sinks_.deadletter_policy.target_file_bytes);
  return bytes;
}

bool BackgroundLander::MayStream(const Batch& batch) const {
  if (sinks_.data == nullptr) return false;
  const sinks::Capabilities& capabilities = sinks_.data->capabilities();
  return capabilities.streams &&
         (capabilities.streams_replacing || !sinks_.data_policy.replaces_table()) &&
         sinks_.data_policy.key_columns.empty() && !batch.cdc &&
         batch.namespace_name != schema::kDeadlettersNamespace;
}

void BackgroundLander::AddCommittedBatches(uint64_t segment_id, std::vector<Batch> batches,
                                           uint64_t bytes) {
  {
    std::unique_lock lock(worker_.mutex());
    SKIPPR_CHECK_MSG(segment_id > last_committed_segment_id_, "segments are handed over in order");
    const auto has_room = [&] {
      return kept_bytes_ + bytes <= kKeptLandings * LargestLandingBytes();
    };
    const bool streams_all = std::all_of(batches.begin(), batches.end(),
                                         [this](const Batch& batch) { return MayStream(batch); });
    if (streams_all && !has_room()) {
      // The lander is the slower stage: ingest keeps pace with it rather than leave it work.
      const WorkerThread::Signals& signals = worker_.signals();
      worker_.changed().wait_for(lock, kRoomWait, [&] {
        return has_room() || !is_busy_ || signals.has_stopped || signals.is_stopping;
      });
    }
    // Only now may a round land the segment: its batches are queued (or left to be read back).
    last_committed_segment_id_ = segment_id;
    if (worker_.signals().has_stopped) {
      queue_.clear();  // what came between the lander's last clear and its end
      return;
    }
    if (!has_room()) return;  // a round reads the segment back
    for (uint32_t ordinal = 0; ordinal < batches.size(); ++ordinal) {
      const bool streams = MayStream(batches[ordinal]);
      queue_.emplace(sinks::SliceRef{segment_id, ordinal},
                     Queued{std::make_shared<const Batch>(std::move(batches[ordinal])), streams});
    }
    kept_bytes_by_segment_[segment_id] += bytes;
    kept_bytes_ += bytes;
  }
  worker_.changed().notify_all();
}

void BackgroundLander::RequestLanding() { worker_.Request(); }

void BackgroundLander::BeginFinishing() {
  worker_.Signal([](WorkerThread::Signals& signals) { signals.is_finishing = true; });
}

Status BackgroundLander::failure() const { return worker_.failure(); }

Result<LandingPassResult> BackgroundLander::Finish() {
  SKIPPR_RETURN_IF_ERROR(worker_.Finish());
  return totals_;
}

Status BackgroundLander::LandUntilFinished() {
  SKIPPR_RETURN_IF_ERROR(LandRound());  // what an earlier run left
  while (true) {
    std::string stream_namespace;
    switch (WaitForWork(stream_namespace)) {
      case Work::kStop:
        return Status::OK();
      case Work::kStream:
        SKIPPR_RETURN_IF_ERROR(Stream(stream_namespace));
        break;
      case Work::kRound:
        SKIPPR_RETURN_IF_ERROR(LandRound());
        break;
      case Work::kFinish:
        return LandRound();  // everything committed is in it: ingest has drained
    }
  }
}

BackgroundLander::Work BackgroundLander::WaitForWork(std::string& stream_namespace) {
  std::unique_lock lock(worker_.mutex());
  WorkerThread::Signals& signals = worker_.signals();
  const auto has_work = [&] {
    return signals.is_stopping || signals.is_requested || signals.is_finishing ||
           FirstStreamable(nullptr) != queue_.end();
  };
  if (!has_work()) {
    SetBusy(false);
    worker_.changed().wait(lock, has_work);
  }
  const Work work = NextWork(stream_namespace);
  SetBusy(work == Work::kStream || work == Work::kRound);
  return work;
}

void BackgroundLander::SetBusy(bool is_busy) {
  if (is_busy_ == is_busy) return;
  is_busy_ = is_busy;
  if (!is_busy_) worker_.changed().notify_all();  // a segment waiting for room waits no more
}

BackgroundLander::Work BackgroundLander::NextWork(std::string& stream_namespace) {
  WorkerThread::Signals& signals = worker_.signals();
  if (signals.is_stopping) return Work::kStop;
  // A round asked for goes first: it lands only what no stream takes, so it never cuts one short.
  if (signals.is_requested) {
    signals.is_requested = false;
    return Work::kRound;
  }
  if (auto first = FirstStreamable(nullptr); first != queue_.end()) {
    stream_namespace = first->second.batch->namespace_name;
    return Work::kStream;
  }
  return Work::kFinish;
}

BackgroundLander::Queue::iterator BackgroundLander::FirstStreamable(
    const std::string* namespace_name) {
  return std::find_if(queue_.begin(), queue_.end(), [&](const auto& queued) {
    return queued.second.streams &&
           (namespace_name == nullptr || queued.second.batch->namespace_name == *namespace_name);
  });
}

Status BackgroundLander::LandRound() {
  uint64_t last_segment_id = 0;
  {
    std::lock_guard lock(worker_.mutex());
    last_segment_id = last_committed_segment_id_;
    pass_.last_segment_id = last_segment_id;
    for (const auto& [slice, queued] : queue_) {
      if (slice.segment_id > last_segment_id) break;
      if (queued.streams) {
        pass_.reserved.insert(slice);
      } else {
        pass_.committed_batches.emplace(slice, queued.batch);
      }
    }
  }
  Result<LandingPassResult> round = LandCommittedSlices(state_, pipeline_, sinks_.view(), pass_);
  std::lock_guard lock(worker_.mutex());
  // The round landed every slice up to its last segment that a stream does not take (or, without
  // a sink for it, none will ever land): none of them is needed in memory.
  std::erase_if(queue_, [&](const auto& queued) {
    return queued.first.segment_id <= last_segment_id && !pass_.reserved.contains(queued.first);
  });
  pass_.committed_batches.clear();
  pass_.reserved.clear();
  ForgetLandedSegments();
  SKIPPR_RETURN_IF_ERROR(round.status());
  AddToTotals(*round);
  return Status::OK();
}

Status BackgroundLander::Stream(const std::string& namespace_name) {
  schema::NamespaceSchema namespace_schema;
  {
    SKIPPR_ASSIGN_OR_RETURN(store::ReadTransaction read, state_.store().BeginRead());
    SKIPPR_ASSIGN_OR_RETURN(const schema::PipelineSchema saved, schema::LoadSchema(read));
    if (auto found = saved.namespaces.find(namespace_name); found != saved.namespaces.end()) {
      namespace_schema = found->second;
    }
  }
  {
    std::lock_guard lock(worker_.mutex());
    auto first = FirstStreamable(&namespace_name);
    SKIPPR_CHECK(first != queue_.end());  // only this thread takes from the queue
    if (first->second.batch->schema_id != namespace_schema.schema_id) {
      // Of a schema older than the saved one: a round projects it onto the saved one.
      first->second.streams = false;
      return Status::OK();
    }
  }
  StreamBudget budget{
      sinks_.data_policy.target_file_bytes,
      std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::nanoseconds>(
                                             std::chrono::duration<double>(
                                                 sinks_.data_policy.commit_interval_seconds))};
  Result<LandingPassResult> landed = LandStream(
      state_, pipeline_, sinks_.view(), namespace_schema,
      [&] { return NextStreamed(namespace_schema, budget); }, pass_);
  {
    std::lock_guard lock(worker_.mutex());
    ForgetLandedSegments();
  }
  SKIPPR_RETURN_IF_ERROR(landed.status());
  AddToTotals(*landed);
  return Status::OK();
}

Result<std::optional<StreamedSlice>> BackgroundLander::NextStreamed(
    const schema::NamespaceSchema& namespace_schema, StreamBudget& budget) {
  DelayForTestSeam();
  std::unique_lock lock(worker_.mutex());
  const WorkerThread::Signals& signals = worker_.signals();
  while (true) {
    if (signals.is_stopping) {
      return Status::Unavailable(fmt::format(
          "the sync pass stopped before landing {} ended; the WAL keeps its rows",
          namespace_schema.name));
    }
    if (budget.bytes_left == 0 || std::chrono::steady_clock::now() >= budget.deadline) {
      return std::optional<StreamedSlice>();
    }
    if (auto next = FirstStreamable(&namespace_schema.name); next != queue_.end()) {
      // A batch of another schema ends the stream; the next stream takes it under its own.
      if (next->second.batch->schema_id != namespace_schema.schema_id) {
        return std::optional<StreamedSlice>();
      }
      StreamedSlice taken{next->first, std::move(next->second.batch)};
      queue_.erase(next);
      ForgetLandedSegments();  // the stream holds the batch now, within its own budget
      budget.bytes_left -= std::min(budget.bytes_left, taken.batch->DataBytes());
      return std::optional<StreamedSlice>(std::move(taken));
    }
    if (signals.is_finishing) return std::optional<StreamedSlice>();
    worker_.changed().wait_until(lock, budget.deadline);
  }
}

void BackgroundLander::AddToTotals(const LandingPassResult& landed) {
  totals_.landings += landed.landings;
  totals_.rows_landed += landed.rows_landed;
  totals_.segments_reclaimed += landed.segments_reclaimed;
  totals_.deadletters.landed += landed.deadletters.landed;
  totals_.deadletters.discarded += landed.deadletters.discarded;
}

void BackgroundLander::ForgetLandedSegments() {
  const uint64_t kept_before = kept_bytes_;
  std::erase_if(kept_bytes_by_segment_, [this](const auto& kept) {
    auto next = queue_.lower_bound(sinks::SliceRef{kept.first, 0});
    if (next != queue_.end() && next->first.segment_id == kept.first) return false;
    kept_bytes_ -= kept.second;
    return true;
  });
  if (kept_bytes_ < kept_before) worker_.changed().notify_all();  // room for a waiting segment
}

}  // namespace skippr::pipeline::internal
