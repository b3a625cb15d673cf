// `skipprd doctor`: checks the configuration and the ground it will run on (reference §1.11) — and,
// for a source with a server (Postgres), that server: reachable with its TLS settings, tables
// readable, what change data capture needs. Exit 0 when every check passes, 1 otherwise.
#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <map>
#include <set>

#include "cli/cli.hpp"
#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "core/disk.hpp"
#include "core/redact.hpp"
#include "pipeline/pipeline.hpp"
#include "sources/sources.hpp"

namespace skippr::cli {

namespace {

struct Check {
  bool ok = true;
  std::string message;
  std::optional<std::string> suggested_fix_command;
};

std::string ShellQuote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

// Writable means a file can be created in it now (or, when it does not exist yet, in the nearest
// existing ancestor, where sync will create it).
Check CheckWritable(const std::string& data_dir) {
  namespace fs = std::filesystem;
  std::error_code error;
  fs::path probe = fs::absolute(data_dir, error);
  const bool exists = fs::is_directory(probe, error);
  while (!fs::exists(probe, error) && probe.has_parent_path() && probe != probe.parent_path()) {
    probe = probe.parent_path();
  }
  std::string probe_file = (probe / ".skipprd-doctor-XXXXXX").string();
  const int fd = mkstemp(probe_file.data());
  if (fd < 0) {
    return {false,
            fmt::format("DATA_DIR {} is not writable ({}: {})", data_dir, probe.string(),
                        std::strerror(errno)),
            fmt::format("mkdir -p {0} && chmod u+rwx {0}", ShellQuote(data_dir))};
  }
  close(fd);
  unlink(probe_file.c_str());
  return {true,
          exists ? fmt::format("DATA_DIR {} is writable", data_dir)
                 : fmt::format("DATA_DIR {} will be created (its parent is writable)", data_dir)};
}

// The disk rule of the first pipeline on `data_dir` (the defaults when none is configured).
Check CheckDiskSpace(const std::string& data_dir, const config::PipelineConfig* pipeline) {
  Result<DiskUsage> usage = MeasureDisk(data_dir);
  if (!usage.ok())
    return {false, fmt::format("DATA_DIR {}: {}", data_dir, usage.status().message())};
  pipeline::DiskRule rule;
  if (pipeline != nullptr) {
    Result<pipeline::DiskRule> resolved = pipeline::ResolveDiskRule(*pipeline);
    if (!resolved.ok()) return {false, resolved.status().message()};
    rule = *resolved;
  }
  if (IsFreeFloorUnreachable(*usage, rule.thresholds)) {
    return {false, fmt::format("DATA_DIR {}: {}; the filesystem is smaller than the {} free-space "
                               "floor, so sync could never read — set disk_min_free_bytes (or "
                               "SKIPPR_DISK_MIN_FREE_BYTES) lower, or move DATA_DIR",
                               data_dir, DescribeDiskUsage(*usage),
                               FormatDecimalBytes(rule.thresholds.pause_below_free_bytes))};
  }
  const DiskPressure pressure = EvaluateDiskPressure(*usage, /*is_paused=*/false, rule.thresholds);
  if (pressure != DiskPressure::kNone) {
    return {false, fmt::format("DATA_DIR {}: {}; sync pauses reading: {} — free space or move "
                               "DATA_DIR",
                               data_dir, DescribeDiskUsage(*usage),
                               DescribeDiskPressure(pressure, *usage, rule.thresholds))};
  }
  return {true, fmt::format("DATA_DIR {}: {}", data_dir, DescribeDiskUsage(*usage))};
}

std::string DescribePipeline(const config::Config& config, const config::PipelineConfig& pipeline) {
  const auto source = config.data_sources.find(pipeline.data_source);
  const std::string source_kind =
      source != config.data_sources.end() ? source->second.connector.kind : pipeline.data_source;
  std::string destination = "WAL-only";
  if (pipeline.data_sink) {
    destination = config.data_sinks.at(*pipeline.data_sink).connector.kind + " sink '" +
                  *pipeline.data_sink + "'";
  }
  return fmt::format("pipeline '{}' ({} source '{}' → {})", pipeline.name, source_kind,
                     pipeline.data_source, destination);
}

std::vector<Check> RunChecks(const config::Config& config) {
  std::vector<Check> checks;
  checks.push_back(
      {true, config.path.empty()
                 ? std::string("no skippr.yml found; using an empty configuration")
                 : fmt::format("config {} loaded; every ${{NAME}} resolved", config.path)});
  const size_t pipeline_count = config.pipelines.size();
  checks.push_back(
      {pipeline_count > 0,
       fmt::format("{} pipeline(s) configured{}", pipeline_count,
                   pipeline_count > 0 ? "" : ": add one under 'pipelines:' in skippr.yml")});
  const size_t source_count = config.data_sources.size();
  checks.push_back(
      {source_count > 0,
       fmt::format("{} data source(s) configured{}", source_count,
                   source_count > 0 ? "" : ": add one under 'data_sources:' in skippr.yml")});
  for (const auto& [name, pipeline] : config.pipelines) {
    checks.push_back({true, DescribePipeline(config, pipeline)});
    if (!pipeline.data_sink) {
      checks.push_back(
          {true, fmt::format("pipeline '{}': no data_sink; WAL is the dataset", name)});
    }
    for (const config::AggregateConfig& aggregate : pipeline.transform.aggregates) {
      checks.push_back(
          {true, fmt::format("pipeline '{}': aggregate '{}' by [{}] with {} measure(s)", name,
                             aggregate.id, fmt::join(aggregate.key_fields, ", "),
                             aggregate.measures.size())});
    }
    checks.push_back({true, fmt::format("pipeline '{}': skipprd_el_storage_mode=local", name)});
  }
  // Sources with a server (Postgres): reachable with their TLS settings, tables readable, and
  // what change data capture needs.
  for (const auto& [name, entry] : config.data_sources) {
    for (const sources::SourceCheck& check : sources::CheckSource(entry.connector, name)) {
      checks.push_back({check.ok, check.message});
    }
  }
  const std::vector<config::ConfigProblem> problems = config::CheckWholeConfig(config);
  for (const config::ConfigProblem& problem : problems) checks.push_back({false, problem.message});
  if (problems.empty()) checks.push_back({true, "no two sinks write one warehouse namespace"});

  std::map<std::string, const config::PipelineConfig*> first_pipeline_by_data_dir;
  for (const auto& [name, pipeline] : config.pipelines) {
    first_pipeline_by_data_dir.emplace(pipeline.data_dir, &pipeline);
  }
  if (first_pipeline_by_data_dir.empty()) first_pipeline_by_data_dir.emplace(ProcessDataDir(), nullptr);
  for (const auto& [data_dir, pipeline] : first_pipeline_by_data_dir) {
    checks.push_back(CheckWritable(data_dir));
    checks.push_back(CheckDiskSpace(data_dir, pipeline));
  }
  return checks;
}

bool AllPassed(const std::vector<Check>& checks) {
  return std::all_of(checks.begin(), checks.end(), [](const Check& check) { return check.ok; });
}

nlohmann::ordered_json ToJson(const std::vector<Check>& checks) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const Check& check : checks) {
    nlohmann::ordered_json item = {
        {"ok", check.ok}, {"severity", check.ok ? "info" : "error"}, {"message", check.message}};
    if (check.suggested_fix_command) item["suggested_fix_command"] = *check.suggested_fix_command;
    list.push_back(std::move(item));
  }
  return {{"ok", AllPassed(checks)}, {"checks", std::move(list)}};
}

