// Every namespace of every pipeline as a query table <pipeline>.<namespace>: in one pinned store
// snapshot, the landed Iceberg snapshot recorded there (data files minus their deletes) plus the
// live WAL slices not landed in it, projected onto the current schema — under merge_by_key, the
// live slices upsert by key over the landed rows.
//
// Tables are bound on demand (query::TableBinder): opening the engine only lists each pipeline's
// namespaces; a statement's tables are bound before it runs (the pipeline's catalog pinned at its
// first bind, the landed snapshot's files listed, the segment files holding its live slices opened
// and their tails and indexes checked), and each slice is decoded and checked when a scan reaches
// it. A table that cannot be bound fails only the statements that read it.
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <memory>
#include <mutex>
#include <set>

#include "iceberg/iceberg.hpp"
#include "lake/lake.hpp"
#include "pipeline/landing.hpp"
#include "pipeline/pipeline.hpp"

namespace skippr::pipeline {

namespace {

// How often a bind re-pins when a segment file vanished under it (reclaimed after landing).
constexpr int kSnapshotAttempts = 10;

const std::string kDeadletters(schema::kDeadlettersNamespace);

// One table's live WAL slices as a query::BatchList: each slice is decoded (and its header and the
// frames read checked) when a scan's thread reaches it, from segment files opened at the bind and
// kept open, so reclaim cannot take a slice away from a scan that listed it.
class LiveSlices {
 public:
  struct Slice {
    std::shared_ptr<const wal::SegmentReader> segment;
    uint32_t ordinal = 0;
    int64_t rows = 0;
  };

  static query::BatchList List(std::vector<Slice> slices) {
    query::BatchList list;
    for (const Slice& slice : slices) list.row_counts.push_back(slice.rows);
    auto shared = std::make_shared<const LiveSlices>(std::move(slices));
    list.read = [shared](size_t index, const FieldSelection& fields) {
      return shared->Read(index, fields);
    };
    return list;
  }

  explicit LiveSlices(std::vector<Slice> slices) : slices_(std::move(slices)) {}

 private:
  // (The scan puts the table's name in front of an error.)
  Result<std::shared_ptr<const Batch>> Read(size_t index, const FieldSelection& fields) const {
    const Slice& slice = slices_.at(index);
    SKIPPR_ASSIGN_OR_RETURN(Batch batch, slice.segment->ReadSlice(slice.ordinal, fields));
    return std::make_shared<const Batch>(std::move(batch));
  }

  const std::vector<Slice> slices_;
};

// One pipeline's catalog as one read transaction saw it: the landed snapshots and landed slices
// are one cut with the live segments, so a slice is read from the lake or from the WAL, never both
// or neither. Segment files are opened once (tail and index checked), for every table that needs
// them.
struct PinnedCatalog {
  std::vector<wal::SegmentEntry> segments;
  internal::LandingState landing;
  std::map<uint64_t, Result<std::shared_ptr<const wal::SegmentReader>>> segment_files;
  // The read transaction of the pin, for the landed order tokens a keyed CDC table's view looks
  // up while it scans (TableSource::landed_token): from DuckDB's threads, one at a time — LMDB's
  // MDB_NOTLS lets a read transaction move between threads, not serve two at once. Open as long
  // as the pin: an engine's, which query opens per statement.
  struct SharedRead {
    explicit SharedRead(store::ReadTransaction transaction) : read(std::move(transaction)) {}
    store::ReadTransaction read;
    std::mutex mutex;
  };
  std::shared_ptr<SharedRead> read;
  // Namespaces whose sink holds a landing the store has as planned (AddLandingsTheSinkHolds).
  std::set<std::string> held_namespaces;
};

// The tables of one pipeline: listed from its saved schema when the engine opens, bound on demand.
// Its tables: one per namespace, and <pipeline>.deadletters (docs/formats/deadletters.md), the
// deadletter slices still in the WAL plus those landed in the deadletter sink.
class PipelineTables {
 public:
  // NotFound: the pipeline never ran, it has no tables. `checks_locations`: file access is off,
  // so landed files must lie in the sink's table data directories.
  static Result<std::unique_ptr<PipelineTables>> Open(const config::Config& config,
                                                      const config::PipelineConfig& pipeline,
                                                      bool checks_locations) {
    SKIPPR_ASSIGN_OR_RETURN(PipelineState state, PipelineState::OpenForReading(pipeline));
    std::unique_ptr<PipelineTables> tables(new PipelineTables());
    tables->name_ = pipeline.name;
    tables->checks_locations_ = checks_locations;
    tables->state_ = std::make_unique<PipelineState>(std::move(state));
    {
      SKIPPR_ASSIGN_OR_RETURN(store::ReadTransaction read, tables->state_->store().BeginRead());
      SKIPPR_ASSIGN_OR_RETURN(tables->schema_, schema::LoadSchema(read));
    }
    tables->policy_ = internal::ResolveLandingPolicy(config, pipeline);
    if (pipeline.data_sink) {
      tables->data_sink_ = config.data_sinks.at(*pipeline.data_sink).connector;
    }
    if (pipeline.deadletter_sink) {
      tables->deadletter_sink_ = config.deadletter_sinks.at(*pipeline.deadletter_sink).connector;
    }
    tables->FindDataDirectories(config, pipeline);
    return tables;
  }

