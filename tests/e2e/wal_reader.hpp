// Test helper: reads every live row of a pipeline's WAL through the store's catalog and the segment
// reader — an independent path from the one sync writes through.
#pragma once

#include <functional>
#include <string>

#include "core/value.hpp"

namespace skippr::testing {

struct WalRows {
  int64_t rows = 0;
  size_t segments = 0;
};

// Calls `visit(namespace, row)` for every live row of the pipeline whose state lives in `state_dir`.
WalRows ReadWalRows(const std::string& state_dir,
                    const std::function<void(const std::string& namespace_name, const Value& row)>& visit);

}  // namespace skippr::testing
