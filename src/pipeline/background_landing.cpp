// RoundThread and BackgroundLander (landing.hpp): LandCommittedSlices rounds on a thread of their
// own.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "pipeline/landing.hpp"

namespace skippr::pipeline::internal {

namespace {
// Batches kept for landing, in source bytes, as a multiple of the landing size: enough for the
// lander to take whole landings from memory while the next one is being committed.
constexpr uint64_t kKeptLandings = 2;
}  // namespace

// ----- RoundThread ---------------------------------------------------------------------------

RoundThread::RoundThread(std::function<Status()> round)
    : round_(std::move(round)), thread_([this] { Run(); }) {}

RoundThread::~RoundThread() {
  {
    std::lock_guard lock(mutex_);
    has_stopped_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void RoundThread::Request() {
  {
    std::lock_guard lock(mutex_);
    is_requested_ = true;
  }
  changed_.notify_all();
}

Status RoundThread::failure() const {
  std::lock_guard lock(mutex_);
  return failure_;
}

bool RoundThread::has_stopped() const {
  std::lock_guard lock(mutex_);
  return has_stopped_;
}

Status RoundThread::Finish() {
  {
    std::lock_guard lock(mutex_);
    is_finishing_ = true;
    is_requested_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::lock_guard lock(mutex_);
  return failure_;
}

void RoundThread::Run() {
  while (true) {
    bool is_last_round = false;
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [this] { return is_requested_ || has_stopped_; });
      if (has_stopped_) return;
      // A request arriving during this round runs another: what it asks for may be committed
      // after this round read its snapshot.
      is_requested_ = false;
      is_last_round = is_finishing_;
    }
    Status status = round_();
    std::lock_guard lock(mutex_);
    if (!status.ok()) {
      failure_ = std::move(status);
      has_stopped_ = true;
      return;
    }
    if (is_last_round) {
      has_stopped_ = true;
      return;
    }
  }
}

// ----- BackgroundLander ----------------------------------------------------------------------

BackgroundLander::BackgroundLander(PipelineState& state, const config::PipelineConfig& pipeline,
                                   PipelineSinks sinks)
    : state_(state),
      pipeline_(pipeline),
      sinks_(std::move(sinks)),
      rounds_([this] { return LandRound(); }) {}

BackgroundLander::~BackgroundLander() = default;

void BackgroundLander::AddCommittedBatches(uint64_t segment_id, std::vector<Batch> batches,
                                           uint64_t source_bytes) {
  if (rounds_.has_stopped()) return;
  std::lock_guard lock(handover_mutex_);
  const uint64_t landing_bytes =
      std::max(sinks_.data_policy.target_file_bytes, sinks_.deadletter_policy.target_file_bytes);
  if (kept_bytes_ + source_bytes > kKeptLandings * landing_bytes) {
    return;  // the landing decodes the segment instead
  }
  for (uint32_t ordinal = 0; ordinal < batches.size(); ++ordinal) {
    handed_over_.emplace(lake::SliceRef{segment_id, ordinal},
                         std::make_shared<const Batch>(std::move(batches[ordinal])));
  }
  kept_bytes_by_segment_[segment_id] += source_bytes;
  kept_bytes_ += source_bytes;
}

void BackgroundLander::RequestLanding() { rounds_.Request(); }

Status BackgroundLander::failure() const { return rounds_.failure(); }

Result<LandingPassResult> BackgroundLander::Finish() {
  SKIPPR_RETURN_IF_ERROR(rounds_.Finish());
  return totals_;
}

Status BackgroundLander::LandRound() {
  {
    std::lock_guard lock(handover_mutex_);
    pass_.committed_batches.merge(handed_over_);
    handed_over_.clear();
  }
  SKIPPR_ASSIGN_OR_RETURN(const LandingPassResult round,
                          LandCommittedSlices(state_, pipeline_, sinks_.view(), pass_));
  totals_.landings += round.landings;
  totals_.rows_landed += round.rows_landed;
  totals_.segments_reclaimed += round.segments_reclaimed;
  totals_.deadletters.landed += round.deadletters.landed;
  totals_.deadletters.discarded += round.deadletters.discarded;
  std::lock_guard lock(handover_mutex_);
  ForgetLandedSegments();
  return Status::OK();
}

void BackgroundLander::ForgetLandedSegments() {
  std::erase_if(kept_bytes_by_segment_, [this](const auto& kept) {
    const auto still_kept = [&](const auto& map) {
      auto next = map.lower_bound(lake::SliceRef{kept.first, 0});
      return next != map.end() && next->first.segment_id == kept.first;
    };
    if (still_kept(pass_.committed_batches) || still_kept(handed_over_)) return false;
    kept_bytes_ -= kept.second;
    return true;
  });
}

}  // namespace skippr::pipeline::internal
