#include "session.hpp"

#include <fmt/format.h>
#include <pybind11/stl.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <thread>

#include "core/log.hpp"
#include "core/redact.hpp"
#include "errors.hpp"
#include "pipeline/pipeline.hpp"

namespace skippr::python {

namespace py = pybind11;

namespace {

constexpr auto kSignalCheckInterval = std::chrono::milliseconds(100);
constexpr int64_t kGroupsPerChunk = 65536;

// The process log, as the CLI keeps it: <data dir>/logs/skipprd.<date>.log, info and above.
void StartLoggingOnce(const std::string& data_dir) {
  static std::once_flag started;
  std::call_once(started, [&] {
    const Status status = InitLogging(LogOptions{std::nullopt, data_dir + "/logs"});
    if (!status.ok()) spdlog::warn("{}", status.message());
  });
}

// Runs `work` on a thread of its own while the calling thread waits with the GIL released,
// looking for signals every 100 ms. Ctrl-C (or any signal handler that raises) sets the stop
// flag `work` is given; `work` then ends cleanly — committed work kept — and the exception
// (KeyboardInterrupt) is raised once it has.
template <typename T>
T RunInterruptibly(const std::function<T(const std::atomic<bool>& stop)>& work) {
  std::atomic<bool> stop{false};
  std::packaged_task<T()> task([&] { return work(stop); });
  std::future<T> done = task.get_future();
  std::thread worker(std::move(task));
  std::optional<py::error_already_set> interrupt;
  while (true) {
    {
      py::gil_scoped_release release;
      if (done.wait_for(kSignalCheckInterval) == std::future_status::ready) break;
    }
    if (!interrupt && PyErr_CheckSignals() != 0) {
      interrupt.emplace();  // takes the raised exception; re-raised after the work has ended
      stop = true;
    }
  }
  worker.join();
  if (interrupt) throw std::move(*interrupt);
  return done.get();
}

py::list NamespacesEvolved(const std::vector<schema::NamespaceChange>& changes) {
  py::list names;
  for (const schema::NamespaceChange& change : changes) names.append(change.namespace_name);
  return names;
}

py::dict SyncSummary(const pipeline::SyncResult& result, const std::string& pipeline_name) {
  py::dict summary;
  summary["pipeline"] = pipeline_name;
  summary["ran_discover"] = result.ran_discover;
  summary["records_read"] = result.records_read;
  summary["rows_committed"] = result.rows_committed;
  summary["segments_committed"] = result.segments_committed;
  summary["rows_by_namespace"] = result.rows_by_namespace;
  summary["deadletters"] = result.deadletter_count;
  summary["landings"] = result.landings;
  summary["rows_landed"] = result.rows_landed;
  summary["segments_reclaimed"] = result.segments_reclaimed;
  summary["rows_aggregated"] = result.rows_aggregated;
  summary["namespaces_evolved"] = NamespacesEvolved(result.changes);
  return summary;
}

// An engine over the pipeline's tables, kept open while a result streams.
struct EngineOwner final : ResultOwner {
  std::unique_ptr<query::Engine> engine;
};

// An aggregate's stored groups in an engine of their own, read from one pinned snapshot.
// Members are destroyed bottom-up: the engine before the groups it scans, those before the
// snapshot they read.
struct AggregateOwner final : ResultOwner {
  std::optional<pipeline::PipelineState> state;
  std::unique_ptr<store::ReadTransaction> read;
  std::shared_ptr<const transform::AggregateGroupChunks> chunks;
  std::unique_ptr<query::Engine> engine;
};

std::unique_ptr<StreamedResult> StreamOrThrow(std::shared_ptr<ResultOwner> owner,
                                              query::Engine& engine, const std::string& sql) {
  Result<std::unique_ptr<query::BatchStream>> stream = [&] {
    py::gil_scoped_release release;
    return engine.OpenBatchStream(sql);
  }();
  return std::make_unique<StreamedResult>(std::move(owner), ValueOrThrow(std::move(stream)));
}

}  // namespace

namespace {

// Only what one pipeline runs with: its entries and itself.
void KeepOnlyPipeline(config::Config& config, const std::string& pipeline_name) {
  const config::PipelineConfig pipeline = config.pipelines.at(pipeline_name);
  const auto keep = [](std::map<std::string, config::ConnectorEntry>& entries,
                       const std::optional<std::string>& name) {
    std::erase_if(entries, [&](const auto& entry) { return entry.first != name; });
  };
  keep(config.data_sources, pipeline.data_source);
  keep(config.data_sinks, pipeline.data_sink);
  keep(config.deadletter_sinks, pipeline.deadletter_sink);
  std::erase_if(config.pipelines, [&](const auto& entry) { return entry.first != pipeline_name; });
}

}  // namespace

Session::Session(const std::string& yaml_text, const std::string& config_path,
                 const std::string& pipeline_name)
    : pipeline_name_(pipeline_name) {
  // First the file's shape, with no variable read: which entries the pipeline runs with.
  const config::Config shape = ValueOrThrow(
      config::ParseConfig(yaml_text, config_path, MapEnvironment(), config::ReferenceMode::kKeep));
  if (shape.FindPipeline(pipeline_name) == nullptr) {
    ThrowStatus(Status::InvalidArgument(
        fmt::format("{} has no pipeline '{}'", config_path, pipeline_name)));
  }
  for (const config::ConfigProblem& problem : config::CheckWholeConfig(shape)) {
    ThrowStatus(Status::InvalidConfig(problem.message));
  }
  // Then the file as the CLI reads it (positions are the file's), resolving only the references
  // of that scope: another pipeline's unset variable is not this session's business.
  const ProcessEnvironment shell;
  config_ = ValueOrThrow(config::ParseConfigAt(yaml_text, config_path, shell,
                                               config::PipelineKeyPaths(shape, pipeline_name)));
  KeepOnlyPipeline(config_, pipeline_name);
  // As the CLI does: what .env and .env.local contribute applies to the whole run.
  for (const auto& [name, value] : config_.dotenv_overrides) setenv(name.c_str(), value.c_str(), 1);
  StartLoggingOnce(pipeline().data_dir);
}

py::dict Session::Doctor() const {
  const std::vector<pipeline::DoctorCheck> checks = [&] {
    py::gil_scoped_release release;
    return pipeline::RunDoctorChecks(config_, pipeline().data_dir);
  }();
  py::list list;
  bool all_ok = true;
  for (const pipeline::DoctorCheck& check : checks) {
    py::dict item;
    item["ok"] = check.ok;
    item["severity"] = check.ok ? "info" : "error";
    item["message"] = Redact(check.message);
    if (check.suggested_fix_command) item["suggested_fix_command"] = *check.suggested_fix_command;
    list.append(item);
    all_ok = all_ok && check.ok;
  }
  py::dict report;
  report["ok"] = all_ok;
  report["checks"] = list;
  return report;
}

py::dict Session::Discover() const {
  Result<pipeline::DiscoverResult> result = RunInterruptibly<Result<pipeline::DiscoverResult>>(
      [&](const std::atomic<bool>&) { return pipeline::Discover(config_, pipeline(), nullptr); });
  pipeline::DiscoverResult discovered = ValueOrThrow(std::move(result));
  py::dict summary;
  summary["pipeline"] = pipeline_name_;
  summary["records"] = discovered.records;
  summary["bytes"] = discovered.bytes;
  summary["deadletters"] = discovered.deadletter_count;
  summary["namespaces_evolved"] = NamespacesEvolved(discovered.changes);
  py::list namespaces;
  for (const auto& [name, namespace_schema] : discovered.schema.namespaces) namespaces.append(name);
  summary["namespaces"] = namespaces;
  return summary;
}

py::dict Session::Sync(bool once) const {
  Result<pipeline::SyncResult> result =
      RunInterruptibly<Result<pipeline::SyncResult>>([&](const std::atomic<bool>& stop) {
        pipeline::SyncOptions options{.follows_changes = !once, .stop_requested = &stop};
        while (true) {
          Result<pipeline::SyncResult> pass =
              pipeline::SyncOnce(config_, pipeline(), nullptr, options);
          if (once || !pass.ok() || stop) return pass;
          const auto next_pass = std::chrono::steady_clock::now() +
                                 std::chrono::seconds(pipeline().sync_frequency_seconds);
          while (!stop && std::chrono::steady_clock::now() < next_pass) {
            std::this_thread::sleep_for(kSignalCheckInterval);
          }
          if (stop) return pass;
        }
      });
  return SyncSummary(ValueOrThrow(std::move(result)), pipeline_name_);
}

std::unique_ptr<StreamedResult> Session::Query(const std::string& sql) const {
  auto owner = std::make_shared<EngineOwner>();
  Result<std::unique_ptr<query::Engine>> engine = [&] {
    py::gil_scoped_release release;
    return pipeline::OpenQueryEngine(config_, {.allows_file_access = false});
  }();
  owner->engine = ValueOrThrow(std::move(engine));
  query::Engine& opened = *owner->engine;
  return StreamOrThrow(std::move(owner), opened, sql);
}

std::vector<std::string> Session::Namespaces() const {
  Result<schema::PipelineSchema> schema = [&] {
    py::gil_scoped_release release;
    return pipeline::ReadSchema(pipeline());
  }();
  std::vector<std::string> names;
  for (const auto& [name, namespace_schema] : ValueOrThrow(std::move(schema)).namespaces) {
    names.push_back(name);
  }
  return names;
}

const config::AggregateConfig& Session::FindAggregate(const std::string& aggregate_id) const {
  for (const config::AggregateConfig& aggregate : pipeline().transform.aggregates) {
    if (aggregate.id == aggregate_id) return aggregate;
  }
  std::vector<std::string> ids;
  for (const config::AggregateConfig& aggregate : pipeline().transform.aggregates) {
    ids.push_back(aggregate.id);
  }
  ThrowStatus(Status::NotFound(
      fmt::format("pipeline '{}' has no aggregate with id '{}'; its transform.aggregates are: {}",
                  pipeline_name_, aggregate_id,
                  ids.empty() ? "(none)" : fmt::format("{}", fmt::join(ids, ", ")))));
}

std::vector<std::pair<std::string, std::string>> Session::AggregateMeasures(
    const std::string& aggregate_id) const {
  std::vector<std::pair<std::string, std::string>> measures;
  for (const config::AggregateMeasure& measure : FindAggregate(aggregate_id).measures) {
    measures.emplace_back(measure.name,
                          measure.kind == config::MeasureKind::kSum ? "sum" : "count");
  }
  return measures;
}

std::unique_ptr<StreamedResult> Session::Aggregates(const std::string& aggregate_id) const {
  const config::AggregateConfig& aggregate = FindAggregate(aggregate_id);
  auto owner = std::make_shared<AggregateOwner>();
  const Status opened = [&]() -> Status {
    py::gil_scoped_release release;
    SKIPPR_ASSIGN_OR_RETURN(pipeline::PipelineState state,
                            pipeline::PipelineState::OpenForReading(pipeline()));
    owner->state.emplace(std::move(state));
    SKIPPR_ASSIGN_OR_RETURN(store::ReadTransaction read, owner->state->store().BeginRead());
    owner->read = std::make_unique<store::ReadTransaction>(std::move(read));
    SKIPPR_ASSIGN_OR_RETURN(
        transform::AggregateGroupChunks chunks,
        transform::AggregateGroupChunks::Open(*owner->read, aggregate, kGroupsPerChunk));
    owner->chunks = std::make_shared<const transform::AggregateGroupChunks>(std::move(chunks));
    SKIPPR_ASSIGN_OR_RETURN(owner->engine, query::Engine::Open({.allows_file_access = false}));
    return pipeline::RegisterAggregateGroups(*owner->engine, aggregate, owner->chunks);
  }();
  ThrowIfError(opened);
  // Keys and sums as the store holds them (text: sums are exact, of any size); counts as numbers.
  std::vector<std::string> columns;
  for (size_t i = 0; i < aggregate.key_fields.size(); ++i) {
    columns.push_back(
        fmt::format("key_{} AS {}", i, query::QuoteIdentifier(aggregate.key_fields[i])));
  }
  for (size_t j = 0; j < aggregate.measures.size(); ++j) {
    const config::AggregateMeasure& measure = aggregate.measures[j];
    const std::string value = measure.kind == config::MeasureKind::kCount
                                  ? fmt::format("CAST(measure_{} AS BIGINT)", j)
                                  : fmt::format("measure_{}", j);
    columns.push_back(fmt::format("{} AS {}", value, query::QuoteIdentifier(measure.name)));
  }
  const std::string sql = fmt::format("SELECT {} FROM {}.{}", fmt::join(columns, ", "),
                                      query::QuoteIdentifier(pipeline::kAggregateGroupsSchema),
                                      query::QuoteIdentifier(aggregate.id));
  query::Engine& engine = *owner->engine;
  return StreamOrThrow(std::move(owner), engine, sql);
}

void RegisterSession(py::module_& module) {
  py::class_<Session>(module, "Session", "One pipeline of a configuration, run in this process.")
      .def(py::init<const std::string&, const std::string&, const std::string&>(),
           py::arg("yaml_text"), py::arg("config_path"), py::arg("pipeline"))
      .def_property_readonly("pipeline", &Session::pipeline_name)
      .def("doctor", &Session::Doctor)
      .def("discover", &Session::Discover)
      .def("sync", &Session::Sync, py::arg("once"))
      .def("query", &Session::Query, py::arg("sql"))
      .def("namespaces", &Session::Namespaces)
      .def("aggregates", &Session::Aggregates, py::arg("aggregate_id"))
      .def("aggregate_measures", &Session::AggregateMeasures, py::arg("aggregate_id"));
}

}  // namespace skippr::python
