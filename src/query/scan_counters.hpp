// Internal to query/: what wal_scan reports to its engine as it reads (Engine::scan_counters),
// and the first batch it could not read.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <utility>

#include "core/status.hpp"

namespace skippr::query::detail {

// The first failure of a statement's scans, with its code (Corruption for a damaged WAL slice):
// DuckDB's error for it is text only, so the engine reports this instead.
class ScanFailure {
 public:
  void Record(Status failure) {
    std::lock_guard lock(mutex_);
    if (!first_) first_ = std::move(failure);
  }
  std::optional<Status> Take() {
    std::lock_guard lock(mutex_);
    return std::exchange(first_, std::nullopt);
  }

 private:
  std::mutex mutex_;
  std::optional<Status> first_;
};

struct AtomicScanCounters {
  std::atomic<int64_t> batches{0};
  std::atomic<int64_t> columns{0};
  std::atomic<int64_t> landed_files{0};
  std::atomic<int64_t> landed_files_read{0};
  ScanFailure failure;
};

}  // namespace skippr::query::detail