void PrintText(const std::vector<Check>& checks) {
  for (const Check& check : checks) {
    fmt::print("{} {}\n", check.ok ? "[ok]  " : "[FAIL]", Redact(check.message));
    if (check.suggested_fix_command) fmt::print("       fix: {}\n", *check.suggested_fix_command);
  }
  fmt::print("{}\n", AllPassed(checks) ? "All checks passed." : "Some checks failed.");
}

int RunDoctor(const GlobalOptions& global, const std::string& output) {
  Result<config::Config> config = LoadConfigForCommand(global);
  if (!config.ok()) {
    if (output == "json") {
      const std::vector<Check> failed = {{false, "config failed: " + config.status().message()}};
      fmt::print("{}\n", Redact(JsonText(ToJson(failed))));
    }
    return kExitFailure;
  }
  const std::vector<Check> checks = RunChecks(*config);
  if (output == "json") {
    fmt::print("{}\n", Redact(JsonText(ToJson(checks))));
  } else {
    PrintText(checks);
  }
  const size_t failed =
      std::count_if(checks.begin(), checks.end(), [](const Check& check) { return !check.ok; });
  spdlog::info("doctor: {} checks, {} failed", checks.size(), failed);
  return failed == 0 ? kExitSuccess : kExitFailure;
}

}  // namespace

void AddDoctorCommand(CLI::App& app, const GlobalOptions& global, int& exit_code) {
  auto* command = app.add_subcommand(
      "doctor", "Check skippr.yml, DATA_DIR and the sources' servers (Postgres: reachable, tables, CDC needs)");
  auto output = std::make_shared<std::string>("text");
  command->add_option("--output", *output, "text or json")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  command->callback([&global, &exit_code, output] { exit_code = RunDoctor(global, *output); });
}

}  // namespace skippr::cli
