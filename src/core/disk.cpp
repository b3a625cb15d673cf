#include "core/disk.hpp"

#include <fmt/format.h>
#include <sys/statvfs.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>

namespace skippr {

double DiskUsage::used_percent() const {
  const uint64_t usable = used_bytes + available_bytes;
  return usable == 0 ? 100.0
                     : 100.0 * static_cast<double>(used_bytes) / static_cast<double>(usable);
}

Result<DiskUsage> MeasureDisk(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code error;
  fs::path probe = fs::absolute(path, error);
  if (error) return Status::IOError(fmt::format("cannot resolve '{}': {}", path, error.message()));
  while (!fs::exists(probe, error) && probe.has_parent_path() && probe != probe.parent_path()) {
    probe = probe.parent_path();
  }
  struct statvfs stats {};
  if (statvfs(probe.c_str(), &stats) != 0) {
    return Status::IOError(
        fmt::format("cannot measure free space of '{}': {}", probe.string(), std::strerror(errno)));
  }
  DiskUsage usage;
  usage.measured_path = probe.string();
  usage.total_bytes = static_cast<uint64_t>(stats.f_blocks) * stats.f_frsize;
  usage.available_bytes = static_cast<uint64_t>(stats.f_bavail) * stats.f_frsize;
  usage.used_bytes = static_cast<uint64_t>(stats.f_blocks - stats.f_bfree) * stats.f_frsize;
  return usage;
}

DiskPressure EvaluateDiskPressure(const DiskUsage& usage, bool is_paused,
                                  const DiskThresholds& thresholds) {
  if (usage.available_bytes < thresholds.pause_below_free_bytes) return DiskPressure::kBelowFreeFloor;
  const double used_percent = usage.used_percent();
  if (used_percent >= thresholds.pause_at_used_percent) return DiskPressure::kAtPausePercent;
  if (is_paused && used_percent > thresholds.resume_at_used_percent) {
    return DiskPressure::kAboveResumePercent;
  }
  return DiskPressure::kNone;
}

bool IsFreeFloorUnreachable(const DiskUsage& usage, const DiskThresholds& thresholds) {
  return usage.used_bytes + usage.available_bytes < thresholds.pause_below_free_bytes;
}

std::string DescribeDiskPressure(DiskPressure pressure, const DiskUsage& usage,
                                 const DiskThresholds& thresholds) {
  const double used_percent = std::floor(usage.used_percent());
  switch (pressure) {
    case DiskPressure::kNone:
      return "";
    case DiskPressure::kBelowFreeFloor:
      return fmt::format(
          "{} free is below the {} free-space floor (reading resumes once {} are free)",
          FormatBytes(usage.available_bytes), FormatDecimalBytes(thresholds.pause_below_free_bytes),
          FormatDecimalBytes(thresholds.pause_below_free_bytes));
    case DiskPressure::kAtPausePercent:
      return fmt::format("{:.0f} % used is at or above the {:g} % pause threshold (reading resumes "
                         "at {:g} % used)",
                         used_percent, thresholds.pause_at_used_percent,
                         thresholds.resume_at_used_percent);
    case DiskPressure::kAboveResumePercent:
      return fmt::format("{:.0f} % used is not yet back down to the {:g} % resume threshold",
                         used_percent, thresholds.resume_at_used_percent);
  }
  return "";
}

std::string FormatBytes(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return fmt::format("{} B", bytes);
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 5) {
    value /= 1024.0;
    ++unit;
  }
  return fmt::format("{:.1f} {}", value, kUnits[unit]);
}

std::string FormatDecimalBytes(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "kB", "MB", "GB", "TB", "PB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1000.0 && unit < 5) {
    value /= 1000.0;
    ++unit;
  }
  return unit == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", value, kUnits[unit]);
}

std::string DescribeDiskUsage(const DiskUsage& usage) {
  return fmt::format("{} free of {} ({:.0f} % used)", FormatBytes(usage.available_bytes),
                     FormatBytes(usage.total_bytes), std::floor(usage.used_percent()));
}

}  // namespace skippr
