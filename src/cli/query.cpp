// `skipprd query`: SQL over every pipeline's tables <pipeline>.<namespace> with DuckDB in-process
// (reference §1.8); `skipprd df` prints one namespace's rows (§1.9).
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <iostream>

#include "cli/cli.hpp"
#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "pipeline/pipeline.hpp"

namespace skippr::cli {

namespace {

struct QueryFlags {
  std::string sql;
  bool plain = false;
  std::string output = "table";
  bool allows_file_access = false;  // --allow-file-access
};

query::OutputFormat FormatOf(const QueryFlags& flags) {
  if (flags.plain) return query::OutputFormat::kPlain;
  if (flags.output == "csv") return query::OutputFormat::kCsv;
  if (flags.output == "json") return query::OutputFormat::kJson;
  return query::OutputFormat::kTable;
}

// Passes the result on, and while it runs shows the rows written so far on standard error, once a
// second — only when standard error is a terminal and the result goes elsewhere (an export to a
// file or a pipe): nothing extra when piped, nothing mixed into a result on the terminal.
class ProgressWriter final : public query::ResultWriter {
 public:
  explicit ProgressWriter(query::ResultWriter& inner)
      : inner_(inner),
        shows_progress_(isatty(STDERR_FILENO) == 1 && isatty(STDOUT_FILENO) != 1),
        started_(std::chrono::steady_clock::now()),
        last_shown_(started_) {}
  Status Begin(const std::vector<std::string>& header,
               const std::vector<std::string>& column_types) override {
    return inner_.Begin(header, column_types);
  }
  Status Write(const query::ResultRows& rows) override {
    SKIPPR_RETURN_IF_ERROR(inner_.Write(rows));
    rows_ += rows.size();
    const auto now = std::chrono::steady_clock::now();
    if (shows_progress_ && now - last_shown_ >= std::chrono::seconds(1)) {
      last_shown_ = now;
      const double seconds = std::chrono::duration<double>(now - started_).count();
      fmt::print(stderr, "\r{} rows written, {:.0f} rows/s\033[K", rows_, rows_ / seconds);
      is_line_shown_ = true;
    }
    return Status::OK();
  }
  Status End() override {
    ClearLine();
    return inner_.End();
  }
  ~ProgressWriter() override { ClearLine(); }

 private:
  void ClearLine() {
    if (is_line_shown_) fmt::print(stderr, "\r\033[K");
    is_line_shown_ = false;
  }

  query::ResultWriter& inner_;
  const bool shows_progress_;
  const std::chrono::steady_clock::time_point started_;
  std::chrono::steady_clock::time_point last_shown_;
  uint64_t rows_ = 0;
  bool is_line_shown_ = false;
};

// Runs one statement against a fresh snapshot of every pipeline, its result streamed to stdout.
int RunStatement(const config::Config& config, const std::string& sql, const QueryFlags& flags) {
  const auto started = std::chrono::steady_clock::now();
  Result<std::unique_ptr<query::Engine>> engine =
      pipeline::OpenQueryEngine(config, pipeline::QueryAccess{flags.allows_file_access});
  if (!engine.ok()) {
    fmt::print(stderr, "query failed: {}\n", engine.status().message());
    return kExitFailure;
  }
  std::unique_ptr<query::ResultWriter> format = query::MakeFormatWriter(FormatOf(flags), WriteToStdout);
  Status status;
  {
    ProgressWriter progress(*format);
    status = (*engine)->Stream(sql, progress);
  }
  if (!status.ok()) {
    std::fflush(stdout);  // what was written, before the error
    fmt::print(stderr, "query failed: {}\n", status.message());
    spdlog::warn("query failed: {}", status.message());
    return kExitFailure;
  }
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

// Several statements' rows as one result: the first Begin and the last End reach the writer.
class OneDocument final : public query::ResultWriter {
 public:
  explicit OneDocument(query::ResultWriter& inner) : inner_(inner) {}
  Status Begin(const std::vector<std::string>& header,
               const std::vector<std::string>& column_types) override {
    if (is_begun_) return Status::OK();
    is_begun_ = true;
    return inner_.Begin(header, column_types);
  }
  Status Write(const query::ResultRows& rows) override { return inner_.Write(rows); }
  Status End() override { return Status::OK(); }
  // Ends the document (begun with `header` when no statement ran).
  Status Finish(const std::vector<std::string>& header) {
    SKIPPR_RETURN_IF_ERROR(Begin(header, {}));
    return inner_.End();
  }

 private:
  query::ResultWriter& inner_;
  bool is_begun_ = false;
};

std::string SelectAll(const std::string& table) {
  const size_t dot = table.find('.');
  return fmt::format("SELECT * FROM {}.{}", query::QuoteIdentifier(table.substr(0, dot)),
                     query::QuoteIdentifier(table.substr(dot + 1)));
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
  // Every table's columns first: tables that differ fail before a row is written.
  std::vector<std::string> header;
  for (const std::string& table : tables) {
    Result<query::QueryResult> columns = (*engine)->Run(SelectAll(table) + " LIMIT 0");
    if (!columns.ok()) {
      fmt::print(stderr, "df failed: {}\n", columns.status().message());
      return kExitFailure;
    }
    if (header.empty()) {
      header = columns->header;
    } else if (columns->header != header) {
      fmt::print(stderr, "df failed: namespaces of {} have different columns; name one with --namespace\n",
                 pipeline_name);
      return kExitFailure;
    }
  }
  std::unique_ptr<query::ResultWriter> plain =
      query::MakeFormatWriter(query::OutputFormat::kPlain, WriteToStdout);
  OneDocument document(*plain);
  for (const std::string& table : tables) {
    if (Status status = (*engine)->Stream(SelectAll(table), document); !status.ok()) {
      std::fflush(stdout);
      fmt::print(stderr, "df failed: {}\n", status.message());
      return kExitFailure;
    }
  }
  if (Status status = document.Finish(header); !status.ok()) {
    fmt::print(stderr, "df failed: {}\n", status.message());
    return kExitFailure;
  }
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
