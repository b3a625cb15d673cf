// `skipprd aggregates list|show|verify`: the transform.aggregates a pipeline keeps in Skippr Store
// (seeds/materialised-views.txt). list and show read one pinned snapshot and never take the writer
// lease; verify recomputes every measure with SQL over `query`'s view and exits 1 on a difference.
#include <fmt/format.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "cli/cli.hpp"
#include "cli/commands.hpp"
#include "pipeline/pipeline.hpp"

namespace skippr::cli {

namespace {

struct AggregatesFlags {
  std::string pipeline;
  std::string id;
  std::vector<std::string> keys;  // k=v
  std::string output = "table";
};

using KeyTuple = std::vector<std::optional<std::string>>;
using MeasureTuple = std::vector<std::optional<std::string>>;

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
        Result<transform::AggregateSnapshot> snapshot = transform::ReadAggregate(*read, *aggregate);
        Result<transform::AggregateLag> lag = transform::ReadLag(*read, *aggregate);
        if (!snapshot.ok() || !lag.ok()) {
          fmt::print(stderr, "aggregates list failed: pipeline={} aggregate={}: {}\n",
                     pipeline->name, aggregate->id,
                     (snapshot.ok() ? lag.status() : snapshot.status()).message());
          return kExitFailure;
        }
        row.push_back(std::to_string(snapshot->groups.size()));
        row.push_back(snapshot->is_current ? "current" : "rebuilds at the next sync");
        row.push_back(std::to_string(lag->segments));
        row.push_back(std::to_string(lag->rows));
      }
      table.rows.push_back(std::move(row));
    }
  }
  Print(Render(table, flags.output));
  return kExitSuccess;
}

// One aggregate's groups as a table: key fields, then measures.
query::QueryResult GroupsTable(const config::AggregateConfig& aggregate,
                               const transform::AggregateSnapshot& snapshot,
                               const std::vector<std::pair<std::string, std::string>>& filters) {
  query::QueryResult table;
  for (const std::string& key : aggregate.key_fields) {
    table.header.push_back(key);
    table.column_types.push_back("VARCHAR");
  }
  for (const config::AggregateMeasure& measure : aggregate.measures) {
    table.header.push_back(measure.name);
    // Exact sums stay text in JSON (they may exceed 64 bits); counts are numbers.
    table.column_types.push_back(measure.kind == config::MeasureKind::kCount ? "BIGINT"
                                                                             : "VARCHAR");
  }
  for (const transform::AggregateGroup& group : snapshot.groups) {
    if (!MatchesFilters(aggregate, group, filters)) continue;
    std::vector<std::optional<std::string>> row = group.keys;
    row.insert(row.end(), group.measures.begin(), group.measures.end());
    table.rows.push_back(std::move(row));
  }
  return table;
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
      Result<transform::AggregateSnapshot> snapshot = transform::ReadAggregate(*read, *aggregate);
      if (!snapshot.ok()) {
        fmt::print(stderr, "aggregates show failed: pipeline={} aggregate={}: {}\n", pipeline->name,
                   aggregate->id, snapshot.status().message());
        return kExitFailure;
      }
      if (flags.output == "table" && (aggregates.size() > 1 || pipelines->size() > 1)) {
        fmt::print("{}.{}\n", pipeline->name, aggregate->id);
      }
      Print(Render(GroupsTable(*aggregate, *snapshot, *filters), flags.output));
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

// SELECT <keys as text>, <measures as text> FROM (the tables, unioned by name) GROUP BY <keys>.
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
  for (const std::string& key : aggregate.key_fields) {
    keys.push_back(query::QuoteIdentifier(key));
    outputs.push_back(fmt::format("CAST({} AS VARCHAR)", query::QuoteIdentifier(key)));
  }
  for (const config::AggregateMeasure& measure : aggregate.measures) {
    const std::string field =
        columns.contains(measure.field) ? query::QuoteIdentifier(measure.field) : "NULL";
    if (measure.kind == config::MeasureKind::kCount) {
      outputs.push_back(measure.field == "*" ? "count(*)" : fmt::format("count({})", field));
    } else {
      outputs.push_back(fmt::format("sum({})", field));
    }
  }
  return fmt::format("SELECT {} FROM ({}) GROUP BY {}", fmt::join(outputs, ", "),
                     fmt::join(selects, " UNION ALL BY NAME "), fmt::join(keys, ", "));
}

