// Internal to pipeline/: landing committed WAL slices in the pipeline's SkipprLake sink, exactly
// once, and reclaiming the segments behind them (DESIGN.md §6). The store's catalog family keeps
//   ("landing", namespace)              the landing planned and not yet recorded (JSON), so a crash
//                                       replays exactly the same slices under the same landing id;
//   ("landed", segment id, ordinal)     a landed slice of a segment not yet reclaimed;
//   ("lake_snapshot", namespace)        the table snapshot holding every landed row (JSON).
// docs/formats/landing.md documents the keys and the protocol.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>

#include "lake/lake.hpp"
#include "pipeline/pipeline.hpp"

namespace skippr::pipeline::internal {

// The pipeline's lake writer; nullptr when its data_sink is not SkipprLake (or it has none).
Result<std::unique_ptr<lake::LakeWriter>> OpenLakeWriter(const config::Config& config,
                                                         const config::PipelineConfig& pipeline);

// How the pipeline's sink lands (its SkipprLake settings).
struct LakePolicy {
  uint64_t target_file_bytes = 128 << 20;  // of uncompressed column data per landing
  double commit_interval_seconds = 60;
  bool replaces_table = false;  // write_policy replace_table
};
LakePolicy ResolveLakePolicy(const config::Config& config, const config::PipelineConfig& pipeline);

// What one sync pass has landed so far: with replace_table, each namespace's first landing of the
// pass replaces the table and the later ones append to it.
struct PassLandings {
  std::set<std::string> namespaces_landed;
  // The batches this pass committed and has not landed yet, by slice: a landing takes them from
  // here instead of decoding the segment again (the segment, not this cache, is what a replay after
  // a crash reads).
  std::map<lake::SliceRef, std::shared_ptr<const Batch>> committed_batches;
};

struct LandingPassResult {
  uint64_t landings = 0;  // snapshots committed (replays included)
  int64_t rows_landed = 0;
  uint64_t segments_reclaimed = 0;
};

// Lands every committed slice not landed yet (pending landings first), one snapshot per namespace
// per at most `policy.target_file_bytes`, recording each in the store and reclaiming fully landed
// segments.
Result<LandingPassResult> LandCommittedSlices(PipelineState& state,
                                              const config::PipelineConfig& pipeline,
                                              lake::LakeWriter& writer, const LakePolicy& policy,
                                              PassLandings& pass);

// What readers need from one store snapshot: the slices already in the lake and each namespace's
// landed snapshot.
struct LandingState {
  std::set<lake::SliceRef> landed;
  std::map<std::string, lake::LandedSnapshot> snapshots;
};
Result<LandingState> ReadLandingState(const store::ReadTransaction& read);

}  // namespace skippr::pipeline::internal
