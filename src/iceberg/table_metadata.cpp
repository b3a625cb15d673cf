// Iceberg table metadata: lookups, and the edits a landing makes (new table, schema evolution,
// snapshots, expiry). JSON lives in table_metadata_json.cpp, files in metadata_files.cpp.
#include "iceberg/table_metadata.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <set>
#include <unordered_map>

#include "core/check.hpp"
#include "iceberg/internal/random.hpp"

namespace skippr::iceberg {
namespace {

constexpr std::string_view kOperationKey = "operation";
constexpr std::string_view kPreviousVersionsMaxProperty = "write.metadata.previous-versions-max";

int32_t MaxFieldId(const std::vector<Field>& fields) {
  int32_t max_id = 0;
  for (const Field& field : fields) {
    max_id = std::max({max_id, field.id, MaxFieldId(field.type.children())});
  }
  return max_id;
}

Status CollectFieldIds(const std::vector<Field>& fields, std::set<int32_t>& seen_ids) {
  for (const Field& field : fields) {
    if (field.id <= 0 || !seen_ids.insert(field.id).second) {
      return Status::InvalidArgument(
          fmt::format("field '{}' has id {}, which is {}; Iceberg field ids are positive and "
                      "unique in a schema",
                      field.name, field.id, field.id <= 0 ? "not positive" : "used twice"));
    }
    SKIPPR_RETURN_IF_ERROR(CollectFieldIds(field.type.children(), seen_ids));
  }
  return Status::OK();
}

Status CheckFieldIds(const std::vector<Field>& fields) {
  std::set<int32_t> seen_ids;
  return CollectFieldIds(fields, seen_ids);
}

size_t PreviousVersionsMax(const std::map<std::string, std::string>& properties) {
  const auto it = properties.find(std::string(kPreviousVersionsMaxProperty));
  if (it == properties.end()) return kDefaultPreviousVersionsMax;
  int parsed = 0;
  const char* end = it->second.data() + it->second.size();
  const auto [stop, error] = std::from_chars(it->second.data(), end, parsed);
  if (error != std::errc() || stop != end) return kDefaultPreviousVersionsMax;
  return static_cast<size_t>(std::max(parsed, 1));
}

using SnapshotIndex = std::unordered_map<int64_t, const Snapshot*>;

SnapshotIndex IndexSnapshots(const TableMetadata& metadata) {
  SnapshotIndex index;
  for (const Snapshot& snapshot : metadata.snapshots) index[snapshot.snapshot_id] = &snapshot;
  return index;
}

// Visits `head` and its ancestors, newest first, until `visit` returns false or the chain ends (at
// the first snapshot or an expired parent). Bounded by the snapshot count against a cyclic chain.
template <typename Visit>
void ForEachAncestor(const SnapshotIndex& index, int64_t head_id, Visit visit) {
  std::optional<int64_t> next_id = head_id;
  for (size_t steps = 0; next_id && steps <= index.size(); ++steps) {
    const auto it = index.find(*next_id);
    if (it == index.end() || !visit(*it->second)) return;
    next_id = it->second->parent_snapshot_id;
  }
}

// The spec's retention step 2: refs other than main whose snapshot is older than their max age go.
void DropExpiredRefs(TableMetadata& metadata, const SnapshotIndex& index,
                     const SnapshotRetention& retention) {
  std::erase_if(metadata.refs, [&](const auto& named_ref) {
    const auto& [name, ref] = named_ref;
    if (name == kMainBranch) return false;
    const auto head = index.find(ref.snapshot_id);
    const int64_t max_ref_age_ms = ref.max_ref_age_ms.value_or(retention.max_ref_age_ms);
    return head == index.end() || retention.now_ms - head->second->timestamp_ms > max_ref_age_ms;
  });
}

// Step 4 for one branch: its head and ancestors until one is both older than the cutoff and beyond
// the newest min-snapshots-to-keep.
void RetainBranch(const SnapshotRef& branch, const SnapshotIndex& index,
                  const SnapshotRetention& retention, std::set<int64_t>& retained_ids) {
  const int64_t cutoff_ms =
      retention.now_ms - branch.max_snapshot_age_ms.value_or(retention.max_snapshot_age_ms);
  const auto min_to_keep = static_cast<size_t>(
      std::max(branch.min_snapshots_to_keep.value_or(retention.min_snapshots_to_keep), 1));
  size_t kept_in_branch = 0;
  ForEachAncestor(index, branch.snapshot_id, [&](const Snapshot& snapshot) {
    if (kept_in_branch >= min_to_keep && snapshot.timestamp_ms < cutoff_ms) return false;
    retained_ids.insert(snapshot.snapshot_id);
    ++kept_in_branch;
    return true;
  });
}

// Steps 2–4: what the refs that survive keep (a tag its snapshot, a branch its recent history).
std::set<int64_t> RetainedByRefs(TableMetadata& metadata, const SnapshotIndex& index,
                                 const SnapshotRetention& retention) {
  DropExpiredRefs(metadata, index, retention);
  std::set<int64_t> retained_ids;
  for (const auto& [name, ref] : metadata.refs) {
    retained_ids.insert(ref.snapshot_id);
    if (ref.is_branch()) RetainBranch(ref, index, retention, retained_ids);
  }
  return retained_ids;
}

// Snapshots no ref reaches at all (not even beyond its retention) stay until old enough.
std::set<int64_t> UnreferencedButYoung(const TableMetadata& metadata, const SnapshotIndex& index,
                                       const SnapshotRetention& retention) {
  std::set<int64_t> reachable_ids;
  for (const auto& [name, ref] : metadata.refs) {
    if (!ref.is_branch()) {
      reachable_ids.insert(ref.snapshot_id);
      continue;
    }
    ForEachAncestor(index, ref.snapshot_id, [&](const Snapshot& snapshot) {
      reachable_ids.insert(snapshot.snapshot_id);
      return true;
    });
  }
  const int64_t cutoff_ms = retention.now_ms - retention.max_snapshot_age_ms;
  std::set<int64_t> young_ids;
  for (const Snapshot& snapshot : metadata.snapshots) {
    if (!reachable_ids.count(snapshot.snapshot_id) && snapshot.timestamp_ms >= cutoff_ms) {
      young_ids.insert(snapshot.snapshot_id);
    }
  }
  return young_ids;
}

// An entry whose snapshot is gone invalidates the history before it: keeping older entries would
// claim a later snapshot was current while the expired one was.
void TrimSnapshotLog(TableMetadata& metadata) {
  size_t first_kept = 0;
  for (size_t i = 0; i < metadata.snapshot_log.size(); ++i) {
    if (metadata.FindSnapshot(metadata.snapshot_log[i].snapshot_id) == nullptr) first_kept = i + 1;
  }
  metadata.snapshot_log.erase(metadata.snapshot_log.begin(),
                              metadata.snapshot_log.begin() + static_cast<ptrdiff_t>(first_kept));
}

}  // namespace

std::string_view SnapshotOperationName(SnapshotOperation operation) {
  switch (operation) {
    case SnapshotOperation::kAppend:
      return "append";
    case SnapshotOperation::kReplace:
      return "replace";
    case SnapshotOperation::kOverwrite:
      return "overwrite";
    case SnapshotOperation::kDelete:
      return "delete";
  }
  return "append";
}

const TableSchema* TableMetadata::FindSchema(int32_t schema_id) const {
  for (const TableSchema& schema : schemas) {
    if (schema.schema_id == schema_id) return &schema;
  }
  return nullptr;
}

const TableSchema& TableMetadata::CurrentSchema() const {
  const TableSchema* schema = FindSchema(current_schema_id);
  SKIPPR_CHECK_MSG(schema != nullptr, "table metadata without its current schema");
  return *schema;
}

const Snapshot* TableMetadata::FindSnapshot(int64_t snapshot_id) const {
  for (const Snapshot& snapshot : snapshots) {
    if (snapshot.snapshot_id == snapshot_id) return &snapshot;
  }
  return nullptr;
}

const Snapshot* TableMetadata::CurrentSnapshot() const {
  return current_snapshot_id ? FindSnapshot(*current_snapshot_id) : nullptr;
}

Result<TableMetadata> NewTableMetadata(std::string location, std::vector<Field> fields,
                                       int64_t now_ms, int32_t last_column_id) {
  while (location.size() > 1 && location.back() == '/') location.pop_back();
  if (location.empty()) return Status::InvalidArgument("a new Iceberg table needs a location");
  SKIPPR_RETURN_IF_ERROR(CheckFieldIds(fields));
  TableMetadata metadata;
  SKIPPR_ASSIGN_OR_RETURN(metadata.table_uuid, internal::RandomUuid());
  metadata.location = std::move(location);
  metadata.last_updated_ms = now_ms;
  metadata.last_column_id = std::max(last_column_id, MaxFieldId(fields));
  metadata.schemas.push_back(TableSchema{0, std::move(fields), {}});
  metadata.partition_specs.push_back(PartitionSpec{});
  metadata.sort_orders.push_back(SortOrder{});
  return metadata;
}

TableMetadata NextVersion(const TableMetadata& base, const std::string& base_location,
                          int64_t now_ms) {
  TableMetadata next = base;
  next.metadata_log.push_back(MetadataLogEntry{base.last_updated_ms, base_location});
  const size_t max_entries = PreviousVersionsMax(base.properties);
  if (next.metadata_log.size() > max_entries) {
    next.metadata_log.erase(next.metadata_log.begin(),
                            next.metadata_log.end() - static_cast<ptrdiff_t>(max_entries));
  }
  next.last_updated_ms = std::max(now_ms, base.last_updated_ms);
  return next;
}

Result<int32_t> AddSchema(TableMetadata& metadata, std::vector<Field> fields,
                          int32_t last_column_id) {
  SKIPPR_RETURN_IF_ERROR(CheckFieldIds(fields));
  metadata.last_column_id = std::max({metadata.last_column_id, last_column_id, MaxFieldId(fields)});
  for (const TableSchema& schema : metadata.schemas) {
    if (schema.fields == fields && schema.identifier_field_ids.empty()) {
      metadata.current_schema_id = schema.schema_id;
      return schema.schema_id;
    }
  }
  int32_t highest_id = -1;
  for (const TableSchema& schema : metadata.schemas) {
    highest_id = std::max(highest_id, schema.schema_id);
  }
  metadata.schemas.push_back(TableSchema{highest_id + 1, std::move(fields), {}});
  metadata.current_schema_id = highest_id + 1;
  return metadata.current_schema_id;
}

Result<int64_t> NewSnapshotId(const TableMetadata& metadata) {
  constexpr int kAttempts = 16;  // a collision among 2^63 ids is already absurdly unlikely
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    SKIPPR_ASSIGN_OR_RETURN(uint64_t random, internal::RandomU64());
    const auto snapshot_id = static_cast<int64_t>(random & 0x7fff'ffff'ffff'ffffULL);
    if (snapshot_id > 0 && metadata.FindSnapshot(snapshot_id) == nullptr) return snapshot_id;
  }
  return Status::Internal("could not draw an unused snapshot id; the random source is broken");
}

Status AddSnapshot(TableMetadata& metadata, NewSnapshot snapshot) {
  if (snapshot.snapshot_id <= 0 || metadata.FindSnapshot(snapshot.snapshot_id) != nullptr) {
    return Status::InvalidArgument(fmt::format(
        "snapshot id {} cannot be added to table {}: it is {}; draw one with NewSnapshotId()",
        snapshot.snapshot_id, metadata.location,
        snapshot.snapshot_id <= 0 ? "not positive" : "already used"));
  }
  if (snapshot.manifest_list.empty()) {
    return Status::InvalidArgument("a snapshot needs the location of its manifest list");
  }
  if (snapshot.summary.count(std::string(kOperationKey)) != 0) {
    return Status::InvalidArgument(
        "a snapshot summary's \"operation\" is set through NewSnapshot::operation, not the map");
  }
  Snapshot added{.snapshot_id = snapshot.snapshot_id,
                 .parent_snapshot_id = metadata.current_snapshot_id,
                 .sequence_number = metadata.NextSequenceNumber(),
                 .timestamp_ms = snapshot.timestamp_ms,
                 .manifest_list = std::move(snapshot.manifest_list),
                 .operation = snapshot.operation,
                 .summary = std::move(snapshot.summary),
                 .schema_id = metadata.current_schema_id};
  metadata.last_sequence_number = added.sequence_number;
  metadata.last_updated_ms = std::max(metadata.last_updated_ms, added.timestamp_ms);
  metadata.current_snapshot_id = added.snapshot_id;
  SnapshotRef& main = metadata.refs[std::string(kMainBranch)];  // keeps main's retention settings
  main.snapshot_id = added.snapshot_id;
  main.type = "branch";
  metadata.snapshot_log.push_back(SnapshotLogEntry{added.timestamp_ms, added.snapshot_id});
  metadata.snapshots.push_back(std::move(added));
  return Status::OK();
}

const Snapshot* FindAncestorWithSummary(const TableMetadata& metadata, std::string_view key,
                                        std::string_view value) {
  if (!metadata.current_snapshot_id) return nullptr;
  const Snapshot* found = nullptr;
  ForEachAncestor(IndexSnapshots(metadata), *metadata.current_snapshot_id,
                  [&](const Snapshot& snapshot) {
                    const auto it = snapshot.summary.find(std::string(key));
                    if (it != snapshot.summary.end() && it->second == value) found = &snapshot;
                    return found == nullptr;
                  });
  return found;
}

std::vector<Snapshot> ExpireSnapshots(TableMetadata& metadata, const SnapshotRetention& retention) {
  const SnapshotIndex index = IndexSnapshots(metadata);
  std::set<int64_t> retained_ids = RetainedByRefs(metadata, index, retention);
  retained_ids.merge(UnreferencedButYoung(metadata, index, retention));

  std::vector<Snapshot> kept;
  std::vector<Snapshot> removed;
  for (Snapshot& snapshot : metadata.snapshots) {
    (retained_ids.count(snapshot.snapshot_id) ? kept : removed).push_back(std::move(snapshot));
  }
  metadata.snapshots = std::move(kept);
  TrimSnapshotLog(metadata);
  return removed;
}

}  // namespace skippr::iceberg