bool MeasuresEqual(const std::optional<std::string>& stored,
                   const std::optional<std::string>& computed, const std::string& computed_type) {
  if (!stored || !computed) return stored.has_value() == computed.has_value();
  if (computed_type != "DOUBLE" && computed_type != "FLOAT") return *stored == *computed;
  // Double sums: the running total subtracts as well as adds, so it may drift in the last bits.
  const double a = std::strtod(stored->c_str(), nullptr);
  const double b = std::strtod(computed->c_str(), nullptr);
  return std::fabs(a - b) <= 1e-9 * std::max({1.0, std::fabs(a), std::fabs(b)});
}

std::string TupleText(const std::vector<std::optional<std::string>>& values) {
  std::vector<std::string> texts;
  for (const auto& value : values) texts.push_back(value ? *value : "NULL");
  return fmt::format("({})", fmt::join(texts, ", "));
}

// Prints each difference (at most a few dozen) and returns how many there are.
Result<size_t> VerifyAggregate(query::Engine& engine, const store::ReadTransaction& read,
                               const config::PipelineConfig& pipeline,
                               const config::AggregateConfig& aggregate) {
  SKIPPR_ASSIGN_OR_RETURN(transform::AggregateSnapshot snapshot,
                          transform::ReadAggregate(read, aggregate));
  SKIPPR_ASSIGN_OR_RETURN(transform::AggregateLag lag, transform::ReadLag(read, aggregate));
  SKIPPR_ASSIGN_OR_RETURN(auto tables, AggregatedTables(engine, pipeline, aggregate));
  std::map<KeyTuple, MeasureTuple> computed;
  std::vector<std::string> types;
  if (!tables.empty()) {
    SKIPPR_ASSIGN_OR_RETURN(query::QueryResult result, engine.Run(RecomputeSql(aggregate, tables)));
    const size_t key_count = aggregate.key_fields.size();
    types.assign(result.column_types.begin() + static_cast<long>(key_count),
                 result.column_types.end());
    for (auto& row : result.rows) {
      computed[KeyTuple(row.begin(), row.begin() + static_cast<long>(key_count))] =
          MeasureTuple(row.begin() + static_cast<long>(key_count), row.end());
    }
  }
  const std::string name = fmt::format("{}.{}", pipeline.name, aggregate.id);
  size_t differences = 0;
  const auto report = [&](const std::string& text) {
    if (++differences <= 20) fmt::print("  {}: {}\n", name, text);
  };
  if (!snapshot.is_current)
    report("the stored state is of another config; the next sync rebuilds it");
  if (lag.segments > 0) {
    report(
        fmt::format("the processor is {} rows ({} segment(s)) behind the WAL; run sync to catch up",
                    lag.rows, lag.segments));
  }
  std::map<KeyTuple, MeasureTuple> stored;
  for (transform::AggregateGroup& group : snapshot.groups) stored[group.keys] = group.measures;
  for (const auto& [keys, measures] : computed) {
    auto found = stored.find(keys);
    if (found == stored.end()) {
      report(fmt::format("group {} is missing (SQL: {})", TupleText(keys), TupleText(measures)));
      continue;
    }
    for (size_t i = 0; i < measures.size(); ++i) {
      if (MeasuresEqual(found->second[i], measures[i], types[i])) continue;
      report(fmt::format("group {} measure {}: stored {}, SQL {}", TupleText(keys),
                         aggregate.measures[i].name, found->second[i].value_or("NULL"),
                         measures[i].value_or("NULL")));
    }
  }
  for (const auto& [keys, measures] : stored) {
    if (!computed.contains(keys))
      report(fmt::format("group {} is stored but SQL has no rows for it", TupleText(keys)));
  }
  if (differences == 0) {
    fmt::print("{}: {} group(s), every measure equals the SQL recompute\n", name, stored.size());
  } else {
    fmt::print("{}: {} difference(s)\n", name, differences);
  }
  return differences;
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
