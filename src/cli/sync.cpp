// `skipprd sync`: read → WAL → (destination, as sinks arrive) for one pipeline or all of them
// (reference §1.7). With --once one pass; without it a new pass every sync_frequency_seconds.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "cli/cli.hpp"
#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "core/disk.hpp"
#include "pipeline/pipeline.hpp"

namespace skippr::cli {

namespace {

struct SyncFlags {
  std::string pipeline;
  bool once = false;
  std::string output = "progress";
};

// Where a pipeline's deadletters go, for the sync summary (docs/formats/deadletters.md).
std::string DeadletterDestination(const config::PipelineConfig& pipeline) {
  const std::string table = pipeline.name + "." + std::string(schema::kDeadlettersNamespace);
  if (pipeline.deadletter_sink) {
    return fmt::format("committed to the WAL, landed in deadletter_sinks.{}; query {}",
                       *pipeline.deadletter_sink, table);
  }
  if (pipeline.data_sink) {
    return "committed to the WAL; no deadletter sink: discarded once their batch lands";
  }
  return fmt::format("kept in the WAL; query {}", table);
}

// One pass of one pipeline, reported in the chosen output mode; true when it succeeded.
bool SyncPipeline(const config::Config& config, const config::PipelineConfig& pipeline, OutputMode mode,
                  const pipeline::SyncOptions& options) {
  RunOutput output(mode, "sync");
  output.Text(fmt::format("Sync started: pipeline={}", pipeline.name));
  output.Event("sync_start", {{"pipeline", pipeline.name}});
  output.Text("[start] Ingesting");
  spdlog::info("Syncing pipeline: {}", pipeline.name);
  auto last_status = std::chrono::steady_clock::now();
  bool was_paused_for_disk = false;
  Result<pipeline::SyncResult> result =
      pipeline::SyncOnce(config, pipeline, [&](const pipeline::SyncProgress& progress) {
        output.Progress(fmt::format("Ingesting {}: {} records read, {} rows committed in {} segment(s), "
                                    "{} read{}",
                                    pipeline.name, progress.records_read, progress.rows_committed,
                                    progress.segments_committed, FormatBytes(progress.bytes_read),
                                    progress.is_paused_for_disk
                                        ? fmt::format(" — paused {:.0f} s: {}", progress.paused_seconds,
                                                      progress.disk_pressure)
                                        : ""));
        if (progress.is_paused_for_disk && !was_paused_for_disk) {
          output.Event("disk_pressure", {{"pipeline", pipeline.name}, {"rule", progress.disk_pressure}});
          output.Text(fmt::format("[paused] Reading: disk pressure under DATA_DIR: {}",
                                  progress.disk_pressure));
        }
        was_paused_for_disk = progress.is_paused_for_disk;
        if (std::chrono::steady_clock::now() - last_status >= std::chrono::seconds(10)) {
          last_status = std::chrono::steady_clock::now();
          output.Event("sync_status", {{"total_rows", progress.records_read},
                                       {"bytes", progress.bytes_read},
                                       {"rows_written", progress.rows_committed},
                                       {"uploads_in_flight", 0},
                                       {"elapsed_ms", output.elapsed_ms()}});
        }
      }, options);
  output.EndProgress();
  if (!result.ok()) {
    output.Event("sync_error", {{"pipeline", pipeline.name}, {"error", result.status().message()}});
    fmt::print(stderr, "sync failed: pipeline={}: {}\nCommitted batches stay in the WAL; retry later: the "
                       "next run picks up from there.\n",
               pipeline.name, result.status().message());
    spdlog::error("sync {}: failed: {}", pipeline.name, result.status().message());
    return false;
  }
  output.Text("[done]  Ingesting");
  for (const schema::NamespaceChange& change : result->changes) {
    output.Event("namespace_discovered", {{"namespace", change.namespace_name}});
    output.Text(fmt::format("Schema evolved: {}", change.namespace_name));
  }
  if (result->deadletter_count > 0) {
    output.Text(fmt::format("Deadletters: {} ({})", result->deadletter_count,
                            DeadletterDestination(pipeline)));
    for (const schema::Deadletter& deadletter : result->deadletters) {
      output.Text("  " + schema::DescribeDeadletter(deadletter));
    }
  }
  if (result->landings > 0) {
    output.Text(fmt::format("Landed: {} rows into {} ({} landing(s)); {} WAL segment(s) reclaimed",
                            result->rows_landed, pipeline.data_sink.value_or(""), result->landings,
                            result->segments_reclaimed));
  }
  if (result->deadletters_landed > 0) {
    output.Text(fmt::format("Deadletters landed: {} in deadletter_sinks.{}",
                            result->deadletters_landed, pipeline.deadletter_sink.value_or("")));
  }
  if (result->deadletters_discarded > 0) {
    output.Text(fmt::format(
        "Discarded {} deadletter records because no deadletter sink is configured",
        result->deadletters_discarded));
  }
  if (!pipeline.transform.aggregates.empty()) {
    output.Text(fmt::format("Aggregated: {} row(s) applied to {} aggregate(s)",
                            result->rows_aggregated, pipeline.transform.aggregates.size()));
  }
  output.Text("[start] Finalising");
  output.Text("[done]  Finalising");
  output.Text(fmt::format("Sync complete: pipeline={} namespaces={} rows={} elapsed={}ms", pipeline.name,
                          result->rows_by_namespace.size(), result->rows_committed, output.elapsed_ms()));
  output.Event("sync_complete", {{"pipeline", pipeline.name},
                                 {"namespaces_synced", result->rows_by_namespace.size()},
                                 {"total_rows", result->rows_committed},
                                 {"records_read", result->records_read},
                                 {"segments_committed", result->segments_committed},
                                 {"deadletters", result->deadletter_count},
                                 {"deadletters_landed", result->deadletters_landed},
                                 {"deadletters_discarded", result->deadletters_discarded},
                                 {"rows_landed", result->rows_landed},
                                 {"landings", result->landings},
                                 {"segments_reclaimed", result->segments_reclaimed},
                                 {"rows_aggregated", result->rows_aggregated},
                                 {"elapsed_ms", output.elapsed_ms()}});
  spdlog::info("Pipeline sync complete: {}: {} records read, {} rows committed in {} segment(s)",
               pipeline.name, result->records_read, result->rows_committed, result->segments_committed);
  return true;
}

std::optional<int64_t> SyncFrequencyOverride() {
  const char* value = std::getenv("SYNC_FREQUENCY");
  if (value == nullptr || value[0] == '\0') return std::nullopt;
  char* end = nullptr;
  const long long seconds = std::strtoll(value, &end, 10);
  if (end == value || seconds <= 0) return std::nullopt;
  return seconds;
}

int RunSync(const GlobalOptions& global, const SyncFlags& flags) {
  Result<config::Config> config = LoadConfigForCommand(global);
  if (!config.ok()) return kExitFailure;  // reported by LoadConfigForCommand
  for (const config::ConfigProblem& problem : config::CheckWholeConfig(*config)) {
    fmt::print(stderr, "[skippr] config failed: {}\n", problem.message);
    return kExitFailure;
  }
  Result<std::vector<const config::PipelineConfig*>> resolved =
      ResolvePipelines(*config, flags.pipeline, /*env_fallback=*/true);
  if (!resolved.ok()) {
    fmt::print(stderr, "sync failed: {}\n", resolved.status().message());
    return kExitFailure;
  }
  const std::vector<const config::PipelineConfig*>& pipelines = *resolved;
  if (pipelines.empty()) {
    fmt::print(stderr, "sync: no pipelines are defined; add one under 'pipelines:' in skippr.yml\n");
    return kExitFailure;
  }
  const OutputMode mode = ParseOutputMode(flags.output);
  std::map<std::string, std::chrono::steady_clock::time_point> last_run;
  while (true) {
    bool all_ok = true;
    for (const config::PipelineConfig* pipeline : pipelines) {
      const int64_t frequency = SyncFrequencyOverride().value_or(pipeline->sync_frequency_seconds);
      auto previous = last_run.find(pipeline->name);
      if (!flags.once && previous != last_run.end() &&
          std::chrono::steady_clock::now() - previous->second < std::chrono::seconds(frequency)) {
        continue;
      }
      last_run[pipeline->name] = std::chrono::steady_clock::now();
      // One pipeline without --once follows a change stream; several take turns, each pass
      // ending when its source has caught up.
      const pipeline::SyncOptions options{.follows_changes = !flags.once && pipelines.size() == 1};
      all_ok = SyncPipeline(*config, *pipeline, mode, options) && all_ok;
    }
    if (flags.once) return all_ok ? kExitSuccess : kExitFailure;
    std::this_thread::sleep_for(std::chrono::seconds(pipelines.size() == 1 ? 1 : 10));
  }
}

}  // namespace

void AddSyncCommand(CLI::App& app, const GlobalOptions& global, int& exit_code) {
  auto* command = app.add_subcommand(
      "sync", "Read the source, commit every batch to the WAL, and land it (one pipeline, or all)");
  auto flags = std::make_shared<SyncFlags>();
  command->add_option("-p,--pipeline", flags->pipeline, "Pipeline name (else $PIPELINE_NAME; else all)");
  command->add_flag("--once", flags->once, "Run one pass and exit (else a pass every sync_frequency_seconds)");
  command->add_option("--output", flags->output, "progress, text or json")
      ->check(CLI::IsMember({"progress", "text", "json"}))
      ->capture_default_str();
  command->callback([&global, &exit_code, flags] { exit_code = RunSync(global, *flags); });
}

}  // namespace skippr::cli
