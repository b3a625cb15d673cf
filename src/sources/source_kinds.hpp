// Internal to sources/: one factory per source kind.
#pragma once

#include <memory>

#include "sources/sources.hpp"

namespace skippr::sources::internal {

std::unique_ptr<Source> MakeSampleSource(const config::ConnectorConfig& connector);
Result<std::unique_ptr<Source>> MakeFileSource(const config::ConnectorConfig& connector);
Result<std::unique_ptr<Source>> MakeS3Source(const config::ConnectorConfig& connector,
                                             const std::string& source_name);
std::vector<SourceCheck> CheckS3(const config::ConnectorConfig& connector,
                                 const std::string& source_name);

}  // namespace skippr::sources::internal
