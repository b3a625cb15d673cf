// `skipprd query`: SQL over every pipeline's tables <pipeline>.<namespace> with DuckDB in-process
// (reference §1.8); `skipprd df` prints one namespace's rows (§1.9).
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <iostream>

#include "cli/cli.hpp"
#include "cli/commands.hpp"
#include "pipeline/pipeline.hpp"

namespace skippr::cli {

namespace {

struct QueryFlags {
  std::string sql;
  bool plain = false;
  std::string output = "table";
  bool allows_file_access = false;  // --allow-file-access
};

std::string Render(const query::QueryResult& result, const QueryFlags& flags) {
  if (flags.plain) return query::FormatPlain(result);
  if (flags.output == "csv") return query::FormatCsv(result);
  if (flags.output == "json") return query::FormatJson(result);
  return query::FormatTable(result);
}

// Runs one statement against a fresh snapshot of every pipeline.
int RunStatement(const config::Config& config, const std::string& sql, const QueryFlags& flags) {
  const auto started = std::chrono::steady_clock::now();
  Result<std::unique_ptr<query::Engine>> engine =
      pipeline::OpenQueryEngine(config, pipeline::QueryAccess{flags.allows_file_access});
  if (!engine.ok()) {
    fmt::print(stderr, "query failed: {}\n", engine.status().message());
    return kExitFailure;
  }
  Result<query::QueryResult> result = (*engine)->Run(sql);
  if (!result.ok()) {
    fmt::print(stderr, "query failed: {}\n", result.status().message());
    spdlog::warn("query failed: {}", result.status().message());
    return kExitFailure;
  }
  const std::string text = Render(*result, flags);
  fmt::print("{}{}", text, text.empty() || text.back() == '\n' ? "" : "\n");
  std::fflush(stdout);  // the result before the timing line, also when both go to one terminal
  if (!flags.plain) {
    fmt::print(stderr, "Query time: {:.3f} seconds\n",
               std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  }
  return kExitSuccess;
}

int RunQuery(const GlobalOptions& global, const QueryFlags& flags) {
  Result<config::Config> config = LoadConfigForCommand(global);
  if (!config.ok()) return kExitFailure;  // reported by LoadConfigForCommand
  if (!flags.sql.empty()) return RunStatement(*config, flags.sql, flags);
  // Interactive: one statement per line until :q, :quit, exit or end of input.
  const bool is_terminal = isatty(STDIN_FILENO) == 1;
  std::string line;
  while (true) {
    if (is_terminal) fmt::print("sql> ");
    std::fflush(stdout);
    if (!std::getline(std::cin, line)) break;
    if (line == ":q" || line == ":quit" || line == "exit") break;
    if (line.find_first_not_of(" \t;") == std::string::npos) continue;
    RunStatement(*config, line, flags);
  }
  return kExitSuccess;
}

struct DfFlags {
  std::string pipeline;
  std::string namespace_name;
};

int RunDf(const GlobalOptions& global, const DfFlags& flags) {
  Result<config::Config> config = LoadConfigForCommand(global);
  if (!config.ok()) return kExitFailure;  // reported by LoadConfigForCommand
  std::string pipeline_name = flags.pipeline;
  std::string namespace_name = flags.namespace_name;
  if (const size_t dot = namespace_name.find('.'); dot != std::string::npos) {
    pipeline_name = namespace_name.substr(0, dot);
    namespace_name = namespace_name.substr(dot + 1);
  }
  if (pipeline_name.empty()) {
    fmt::print(stderr, "df() requires a pipeline when listing all namespaces\n");
    return kExitFailure;
  }
  Result<const config::PipelineConfig*> pipeline = ResolvePipeline(*config, pipeline_name, false);
  if (!pipeline.ok()) {
    fmt::print(stderr, "df failed: {}\n", pipeline.status().message());
    return kExitFailure;
  }
  Result<std::unique_ptr<query::Engine>> engine = pipeline::OpenQueryEngine(*config);
  if (!engine.ok()) {
    fmt::print(stderr, "df failed: {}\n", engine.status().message());
    return kExitFailure;
  }
  std::vector<std::string> tables;
  for (const std::string& table : (*engine)->TableNames()) {
    if (table.rfind(pipeline_name + ".", 0) != 0) continue;
    if (!namespace_name.empty() && table != pipeline_name + "." + namespace_name) continue;
    // Every namespace means the data: the deadletter table has columns of its own (name it).
    if (namespace_name.empty() && table == pipeline_name + "." + std::string(schema::kDeadlettersNamespace)) {
      continue;
    }
    tables.push_back(table);
  }
  query::QueryResult combined;
  for (const std::string& table : tables) {
    const size_t dot = table.find('.');
    Result<query::QueryResult> result = (*engine)->Run(
        fmt::format("SELECT * FROM \"{}\".\"{}\"", table.substr(0, dot), table.substr(dot + 1)));
    if (!result.ok()) {
      fmt::print(stderr, "df failed: {}\n", result.status().message());
      return kExitFailure;
    }
    if (combined.header.empty()) {
      combined.header = result->header;
      combined.column_types = result->column_types;
    } else if (combined.header != result->header) {
      fmt::print(stderr, "df failed: namespaces of {} have different columns; name one with --namespace\n",
                 pipeline_name);
      return kExitFailure;
    }
    for (auto& row : result->rows) combined.rows.push_back(std::move(row));
  }
  fmt::print("{}\n", query::FormatPlain(combined));
  return kExitSuccess;
}

}  // namespace

void AddQueryCommand(CLI::App& app, const GlobalOptions& global, int& exit_code) {
  auto* command = app.add_subcommand(
      "query", "Run SQL over <pipeline>.<namespace> tables (an interactive sql> prompt without --sql)");
  auto flags = std::make_shared<QueryFlags>();
  command->add_option("--sql", flags->sql, "The statement to run");
  command->add_flag("--plain", flags->plain, "Print {\"header\":[...],\"rows\":[[...]]} with string values");
  command->add_option("--output", flags->output, "table, csv or json")
      ->check(CLI::IsMember({"table", "csv", "json"}))
      ->capture_default_str();
  command->add_flag(std::string(query::kAllowFileAccessFlag), flags->allows_file_access,
                    "Let SQL read and write files, attach databases, load extensions and change "
                    "settings (off: only the <pipeline>.<namespace> tables can be read)");
  command->callback([&global, &exit_code, flags] { exit_code = RunQuery(global, *flags); });

  auto* df = app.add_subcommand("df", "Print a namespace's rows as {\"header\",\"rows\"} JSON");
  auto df_flags = std::make_shared<DfFlags>();
  df->add_option("-p,--pipeline", df_flags->pipeline, "Pipeline name");
  df->add_option("--namespace", df_flags->namespace_name, "Namespace, or pipeline.namespace");
  df->callback([&global, &exit_code, df_flags] { exit_code = RunDf(global, *df_flags); });
}

}  // namespace skippr::cli
