#include "cli/context.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <filesystem>

#include "cli/last_resort.hpp"

namespace skippr::cli {

std::string ProcessDataDir() {
  const char* data_dir = std::getenv("DATA_DIR");
  return data_dir != nullptr && data_dir[0] != '\0' ? data_dir : "./data";
}

namespace {
void StartLogging(const GlobalOptions& options) {
  const std::string log_dir = (std::filesystem::path(ProcessDataDir()) / "logs").string();
  Status status = InitLogging(LogOptions{options.log_level, log_dir});
  if (!status.ok()) fmt::print(stderr, "skipprd: warning: {}\n", status.message());
  internal::SetLastResortLogFile(LogFilePath());
}
// Shown even without --log: a user who named a file must hear that it was not used.
void Warn(const std::string& message) {
  fmt::print(stderr, "skipprd: warning: {}\n", message);
  spdlog::warn("{}", message);
}
}  // namespace

Result<config::Config> LoadConfigForCommand(const GlobalOptions& options) {
  const ProcessEnvironment shell;
  const config::ConfigLocation location =
      config::FindConfigFile(options.config_path, shell, /*working_dir=*/"");
  if (!location.path) {
    StartLogging(options);
    if (location.fell_back_from) {
      Warn(
          fmt::format("config file '{}' not found, and there is no skippr.yml or skippr.yaml in "
                      "the working directory; using an empty configuration",
                      *location.fell_back_from));
    }
    return config::Config{};
  }
  Result<config::Config> loaded = config::LoadConfigFile(*location.path, shell);
  if (loaded.ok()) {
    for (const auto& [name, value] : loaded->dotenv_overrides)
      setenv(name.c_str(), value.c_str(), 1);
  }
  StartLogging(options);
  if (location.fell_back_from) {
    Warn(fmt::format("config file '{}' not found; using '{}'", *location.fell_back_from,
                     *location.path));
  }
  if (loaded.ok()) {
    spdlog::info("loaded configuration from {}", *location.path);
  } else {
    fmt::print(stderr, "[skippr] config failed: {}\n", loaded.status().message());
    spdlog::error("config failed: {}", loaded.status().message());
  }
  return loaded;
}

Result<const config::PipelineConfig*> ResolvePipeline(const config::Config& config,
                                                      const std::string& flag_value,
                                                      bool env_fallback) {
  std::string name = flag_value;
  std::string_view named_by = "--pipeline";
  if (name.empty() && env_fallback) {
    const char* from_env = std::getenv("PIPELINE_NAME");
    if (from_env != nullptr) name = from_env;
    named_by = "PIPELINE_NAME";
  }
  if (name.empty()) return static_cast<const config::PipelineConfig*>(nullptr);
  // The same rule as skippr.yml's names: a name from the command line or the environment must not
  // reach a path either.
  if (Status valid = config::CheckPipelineName(name); !valid.ok()) {
    return Status::InvalidArgument(fmt::format("{}: {}", named_by, valid.message()));
  }
  if (const config::PipelineConfig* pipeline = config.FindPipeline(name)) return pipeline;
  std::vector<std::string> names;
  for (const auto& [defined, pipeline] : config.pipelines) names.push_back(defined);
  return Status::InvalidArgument(fmt::format(
      "pipeline '{}' is not defined in {} ({})", name,
      config.path.empty() ? std::string("the configuration (no skippr.yml found)") : config.path,
      names.empty() ? std::string("no pipelines are defined")
                    : fmt::format("defined: {}", fmt::join(names, ", "))));
}

Result<std::vector<const config::PipelineConfig*>> ResolvePipelines(const config::Config& config,
                                                                   const std::string& flag_value,
                                                                   bool env_fallback) {
  SKIPPR_ASSIGN_OR_RETURN(const config::PipelineConfig* named,
                          ResolvePipeline(config, flag_value, env_fallback));
  std::vector<const config::PipelineConfig*> pipelines;
  if (named != nullptr) {
    pipelines.push_back(named);
  } else {
    for (const auto& [name, pipeline] : config.pipelines) pipelines.push_back(&pipeline);
  }
  return pipelines;
}

}  // namespace skippr::cli
