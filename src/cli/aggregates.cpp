// `skipprd aggregates list|show|verify`: the transform.aggregates a pipeline keeps in Skippr Store
// (seeds/materialised-views.txt). list and show read one pinned snapshot and never take the writer
// lease; verify recomputes every measure with SQL over `query`'s view and exits 1 on a difference.
#include <fmt/format.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "cli/cli.hpp"
#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "pipeline/pipeline.hpp"

namespace skippr::cli {

namespace {

// Groups read and decoded at a time from the store (aggregates show and verify).
constexpr int64_t kGroupsPerChunk = 65536;

struct AggregatesFlags {
  std::string pipeline;
  std::string id;
  std::vector<std::string> keys;  // k=v
  std::string output = "table";
};

std::string Render(const query::QueryResult& result, const std::string& output) {
  if (output == "csv") return query::FormatCsv(result);
  if (output == "json") return query::FormatJson(result);
  return query::FormatTable(result);
}

void Print(const std::string& text) {
  fmt::print("{}{}", text, text.empty() || text.back() == '\n' ? "" : "\n");
}

// The pipelines named (or all), each with the aggregates named (or all).
Result<std::vector<const config::PipelineConfig*>> PipelinesWithAggregates(
    const config::Config& config, const AggregatesFlags& flags) {
  SKIPPR_ASSIGN_OR_RETURN(std::vector<const config::PipelineConfig*> pipelines,
                          ResolvePipelines(config, flags.pipeline, /*env_fallback=*/false));
  std::erase_if(pipelines, [](const config::PipelineConfig* pipeline) {
    return pipeline->transform.aggregates.empty();
  });
  if (pipelines.empty()) {
    return Status::NotFound(
        "no pipeline has transform.aggregates; add one to skippr.yml (docs/config.md, "
        "`transform.aggregates`)");
  }
  return pipelines;
}

std::vector<const config::AggregateConfig*> SelectAggregates(const config::PipelineConfig& pipeline,
                                                             const std::string& id) {
  std::vector<const config::AggregateConfig*> selected;
  for (const config::AggregateConfig& aggregate : pipeline.transform.aggregates) {
    if (id.empty() || aggregate.id == id) selected.push_back(&aggregate);
  }
  return selected;
}

Result<std::vector<std::pair<std::string, std::string>>> ParseKeyFilters(
    const std::vector<std::string>& filters) {
  std::vector<std::pair<std::string, std::string>> parsed;
  for (const std::string& filter : filters) {
    const size_t equals = filter.find('=');
    if (equals == std::string::npos || equals == 0) {
      return Status::InvalidArgument(fmt::format(
          "--key {}: write --key <key field>=<value>, e.g. --key customer_id=42", filter));
    }
    parsed.emplace_back(filter.substr(0, equals), filter.substr(equals + 1));
  }
  return parsed;
}

bool MatchesFilters(const config::AggregateConfig& aggregate,
                    const transform::AggregateGroup& group,
                    const std::vector<std::pair<std::string, std::string>>& filters) {
  for (const auto& [field, value] : filters) {
    for (size_t i = 0; i < aggregate.key_fields.size(); ++i) {
      if (aggregate.key_fields[i] != field) continue;
      if (!group.keys[i] ? value != "NULL" : *group.keys[i] != value) return false;
    }
  }
  return true;
}

int RunList(const GlobalOptions& global, const AggregatesFlags& flags) {
  Result<config::Config> config = LoadConfigForCommand(global);
  if (!config.ok()) return kExitFailure;
  Result<std::vector<const config::PipelineConfig*>> pipelines =
      PipelinesWithAggregates(*config, flags);
  if (!pipelines.ok()) {
    fmt::print(stderr, "aggregates list failed: {}\n", pipelines.status().message());
    return kExitFailure;
  }
  query::QueryResult table;
  table.header = {"pipeline", "id",    "key_fields",   "measures",
                  "groups",   "state", "lag_segments", "lag_rows"};
  table.column_types = {"VARCHAR", "VARCHAR", "VARCHAR", "VARCHAR",
                        "BIGINT",  "VARCHAR", "BIGINT",  "BIGINT"};
  for (const config::PipelineConfig* pipeline : *pipelines) {
    Result<pipeline::PipelineState> state = pipeline::PipelineState::OpenForReading(*pipeline);
    std::optional<store::ReadTransaction> read;
    if (state.ok()) {
      Result<store::ReadTransaction> begun = state->store().BeginRead();
      if (!begun.ok()) {
        fmt::print(stderr, "aggregates list failed: pipeline={}: {}\n", pipeline->name,
                   begun.status().message());
        return kExitFailure;
      }
      read.emplace(std::move(begun).value());
    }
    for (const config::AggregateConfig* aggregate : SelectAggregates(*pipeline, flags.id)) {
      std::vector<std::string> measures;
      for (const config::AggregateMeasure& measure : aggregate->measures) {
        measures.push_back(fmt::format("{}={}({})", measure.name,
                                       measure.kind == config::MeasureKind::kSum ? "sum" : "count",
                                       measure.field));
      }
      std::vector<std::optional<std::string>> row = {
          pipeline->name, aggregate->id, fmt::format("{}", fmt::join(aggregate->key_fields, ",")),
          fmt::format("{}", fmt::join(measures, ","))};
      if (!read) {
        row.insert(row.end(), {"0", "no state yet (run sync)", std::nullopt, std::nullopt});
      } else {
        // Counted from the keys: no group is decoded.
        Result<transform::AggregateGroupChunks> groups =
            transform::AggregateGroupChunks::Open(*read, *aggregate, kGroupsPerChunk);
        Result<transform::AggregateLag> lag = transform::ReadLag(*read, *aggregate);
        if (!groups.ok() || !lag.ok()) {
          fmt::print(stderr, "aggregates list failed: pipeline={} aggregate={}: {}\n",
                     pipeline->name, aggregate->id,
                     (groups.ok() ? lag.status() : groups.status()).message());
          return kExitFailure;
        }
        row.push_back(std::to_string(groups->group_count()));
        row.push_back(groups->is_current() ? "current" : "rebuilds at the next sync");
        row.push_back(std::to_string(lag->segments));
        row.push_back(std::to_string(lag->rows));
      }
      table.rows.push_back(std::move(row));
    }
  }
  Print(Render(table, flags.output));
  return kExitSuccess;
}

// Rows of text handed to a format writer.
class TextRows final : public query::ResultRows {
 public:
  explicit TextRows(std::vector<std::vector<std::optional<std::string>>> rows)
      : rows_(std::move(rows)) {}
  size_t size() const override { return rows_.size(); }
  std::optional<std::string_view> Value(size_t row, size_t column) const override {
    const std::optional<std::string>& value = rows_[row][column];
    return value ? std::optional<std::string_view>(*value) : std::nullopt;
  }