  std::vector<std::string> TableNames() const {
    std::vector<std::string> names;
    for (const auto& [ns_name, ns] : schema_.namespaces) names.push_back(ns_name);
    if (!schema_.namespaces.contains(kDeadletters)) names.push_back(kDeadletters);
    return names;
  }

  // Where the lake writer puts each table's data and delete files: all that query may read
  // besides the WAL when file access is off (query::EngineOptions::readable_directories).
  const std::map<std::string, std::string>& data_directories() const { return data_directories_; }

  // The DuckDB database its data sink lands in, if it is one: attached before any pin.
  std::string database_path() const {
    return data_sink_ ? sinks::DatabasePathOf(*data_sink_) : std::string();
  }

  // The tables, in order, from one pinned catalog (re-pinned, for all of them, when a segment file
  // was reclaimed between the pin and its read).
  std::vector<Result<query::TableSource>> Bind(const std::vector<std::string>& names) {
    std::vector<Result<query::TableSource>> bound;
    for (int attempt = 1; attempt <= kSnapshotAttempts; ++attempt) {
      if (attempt > 1) pin_.reset();
      bound.clear();
      bool segment_vanished = false;
      for (const std::string& name : names) {
        bound.push_back(BindTable(name));
        segment_vanished = segment_vanished || bound.back().status().code() == StatusCode::kNotFound;
      }
      if (!segment_vanished) break;
    }
    return bound;
  }

 private:
  PipelineTables() = default;

  void FindDataDirectories(const config::Config& config, const config::PipelineConfig& pipeline) {
    if (pipeline.data_sink) {
      const config::ConnectorConfig& sink = config.data_sinks.at(*pipeline.data_sink).connector;
      for (const auto& [ns_name, ns] : schema_.namespaces) AddDataDirectory(sink, ns_name);
    }
    if (pipeline.deadletter_sink && !schema_.namespaces.contains(kDeadletters)) {
      AddDataDirectory(config.deadletter_sinks.at(*pipeline.deadletter_sink).connector, kDeadletters);
    }
  }

  void AddDataDirectory(const config::ConnectorConfig& sink, const std::string& table) {
    if (!sink.Has("warehouse")) return;  // not Iceberg tables
    Result<std::string> location = iceberg::TableLocation(
        sink.GetString("warehouse"),
        sink.Has("table_namespace") ? sink.GetString("table_namespace") : "default", table);
    if (!location.ok()) return;  // no table: nothing of it can be read
    // A table on S3 is read from its local copies.
    Result<std::string> local = lake::IsWarehouseOnS3(*location)
                                    ? lake::LocalCopyPathOf(state_->sink_directory(), *location)
                                    : iceberg::EnvPathOfUri(*location);
    if (local.ok()) data_directories_[table] = *local + "/data/";
  }

