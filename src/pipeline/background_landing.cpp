// BackgroundLander (landing.hpp): LandCommittedSlices rounds on a thread of their own.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "pipeline/landing.hpp"

namespace skippr::pipeline::internal {

namespace {
// Batches kept for landing, in source bytes, as a multiple of the landing size: enough for the
// lander to take whole landings from memory while the next one is being committed.
constexpr uint64_t kKeptLandings = 2;
}  // namespace

BackgroundLander::BackgroundLander(PipelineState& state, const config::PipelineConfig& pipeline,
                                   std::unique_ptr<lake::LakeWriter> writer, LakePolicy policy)
    : state_(state), pipeline_(pipeline), writer_(std::move(writer)), policy_(policy) {
  thread_ = std::thread([this] { Run(); });
}

BackgroundLander::~BackgroundLander() {
  {
    std::lock_guard lock(mutex_);
    has_stopped_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void BackgroundLander::AddCommittedBatches(uint64_t segment_id, std::vector<Batch> batches,
                                           uint64_t source_bytes) {
  std::lock_guard lock(mutex_);
  if (has_stopped_ || kept_bytes_ + source_bytes > kKeptLandings * policy_.target_file_bytes) {
    return;  // the landing decodes the segment instead
  }
  for (uint32_t ordinal = 0; ordinal < batches.size(); ++ordinal) {
    handed_over_.emplace(lake::SliceRef{segment_id, ordinal},
                         std::make_shared<const Batch>(std::move(batches[ordinal])));
  }
  kept_bytes_by_segment_[segment_id] += source_bytes;
  kept_bytes_ += source_bytes;
}

void BackgroundLander::RequestLanding() {
  {
    std::lock_guard lock(mutex_);
    is_landing_requested_ = true;
  }
  changed_.notify_all();
}

Status BackgroundLander::failure() const {
  std::lock_guard lock(mutex_);
  return failure_;
}

Result<LandingPassResult> BackgroundLander::Finish() {
  {
    std::lock_guard lock(mutex_);
    is_finishing_ = true;
    is_landing_requested_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::lock_guard lock(mutex_);
  SKIPPR_RETURN_IF_ERROR(failure_);
  return totals_;
}

void BackgroundLander::Run() {
  while (true) {
    bool is_last_round = false;
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [this] { return is_landing_requested_ || has_stopped_; });
      if (has_stopped_) return;
      // A round asked for after this point runs after this one: what it must land may be
      // committed after this round planned its landings.
      is_landing_requested_ = false;
      is_last_round = is_finishing_;
      pass_.committed_batches.merge(handed_over_);
      handed_over_.clear();
    }
    Result<LandingPassResult> round =
        LandCommittedSlices(state_, pipeline_, *writer_, policy_, pass_);
    std::lock_guard lock(mutex_);
    if (!round.ok()) {
      failure_ = round.status();
      has_stopped_ = true;
      return;
    }
    totals_.landings += round->landings;
    totals_.rows_landed += round->rows_landed;
    totals_.segments_reclaimed += round->segments_reclaimed;
    ForgetLandedSegments();
    if (is_last_round) {
      has_stopped_ = true;
      return;
    }
  }
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
