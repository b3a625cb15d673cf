// `skipprd discover`: sample the source, infer every field, save the schema (reference §1.4).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "cli/cli.hpp"
#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "core/disk.hpp"
#include "pipeline/pipeline.hpp"

namespace skippr::cli {

namespace {

struct DiscoverFlags {
  std::string pipeline;
  std::string output = "progress";
};

int RunDiscover(const GlobalOptions& global, const DiscoverFlags& flags) {
  Result<config::Config> config = LoadConfigForCommand(global);
  if (!config.ok()) return kExitFailure;  // reported by LoadConfigForCommand
  Result<const config::PipelineConfig*> pipeline = ResolvePipeline(*config, flags.pipeline, true);
  if (!pipeline.ok()) {
    fmt::print(stderr, "discover failed: {}\n", pipeline.status().message());
    return kExitFailure;
  }
  if (*pipeline == nullptr) {
    fmt::print(stderr, "discover: no pipeline named (use --pipeline NAME or set PIPELINE_NAME); "
                       "nothing to discover\n");
    return kExitSuccess;
  }
  const std::string& name = (*pipeline)->name;
  RunOutput output(ParseOutputMode(flags.output), "discover");
  output.Text(fmt::format("Discover started: pipeline={}", name));
  output.Event("discover_start", {{"pipeline", name}});
  output.Text("[start] Discovering");
  spdlog::info("discover {}: started", name);

  Result<pipeline::DiscoverResult> result =
      pipeline::Discover(*config, **pipeline, [&](const pipeline::DiscoverProgress& progress) {
        output.Progress(fmt::format("Discovering {}: {} records, {} read, {} deadletters", name,
                                    progress.records, FormatBytes(progress.bytes),
                                    progress.deadletters));
      });
  output.EndProgress();
  if (!result.ok()) {
    output.Event("discover_complete", {{"ok", false},
                                       {"error", result.status().message()},
                                       {"elapsed_ms", output.elapsed_ms()}});
    fmt::print(stderr, "discover failed: {}\n", result.status().message());
    spdlog::error("discover {}: failed: {}", name, result.status().message());
    return kExitFailure;
  }
  output.Text("[done]  Discovering");

  size_t total_fields = 0;
  for (const auto& [ns_name, ns] : result->schema.namespaces) {
    const size_t field_count = ns.CountFields();
    total_fields += field_count;
    output.Text(fmt::format("Namespace discovered: {} ({} fields)", ns_name, field_count));
    output.Event("namespace_discovered", {{"namespace", ns_name}, {"field_count", field_count}});
  }
  for (const schema::NamespaceChange& change : result->changes) {
    output.Text(fmt::format("Schema evolved: {}", change.namespace_name));
    for (const std::string& line : change.changes) output.Text("  " + line);
    const size_t added = std::count_if(change.changes.begin(), change.changes.end(),
                                       [](const std::string& line) { return line.rfind("added", 0) == 0; });
    output.Event("schema_evolved", {{"namespace", change.namespace_name},
                                    {"fields_added", added},
                                    {"changes", change.changes}});
  }
  if (result->deadletter_count > 0) {
    output.Text(fmt::format("Deadletters: {} (records that could not be read; they are not in the "
                            "schema)",
                            result->deadletter_count));
    for (const schema::Deadletter& deadletter : result->deadletters) {
      output.Text("  " + schema::DescribeDeadletter(deadletter));
      output.Event("deadletter", {{"source", deadletter.origin.source},
                                  {"line", deadletter.origin.line},
                                  {"record", deadletter.origin.row},
                                  {"reason", deadletter.reason}});
    }
    if (result->deadletter_count > result->deadletters.size()) {
      output.Text(fmt::format("  ... and {} more (see the log)",
                              result->deadletter_count - result->deadletters.size()));
    }
  }
  output.Text(fmt::format("Discover complete: pipeline={} namespaces={} fields={} elapsed={}ms", name,
                          result->schema.namespaces.size(), total_fields, output.elapsed_ms()));
  output.Event("discover_complete", {{"ok", true},
                                     {"namespaces_discovered", result->schema.namespaces.size()},
                                     {"total_fields", total_fields},
                                     {"records", result->records},
                                     {"deadletters", result->deadletter_count},
                                     {"elapsed_ms", output.elapsed_ms()}});
  spdlog::info("discover {}: complete: {} records, {} namespaces, {} fields, {} deadletters", name,
               result->records, result->schema.namespaces.size(), total_fields,
               result->deadletter_count);
  return kExitSuccess;
}

}  // namespace

void AddDiscoverCommand(CLI::App& app, const GlobalOptions& global, int& exit_code) {
  auto* command = app.add_subcommand(
      "discover", "Sample a pipeline's source, infer its schema and save it (writes no data)");
  auto flags = std::make_shared<DiscoverFlags>();
  command->add_option("-p,--pipeline", flags->pipeline, "Pipeline name (else $PIPELINE_NAME)");
  command->add_option("--output", flags->output, "progress, text or json")
      ->check(CLI::IsMember({"progress", "text", "json"}))
      ->capture_default_str();
  command->callback([&global, &exit_code, flags] { exit_code = RunDiscover(global, *flags); });
}

}  // namespace skippr::cli