 private:
  std::vector<std::vector<std::optional<std::string>>> rows_;
};

// One aggregate's groups (those matching `filters`) to standard output in `output`'s format:
// key fields, then measures, a chunk of groups at a time, as query streams a result.
Status WriteGroups(const config::AggregateConfig& aggregate,
                   const transform::AggregateGroupChunks& chunks,
                   const std::vector<std::pair<std::string, std::string>>& filters,
                   const std::string& output) {
  std::vector<std::string> header;
  std::vector<std::string> column_types;
  for (const std::string& key : aggregate.key_fields) {
    header.push_back(key);
    column_types.push_back("VARCHAR");
  }
  for (const config::AggregateMeasure& measure : aggregate.measures) {
    header.push_back(measure.name);
    // Exact sums stay text in JSON (they may exceed 64 bits); counts are numbers.
    column_types.push_back(measure.kind == config::MeasureKind::kCount ? "BIGINT" : "VARCHAR");
  }
  const query::OutputFormat format = output == "csv"    ? query::OutputFormat::kCsv
                                     : output == "json" ? query::OutputFormat::kJson
                                                        : query::OutputFormat::kTable;
  std::unique_ptr<query::ResultWriter> writer = query::MakeFormatWriter(format, WriteToStdout);
  SKIPPR_RETURN_IF_ERROR(writer->Begin(header, column_types));
  for (size_t chunk = 0; chunk < chunks.chunk_sizes().size(); ++chunk) {
    SKIPPR_ASSIGN_OR_RETURN(std::vector<transform::AggregateGroup> groups, chunks.Read(chunk));
    std::vector<std::vector<std::optional<std::string>>> rows;
    for (transform::AggregateGroup& group : groups) {
      if (!MatchesFilters(aggregate, group, filters)) continue;
      std::vector<std::optional<std::string>> row = std::move(group.keys);
      row.insert(row.end(), group.measures.begin(), group.measures.end());
      rows.push_back(std::move(row));
    }
    SKIPPR_RETURN_IF_ERROR(writer->Write(TextRows(std::move(rows))));
  }
  return writer->End();
}

int RunShow(const GlobalOptions& global, const AggregatesFlags& flags) {
  Result<config::Config> config = LoadConfigForCommand(global);
  if (!config.ok()) return kExitFailure;
  Result<std::vector<const config::PipelineConfig*>> pipelines =
      PipelinesWithAggregates(*config, flags);
  Result<std::vector<std::pair<std::string, std::string>>> filters = ParseKeyFilters(flags.keys);
  if (!pipelines.ok() || !filters.ok()) {
    fmt::print(stderr, "aggregates show failed: {}\n",
               (pipelines.ok() ? filters.status() : pipelines.status()).message());
    return pipelines.ok() ? kExitUsage : kExitFailure;
  }
  bool found = false;
  for (const config::PipelineConfig* pipeline : *pipelines) {
    Result<pipeline::PipelineState> state = pipeline::PipelineState::OpenForReading(*pipeline);
    if (!state.ok()) {
      fmt::print(stderr, "aggregates show failed: pipeline={}: {}\n", pipeline->name,
                 state.status().message());
      return kExitFailure;
    }
    Result<store::ReadTransaction> read = state->store().BeginRead();
    if (!read.ok()) {
      fmt::print(stderr, "aggregates show failed: {}\n", read.status().message());
      return kExitFailure;
    }
    const std::vector<const config::AggregateConfig*> aggregates =
        SelectAggregates(*pipeline, flags.id);
    for (const config::AggregateConfig* aggregate : aggregates) {
      found = true;
      if (flags.output == "table" && (aggregates.size() > 1 || pipelines->size() > 1)) {
        fmt::print("{}.{}\n", pipeline->name, aggregate->id);
      }
      Result<transform::AggregateGroupChunks> chunks =
          transform::AggregateGroupChunks::Open(*read, *aggregate, kGroupsPerChunk);
      const Status written =
          chunks.ok() ? WriteGroups(*aggregate, *chunks, *filters, flags.output) : chunks.status();
      if (!written.ok()) {
        std::fflush(stdout);
        fmt::print(stderr, "aggregates show failed: pipeline={} aggregate={}: {}\n", pipeline->name,
                   aggregate->id, written.message());
        return kExitFailure;
      }
    }
  }
  if (!found) {
    fmt::print(
        stderr,
        "aggregates show failed: no aggregate with id '{}'; `skipprd aggregates list` names them\n",
        flags.id);
    return kExitFailure;
  }
  return kExitSuccess;
}

// ---------------------------------------------------------------------------------------------
// verify

// The tables of `pipeline` whose columns include every key field, with their columns.
Result<std::vector<std::pair<std::string, std::vector<std::string>>>> AggregatedTables(
    query::Engine& engine, const config::PipelineConfig& pipeline,
    const config::AggregateConfig& aggregate) {
  std::vector<std::pair<std::string, std::vector<std::string>>> tables;
  for (const std::string& name : engine.TableNames()) {
    if (name.rfind(pipeline.name + ".", 0) != 0) continue;
    // The deadletter table holds records that never reached a namespace: no aggregate covers it.
    if (name.substr(pipeline.name.size() + 1) == schema::kDeadlettersNamespace) continue;
    const std::string qualified =
        fmt::format("{}.{}", query::QuoteIdentifier(pipeline.name),
                    query::QuoteIdentifier(name.substr(pipeline.name.size() + 1)));
    SKIPPR_ASSIGN_OR_RETURN(query::QueryResult columns,
                            engine.Run(fmt::format("SELECT * FROM {} LIMIT 0", qualified)));
    const bool has_keys = std::all_of(
        aggregate.key_fields.begin(), aggregate.key_fields.end(), [&](const std::string& key) {
          return std::find(columns.header.begin(), columns.header.end(), key) !=
                 columns.header.end();
        });
    if (has_keys) tables.emplace_back(qualified, columns.header);
  }
  return tables;
}

// SELECT <keys as text> AS k_<i>, <measures> AS m_<j> FROM (the tables, unioned by name) GROUP BY
// <keys>; no rows (and untyped measures) when no table holds the keys.
std::string RecomputeSql(
    const config::AggregateConfig& aggregate,
    const std::vector<std::pair<std::string, std::vector<std::string>>>& tables) {
  std::set<std::string> columns;
  std::vector<std::string> selects;
  for (const auto& [qualified, header] : tables) {
    columns.insert(header.begin(), header.end());
    selects.push_back(fmt::format("SELECT * FROM {}", qualified));
  }
  std::vector<std::string> keys;
  std::vector<std::string> outputs;
  for (size_t i = 0; i < aggregate.key_fields.size(); ++i) {
    const std::string key = query::QuoteIdentifier(aggregate.key_fields[i]);
    keys.push_back(key);
    outputs.push_back(tables.empty() ? fmt::format("CAST(NULL AS VARCHAR) AS k_{}", i)
                                     : fmt::format("CAST({} AS VARCHAR) AS k_{}", key, i));
  }
  for (size_t j = 0; j < aggregate.measures.size(); ++j) {
    const config::AggregateMeasure& measure = aggregate.measures[j];
    const std::string field =
        columns.contains(measure.field) ? query::QuoteIdentifier(measure.field) : "NULL";
    std::string value = measure.kind == config::MeasureKind::kSum ? fmt::format("sum({})", field)
                        : measure.field == "*"                    ? std::string("count(*)")
                                                                  : fmt::format("count({})", field);
    outputs.push_back(fmt::format("{} AS m_{}", tables.empty() ? "NULL" : value, j));
  }
  if (tables.empty()) return fmt::format("SELECT {} WHERE false", fmt::join(outputs, ", "));
  return fmt::format("SELECT {} FROM ({}) GROUP BY {}", fmt::join(outputs, ", "),
                     fmt::join(selects, " UNION ALL BY NAME "), fmt::join(keys, ", "));
}

// Whether measure j differs, in SQL over r (the recompute) and s (the stored groups): as text, or
// for a double sum within a relative 1e-9 (the running total subtracts as well as adds, so its last
// bits may drift; equal infinities and NaNs are equal).
std::string MeasureDiffers(size_t j, const std::string& computed_type) {
  if (computed_type != "DOUBLE" && computed_type != "FLOAT") {
    return fmt::format("CAST(r.m_{0} AS VARCHAR) IS DISTINCT FROM s.measure_{0}", j);
  }
  const std::string a = fmt::format("CAST(r.m_{} AS DOUBLE)", j);
  const std::string b = fmt::format("TRY_CAST(s.measure_{} AS DOUBLE)", j);
  return fmt::format(
      "CASE WHEN r.m_{0} IS NULL OR s.measure_{0} IS NULL THEN (r.m_{0} IS NULL) <> (s.measure_{0} "
      "IS NULL) ELSE NOT coalesce({1} = {2} OR abs({1} - {2}) <= 1e-9 * greatest(1.0, abs({1}), "
      "abs({2})), false) END",
      j, a, b);
}

// Every group the recompute and the store disagree on, ordered by key: key_<i>, in_sql, in_store,
// then per measure sql_<j>, stored_<j>, differs_<j>.
std::string DifferencesSql(const config::AggregateConfig& aggregate, const std::string& recompute,
                           const std::vector<std::string>& measure_types) {
  std::vector<std::string> outputs;
  std::vector<std::string> join;
  std::vector<std::string> order;
  for (size_t i = 0; i < aggregate.key_fields.size(); ++i) {
    outputs.push_back(fmt::format("coalesce(r.k_{0}, s.key_{0}) AS key_{0}", i));
    join.push_back(fmt::format("r.k_{0} IS NOT DISTINCT FROM s.key_{0}", i));
    order.push_back(fmt::format("key_{}", i));
  }
  outputs.push_back("r.present IS NOT NULL AS in_sql");
  outputs.push_back("s.present IS NOT NULL AS in_store");
  std::vector<std::string> differences = {"r.present IS NULL", "s.present IS NULL"};
  for (size_t j = 0; j < aggregate.measures.size(); ++j) {
    const std::string differs = MeasureDiffers(j, measure_types.at(j));
    outputs.push_back(fmt::format("CAST(r.m_{0} AS VARCHAR) AS sql_{0}", j));
    outputs.push_back(fmt::format("s.measure_{0} AS stored_{0}", j));
    outputs.push_back(fmt::format("{} AS differs_{}", differs, j));
    differences.push_back(differs);
  }
  return fmt::format(
      "SELECT {} FROM (SELECT *, true AS present FROM ({})) r FULL OUTER JOIN (SELECT *, true AS "
      "present FROM {}.{}) s ON {} WHERE {} ORDER BY {}",
      fmt::join(outputs, ", "), recompute, query::QuoteIdentifier(pipeline::kAggregateGroupsSchema),
      query::QuoteIdentifier(aggregate.id), fmt::join(join, " AND "),
      fmt::join(differences, " OR "), fmt::join(order, ", "));
}

std::string TupleText(const std::vector<std::optional<std::string>>& values) {
  std::vector<std::string> texts;
  for (const auto& value : values) texts.push_back(value ? *value : "NULL");
  return fmt::format("({})", fmt::join(texts, ", "));
}

// Reads the rows of DifferencesSql as they stream: prints the first few differences, counts all.
class DifferenceReport final : public query::ResultWriter {
 public:
  DifferenceReport(std::string name, const config::AggregateConfig& aggregate)
      : name_(std::move(name)), aggregate_(aggregate) {}