  Status Pin() {
    if (pin_) return Status::OK();
    PinnedCatalog pin;
    SKIPPR_ASSIGN_OR_RETURN(store::ReadTransaction read, state_->store().BeginRead());
    SKIPPR_ASSIGN_OR_RETURN(pin.segments, wal::LiveSegments(read));
    SKIPPR_ASSIGN_OR_RETURN(pin.landing, internal::ReadLandingState(read));
    SKIPPR_RETURN_IF_ERROR(AddLandingsTheSinkHolds(pin));
    pin.read = std::make_shared<PinnedCatalog::SharedRead>(std::move(read));
    pin_ = std::move(pin);
    return Status::OK();
  }

  // A sink read at its current state (a DuckDB database, attached before this pin) may hold
  // landings the pinned store still has as planned: their slices are read from the sink.
  Status AddLandingsTheSinkHolds(PinnedCatalog& pin) const {
    for (const sinks::Landing& pending : pin.landing.pending) {
      const std::optional<config::ConnectorConfig>& sink =
          pending.namespace_name == kDeadletters ? deadletter_sink_ : data_sink_;
      if (!sink || !sinks::ReadsCurrentState(*sink)) continue;
      SKIPPR_ASSIGN_OR_RETURN(const bool held, sinks::HoldsLanding(*sink, pending.namespace_name,
                                                                   pending.landing_id));
      if (!held) continue;
      pin.landing.landed.insert(pending.slices.begin(), pending.slices.end());
      pin.held_namespaces.insert(pending.namespace_name);
    }
    return Status::OK();
  }

  // What a keyed CDC namespace's table holds already (its landings' order tokens), for its view to
  // leave out the live changes their landing will leave out; nothing while no change is live.
  Status SetLandedTokens(const std::string& ns_name, bool has_live_changes,
                         query::TableSource& table) {
    const store::ReadTransaction& read = pin_->read->read;
    SKIPPR_ASSIGN_OR_RETURN(std::optional<std::string> truncate,
                            internal::LandedTokens::ReadTruncate(read, ns_name));
    table.landed_truncate_token = truncate.value_or("");
    SKIPPR_ASSIGN_OR_RETURN(const bool has_keys, internal::LandedTokens::HasKeys(read, ns_name));
    if (!has_keys || !has_live_changes) return Status::OK();
    table.landed_token = [shared = pin_->read, ns_name](
                             std::string_view business_key) -> Result<std::string> {
      std::lock_guard<std::mutex> lock(shared->mutex);
      SKIPPR_ASSIGN_OR_RETURN(std::optional<std::string> token,
                              internal::LandedTokens::ReadKey(shared->read, ns_name, business_key));
      return token.value_or(std::string());
    };
    return Status::OK();
  }

  Result<std::shared_ptr<const wal::SegmentReader>> SegmentFile(const wal::SegmentEntry& entry) {
    auto it = pin_->segment_files.find(entry.segment_id);
    if (it == pin_->segment_files.end()) {
      // A statement may read a few columns of a few slices: each read checks what it reads.
      Result<wal::SegmentReader> reader = wal::OpenSegment(
          state_->wal_directory(), entry, &state_->wal_env(), wal::SegmentVerification::kEachRead);
      Result<std::shared_ptr<const wal::SegmentReader>> shared =
          reader.ok() ? Result<std::shared_ptr<const wal::SegmentReader>>(
                            std::make_shared<const wal::SegmentReader>(std::move(reader).value()))
                      : Result<std::shared_ptr<const wal::SegmentReader>>(reader.status());
      it = pin_->segment_files.emplace(entry.segment_id, std::move(shared)).first;
    }
    return it->second;
  }

  // The live slices of `ns_name` in the pinned catalog, their segment files opened.
  Result<std::vector<LiveSlices::Slice>> LiveSlicesOf(const std::string& ns_name) {
    std::vector<LiveSlices::Slice> slices;
    for (const wal::SegmentEntry& entry : pin_->segments) {
      for (const wal::SliceSummary& slice : entry.slices) {
        if (slice.namespace_name != ns_name ||
            pin_->landing.landed.contains({entry.segment_id, slice.ordinal})) {
          continue;
        }
        SKIPPR_ASSIGN_OR_RETURN(std::shared_ptr<const wal::SegmentReader> segment,
                                SegmentFile(entry));
        slices.push_back({std::move(segment), slice.ordinal, slice.rows});
      }
    }
    return slices;
  }

