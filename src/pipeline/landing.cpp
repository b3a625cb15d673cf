// Landing committed WAL slices in the pipeline's sinks, exactly once, and reclaiming the WAL
// behind them.
#include "pipeline/landing.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/check.hpp"
#include "core/crash.hpp"

namespace skippr::pipeline::internal {

namespace {

constexpr int kLandingFormatVersion = 1;
constexpr int kCommitFormatVersion = 2;
// A landing's size is judged by its slices' column bytes, which a round holds in memory while it
// lands them; a segment entry written before they were recorded has only its compressed bytes,
// and column data compresses about this much (bench/wal measures 5x on typical records).
constexpr uint64_t kAssumedCompressionRatio = 4;

std::string PendingKey(const std::string& namespace_name) {
  return store::KeyBuilder().Text("landing").Text(namespace_name).key();
}
std::string PendingPrefix() { return store::KeyBuilder().Text("landing").key(); }
std::string LandedKey(const sinks::SliceRef& slice) {
  return store::KeyBuilder().Text("landed").U64(slice.segment_id).U64(slice.ordinal).key();
}
std::string LandedPrefix() { return store::KeyBuilder().Text("landed").key(); }
std::string LandedSegmentPrefix(uint64_t segment_id) {
  return store::KeyBuilder().Text("landed").U64(segment_id).key();
}
std::string CommitKey(const std::string& namespace_name) {
  return store::KeyBuilder().Text("sink_commit").Text(namespace_name).key();
}
std::string CommitPrefix() { return store::KeyBuilder().Text("sink_commit").key(); }
// Format 1's record of a SkipprLake table's snapshot, read as that sink's commit.
std::string LakeSnapshotPrefix() { return store::KeyBuilder().Text("lake_snapshot").key(); }

std::string LandingToJson(const sinks::Landing& landing) {
  nlohmann::json slices = nlohmann::json::array();
  for (const sinks::SliceRef& slice : landing.slices) {
    slices.push_back({slice.segment_id, slice.ordinal});
  }
  nlohmann::json json{{"format_version", kLandingFormatVersion},
                      {"landing_id", landing.landing_id},
                      {"namespace", landing.namespace_name},
                      {"replaces_table", landing.replaces_table},
                      {"slices", std::move(slices)}};
  // Only merge_by_key landings carry keys: a replay lands under the keys it was planned with.
  if (!landing.key_columns.empty()) json["key_columns"] = landing.key_columns;
  return json.dump();
}

Result<sinks::Landing> LandingFromJson(std::string_view text) {
  try {
    const nlohmann::json json = nlohmann::json::parse(text);
    sinks::Landing landing;
    landing.landing_id = json.at("landing_id").get<std::string>();
    landing.namespace_name = json.at("namespace").get<std::string>();
    landing.replaces_table = json.at("replaces_table").get<bool>();
    for (const nlohmann::json& slice : json.at("slices")) {
      landing.slices.push_back({slice.at(0).get<uint64_t>(), slice.at(1).get<uint32_t>()});
    }
    landing.key_columns = json.value("key_columns", std::vector<std::string>{});
    return landing;
  } catch (const nlohmann::json::exception& error) {
    return Status::Corruption(fmt::format("a pending landing record is unreadable: {}",
                                          error.what()));
  }
}

std::string CommitToJson(const sinks::CommitId& commit) {
  return nlohmann::json{{"format_version", kCommitFormatVersion},
                        {"location", commit.location},
                        {"version", commit.version}}
      .dump();
}

// A ("sink_commit", namespace) record, or format 1's ("lake_snapshot", namespace).
Result<sinks::CommitId> CommitFromJson(std::string_view text) {
  try {
    const nlohmann::json json = nlohmann::json::parse(text);
    if (json.contains("metadata_location")) {
      return sinks::CommitId{json.at("metadata_location").get<std::string>(),
                             json.at("snapshot_id").get<int64_t>()};
    }
    return sinks::CommitId{json.at("location").get<std::string>(),
                           json.at("version").get<int64_t>()};
  } catch (const nlohmann::json::exception& error) {
    return Status::Corruption(fmt::format("a sink commit record is unreadable: {}", error.what()));
  }
}

template <typename Transaction>
Result<std::vector<sinks::Landing>> ReadPendingLandings(const Transaction& read) {
  std::vector<sinks::Landing> pending;
  Status failure;
  SKIPPR_RETURN_IF_ERROR(read.Scan(store::Family::kCatalog, PendingPrefix(),
                                   [&](std::string_view, std::string_view value) {
                                     Result<sinks::Landing> landing = LandingFromJson(value);
                                     if (!landing.ok()) {
                                       failure = landing.status();
                                       return false;
                                     }
                                     pending.push_back(std::move(landing).value());
                                     return true;
                                   }));
  SKIPPR_RETURN_IF_ERROR(failure);
  return pending;
}

Status CheckNamespaceKeys(const sinks::LandingPolicy& policy,
                          const schema::NamespaceSchema& namespace_schema) {
  if (policy.key_columns.empty()) return Status::OK();
  Status keys = sinks::CheckKeyColumns(policy.key_columns, namespace_schema.fields);
  if (keys.ok()) return keys;
  return Status::InvalidConfig(fmt::format(
      "{}: namespace '{}': {}; write_policy merge_by_key keys every namespace of the source by "
      "these columns — name top-level columns it has (`skipprd schema` lists them)",
      policy.key_columns_setting, namespace_schema.name, keys.message()));
}

// The key a source gives a namespace's rows (a PostgreSQL table's primary key), when the lake can
// key a table by it: its changes then land as the source's final state, as query shows them. A key
// the lake cannot use (a float column) leaves the namespace appended — its updates and deletes are
// then refused at landing, naming it.
std::vector<std::string> SourceKeyOf(const schema::NamespaceSchema& namespace_schema) {
  if (namespace_schema.key_fields.empty() ||
      !sinks::CheckKeyColumns(namespace_schema.key_fields, namespace_schema.fields).ok()) {
    return {};
  }
  return namespace_schema.key_fields;
}

bool IsDeadletters(std::string_view namespace_name) {
  return namespace_name == schema::kDeadlettersNamespace;
}

// How a namespace's slices land; nullptr when they do not (data namespaces without a data sink).
// Deadletter slices always have a policy: they land in the deadletter sink or are discarded.
const sinks::LandingPolicy* PolicyFor(const LandingSinks& sinks, std::string_view namespace_name) {
  if (IsDeadletters(namespace_name)) return &sinks.deadletter_policy;
  return sinks.data != nullptr ? &sinks.data_policy : nullptr;
}

// The next landing of each namespace: its slices no landing holds yet, in commit order, up to
// about its policy's `target_file_bytes` of column data (always at least one slice).
Result<std::vector<sinks::Landing>> PlanLandings(
    const std::string& pipeline, const std::string& pipeline_instance,
    const std::vector<wal::SegmentEntry>& segments, const std::set<sinks::SliceRef>& landed,
    const LandingSinks& sinks, const PassLandings& pass, const schema::PipelineSchema& saved) {
  std::map<std::string, std::vector<sinks::SliceRef>> slices_by_namespace;
  std::map<std::string, uint64_t> bytes_by_namespace;
  std::set<std::string> full;
  for (const wal::SegmentEntry& segment : segments) {
    for (const wal::SliceSummary& slice : segment.slices) {
      const sinks::SliceRef ref{segment.segment_id, slice.ordinal};
      if (landed.contains(ref) || pass.reserved.contains(ref) ||
          full.contains(slice.namespace_name)) {
        continue;
      }
      const sinks::LandingPolicy* policy = PolicyFor(sinks, slice.namespace_name);
      if (policy == nullptr) continue;
      uint64_t& bytes = bytes_by_namespace[slice.namespace_name];
      const uint64_t slice_bytes = slice.uncompressed_bytes > 0
                                       ? slice.uncompressed_bytes
                                       : slice.bytes * kAssumedCompressionRatio;
      if (bytes > 0 && bytes + slice_bytes > policy->target_file_bytes) {
        full.insert(slice.namespace_name);
        continue;
      }
      slices_by_namespace[slice.namespace_name].push_back(ref);
      bytes += slice_bytes;
    }
  }
  std::vector<sinks::Landing> landings;
  for (auto& [namespace_name, slices] : slices_by_namespace) {
    const sinks::LandingPolicy& policy = *PolicyFor(sinks, namespace_name);
    const bool replaces_table =
        policy.replaces_table() && !pass.namespaces_landed.contains(namespace_name);
    std::vector<std::string> key_columns = policy.key_columns;
    if (auto namespace_schema = saved.namespaces.find(namespace_name);
        namespace_schema != saved.namespaces.end()) {
      SKIPPR_RETURN_IF_ERROR(CheckNamespaceKeys(policy, namespace_schema->second));
      if (key_columns.empty()) key_columns = SourceKeyOf(namespace_schema->second);
    }
    landings.push_back(sinks::PlanLanding(pipeline, pipeline_instance, namespace_name,
                                          std::move(slices), replaces_table,
                                          std::move(key_columns)));
  }
  return landings;
}

Result<std::vector<std::shared_ptr<const Batch>>> ReadLandingSlices(
    const PipelineState& state, const std::map<uint64_t, wal::SegmentEntry>& segments,
    const sinks::Landing& landing, PassLandings& pass) {
  std::vector<std::shared_ptr<const Batch>> batches;
  std::optional<wal::SegmentReader> reader;
  for (const sinks::SliceRef& slice : landing.slices) {
    if (auto cached = pass.committed_batches.find(slice); cached != pass.committed_batches.end()) {
      batches.push_back(cached->second);
      continue;
    }
    auto entry = segments.find(slice.segment_id);
    if (entry == segments.end()) {
      return Status::Corruption(fmt::format(
          "landing {} names WAL segment {}, which is not live: a landed segment was reclaimed "
          "before its landing was recorded",
          landing.landing_id, slice.segment_id));
    }
    if (!reader || reader->header().segment_id != slice.segment_id) {
      SKIPPR_ASSIGN_OR_RETURN(reader,
                              wal::OpenSegment(state.wal_directory(), entry->second, &state.wal_env()));
    }
    SKIPPR_ASSIGN_OR_RETURN(Batch batch, reader->ReadSlice(slice.ordinal));
    SKIPPR_CHECK(batch.namespace_name == landing.namespace_name);
    batches.push_back(std::make_shared<const Batch>(std::move(batch)));
  }
  return batches;
}

// Removes a fully landed segment's catalog entry and landed markers in `write` (its file goes
// after the commit).
Status ReclaimSegment(store::WriteTransaction& write, uint64_t segment_id) {
  SKIPPR_RETURN_IF_ERROR(wal::DeleteSegmentEntry(write, segment_id));
  return write.DeletePrefix(store::Family::kCatalog, LandedSegmentPrefix(segment_id));
}

// Records the landing (its slices landed, the namespace's sink commit, the plan done) and reclaims
// the segments all of whose slices are now landed, in one transaction; then deletes their files.
Result<uint64_t> RecordLanding(PipelineState& state, const config::PipelineConfig& pipeline,
                               const std::map<uint64_t, wal::SegmentEntry>& segments,
                               const sinks::Landing& landing, const sinks::CommitId& commit,
                               const DeadletterTotals& deadletters,
                               const LandedTokens* tokens = nullptr) {
  SKIPPR_ASSIGN_OR_RETURN(store::WriteTransaction write, state.store().BeginWrite());
  if (tokens != nullptr) SKIPPR_RETURN_IF_ERROR(tokens->Record(write));
  for (const sinks::SliceRef& slice : landing.slices) {
    SKIPPR_RETURN_IF_ERROR(write.Put(store::Family::kCatalog, LandedKey(slice), landing.landing_id));
  }
  if (deadletters.landed > 0 || deadletters.discarded > 0) {
    SKIPPR_RETURN_IF_ERROR(AddDeadletterTotals(write, deadletters));
  }
  if (commit.version != 0) {
    SKIPPR_RETURN_IF_ERROR(write.Put(store::Family::kCatalog, CommitKey(landing.namespace_name),
                                     CommitToJson(commit)));
  }
  SKIPPR_RETURN_IF_ERROR(write.Delete(store::Family::kCatalog, PendingKey(landing.namespace_name)));
  std::vector<const wal::SegmentEntry*> reclaimed;
  std::set<uint64_t> touched;
  for (const sinks::SliceRef& slice : landing.slices) touched.insert(slice.segment_id);
  for (uint64_t segment_id : touched) {
    const wal::SegmentEntry& entry = segments.at(segment_id);
    bool all_landed = true;
    for (const wal::SliceSummary& slice : entry.slices) {
      SKIPPR_ASSIGN_OR_RETURN(std::optional<std::string> marker,
                              write.Get(store::Family::kCatalog,
                                        LandedKey({segment_id, slice.ordinal})));
      all_landed = all_landed && marker.has_value();
    }
    if (!all_landed) continue;
    // An aggregate processor still behind this segment keeps it; ReclaimLandedSegments takes it
    // once every cursor has passed.
    SKIPPR_ASSIGN_OR_RETURN(const bool is_passed, transform::AggregatesHavePassed(
                                                      write, pipeline.transform.aggregates, entry));
    if (!is_passed) continue;
    SKIPPR_RETURN_IF_ERROR(ReclaimSegment(write, segment_id));
    reclaimed.push_back(&entry);
  }
  CrashPoint("landing.before_store_commit");
  SKIPPR_RETURN_IF_ERROR(write.Commit());
  CrashPoint("landing.after_store_commit");
  for (const wal::SegmentEntry* entry : reclaimed) {
    SKIPPR_RETURN_IF_ERROR(wal::DeleteSegmentFile(state.wal_directory(), *entry, &state.wal_env()));
  }
  return reclaimed.size();
}

// The source connectors that take a `primary_key` setting (config/connectors.cpp).
bool TakesPrimaryKey(const config::ConnectorConfig& source) {
  return source.kind == "File" || source.kind == "S3";
}

// merge_by_key needs the source's key: refused at the start of a pass, before anything is read.
Status CheckPrimaryKeyIsSet(const config::Config& config, const config::PipelineConfig& pipeline) {
  const config::ConnectorConfig& source = config.data_sources.at(pipeline.data_source).connector;
  if (source.Has("primary_key") && !source.GetStringList("primary_key").empty()) {
    return Status::OK();
  }
  const std::string policy_setting =
      fmt::format("data_sinks.{}.{}.write_policy", *pipeline.data_sink,
                  config.data_sinks.at(*pipeline.data_sink).connector.kind);
  if (!TakesPrimaryKey(source)) {
    return Status::InvalidConfig(fmt::format(
        "{}: merge_by_key needs a primary key, and the {} source data_sources.{} (pipeline {}) "
        "publishes none; use write_policy append or replace_table",
        policy_setting, source.kind, pipeline.data_source, pipeline.name));
  }
  return Status::InvalidConfig(fmt::format(
      "{}: merge_by_key needs a primary key; set data_sources.{}.{}.primary_key: [<column>, ...] "
      "(the columns that identify a row), or use write_policy append",
      policy_setting, pipeline.data_source, source.kind));
}

// ", replacing the table" and the like, for the landing's log line.
std::string DescribePolicy(const sinks::Landing& landing, const sinks::LandingOutcome& outcome) {
  if (landing.replaces_table) return ", replacing the table";
  if (landing.key_columns.empty() || outcome.was_landed_before) return "";
  return fmt::format(", merged by key: {} rows written, {} earlier rows deleted",
                     outcome.rows_written, outcome.rows_deleted);
}

}  // namespace

namespace {

std::string SinkSetting(std::string_view section, const std::string& name,
                        const config::ConnectorConfig& entry) {
  return fmt::format("{}.{}.{}", section, name, entry.kind);
}

// A data sink that cannot land the pipeline's write policy, refused before anything is read.
Status CheckWritePolicy(const config::PipelineConfig& pipeline, const std::string& setting,
                        const sinks::Capabilities& capabilities,
                        const sinks::LandingPolicy& policy) {
  if (capabilities.Supports(policy.write_policy)) return Status::OK();
  return Status::InvalidConfig(fmt::format(
      "{}.write_policy: sink '{}' does not support write policy {} (pipeline {}); use one of its "
      "policies",
      setting, *pipeline.data_sink, sinks::WritePolicyName(policy.write_policy), pipeline.name));
}

}  // namespace

Result<PipelineSinks> OpenSinks(const config::Config& config,
                                const config::PipelineConfig& pipeline,
                                const sinks::SinkContext& context) {
  PipelineSinks sinks;
  if (pipeline.data_sink) {
    const config::ConnectorConfig& entry = config.data_sinks.at(*pipeline.data_sink).connector;
    const std::string setting = SinkSetting("data_sinks", *pipeline.data_sink, entry);
    sinks.data_policy = ResolveLandingPolicy(config, pipeline);
    SKIPPR_ASSIGN_OR_RETURN(const sinks::Capabilities capabilities,
                            sinks::CapabilitiesOf(entry, setting));
    SKIPPR_RETURN_IF_ERROR(CheckWritePolicy(pipeline, setting, capabilities, sinks.data_policy));
    if (sinks.data_policy.write_policy == sinks::WritePolicy::kMergeByKey) {
      SKIPPR_RETURN_IF_ERROR(CheckPrimaryKeyIsSet(config, pipeline));
    }
    SKIPPR_ASSIGN_OR_RETURN(sinks.data, sinks::OpenSink(context, entry, setting));
  }
  if (!pipeline.deadletter_sink) return sinks;
  // The loader admits only a SkipprLake deadletter sink; deadletters land by append.
  const config::ConnectorConfig& entry =
      config.deadletter_sinks.at(*pipeline.deadletter_sink).connector;
  SKIPPR_CHECK(entry.kind == "SkipprLake");
  sinks.deadletter_policy = sinks::LandingPolicyOf(entry);
  sinks.deadletter_policy.write_policy = sinks::WritePolicy::kAppend;
  SKIPPR_ASSIGN_OR_RETURN(
      sinks.deadletters,
      sinks::OpenSink(context, entry,
                      SinkSetting("deadletter_sinks", *pipeline.deadletter_sink, entry)));
  return sinks;
}

sinks::LandingPolicy ResolveLandingPolicy(const config::Config& config,
                                          const config::PipelineConfig& pipeline) {
  if (!pipeline.data_sink) return sinks::LandingPolicy{};
  const config::ConnectorConfig& sink = config.data_sinks.at(*pipeline.data_sink).connector;
  sinks::LandingPolicy policy = sinks::LandingPolicyOf(sink);
  const config::ConnectorConfig& source = config.data_sources.at(pipeline.data_source).connector;
  if (policy.write_policy == sinks::WritePolicy::kMergeByKey && source.Has("primary_key")) {
    policy.key_columns = source.GetStringList("primary_key");
    policy.key_columns_setting =
        fmt::format("data_sources.{}.{}.primary_key", pipeline.data_source, source.kind);
  }
  return policy;
}

Status CheckKeyColumns(const sinks::LandingPolicy& policy, const schema::PipelineSchema& schema) {
  for (const auto& [namespace_name, namespace_schema] : schema.namespaces) {
    SKIPPR_RETURN_IF_ERROR(CheckNamespaceKeys(policy, namespace_schema));
  }
  return Status::OK();
}

Result<LandingState> ReadLandingState(const store::ReadTransaction& read) {
  LandingState state;
  Status failure;
  SKIPPR_RETURN_IF_ERROR(read.Scan(
      store::Family::kCatalog, LandedPrefix(), [&](std::string_view key, std::string_view) {
        store::KeyReader reader(key);
        Result<std::string> tag = reader.Text();
        Result<uint64_t> segment_id = reader.U64();
        Result<uint64_t> ordinal = reader.U64();
        if (!tag.ok() || !segment_id.ok() || !ordinal.ok() || !reader.ExpectEnd().ok()) {
          failure = Status::Corruption("a landed-slice key in the catalog is malformed");
          return false;
        }
        state.landed.insert({*segment_id, static_cast<uint32_t>(*ordinal)});
        return true;
      }));
  SKIPPR_RETURN_IF_ERROR(failure);
  // Format 1's lake snapshots first: a sink commit recorded since replaces one.
  for (const std::string& prefix : {LakeSnapshotPrefix(), CommitPrefix()}) {
    SKIPPR_RETURN_IF_ERROR(read.Scan(
        store::Family::kCatalog, prefix, [&](std::string_view key, std::string_view value) {
          store::KeyReader reader(key);
          Result<std::string> tag = reader.Text();
          Result<std::string> namespace_name = reader.Text();
          Result<sinks::CommitId> commit = CommitFromJson(value);
          if (!tag.ok() || !namespace_name.ok() || !commit.ok()) {
            failure = commit.ok() ? Status::Corruption("a sink commit key is malformed")
                                  : commit.status();
            return false;
          }
          state.commits[*namespace_name] = *commit;
          return true;
        }));
    SKIPPR_RETURN_IF_ERROR(failure);
  }
  SKIPPR_ASSIGN_OR_RETURN(state.pending, ReadPendingLandings(read));
  SKIPPR_RETURN_IF_ERROR(failure);
  return state;
}

Result<uint64_t> ReclaimLandedSegments(PipelineState& state,
                                       const config::PipelineConfig& pipeline) {
  // Without aggregates RecordLanding reclaimed every fully landed segment already.
  if (pipeline.transform.aggregates.empty()) return uint64_t{0};
  std::vector<wal::SegmentEntry> candidates;
  {
    SKIPPR_ASSIGN_OR_RETURN(store::ReadTransaction read, state.store().BeginRead());
    SKIPPR_ASSIGN_OR_RETURN(std::vector<wal::SegmentEntry> live, wal::LiveSegments(read));
    SKIPPR_ASSIGN_OR_RETURN(LandingState landed, ReadLandingState(read));
    for (wal::SegmentEntry& entry : live) {
      const bool all_landed =
          std::all_of(entry.slices.begin(), entry.slices.end(), [&](const auto& slice) {
            return landed.landed.contains({entry.segment_id, slice.ordinal});
          });
      if (all_landed) candidates.push_back(std::move(entry));
    }
  }
  if (candidates.empty()) return uint64_t{0};
  // Only the landing thread reclaims, so the candidates are still live in this transaction.
  SKIPPR_ASSIGN_OR_RETURN(store::WriteTransaction write, state.store().BeginWrite());
  std::vector<const wal::SegmentEntry*> reclaimed;
  for (const wal::SegmentEntry& entry : candidates) {
    SKIPPR_ASSIGN_OR_RETURN(const bool is_passed, transform::AggregatesHavePassed(
                                                      write, pipeline.transform.aggregates, entry));
    if (!is_passed) continue;
    SKIPPR_RETURN_IF_ERROR(ReclaimSegment(write, entry.segment_id));
    reclaimed.push_back(&entry);
  }
  if (reclaimed.empty()) return uint64_t{0};
  CrashPoint("landing.before_reclaim_commit");
  SKIPPR_RETURN_IF_ERROR(write.Commit());
  for (const wal::SegmentEntry* entry : reclaimed) {
    SKIPPR_RETURN_IF_ERROR(wal::DeleteSegmentFile(state.wal_directory(), *entry, &state.wal_env()));
  }
  spdlog::info("sync {}: reclaimed {} landed segment(s) the aggregate processor has passed",
               pipeline.name, reclaimed.size());
  return static_cast<uint64_t>(reclaimed.size());
}

namespace {

// What one round reads from one store snapshot: the live segments it lands from (those committed
// before the pass's first round), and its landings — the pending ones it can land, else new ones.
struct RoundPlan {
  std::map<uint64_t, wal::SegmentEntry> segments;
  std::vector<sinks::Landing> landings;
  schema::PipelineSchema saved;
};

Result<RoundPlan> PlanRound(PipelineState& state, const config::PipelineConfig& pipeline,
                            const LandingSinks& sinks, const PassLandings& pass,
                            std::optional<uint64_t>& last_segment_id) {
  RoundPlan plan;
  SKIPPR_ASSIGN_OR_RETURN(store::ReadTransaction read, state.store().BeginRead());
  SKIPPR_ASSIGN_OR_RETURN(std::vector<wal::SegmentEntry> live, wal::LiveSegments(read));
  if (!last_segment_id) {
    last_segment_id = 0;
    for (const wal::SegmentEntry& entry : live) {
      last_segment_id = std::max(*last_segment_id, entry.segment_id);
    }
  }
  std::erase_if(live, [&](const wal::SegmentEntry& entry) {
    return entry.segment_id > *last_segment_id;
  });
  SKIPPR_ASSIGN_OR_RETURN(LandingState landed, ReadLandingState(read));
  SKIPPR_ASSIGN_OR_RETURN(plan.landings, ReadPendingLandings(read));
  // A landing planned for a sink this configuration no longer has waits for it to come back.
  std::erase_if(plan.landings, [&](const sinks::Landing& landing) {
    return PolicyFor(sinks, landing.namespace_name) == nullptr;
  });
  SKIPPR_ASSIGN_OR_RETURN(plan.saved, schema::LoadSchema(read));
  if (plan.landings.empty()) {
    SKIPPR_ASSIGN_OR_RETURN(plan.landings, PlanLandings(pipeline.name, state.store().identity().instance_id,
                                                        live, landed.landed, sinks, pass,
                                                        plan.saved));
  }
  for (wal::SegmentEntry& entry : live) plan.segments.emplace(entry.segment_id, std::move(entry));
  return plan;
}

// The rows of a landing's slices, from the catalog entries of their segments.
Result<int64_t> RowsOf(const std::map<uint64_t, wal::SegmentEntry>& segments,
                       const sinks::Landing& landing) {
  int64_t rows = 0;
  for (const sinks::SliceRef& slice : landing.slices) {
    auto entry = segments.find(slice.segment_id);
    if (entry == segments.end() || slice.ordinal >= entry->second.slices.size()) {
      return Status::Corruption(fmt::format(
          "landing {} names slice {}/{}, which no live WAL segment holds: a segment was reclaimed "
          "before its landing was recorded",
          landing.landing_id, slice.segment_id, slice.ordinal));
    }
    rows += entry->second.slices[slice.ordinal].rows;
  }
  return rows;
}

Status FinishLanding(PipelineState& state, const config::PipelineConfig& pipeline,
                     const std::map<uint64_t, wal::SegmentEntry>& segments,
                     const sinks::Landing& landing, const sinks::LandingOutcome& outcome,
                     const DeadletterTotals& deadletters, std::string_view how, PassLandings& pass,
                     LandingPassResult& result, const LandedTokens* tokens = nullptr);

// Lets the sink rewrite the namespace's table when a merge has left it slow to read
// (Sink::Maintain; the lake past its delete-file or small-file limits) and points the store's
// readers at the rewritten commit, which holds the same rows. Maintenance never fails a landing: a
// failure is logged and the next landing retries.
void MaintainTable(PipelineState& state, sinks::Sink& sink,
                   const schema::NamespaceSchema& namespace_schema,
                   const sinks::LandingPolicy& policy) {
  const auto maintain = [&]() -> Result<sinks::MaintenanceOutcome> {
    SKIPPR_ASSIGN_OR_RETURN(sinks::MaintenanceOutcome outcome,
                            sink.Maintain(namespace_schema, policy));
    if (!outcome.committed) return outcome;
    SKIPPR_ASSIGN_OR_RETURN(store::WriteTransaction write, state.store().BeginWrite());
    SKIPPR_RETURN_IF_ERROR(write.Put(store::Family::kCatalog, CommitKey(namespace_schema.name),
                                     CommitToJson(outcome.commit)));
    SKIPPR_RETURN_IF_ERROR(write.Commit());
    return outcome;
  };
  Result<sinks::MaintenanceOutcome> outcome = maintain();
  if (!outcome.ok()) {
    spdlog::warn("sink {}: table maintenance failed, retried after the next landing: {}",
                 namespace_schema.name, outcome.status().message());
  } else if (outcome->committed) {
    spdlog::info(
        "sink {}: maintenance rewrote {} data file(s) into {} file(s) of {} rows and "
        "removed {} delete file(s) as commit {}",
        namespace_schema.name, outcome->data_files_rewritten, outcome->data_files_written,
        outcome->rows_written, outcome->delete_files_removed, outcome->commit.version);
  }
}

// Lands one planned landing in its sink — or discards it, for deadletters without a deadletter
// sink — and records it; adds what it did to `result`.
Status LandOne(PipelineState& state, const config::PipelineConfig& pipeline,
               const LandingSinks& sinks, const RoundPlan& plan, const sinks::Landing& landing,
               PassLandings& pass, LandingPassResult& result) {
  const bool is_deadletters = IsDeadletters(landing.namespace_name);
  sinks::LandingOutcome outcome;
  DeadletterTotals deadletters;
  std::vector<std::shared_ptr<const Batch>> batches;
  std::optional<LandedTokens> tokens;
  const schema::NamespaceSchema* namespace_schema = &schema::DeadletterSchema();
  if (is_deadletters && sinks.deadletters == nullptr) {
    // Nothing to write: the slices' rows come from the catalog, nothing is decoded.
    SKIPPR_ASSIGN_OR_RETURN(outcome.rows, RowsOf(plan.segments, landing));
    deadletters.discarded = static_cast<uint64_t>(outcome.rows);
  } else {
    if (!is_deadletters) {
      auto saved = plan.saved.namespaces.find(landing.namespace_name);
      if (saved == plan.saved.namespaces.end()) {
        return Status::Corruption(fmt::format("landing {}: namespace '{}' has no saved schema",
                                              landing.landing_id, landing.namespace_name));
      }
      namespace_schema = &saved->second;
    }
    SKIPPR_ASSIGN_OR_RETURN(batches, ReadLandingSlices(state, plan.segments, landing, pass));
    sinks::Sink& sink = is_deadletters ? *sinks.deadletters : *sinks.data;
    if (landing.key_columns.empty()) {
      SKIPPR_ASSIGN_OR_RETURN(outcome, sink.Land(landing, *namespace_schema, batches));
    } else {
      // A merge lands only the changes its table does not hold yet. The tokens read here are the
      // ones a replay of this landing reads too: only recording it changes them.
      {
        SKIPPR_ASSIGN_OR_RETURN(store::ReadTransaction read, state.store().BeginRead());
        SKIPPR_ASSIGN_OR_RETURN(tokens, LandedTokens::Read(read, landing.namespace_name, batches));
      }
      SKIPPR_ASSIGN_OR_RETURN(outcome, sink.Land(landing, *namespace_schema, tokens->NewChanges()));
    }
    if (is_deadletters) deadletters.landed = static_cast<uint64_t>(outcome.rows);
  }
  SKIPPR_RETURN_IF_ERROR(FinishLanding(state, pipeline, plan.segments, landing, outcome,
                                       deadletters, "", pass, result,
                                       tokens ? &*tokens : nullptr));
  // A merge adds a delete file and a small data file: past the limits the table is rewritten.
  if (!is_deadletters && !landing.key_columns.empty()) {
    MaintainTable(state, *sinks.data, *namespace_schema, sinks.data_policy);
  }
  return Status::OK();
}

// Records a landing that its sink holds now (or that was discarded), logs it, adds it to `result`.
Status FinishLanding(PipelineState& state, const config::PipelineConfig& pipeline,
                     const std::map<uint64_t, wal::SegmentEntry>& segments,
                     const sinks::Landing& landing, const sinks::LandingOutcome& outcome,
                     const DeadletterTotals& deadletters, std::string_view how, PassLandings& pass,
                     LandingPassResult& result, const LandedTokens* tokens) {
  const bool is_deadletters = IsDeadletters(landing.namespace_name);
  SKIPPR_ASSIGN_OR_RETURN(
      const uint64_t reclaimed,
      RecordLanding(state, pipeline, segments, landing, outcome.commit, deadletters, tokens));
  pass.namespaces_landed.insert(landing.namespace_name);
  for (const sinks::SliceRef& slice : landing.slices) pass.committed_batches.erase(slice);
  if (deadletters.discarded > 0) {
    spdlog::warn("Discarded {} deadletter records because no deadletter sink is configured "
                 "(pipeline {}; set pipelines.{}.deadletter_sink to keep them); {} segment(s) "
                 "reclaimed",
                 deadletters.discarded, pipeline.name, pipeline.name, reclaimed);
  } else {
    spdlog::info(
        "sink {}: landing {} of {} rows ({} slices{}{}) {} commit {}; {} segment(s) reclaimed",
        landing.namespace_name, landing.landing_id, outcome.rows, landing.slices.size(), how,
        DescribePolicy(landing, outcome),
        outcome.was_landed_before ? "was already in" : "committed as", outcome.commit.version,
        reclaimed);
  }
  if (!is_deadletters) {
    ++result.landings;
    result.rows_landed += outcome.rows;
  }
  result.deadletters.landed += deadletters.landed;
  result.deadletters.discarded += deadletters.discarded;
  result.segments_reclaimed += reclaimed;
  return Status::OK();
}

}  // namespace

Result<LandingPassResult> LandCommittedSlices(PipelineState& state,
                                              const config::PipelineConfig& pipeline,
                                              const LandingSinks& sinks, PassLandings& pass) {
  LandingPassResult result;
  // Segments committed while this runs (ingest goes on beside a BackgroundLander) wait for the
  // next call: landing them now would cut them into landings smaller than the target.
  std::optional<uint64_t> last_segment_id = pass.last_segment_id;
  while (true) {
    SKIPPR_ASSIGN_OR_RETURN(const RoundPlan plan,
                            PlanRound(state, pipeline, sinks, pass, last_segment_id));
    if (plan.landings.empty()) {
      SKIPPR_ASSIGN_OR_RETURN(const uint64_t reclaimed, ReclaimLandedSegments(state, pipeline));
      result.segments_reclaimed += reclaimed;
      return result;
    }
    {
      // The plan is recorded before anything reaches the lake: after a crash the same slices land
      // under the same id, which the table's history then recognises.
      SKIPPR_ASSIGN_OR_RETURN(store::WriteTransaction write, state.store().BeginWrite());
      for (const sinks::Landing& landing : plan.landings) {
        SKIPPR_RETURN_IF_ERROR(write.Put(store::Family::kCatalog,
                                         PendingKey(landing.namespace_name), LandingToJson(landing)));
      }
      SKIPPR_RETURN_IF_ERROR(write.Commit());
    }
    // One landing per namespace per round (the pending key is per namespace); the next round plans
    // what is left.
    for (const sinks::Landing& landing : plan.landings) {
      SKIPPR_RETURN_IF_ERROR(LandOne(state, pipeline, sinks, plan, landing, pass, result));
    }
  }
}

namespace {

// Records `landing`, the stream's slices, as planned — checking that no landing holds any of them
// — and returns the live segments as of that record.
Result<std::map<uint64_t, wal::SegmentEntry>> RecordStreamPlan(PipelineState& state,
                                                               const sinks::Landing& landing) {
  SKIPPR_ASSIGN_OR_RETURN(store::WriteTransaction write, state.store().BeginWrite());
  SKIPPR_ASSIGN_OR_RETURN(const std::optional<std::string> pending,
                          write.Get(store::Family::kCatalog, PendingKey(landing.namespace_name)));
  SKIPPR_CHECK_MSG(!pending, "a stream lands only while its namespace has no pending landing");
  for (const sinks::SliceRef& slice : landing.slices) {
    SKIPPR_ASSIGN_OR_RETURN(const std::optional<std::string> marker,
                            write.Get(store::Family::kCatalog, LandedKey(slice)));
    SKIPPR_CHECK_MSG(!marker, "a streamed slice was not landed before");
  }
  SKIPPR_RETURN_IF_ERROR(write.Put(store::Family::kCatalog, PendingKey(landing.namespace_name),
                                   LandingToJson(landing)));
  SKIPPR_RETURN_IF_ERROR(write.Commit());
  SKIPPR_ASSIGN_OR_RETURN(store::ReadTransaction read, state.store().BeginRead());
  SKIPPR_ASSIGN_OR_RETURN(std::vector<wal::SegmentEntry> live, wal::LiveSegments(read));
  std::map<uint64_t, wal::SegmentEntry> segments;
  for (wal::SegmentEntry& entry : live) segments.emplace(entry.segment_id, std::move(entry));
  return segments;
}

}  // namespace

Result<LandingPassResult> LandStream(PipelineState& state, const config::PipelineConfig& pipeline,
                                     const LandingSinks& sinks,
                                     const schema::NamespaceSchema& namespace_schema,
                                     const NextStreamedSlice& next, PassLandings& pass) {
  SKIPPR_CHECK(sinks.data != nullptr && sinks.data_policy.key_columns.empty() &&
               !IsDeadletters(namespace_schema.name));
  std::vector<sinks::SliceRef> slices;
  int64_t rows = 0;  // the slices' rows; their batches are let go as DuckDB reads them
  SKIPPR_RETURN_IF_ERROR(
      sinks.data
          ->WriteStream(namespace_schema,
                        [&]() -> Result<std::shared_ptr<const Batch>> {
                          SKIPPR_ASSIGN_OR_RETURN(std::optional<StreamedSlice> taken, next());
                          if (!taken) return std::shared_ptr<const Batch>();
                          SKIPPR_CHECK(taken->batch->namespace_name == namespace_schema.name &&
                                       taken->batch->schema_id == namespace_schema.schema_id);
                          slices.push_back(taken->slice);
                          rows += taken->batch->num_rows;
                          return taken->batch;
                        })
          .status());
  LandingPassResult result;
  if (slices.empty()) return result;
  CrashPoint("landing.after_stream_written");
  // The plan, recorded before the commit: a crash from here on replays exactly these slices.
  const sinks::Landing landing = sinks::PlanLanding(
      pipeline.name, state.store().identity().instance_id, namespace_schema.name, std::move(slices),
      sinks.data_policy.replaces_table() &&
          !pass.namespaces_landed.contains(namespace_schema.name));
  using SegmentsById = std::map<uint64_t, wal::SegmentEntry>;
  SKIPPR_ASSIGN_OR_RETURN(const SegmentsById segments, RecordStreamPlan(state, landing));
  SKIPPR_ASSIGN_OR_RETURN(const sinks::LandingOutcome outcome,
                          sinks.data->LandStreamed(landing, namespace_schema, rows));
  SKIPPR_RETURN_IF_ERROR(
      FinishLanding(state, pipeline, segments, landing, outcome, {},
                    ", written as they were committed", pass, result));
  return result;
}

Result<LandingPassResult> LandCommittedSlices(PipelineState& state,
                                              const config::PipelineConfig& pipeline,
                                              sinks::Sink& writer,
                                              const sinks::LandingPolicy& policy,
                                              PassLandings& pass) {
  return LandCommittedSlices(state, pipeline, LandingSinks{&writer, policy, nullptr, {}}, pass);
}

}  // namespace skippr::pipeline::internal
