// sync: its settings (buffer thresholds, the disk rule), SyncOnce (one pass, sync_pass.cpp, and its
// outcome recorded for `status`), and ReadStatus.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/redact.hpp"
#include "core/check.hpp"
#include "core/crash.hpp"
#include "core/disk.hpp"
#include "pipeline/disk_gate.hpp"
#include "pipeline/landing.hpp"
#include "pipeline/pipeline.hpp"
#include "pipeline/sync_pass.hpp"

namespace skippr::pipeline {

namespace {

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

}  // namespace

Result<SyncResult> SyncOnce(const config::Config& config, const config::PipelineConfig& pipeline,
                            const std::function<void(const SyncProgress&)>& on_progress,
                            const SyncOptions& options) {
  SKIPPR_ASSIGN_OR_RETURN(PipelineState state, PipelineState::OpenForWriting(pipeline));
  if (ChaosRequested(pipeline)) StartChaosMode();
  Result<SyncResult> result = internal::RunSyncPass(config, pipeline, state, on_progress, options);
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

}  // namespace skippr::pipeline
