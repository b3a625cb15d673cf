// Internal to pipeline/: the disk backpressure wait of a sync pass (DiskRule in pipeline.hpp).
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "pipeline/pipeline.hpp"

namespace skippr::pipeline::internal {

// Holds reading back while the filesystem holding DATA_DIR is under pressure, visibly (progress,
// log) and for a bounded time: a pass that waited the rule's max_wait_seconds fails with NoSpace
// naming the filesystem and the rule; a floor the filesystem can never reach fails at once.
class DiskGate {
 public:
  DiskGate(std::string pipeline_name, std::string data_dir, DiskRule rule);

  // Returns once reading may go on (or the disk cannot be measured: never stall on that).
  Status WaitUntilReadable(SyncProgress& progress,
                           const std::function<void(const SyncProgress&)>& on_progress);

 private:
  Status Refuse(const DiskUsage& usage, DiskPressure pressure, double waited_seconds) const;

  std::string pipeline_name_;
  std::string data_dir_;
  DiskRule rule_;
  bool has_warned_unmeasurable_ = false;
};

}  // namespace skippr::pipeline::internal
