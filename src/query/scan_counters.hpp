// Internal to query/: the counters wal_scan adds to as it reads (Engine::scan_counters).
#pragma once

#include <atomic>
#include <cstdint>

namespace skippr::query::detail {

struct AtomicScanCounters {
  std::atomic<int64_t> batches{0};
  std::atomic<int64_t> columns{0};
  std::atomic<int64_t> landed_files{0};
  std::atomic<int64_t> landed_files_read{0};
};

}  // namespace skippr::query::detail
