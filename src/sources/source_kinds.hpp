// Internal to sources/: one factory per source kind.
#pragma once

#include <memory>

#include "sources/sources.hpp"

namespace skippr::sources::internal {

std::unique_ptr<Source> MakeSampleSource(const config::ConnectorConfig& connector);
Result<std::unique_ptr<Source>> MakeFileSource(const config::ConnectorConfig& connector);

}  // namespace skippr::sources::internal
