// `skipprd status`: per pipeline, the live WAL (segments, bytes, rows, age of the oldest unlanded
// batch), source positions, disk pressure and the last run's result. Reads one snapshot; never takes
// the writer lease, so it works while a sync runs.
#include <fmt/format.h>

#include <chrono>
#include <nlohmann/json.hpp>

#include "cli/cli.hpp"
#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "pipeline/pipeline.hpp"
#include "sources/sources.hpp"

namespace skippr::cli {

namespace {

struct StatusFlags {
  std::string pipeline;
  std::string output = "text";
};

int64_t NowMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string Age(int64_t since_unix_micros) {
  const int64_t seconds = (NowMicros() - since_unix_micros) / 1'000'000;
  if (seconds < 120) return fmt::format("{} s", seconds);
  if (seconds < 7200) return fmt::format("{} min", seconds / 60);
  return fmt::format("{:.1f} h", seconds / 3600.0);
}

// Files read again because they changed in place: the new versions over all partitions.
uint64_t NewFileVersions(const sources::SourcePositions& positions) {
  uint64_t versions = 0;
  for (const auto& [partition, position] : positions) versions += position.version - 1;
  return versions;
}

nlohmann::ordered_json DeadlettersJson(const pipeline::PipelineStatus& status) {
  const pipeline::DeadletterCounts& counts = status.deadletters;
  return {{"committed", counts.committed},
          {"live", counts.live},
          {"landed", counts.landed},
          {"discarded", counts.discarded},
          {"sink", status.deadletter_sink ? nlohmann::ordered_json("deadletter_sinks." +
                                                                   *status.deadletter_sink)
                                          : nlohmann::ordered_json(nullptr)}};
}

// "  deadletters: 12 committed: 2 in the WAL, 10 landed in deadletter_sinks.dl"
void PrintDeadletters(const pipeline::PipelineStatus& status) {
  const pipeline::DeadletterCounts& counts = status.deadletters;
  std::string where = fmt::format("{} in the WAL", counts.live);
  if (counts.landed > 0 || status.deadletter_sink) {
    where += fmt::format(", {} landed in deadletter_sinks.{}", counts.landed,
                         status.deadletter_sink.value_or("(no longer configured)"));
  }
  if (counts.discarded > 0) where += fmt::format(", {} discarded (no deadletter sink)", counts.discarded);
  fmt::print("  deadletters: {} committed: {} (query {}.deadletters)\n", counts.committed, where,
             status.pipeline);
}

nlohmann::ordered_json ToJson(const pipeline::PipelineStatus& status) {
  nlohmann::ordered_json positions = nlohmann::ordered_json::object();
  for (const auto& [partition, position] : status.positions) {
    nlohmann::ordered_json& entry = positions[partition];
    entry = {{"records_consumed", position.records_consumed},
             {"is_closed", position.is_closed},
             {"size_bytes", position.size_bytes},
             {"version", position.version},
             {"new_versions", position.version - 1}};
    if (!position.version_reason.empty()) entry["version_reason"] = position.version_reason;
  }
  nlohmann::ordered_json json = {{"pipeline", status.pipeline},
                                 {"has_state", status.has_state},
                                 {"pipeline_instance", status.instance_id},
                                 {"destination", status.has_sink ? "sink" : "WAL-only"},
                                 {"live_segments", status.live_segments},
                                 {"live_bytes", status.live_bytes},
                                 {"live_rows", status.live_rows},
                                 {"oldest_unlanded_age_seconds",
                                  status.oldest_live_unix_micros
                                      ? nlohmann::ordered_json((NowMicros() - *status.oldest_live_unix_micros) / 1'000'000)
                                      : nlohmann::ordered_json(nullptr)},
                                 {"source_positions", std::move(positions)},
                                 {"source_new_versions", NewFileVersions(status.positions)},
                                 {"disk_pressure", status.is_under_disk_pressure}};
  if (status.is_under_disk_pressure) json["disk_pressure_rule"] = status.disk_pressure;
  if (status.disk) {
    json["disk"] = {{"path", status.disk->measured_path},
                    {"available_bytes", status.disk->available_bytes},
                    {"total_bytes", status.disk->total_bytes},
                    {"used_percent", status.disk->used_percent()}};
  }
  json["deadletters"] = DeadlettersJson(status);
  nlohmann::ordered_json lags = nlohmann::ordered_json::array();
  for (const transform::AggregateLag& lag : status.aggregate_lags) {
    lags.push_back({{"aggregate", lag.aggregate_id},
                    {"lag_segments", lag.segments},
                    {"lag_rows", lag.rows},
                    {"lag_bytes", lag.bytes}});
  }
  json["aggregates"] = std::move(lags);
  if (status.last_run) {
    const pipeline::LastRun& run = *status.last_run;
    json["last_run"] = {{"ok", run.ok},
                        {"finished_unix_micros", run.finished_unix_micros},
                        {"records_read", run.records_read},
                        {"rows_committed", run.rows_committed},
                        {"segments_committed", run.segments_committed},
                        {"deadletters", run.deadletters}};
    if (!run.ok) json["last_run"]["error"] = run.error;
  } else {
    json["last_run"] = nullptr;
  }
  return json;
}

nlohmann::ordered_json ServerStateJson(const Result<std::optional<sources::ServerState>>& server) {
  if (!server.ok()) return {{"error", server.status().message()}};
  if (!server->has_value()) return nullptr;
  nlohmann::ordered_json facts = nlohmann::ordered_json::object();
  for (const auto& [name, value] : (*server)->facts) facts[name] = value;
  return {{"what", (*server)->what}, {"facts", std::move(facts)}};
}

void PrintServerState(const Result<std::optional<sources::ServerState>>& server) {
  if (!server.ok()) {
    fmt::print("  source server: cannot be read: {}\n", server.status().message());
    return;
  }
  if (!server->has_value()) return;
  std::vector<std::string> facts;
  for (const auto& [name, value] : (*server)->facts) facts.push_back(name + " " + value);
  fmt::print("  source server: {}: {}\n", (*server)->what, fmt::join(facts, ", "));
}

void PrintText(const pipeline::PipelineStatus& status) {
  fmt::print("Pipeline {}\n", status.pipeline);
  if (!status.has_state) {
    fmt::print("  no state yet: run `skipprd discover` or `skipprd sync --pipeline {}`\n", status.pipeline);
  } else {
    fmt::print("  WAL: {} live segment(s), {}, {} rows{}\n", status.live_segments,
               FormatBytes(status.live_bytes), status.live_rows,
               status.has_sink ? "" : " (no data_sink: the WAL is the dataset and is never reclaimed)");
    if (status.oldest_live_unix_micros) {
      fmt::print("  oldest unlanded batch: {} old\n", Age(*status.oldest_live_unix_micros));
    }
    size_t closed = 0;
    uint64_t records = 0;
    for (const auto& [partition, position] : status.positions) {
      closed += position.is_closed ? 1 : 0;
      records += position.records_consumed;
    }
    fmt::print("  source: {} partition(s), {} read to the end, {} records consumed\n",
               status.positions.size(), closed, records);
    if (const uint64_t versions = NewFileVersions(status.positions); versions > 0) {
      fmt::print("  changed files: {} new version(s), read again from their start:\n", versions);
      for (const auto& [partition, position] : status.positions) {
        if (position.version == 1) continue;
        fmt::print("    {}: version {} ({})\n", partition, position.version,
                   position.version_reason);
      }
    }
    fmt::print("  store instance: {}\n", status.instance_id);
    PrintDeadletters(status);
    for (const transform::AggregateLag& lag : status.aggregate_lags) {
      fmt::print("  aggregate {}: processor lag {} segment(s), {} rows, {}\n", lag.aggregate_id,
                 lag.segments, lag.rows, FormatBytes(lag.bytes));
    }
  }
  if (status.disk) {
    fmt::print("  disk: {}{}\n", DescribeDiskUsage(*status.disk),
               status.is_under_disk_pressure
                   ? fmt::format(" — UNDER PRESSURE: sync pauses reading: {}", status.disk_pressure)
                   : "");
  }
  if (status.last_run) {
    const pipeline::LastRun& run = *status.last_run;
    if (run.ok) {
      fmt::print("  last run: ok {} ago: {} records read, {} rows committed in {} segment(s), {} deadletters\n",
                 Age(run.finished_unix_micros), run.records_read, run.rows_committed,
                 run.segments_committed, run.deadletters);
    } else {
      fmt::print("  last run: FAILED {} ago: {}\n", Age(run.finished_unix_micros), run.error);
    }
  }
}

int RunStatus(const GlobalOptions& global, const StatusFlags& flags) {
  Result<config::Config> config = LoadConfigForCommand(global);
  if (!config.ok()) return kExitFailure;  // reported by LoadConfigForCommand
  Result<std::vector<const config::PipelineConfig*>> resolved =
      ResolvePipelines(*config, flags.pipeline, /*env_fallback=*/false);
  if (!resolved.ok()) {
    fmt::print(stderr, "status failed: {}\n", resolved.status().message());
    return kExitFailure;
  }
  const std::vector<const config::PipelineConfig*>& pipelines = *resolved;
  nlohmann::ordered_json all = nlohmann::ordered_json::array();
  for (const config::PipelineConfig* pipeline : pipelines) {
    Result<pipeline::PipelineStatus> status = pipeline::ReadStatus(*pipeline);
    if (!status.ok()) {
      fmt::print(stderr, "status failed: pipeline={}: {}\n", pipeline->name, status.status().message());
      return kExitFailure;
    }
    // What the source's server keeps for the pipeline (a replication slot); a server that cannot
    // be reached is reported, not a failure of `status`.
    const auto source = config->data_sources.find(pipeline->data_source);
    Result<std::optional<sources::ServerState>> server =
        source != config->data_sources.end()
            ? sources::ReadServerState(source->second.connector, pipeline->data_source)
            : Result<std::optional<sources::ServerState>>(std::optional<sources::ServerState>());
    if (flags.output == "json") {
      nlohmann::ordered_json json = ToJson(*status);
      json["source_server"] = ServerStateJson(server);
      all.push_back(std::move(json));
    } else {
      PrintText(*status);
      PrintServerState(server);
    }
  }
  if (flags.output == "json") fmt::print("{}\n", JsonText(nlohmann::ordered_json{{"pipelines", std::move(all)}}));
  return kExitSuccess;
}

}  // namespace

void AddStatusCommand(CLI::App& app, const GlobalOptions& global, int& exit_code) {
  auto* command = app.add_subcommand("status", "Show each pipeline's WAL, source positions, disk and last run");
  auto flags = std::make_shared<StatusFlags>();
  command->add_option("-p,--pipeline", flags->pipeline, "Pipeline name (else all)");
  command->add_option("--output", flags->output, "text or json")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  command->callback([&global, &exit_code, flags] { exit_code = RunStatus(global, *flags); });
}

}  // namespace skippr::cli