  // The landed rows; Iceberg files all under the table's data directory (what query may read with
  // file access off): a snapshot landed in another warehouse (the sink's settings changed since)
  // says so.
  Result<query::LandedRows> LandedRowsOf(const std::string& ns_name) {
    auto commit = pin_->landing.commits.find(ns_name);
    const std::optional<config::ConnectorConfig>& sink =
        ns_name == kDeadletters ? deadletter_sink_ : data_sink_;
    if (!sink) return query::LandedRows{};
    // A database is read at its current state, which may hold a landing the store has as planned
    // only; Iceberg tables at the commit the store recorded.
    if (commit == pin_->landing.commits.end() && !pin_->held_namespaces.contains(ns_name)) {
      return query::LandedRows{};
    }
    const sinks::CommitId at =
        commit == pin_->landing.commits.end() ? sinks::CommitId{"", 1} : commit->second;
    SKIPPR_ASSIGN_OR_RETURN(query::LandedRows landed,
                            sinks::ReadLanded({name_, "", &state_->env(),
                                               state_->sink_directory()},
                                              *sink, ns_name, at));
    if (!checks_locations_) return landed;
    auto directory = data_directories_.find(ns_name);
    const auto outside = [&](const std::string& path) {
      return directory == data_directories_.end() || !path.starts_with(directory->second);
    };
    for (const query::LandedFile& file : landed.data_files) {
      if (!outside(file.path)) continue;
      return Status::NotSupported(fmt::format(
          "its landed file '{}' is not under {} of the pipeline's data_sink (was the warehouse or "
          "table_namespace changed?); query reads only the sink's table directories — run "
          "`skipprd query {}` to read it anyway",
          file.path,
          directory == data_directories_.end() ? std::string("a local SkipprLake table directory")
                                                : directory->second,
          query::kAllowFileAccessFlag));
    }
    return landed;
  }

  Result<query::TableSource> BindTable(const std::string& ns_name) {
    auto ns = schema_.namespaces.find(ns_name);
    const bool is_deadletters = ns == schema_.namespaces.end() && ns_name == kDeadletters;
    if (ns == schema_.namespaces.end() && !is_deadletters) {
      return Status::NotFound(fmt::format("pipeline {} has no namespace '{}'", name_, ns_name));
    }
    SKIPPR_RETURN_IF_ERROR(Pin());
    query::TableSource table;
    table.pipeline = name_;
    table.namespace_name = ns_name;
    table.fields = is_deadletters ? schema::DeadletterSchema().fields : ns->second.fields;
    SKIPPR_ASSIGN_OR_RETURN(table.landed, LandedRowsOf(ns_name));
    SKIPPR_ASSIGN_OR_RETURN(std::vector<LiveSlices::Slice> slices, LiveSlicesOf(ns_name));
    // Under merge_by_key the live rows upsert the landed ones, as their landing will. Keys the
    // schema cannot carry fail the sync, not the query: the rows then read as appended.
    if (!is_deadletters && sinks::CheckKeyColumns(policy_.key_columns, table.fields).ok()) {
      table.key_columns = policy_.key_columns;
    }
    // A source's own key (a PostgreSQL table's): its changes converge to the latest row per key.
    if (!is_deadletters && table.key_columns.empty() && !ns->second.key_fields.empty() &&
        sinks::CheckKeyColumns(ns->second.key_fields, table.fields).ok()) {
      table.key_columns = ns->second.key_fields;
      SKIPPR_RETURN_IF_ERROR(SetLandedTokens(ns_name, !slices.empty(), table));
    }
    table.batches = LiveSlices::List(std::move(slices));
    return table;
  }

  std::string name_;
  bool checks_locations_ = true;
  std::unique_ptr<PipelineState> state_;
  schema::PipelineSchema schema_;
  sinks::LandingPolicy policy_;
  std::optional<config::ConnectorConfig> data_sink_;
  std::optional<config::ConnectorConfig> deadletter_sink_;
  std::map<std::string, std::string> data_directories_;  // namespace → ".../data/"
  std::optional<PinnedCatalog> pin_;
};

// Every configured pipeline's tables. A pipeline whose state cannot be opened lists no tables; a
// statement naming it hears why (SchemaProblem).
class PipelinesBinder final : public query::TableBinder {
 public:
  PipelinesBinder(const config::Config& config, bool checks_locations) {
    for (const auto& [name, pipeline] : config.pipelines) {
      Result<std::unique_ptr<PipelineTables>> tables =
          PipelineTables::Open(config, pipeline, checks_locations);
      if (tables.ok()) {
        pipelines_.emplace(name, std::move(tables).value());
      } else if (tables.status().code() != StatusCode::kNotFound) {
        problems_.emplace(name, tables.status());
      }
    }
  }

