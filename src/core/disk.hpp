// Free-space state of the filesystem holding DATA_DIR, and the backpressure rule built on it
// (seeds/how-skipprd-works.txt): pause reading below 5 GB free or at >= 90 % full; resume at 80 %.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.hpp"

namespace skippr {

struct DiskUsage {
  std::string measured_path;  // the directory statvfs() was asked about (nearest existing ancestor)
  uint64_t total_bytes = 0;
  uint64_t available_bytes = 0;  // what an unprivileged writer can still use
  uint64_t used_bytes = 0;

  // Like df's "Use%": used / (used + available).
  double used_percent() const;
};

// The seed's defaults (settable per pipeline and by environment: pipeline::ResolveDiskRule).
struct DiskThresholds {
  uint64_t pause_below_free_bytes = 5'000'000'000;  // 5 GB
  double pause_at_used_percent = 90.0;
  double resume_at_used_percent = 80.0;
};

// The rule that holds reading back, if any.
enum class DiskPressure : uint8_t {
  kNone,
  kBelowFreeFloor,       // less free than pause_below_free_bytes; resumes once that much is free
  kAtPausePercent,       // at or above pause_at_used_percent
  kAboveResumePercent,   // paused, and not yet back down to resume_at_used_percent
};

// Measures the filesystem holding `path`; `path` need not exist yet (its nearest existing ancestor
// is measured, since that is where it will be created).
Result<DiskUsage> MeasureDisk(const std::string& path);

// Which rule pauses reading now. `is_paused` is the current state: a reader paused by usage
// resumes only once usage is back to resume_at_used_percent (hysteresis, so it does not flap at
// the boundary); a reader paused by the free-space floor resumes once that much is free.
DiskPressure EvaluateDiskPressure(const DiskUsage& usage, bool is_paused,
                                  const DiskThresholds& thresholds = {});
inline bool ShouldPauseForDisk(const DiskUsage& usage, bool is_paused,
                               const DiskThresholds& thresholds = {}) {
  return EvaluateDiskPressure(usage, is_paused, thresholds) != DiskPressure::kNone;
}

// True when the filesystem is smaller than the free-space floor: no amount of freeing space could
// ever end the pause, so waiting is pointless.
bool IsFreeFloorUnreachable(const DiskUsage& usage, const DiskThresholds& thresholds);

// The rule that holds and when it lets go, e.g. "1.2 GiB free is below the 5.0 GB free-space floor
// (reading resumes once 5.0 GB are free)" or "91 % used is at or above the 90 % pause threshold
// (reading resumes at 80 % used)". Empty for kNone.
std::string DescribeDiskPressure(DiskPressure pressure, const DiskUsage& usage,
                                 const DiskThresholds& thresholds);

// "42.0 GiB free of 251.0 GiB (17 % used)".
std::string DescribeDiskUsage(const DiskUsage& usage);

// "1.5 GiB", "512 B" (binary units, for sizes).
std::string FormatBytes(uint64_t bytes);
// "5.0 GB", "750 MB" (decimal units, as thresholds are written: 5 GB = 5,000,000,000 bytes).
std::string FormatDecimalBytes(uint64_t bytes);

}  // namespace skippr
