#include "pipeline/disk_gate.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <thread>

namespace skippr::pipeline {

namespace {

constexpr double kStillPausedLogSeconds = 60;
constexpr auto kPollInterval = std::chrono::seconds(1);

// A SKIPPR_DISK_* value: nullopt when unset or empty; InvalidConfig when not a number in range.
Result<std::optional<double>> EnvSetting(const char* name, double min_value, double max_value) {
  const char* text = std::getenv(name);
  if (text == nullptr || text[0] == '\0') return std::optional<double>();
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(text, &end);
  if (end == text || *end != '\0' || errno == ERANGE || !std::isfinite(value) ||
      value < min_value || value > max_value) {
    return Status::InvalidConfig(fmt::format(
        "environment variable {}='{}' is not a number from {:g} to {:g}; fix or unset it", name,
        std::string(text).substr(0, 64), min_value, max_value));
  }
  return std::optional<double>(value);
}

template <typename Setting>
Result<double> Pick(const std::optional<int64_t>& setting, const char* env_name, double min_value,
                    double max_value, Setting fallback) {
  if (setting) return static_cast<double>(*setting);
  SKIPPR_ASSIGN_OR_RETURN(std::optional<double> from_env, EnvSetting(env_name, min_value, max_value));
  return from_env.value_or(static_cast<double>(fallback));
}

}  // namespace

Result<DiskRule> ResolveDiskRule(const config::PipelineConfig& pipeline) {
  DiskRule rule;
  DiskThresholds& thresholds = rule.thresholds;
  SKIPPR_ASSIGN_OR_RETURN(const double min_free_bytes,
                          Pick(pipeline.disk_min_free_bytes, "SKIPPR_DISK_MIN_FREE_BYTES", 0, 1e18,
                               thresholds.pause_below_free_bytes));
  thresholds.pause_below_free_bytes = static_cast<uint64_t>(min_free_bytes);
  SKIPPR_ASSIGN_OR_RETURN(thresholds.pause_at_used_percent,
                          Pick(pipeline.disk_pause_at_percent, "SKIPPR_DISK_PAUSE_AT_PERCENT", 0.001,
                               100, thresholds.pause_at_used_percent));
  SKIPPR_ASSIGN_OR_RETURN(thresholds.resume_at_used_percent,
                          Pick(pipeline.disk_resume_at_percent, "SKIPPR_DISK_RESUME_AT_PERCENT", 0,
                               100, thresholds.resume_at_used_percent));
  SKIPPR_ASSIGN_OR_RETURN(rule.max_wait_seconds,
                          Pick(pipeline.disk_wait_seconds, "SKIPPR_DISK_WAIT_SECONDS", 0, 1e9,
                               rule.max_wait_seconds));
  if (thresholds.resume_at_used_percent >= thresholds.pause_at_used_percent) {
    return Status::InvalidConfig(fmt::format(
        "pipeline {}: the disk resume threshold ({:g} %) must be below the pause threshold "
        "({:g} %); set pipelines.{}.disk_resume_at_percent / SKIPPR_DISK_RESUME_AT_PERCENT lower",
        pipeline.name, thresholds.resume_at_used_percent, thresholds.pause_at_used_percent,
        pipeline.name));
  }
  return rule;
}

namespace internal {

DiskGate::DiskGate(std::string pipeline_name, std::string data_dir, DiskRule rule)
    : pipeline_name_(std::move(pipeline_name)), data_dir_(std::move(data_dir)), rule_(rule) {}

Status DiskGate::Refuse(const DiskUsage& usage, DiskPressure pressure,
                        double waited_seconds) const {
  const std::string settings = fmt::format(
      "pipelines.{0}.disk_min_free_bytes / disk_pause_at_percent / disk_resume_at_percent (or "
      "SKIPPR_DISK_MIN_FREE_BYTES / _PAUSE_AT_PERCENT / _RESUME_AT_PERCENT)",
      pipeline_name_);
  if (IsFreeFloorUnreachable(usage, rule_.thresholds)) {
    return Status::NoSpace(fmt::format(
        "sync {}: the filesystem holding DATA_DIR {} ({}) has {} in all, less than the {} "
        "free-space floor, so reading could never resume; lower the floor with {}, or move "
        "DATA_DIR to a larger filesystem",
        pipeline_name_, data_dir_, usage.measured_path, FormatBytes(usage.total_bytes),
        FormatDecimalBytes(rule_.thresholds.pause_below_free_bytes), settings));
  }
  return Status::NoSpace(fmt::format(
      "sync {}: reading stayed paused for {:.0f} s on the filesystem holding DATA_DIR {} ({}, {}): "
      "{}; free space there (a data_sink reclaims the WAL as it lands), or change the thresholds "
      "with {}, or wait longer with disk_wait_seconds / SKIPPR_DISK_WAIT_SECONDS (now {:g} s). "
      "Committed rows are safe; the next run resumes where this one stopped",
      pipeline_name_, waited_seconds, data_dir_, usage.measured_path, DescribeDiskUsage(usage),
      DescribeDiskPressure(pressure, usage, rule_.thresholds), settings, rule_.max_wait_seconds));
}

Status DiskGate::WaitUntilReadable(SyncProgress& progress,
                                   const std::function<void(const SyncProgress&)>& on_progress) {
  const auto started = std::chrono::steady_clock::now();
  double last_logged_seconds = 0;
  bool is_paused = false;
  while (true) {
    Result<DiskUsage> usage = MeasureDisk(data_dir_);
    if (!usage.ok()) {
      if (!has_warned_unmeasurable_) {
        spdlog::warn("sync {}: cannot measure free space under {} ({}); disk backpressure is off",
                     pipeline_name_, data_dir_, usage.status().message());
        has_warned_unmeasurable_ = true;
      }
      return Status::OK();
    }
    const DiskPressure pressure = EvaluateDiskPressure(*usage, is_paused, rule_.thresholds);
    const double waited_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (pressure == DiskPressure::kNone) {
      if (is_paused) {
        spdlog::info("sync {}: disk pressure cleared after {:.0f} s ({}); reading again",
                     pipeline_name_, waited_seconds, DescribeDiskUsage(*usage));
      }
      progress.is_paused_for_disk = false;
      progress.disk_pressure.clear();
      progress.paused_seconds = 0;
      return Status::OK();
    }
    if (IsFreeFloorUnreachable(*usage, rule_.thresholds) || waited_seconds >= rule_.max_wait_seconds) {
      return Refuse(*usage, pressure, waited_seconds);
    }
    const std::string rule = DescribeDiskPressure(pressure, *usage, rule_.thresholds);
    if (!is_paused || waited_seconds - last_logged_seconds >= kStillPausedLogSeconds) {
      spdlog::warn("sync {}: reading {} under {} ({}): {}; waiting up to {:g} s", pipeline_name_,
                   is_paused ? fmt::format("still paused after {:.0f} s", waited_seconds) : "paused",
                   usage->measured_path, DescribeDiskUsage(*usage), rule, rule_.max_wait_seconds);
      last_logged_seconds = waited_seconds;
    }
    is_paused = true;
    progress.is_paused_for_disk = true;
    progress.disk_pressure = rule;
    progress.paused_seconds = waited_seconds;
    if (on_progress) on_progress(progress);
    std::this_thread::sleep_for(kPollInterval);
  }
}

}  // namespace internal
}  // namespace skippr::pipeline
