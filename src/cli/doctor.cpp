// `skipprd doctor`: checks the configuration and the ground it will run on (reference §1.11) — and,
// for a source with a server (Postgres), that server: reachable with its TLS settings, tables
// readable, what change data capture needs (pipeline::RunDoctorChecks). Exit 0 when every check
// passes, 1 otherwise.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/cli.hpp"
#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "core/redact.hpp"
#include "pipeline/pipeline.hpp"

namespace skippr::cli {

namespace {

using Check = pipeline::DoctorCheck;

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
  const std::vector<Check> checks = pipeline::RunDoctorChecks(*config, ProcessDataDir());
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
      "doctor",
      "Check skippr.yml, DATA_DIR, the sources' and sinks' servers and buckets (Postgres: "
      "reachable, tables, CDC needs; S3: the source prefix, the WAL bucket, a lake's warehouse and "
      "catalog table)");
  auto output = std::make_shared<std::string>("text");
  command->add_option("--output", *output, "text or json")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  command->callback([&global, &exit_code, output] { exit_code = RunDoctor(global, *output); });
}

}  // namespace skippr::cli