  std::vector<std::string> DataDirectories() const {
    std::vector<std::string> directories;
    for (const auto& [name, tables] : pipelines_) {
      for (const auto& [ns_name, directory] : tables->data_directories()) {
        directories.push_back(directory);
      }
    }
    return directories;
  }

  std::vector<std::string> DatabasePaths() const {
    std::vector<std::string> paths;
    for (const auto& [name, tables] : pipelines_) {
      if (std::string path = tables->database_path(); !path.empty()) paths.push_back(path);
    }
    return paths;
  }

  std::vector<query::TableName> Names() const override {
    std::vector<query::TableName> names;
    for (const auto& [name, tables] : pipelines_) {
      for (const std::string& table : tables->TableNames()) names.push_back({name, table});
    }
    return names;
  }

  std::vector<Result<query::TableSource>> Bind(const std::vector<query::TableName>& tables) override {
    std::map<std::string, std::vector<std::string>> by_pipeline;
    for (const query::TableName& table : tables) {
      by_pipeline[table.pipeline].push_back(table.namespace_name);
    }
    std::map<query::TableName, Result<query::TableSource>> bound;
    for (const auto& [pipeline, names] : by_pipeline) {
      auto it = pipelines_.find(pipeline);
      std::vector<Result<query::TableSource>> sources =
          it == pipelines_.end()
              ? std::vector<Result<query::TableSource>>(
                    names.size(), Status::NotFound(fmt::format("no pipeline '{}'", pipeline)))
              : it->second->Bind(names);
      for (size_t i = 0; i < names.size(); ++i) {
        bound.emplace(query::TableName{pipeline, names[i]}, std::move(sources[i]));
      }
    }
    std::vector<Result<query::TableSource>> ordered;
    for (const query::TableName& table : tables) ordered.push_back(bound.at(table));
    return ordered;
  }

  Status SchemaProblem(const std::string& schema) const override {
    for (const auto& [name, problem] : problems_) {
      if (config::CleanName(name) != config::CleanName(schema)) continue;
      return Status(problem.code(),
                    fmt::format("pipeline {} cannot be read: {}", name, problem.message()));
    }
    return Status::OK();
  }

 private:
  std::map<std::string, std::unique_ptr<PipelineTables>> pipelines_;
  std::map<std::string, Status> problems_;  // pipelines whose state could not be opened
};

}  // namespace

namespace {

// A statement keeps every segment file it reads open (so reclaim cannot take them away), and a
// WAL-only pipeline keeps every segment it ever wrote: lift the soft open-file limit to the hard
// one, as databases do, rather than fail a large WAL at 1,024 files.
void RaiseOpenFileLimit() {
  static const bool raised = [] {
    struct rlimit limit {};
    if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return false;
    const rlim_t previous = limit.rlim_cur;
    limit.rlim_cur = limit.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) return false;
    spdlog::debug("open-file limit raised from {} to {}", previous, limit.rlim_cur);
    return true;
  }();
  (void)raised;
}

}  // namespace

Result<std::unique_ptr<query::Engine>> OpenQueryEngine(const config::Config& config,
                                                       const QueryAccess& access) {
  RaiseOpenFileLimit();
  auto binder = std::make_unique<PipelinesBinder>(config, !access.allows_file_access);
  query::EngineOptions options;
  options.allows_file_access = access.allows_file_access;
  options.readable_directories = binder->DataDirectories();
  // Attached before any statement pins a store: every landing in a database then is landed or
  // planned in the pin (AddLandingsTheSinkHolds).
  options.attached_databases = binder->DatabasePaths();
  SKIPPR_ASSIGN_OR_RETURN(std::unique_ptr<query::Engine> engine, query::Engine::Open(options));
  engine->SetBinder(std::move(binder));
  return engine;
}

}  // namespace skippr::pipeline
