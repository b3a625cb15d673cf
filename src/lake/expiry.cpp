#include "lake/internal/expiry.hpp"

#include <algorithm>
#include <optional>
#include <set>

namespace skippr::lake::internal {
namespace {

Status DeleteIfPresent(Env& env, const std::string& uri) {
  SKIPPR_ASSIGN_OR_RETURN(const std::string path, iceberg::EnvPathOfUri(uri));
  Status removed = env.RemoveFile(path);
  return removed.code() == StatusCode::kNotFound ? Status::OK() : removed;
}

Result<iceberg::ManifestList> ReadList(Env& env, const iceberg::Snapshot& snapshot) {
  SKIPPR_ASSIGN_OR_RETURN(const std::string path, iceberg::EnvPathOfUri(snapshot.manifest_list));
  return iceberg::ReadManifestList(path, &env);
}

// Every snapshot, kept or expired, oldest first — when they form one line: each the parent of the
// next, the expired ones first, the current one last, and `main` the only ref.
std::optional<std::vector<const iceberg::Snapshot*>> LinearHistory(
    const iceberg::TableMetadata& committed, const std::vector<iceberg::Snapshot>& expired) {
  if (committed.refs.size() != 1 || !committed.refs.contains(std::string(iceberg::kMainBranch))) {
    return std::nullopt;
  }
  std::vector<const iceberg::Snapshot*> history;
  for (const iceberg::Snapshot& snapshot : expired) history.push_back(&snapshot);
  for (const iceberg::Snapshot& snapshot : committed.snapshots) history.push_back(&snapshot);
  std::sort(history.begin(), history.end(), [](const auto* a, const auto* b) {
    return a->sequence_number < b->sequence_number;
  });
  std::set<int64_t> expired_ids;
  for (const iceberg::Snapshot& snapshot : expired) expired_ids.insert(snapshot.snapshot_id);
  for (size_t i = 0; i < history.size(); ++i) {
    if (i > 0 && history[i]->parent_snapshot_id != history[i - 1]->snapshot_id) return std::nullopt;
    if (expired_ids.contains(history[i]->snapshot_id) != (i < expired.size())) return std::nullopt;
  }
  if (history.empty() || history.back()->snapshot_id != committed.current_snapshot_id) {
    return std::nullopt;
  }
  return history;
}

// The data and delete files `snapshot` took out of the table: the DELETED entries of the manifests
// it wrote (later snapshots never carry a DELETED entry forward).
Status AddFilesRemovedBy(Env& env, const iceberg::Snapshot& snapshot,
                         std::vector<std::string>& files) {
  SKIPPR_ASSIGN_OR_RETURN(const iceberg::ManifestList list, ReadList(env, snapshot));
  for (const iceberg::ManifestFile& manifest : list.manifests) {
    if (manifest.added_snapshot_id != snapshot.snapshot_id || manifest.deleted_files_count == 0) {
      continue;
    }
    SKIPPR_ASSIGN_OR_RETURN(const std::string path,
                            iceberg::EnvPathOfUri(manifest.manifest_path));
    SKIPPR_ASSIGN_OR_RETURN(const iceberg::Manifest read,
                            iceberg::ReadManifest(path, manifest.manifest_length, &env));
    for (const iceberg::ManifestEntry& entry : read.entries) {
      if (entry.status == iceberg::EntryStatus::kDeleted &&
          entry.snapshot_id == snapshot.snapshot_id) {
        files.push_back(entry.data_file.file_path);
      }
    }
  }
  return Status::OK();
}

}  // namespace

// On a line of snapshots, with no file name ever used twice, what is live stays contiguous: a
// manifest is in every list from the snapshot that adds it until one merges it away, so an expired
// snapshot's manifest is still needed exactly when the oldest kept snapshot lists it; a data or
// delete file is live from the snapshot that adds it until the one whose manifests list it as
// DELETED, so once that snapshot's parent has expired no kept snapshot has it. Each commit then
// reads a few manifest lists, however many snapshots are kept.
Status RemoveUnreferencedFiles(Env& env, const iceberg::TableMetadata& committed,
                               const std::vector<iceberg::Snapshot>& expired,
                               const std::vector<std::string>& dropped_metadata_files) {
  for (const std::string& file : dropped_metadata_files) {
    SKIPPR_RETURN_IF_ERROR(DeleteIfPresent(env, file));
  }
  if (expired.empty()) return Status::OK();
  const std::optional<std::vector<const iceberg::Snapshot*>> history =
      LinearHistory(committed, expired);
  // The snapshots whose manifest lists say which manifests are still needed.
  std::vector<const iceberg::Snapshot*> listing;
  if (history) {
    listing.push_back(history->at(expired.size()));  // the oldest kept snapshot
  } else {
    for (const iceberg::Snapshot& snapshot : committed.snapshots) listing.push_back(&snapshot);
  }
  std::set<std::string> kept_manifests;
  for (const iceberg::Snapshot* snapshot : listing) {
    SKIPPR_ASSIGN_OR_RETURN(const iceberg::ManifestList list, ReadList(env, *snapshot));
    for (const iceberg::ManifestFile& manifest : list.manifests) {
      kept_manifests.insert(manifest.manifest_path);
    }
  }
  // Read before the expired manifest lists go: the files taken out by each snapshot whose parent
  // just expired (kept or expired itself), live only in that parent and older snapshots.
  std::vector<std::string> unreferenced_files;
  if (history) {
    for (size_t i = 1; i <= expired.size(); ++i) {
      Status read = AddFilesRemovedBy(env, *history->at(i), unreferenced_files);
      if (read.code() == StatusCode::kNotFound) continue;  // its list went in an earlier cleanup
      SKIPPR_RETURN_IF_ERROR(read);
    }
  }
  for (const iceberg::Snapshot& snapshot : expired) {
    Result<iceberg::ManifestList> list = ReadList(env, snapshot);
    if (!list.ok() && list.status().code() == StatusCode::kNotFound) continue;  // removed before
    SKIPPR_RETURN_IF_ERROR(list.status());
    for (const iceberg::ManifestFile& manifest : list->manifests) {
      if (!kept_manifests.contains(manifest.manifest_path)) {
        SKIPPR_RETURN_IF_ERROR(DeleteIfPresent(env, manifest.manifest_path));
      }
    }
    SKIPPR_RETURN_IF_ERROR(DeleteIfPresent(env, snapshot.manifest_list));
  }
  for (const std::string& file : unreferenced_files) {
    SKIPPR_RETURN_IF_ERROR(DeleteIfPresent(env, file));
  }
  return Status::OK();
}

}  // namespace skippr::lake::internal