  void Add(const std::string& text) {
    if (++differences_ <= kShown) fmt::print("  {}: {}\n", name_, text);
  }
  size_t differences() const { return differences_; }

  Status Begin(const std::vector<std::string>&, const std::vector<std::string>&) override {
    return Status::OK();
  }
  Status Write(const query::ResultRows& rows) override {
    const size_t keys = aggregate_.key_fields.size();
    const auto text = [&](size_t row, size_t column) -> std::optional<std::string> {
      std::optional<std::string_view> value = rows.Value(row, column);
      return value ? std::optional<std::string>(*value) : std::nullopt;
    };
    for (size_t row = 0; row < rows.size(); ++row) {
      std::vector<std::optional<std::string>> key;
      for (size_t i = 0; i < keys; ++i) key.push_back(text(row, i));
      const bool in_sql = text(row, keys) == "true";
      const bool in_store = text(row, keys + 1) == "true";
      std::vector<std::optional<std::string>> computed;
      for (size_t j = 0; j < aggregate_.measures.size(); ++j) {
        computed.push_back(text(row, keys + 2 + 3 * j));
      }
      if (!in_store) {
        Add(fmt::format("group {} is missing (SQL: {})", TupleText(key), TupleText(computed)));
        continue;
      }
      if (!in_sql) {
        Add(fmt::format("group {} is stored but SQL has no rows for it", TupleText(key)));
        continue;
      }
      for (size_t j = 0; j < aggregate_.measures.size(); ++j) {
        if (text(row, keys + 4 + 3 * j) != "true") continue;
        Add(fmt::format("group {} measure {}: stored {}, SQL {}", TupleText(key),
                        aggregate_.measures[j].name, text(row, keys + 3 + 3 * j).value_or("NULL"),
                        computed[j].value_or("NULL")));
      }
    }
    return Status::OK();
  }
  Status End() override { return Status::OK(); }

