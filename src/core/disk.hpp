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

struct DiskThresholds {
  uint64_t pause_below_free_bytes = 5'000'000'000;  // 5 GB
  double pause_at_used_percent = 90.0;
  double resume_at_used_percent = 80.0;
};

// Measures the filesystem holding `path`; `path` need not exist yet (its nearest existing ancestor
// is measured, since that is where it will be created).
Result<DiskUsage> MeasureDisk(const std::string& path);

// Whether reading should be paused. `is_paused` is the current state: a paused reader resumes only
// once usage is back to resume_at_used_percent (hysteresis, so it does not flap at the boundary).
bool ShouldPauseForDisk(const DiskUsage& usage, bool is_paused,
                        const DiskThresholds& thresholds = {});

// "42.0 GiB free of 251.0 GiB (17 % used)".
std::string DescribeDiskUsage(const DiskUsage& usage);

// "1.5 GiB", "512 B".
std::string FormatBytes(uint64_t bytes);

}  // namespace skippr
