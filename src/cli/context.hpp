// Internal to cli/: what every command shares — global flags, loading skippr.yml, logging.
#pragma once

#include <optional>
#include <string>

#include "config/config.hpp"
#include "core/log.hpp"

namespace skippr::cli {

struct GlobalOptions {
  std::optional<std::string> config_path;  // --config
  std::optional<LogLevel> log_level;       // --log [level]: stderr logging
};

// Finds and loads skippr.yml as the command line and environment say, exports what .env /
// .env.local contribute (so DATA_DIR and friends apply), and starts logging. A missing file yields
// an empty Config (path empty); a broken one yields its InvalidConfig Status. Logging starts either
// way.
Result<config::Config> LoadConfigForCommand(const GlobalOptions& options);

// The pipeline a command names (--pipeline, else $PIPELINE_NAME when `env_fallback`), checked
// against the configuration. nullptr with an OK status: none was named.
Result<const config::PipelineConfig*> ResolvePipeline(const config::Config& config,
                                                      const std::string& flag_value,
                                                      bool env_fallback);

// The pipelines a command runs on: the one named (as ResolvePipeline), else all of them.
Result<std::vector<const config::PipelineConfig*>> ResolvePipelines(const config::Config& config,
                                                                   const std::string& flag_value,
                                                                   bool env_fallback);

// DATA_DIR from the environment, else ./data: where the process log goes (pipelines may override
// their own data_dir in skippr.yml).
std::string ProcessDataDir();

}  // namespace skippr::cli