 private:
  static constexpr size_t kShown = 20;
  std::string name_;
  const config::AggregateConfig& aggregate_;
  size_t differences_ = 0;
};

// Prints each difference (at most a few dozen) and returns how many there are. The recompute and
// the stored groups meet in one DuckDB join that streams its differing rows: memory is bounded by
// DuckDB's, not by the number of groups.
Result<size_t> VerifyAggregate(query::Engine& engine, const store::ReadTransaction& read,
                               const config::PipelineConfig& pipeline,
                               const config::AggregateConfig& aggregate) {
  SKIPPR_ASSIGN_OR_RETURN(transform::AggregateGroupChunks opened,
                          transform::AggregateGroupChunks::Open(read, aggregate, kGroupsPerChunk));
  auto chunks = std::make_shared<const transform::AggregateGroupChunks>(std::move(opened));
  SKIPPR_ASSIGN_OR_RETURN(transform::AggregateLag lag, transform::ReadLag(read, aggregate));
  SKIPPR_ASSIGN_OR_RETURN(auto tables, AggregatedTables(engine, pipeline, aggregate));
  const std::string recompute = RecomputeSql(aggregate, tables);
  SKIPPR_ASSIGN_OR_RETURN(query::QueryResult shape,
                          engine.Run(fmt::format("SELECT * FROM ({}) LIMIT 0", recompute)));
  const std::vector<std::string> measure_types(
      shape.column_types.begin() + static_cast<long>(aggregate.key_fields.size()),
      shape.column_types.end());
  SKIPPR_RETURN_IF_ERROR(pipeline::RegisterAggregateGroups(engine, aggregate, chunks));

  DifferenceReport report(fmt::format("{}.{}", pipeline.name, aggregate.id), aggregate);
  if (!chunks->is_current()) {
    report.Add("the stored state is of another config; the next sync rebuilds it");
  }
  if (lag.segments > 0) {
    report.Add(
        fmt::format("the processor is {} rows ({} segment(s)) behind the WAL; run sync to catch up",
                    lag.rows, lag.segments));
  }
  SKIPPR_RETURN_IF_ERROR(
      engine.Stream(DifferencesSql(aggregate, recompute, measure_types), report));
  if (report.differences() == 0) {
    fmt::print("{}.{}: {} group(s), every measure equals the SQL recompute\n", pipeline.name,
               aggregate.id, chunks->group_count());
  } else {
    fmt::print("{}.{}: {} difference(s)\n", pipeline.name, aggregate.id, report.differences());
  }
  return report.differences();
}

int RunVerify(const GlobalOptions& global, const AggregatesFlags& flags) {
  Result<config::Config> config = LoadConfigForCommand(global);
  if (!config.ok()) return kExitFailure;
  Result<std::vector<const config::PipelineConfig*>> pipelines =
      PipelinesWithAggregates(*config, flags);
  if (!pipelines.ok()) {
    fmt::print(stderr, "aggregates verify failed: {}\n", pipelines.status().message());
    return kExitFailure;
  }
  size_t differences = 0;
  for (const config::PipelineConfig* pipeline : *pipelines) {
    // The store snapshot is pinned before the query engine pins its own: run verify when no sync
    // is running, or a commit between the two shows as a difference.
    Result<pipeline::PipelineState> state = pipeline::PipelineState::OpenForReading(*pipeline);
    Result<std::unique_ptr<query::Engine>> engine = pipeline::OpenQueryEngine(*config);
    if (!state.ok() || !engine.ok()) {
      fmt::print(stderr, "aggregates verify failed: pipeline={}: {}\n", pipeline->name,
                 (state.ok() ? engine.status() : state.status()).message());
      return kExitFailure;
    }
    Result<store::ReadTransaction> read = state->store().BeginRead();
    if (!read.ok()) {
      fmt::print(stderr, "aggregates verify failed: {}\n", read.status().message());
      return kExitFailure;
    }
    for (const config::AggregateConfig* aggregate : SelectAggregates(*pipeline, flags.id)) {
      Result<size_t> found = VerifyAggregate(**engine, *read, *pipeline, *aggregate);
      if (!found.ok()) {
        fmt::print(stderr, "aggregates verify failed: {}.{}: {}\n", pipeline->name, aggregate->id,
                   found.status().message());
        return kExitFailure;
      }
      differences += *found;
    }
  }
  return differences == 0 ? kExitSuccess : kExitFailure;
}

}  // namespace

void AddAggregatesCommand(CLI::App& app, const GlobalOptions& global, int& exit_code) {
  auto* command = app.add_subcommand(
      "aggregates", "Read the transform.aggregates (materialised views) kept in Skippr Store");
  command->require_subcommand(1);
  auto flags = std::make_shared<AggregatesFlags>();
  const auto add_common = [&](CLI::App* sub) {
    sub->add_option("-p,--pipeline", flags->pipeline, "Pipeline name (else all with aggregates)");
    sub->add_option("--id", flags->id, "Aggregate id (else all)");
  };
  auto* list =
      command->add_subcommand("list", "List each aggregate: keys, measures, groups, processor lag");
  add_common(list);
  list->add_option("--output", flags->output, "table, csv or json")
      ->check(CLI::IsMember({"table", "csv", "json"}))
      ->capture_default_str();
  list->callback([&global, &exit_code, flags] { exit_code = RunList(global, *flags); });

  auto* show = command->add_subcommand("show", "Print an aggregate's groups and measures");
  add_common(show);
  show->add_option("--key", flags->keys,
                   "Only groups whose key field equals a value: k=v (repeatable)");
  show->add_option("--output", flags->output, "table, csv or json")
      ->check(CLI::IsMember({"table", "csv", "json"}))
      ->capture_default_str();
  show->callback([&global, &exit_code, flags] { exit_code = RunShow(global, *flags); });

  auto* verify = command->add_subcommand(
      "verify", "Recompute every measure with SQL over query's view; exit 1 on any difference");
  add_common(verify);
  verify->callback([&global, &exit_code, flags] { exit_code = RunVerify(global, *flags); });
}

}  // namespace skippr::cli
