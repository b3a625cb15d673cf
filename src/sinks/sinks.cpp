// What every sink shares: landing identity, write policies, capabilities, and the factory keyed by
// connector kind.
#include "sinks/sinks.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/hash.hpp"
#include "lake/lake.hpp"
#include "sinks/internal/duckdb_sink.hpp"
#include "sinks/internal/lake_sink.hpp"
#include "sinks/internal/postgres_sink.hpp"

namespace skippr::sinks {

std::vector<uint64_t> Landing::SegmentIds() const {
  std::vector<uint64_t> ids;
  for (const SliceRef& slice : slices) {
    if (ids.empty() || ids.back() != slice.segment_id) ids.push_back(slice.segment_id);
  }
  return ids;  // sorted and unique: the slices are
}

Landing PlanLanding(std::string_view pipeline, std::string_view pipeline_instance,
                    std::string namespace_name, std::vector<SliceRef> slices, bool replaces_table,
                    std::vector<std::string> key_columns) {
  std::sort(slices.begin(), slices.end());
  slices.erase(std::unique(slices.begin(), slices.end()), slices.end());
  std::string identity =
      fmt::format("skippr-landing-v2\n{}\n{}\n{}\n", pipeline, pipeline_instance, namespace_name);
  for (const SliceRef& slice : slices) {
    identity += fmt::format("{}/{}\n", slice.segment_id, slice.ordinal);
  }
  if (replaces_table) identity += "replace\n";
  // Length-prefixed: a column name may hold any character, a newline included.
  for (const std::string& column : key_columns)
    identity += fmt::format("key {}:{}\n", column.size(), column);
  return Landing{Sha256Hex(identity).substr(0, 32), std::move(namespace_name), std::move(slices),
                 replaces_table, std::move(key_columns)};
}

std::string_view WritePolicyName(WritePolicy policy) {
  switch (policy) {
    case WritePolicy::kAppend:
      return "append";
    case WritePolicy::kReplaceTable:
      return "replace_table";
    case WritePolicy::kMergeByKey:
      return "merge_by_key";
  }
  return "append";
}

bool Capabilities::Supports(WritePolicy policy) const {
  return std::find(write_policies.begin(), write_policies.end(), policy) != write_policies.end();
}

Result<int64_t> Sink::WriteStream(const schema::NamespaceSchema&, StreamedBatches) {
  return Status::NotSupported("this sink does not land streams");
}

Result<LandingOutcome> Sink::LandStreamed(const Landing&, const schema::NamespaceSchema&, int64_t) {
  return Status::NotSupported("this sink does not land streams");
}

Result<MaintenanceOutcome> Sink::Maintain(const schema::NamespaceSchema&, const LandingPolicy&) {
  return MaintenanceOutcome{};
}

Status CheckKeyColumns(const std::vector<std::string>& key_columns,
                       const std::vector<Field>& fields) {
  return lake::CheckKeyColumns(key_columns, fields);
}

namespace {

// The sink kinds this build lands in. Adding one: its settings in config/connectors.cpp, a
// SinkKind here, its Sink in a file of its own.
struct SinkKind {
  // Whether this kind takes the entry (Duckdb has two forms, told apart by their settings).
  std::function<bool(const config::ConnectorConfig&)> takes;
  std::function<Capabilities()> capabilities;
  std::function<Result<std::unique_ptr<Sink>>(const SinkContext&, const config::ConnectorConfig&,
                                              const std::string& setting)>
      open;
  // What query reads back; unset: nothing (query shows the live WAL only).
  std::function<Result<query::LandedRows>(const SinkContext&, const config::ConnectorConfig&,
                                          const std::string&, const CommitId&)>
      read_landed;
  // Set for sinks whose read-back is their current state (ReadsCurrentState).
  std::function<Result<bool>(const config::ConnectorConfig&, const std::string&,
                             const std::string&)>
      holds_landing;
  // What doctor checks beyond the kind being built (a server to reach); unset: nothing.
  std::function<std::vector<SinkCheck>(const config::ConnectorConfig&, const std::string&)> check;
};

const std::vector<SinkKind>& Kinds() {
  static const std::vector<SinkKind> kKinds = {
      {[](const config::ConnectorConfig& entry) {
         return entry.kind == "SkipprLake" || (entry.kind == "Duckdb" && entry.Has("warehouse"));
       },
       internal::LakeSink::KindCapabilities, internal::LakeSink::Open,
       internal::LakeSink::ReadLanded, nullptr, internal::LakeSink::Check},
      {[](const config::ConnectorConfig& entry) {
         return entry.kind == "Duckdb" && entry.Has("database");
       },
       internal::DuckdbSink::KindCapabilities, internal::DuckdbSink::Open,
       internal::DuckdbSink::ReadLanded, internal::DuckdbSink::HoldsLandingReadOnly, nullptr},
      {[](const config::ConnectorConfig& entry) { return entry.kind == "Postgres"; },
       internal::PostgresSink::KindCapabilities, internal::PostgresSink::Open, nullptr, nullptr,
       internal::PostgresSink::Check},
  };
  return kKinds;
}

const SinkKind* KindOf(const config::ConnectorConfig& entry) {
  for (const SinkKind& kind : Kinds()) {
    if (kind.takes(entry)) return &kind;
  }
  return nullptr;
}

Status NotBuilt(const config::ConnectorConfig& entry, const std::string& setting) {
  return Status::NotSupported(
      fmt::format("{}: this build cannot land in a {} sink yet; use a SkipprLake, Duckdb or "
                  "Postgres sink, or no "
                  "data_sink (the WAL is then the dataset)",
                  setting, entry.kind));
}

}  // namespace

Result<std::unique_ptr<Sink>> OpenSink(const SinkContext& context,
                                       const config::ConnectorConfig& entry,
                                       const std::string& setting) {
  const SinkKind* kind = KindOf(entry);
  if (kind == nullptr) return NotBuilt(entry, setting);
  return kind->open(context, entry, setting);
}

Result<Capabilities> CapabilitiesOf(const config::ConnectorConfig& entry,
                                    const std::string& setting) {
  const SinkKind* kind = KindOf(entry);
  if (kind == nullptr) return NotBuilt(entry, setting);
  return kind->capabilities();
}

LandingPolicy LandingPolicyOf(const config::ConnectorConfig& entry) {
  LandingPolicy policy;
  if (entry.Has("write_policy")) {
    const std::string& name = entry.GetString("write_policy");
    for (WritePolicy candidate :
         {WritePolicy::kAppend, WritePolicy::kReplaceTable, WritePolicy::kMergeByKey}) {
      if (WritePolicyName(candidate) == name) policy.write_policy = candidate;
    }
  }
  if (entry.Has("target_file_size_bytes")) {
    policy.target_file_bytes = static_cast<uint64_t>(entry.GetInteger("target_file_size_bytes"));
  }
  if (entry.Has("commit_interval_seconds")) {
    policy.commit_interval_seconds =
        static_cast<double>(entry.GetInteger("commit_interval_seconds"));
  }
  return policy;
}

bool IsReadBack(const config::ConnectorConfig& entry) {
  const SinkKind* kind = KindOf(entry);
  return kind != nullptr && static_cast<bool>(kind->read_landed);
}

Result<query::LandedRows> ReadLanded(const SinkContext& context,
                                     const config::ConnectorConfig& entry,
                                     const std::string& namespace_name, const CommitId& commit) {
  const SinkKind* kind = KindOf(entry);
  if (kind == nullptr || !kind->read_landed || commit.version == 0) return query::LandedRows{};
  return kind->read_landed(context, entry, namespace_name, commit);
}

std::vector<SinkCheck> CheckSink(const config::ConnectorConfig& entry, const std::string& setting) {
  const SinkKind* kind = KindOf(entry);
  if (kind == nullptr) return {{false, std::string(NotBuilt(entry, setting).message())}};
  if (!kind->check) return {};
  return kind->check(entry, setting);
}

bool ReadsCurrentState(const config::ConnectorConfig& entry) {
  const SinkKind* kind = KindOf(entry);
  return kind != nullptr && static_cast<bool>(kind->holds_landing);
}

std::string DatabasePathOf(const config::ConnectorConfig& entry) {
  if (!ReadsCurrentState(entry)) return "";
  return internal::DuckdbSink::SettingsOf(entry).database_path;
}

Result<bool> HoldsLanding(const config::ConnectorConfig& entry, const std::string& namespace_name,
                          const std::string& landing_id) {
  const SinkKind* kind = KindOf(entry);
  if (kind == nullptr || !kind->holds_landing) return false;
  return kind->holds_landing(entry, namespace_name, landing_id);
}

}  // namespace skippr::sinks
