// Table commits: a new metadata file, then the catalog pointer swap (the commit point), then the
// version hint (docs/formats/iceberg-tables.md, "Commit protocol").
#include <fmt/format.h>

#include "core/crash.hpp"
#include "iceberg/catalog.hpp"

namespace skippr::iceberg {
namespace {

// Enough for any real run of stranded commits (a writer leaves at most one each time it dies).
constexpr int kMaxStrandedCommits = 64;

Result<VersionedMetadata> ReadVersioned(Env& env, std::string location) {
  SKIPPR_ASSIGN_OR_RETURN(TableMetadata metadata, ReadMetadataFile(location, &env));
  const int64_t version = MetadataFileVersion(location).value_or(0);
  return VersionedMetadata{version, std::move(location), std::move(metadata)};
}

std::string SiblingMetadataLocation(const std::string& location, int64_t version) {
  return fmt::format("{}/v{}.metadata.json", location.substr(0, location.rfind('/')), version);
}

// The next version's file when it is a complete successor of `current` that its writer did not
// swap in: the same table, with a metadata log ending at `current`.
Result<std::optional<VersionedMetadata>> FindStrandedSuccessor(Env& env,
                                                               const VersionedMetadata& current) {
  if (current.version == 0) return std::optional<VersionedMetadata>();
  Result<VersionedMetadata> successor =
      ReadVersioned(env, SiblingMetadataLocation(current.location, current.version + 1));
  if (!successor.ok()) {
    if (successor.status().code() == StatusCode::kNotFound) {
      return std::optional<VersionedMetadata>();
    }
    return successor.status();
  }
  const TableMetadata& next = successor->metadata;
  const bool continues_current = next.table_uuid == current.metadata.table_uuid &&
                                 !next.metadata_log.empty() &&
                                 next.metadata_log.back().metadata_file == current.location;
  if (!continues_current) return std::optional<VersionedMetadata>();
  return std::optional<VersionedMetadata>(std::move(successor).value());
}

Status UpdateHintAfterCommit(Env& env, const VersionedMetadata& committed,
                             const TableIdentifier& table) {
  Status hinted = WriteVersionHint(committed.metadata.location, committed.version, &env);
  if (hinted.ok()) return hinted;
  return Status(
      hinted.code(),
      fmt::format("table {} committed version {} ({}), but its version-hint.text was not "
                  "updated: {}",
                  table.ToString(), committed.version, committed.location, hinted.message()));
}

// The swap, where "the catalog already points at our file" also counts as success: a
// LoadTableForCommit elsewhere completed this very commit. A swap lost for good removes our file,
// which nobody can adopt any more (its base is no longer current) and which would otherwise look
// like a newer version to catalog-less readers.
Status SwapToNewFile(Catalog& catalog, const TableIdentifier& table,
                     const std::string& base_location, const std::string& new_location) {
  Status swapped = catalog.CompareAndSwap(table, base_location, new_location);
  if (swapped.code() != StatusCode::kConflict) return swapped;
  Result<std::string> current_location = catalog.LoadTable(table);
  if (current_location.ok() && *current_location == new_location) return Status::OK();
  Result<std::string> path = EnvPathOfUri(new_location);
  if (path.ok()) (void)catalog.env().RemoveFile(*path);
  return swapped;
}

}  // namespace

Status MissingCurrentMetadata(const TableIdentifier& table, std::string_view metadata_location) {
  return Status::Corruption(fmt::format(
      "the catalog points table {} at metadata file {}, which does not exist: the table's current "
      "metadata was deleted or moved; restore it from a backup of the warehouse (nothing is "
      "landed or reclaimed until then, the WAL keeps every row)",
      table.ToString(), metadata_location));
}

Result<VersionedMetadata> CreateTableWithMetadata(Catalog& catalog, const TableIdentifier& table,
                                                  const TableMetadata& metadata) {
  SKIPPR_RETURN_IF_ERROR(catalog.CreateNamespace(table.table_namespace));
  Result<std::string> written = WriteMetadataFile(metadata, 1, &catalog.env());
  VersionedMetadata created;
  if (written.ok()) {
    created = VersionedMetadata{1, std::move(written).value(), metadata};
  } else if (written.status().code() == StatusCode::kConflict) {
    // A v1 is there already. Without a catalog row it is a create that died before registering:
    // register it. With one, CreateTable below reports that the table exists.
    SKIPPR_ASSIGN_OR_RETURN(created, ReadVersioned(catalog.env(),
                                                   MetadataFileLocation(metadata.location, 1)));
  } else {
    return written.status();
  }
  CrashPoint("iceberg.after_first_metadata_file");
  SKIPPR_RETURN_IF_ERROR(catalog.CreateTable(table, created.location));
  SKIPPR_RETURN_IF_ERROR(UpdateHintAfterCommit(catalog.env(), created, table));
  return created;
}

Result<VersionedMetadata> LoadTableMetadata(Catalog& catalog, const TableIdentifier& table) {
  SKIPPR_ASSIGN_OR_RETURN(std::string location, catalog.LoadTable(table));
  Result<VersionedMetadata> loaded = ReadVersioned(catalog.env(), location);
  // NotFound from here would read as "no such table" and invite a create, which the catalog row
  // refuses: the table exists, its current metadata does not.
  if (!loaded.ok() && loaded.status().code() == StatusCode::kNotFound) {
    return MissingCurrentMetadata(table, location);
  }
  return loaded;
}

Result<VersionedMetadata> LoadTableForCommit(Catalog& catalog, const TableIdentifier& table) {
  SKIPPR_ASSIGN_OR_RETURN(VersionedMetadata current, LoadTableMetadata(catalog, table));
  for (int completed = 0; completed < kMaxStrandedCommits; ++completed) {
    SKIPPR_ASSIGN_OR_RETURN(std::optional<VersionedMetadata> successor,
                            FindStrandedSuccessor(catalog.env(), current));
    if (!successor) return current;
    Status swapped = catalog.CompareAndSwap(table, current.location, successor->location);
    if (swapped.code() == StatusCode::kConflict) {  // someone else moved on: start from there
      SKIPPR_ASSIGN_OR_RETURN(current, LoadTableMetadata(catalog, table));
      continue;
    }
    SKIPPR_RETURN_IF_ERROR(swapped);
    SKIPPR_RETURN_IF_ERROR(UpdateHintAfterCommit(catalog.env(), *successor, table));
    current = std::move(*successor);
  }
  return Status::Unavailable(fmt::format(
      "table {} still has an unfinished commit after completing {}; another writer is committing "
      "as fast as we load: retry later",
      table.ToString(), kMaxStrandedCommits));
}

Result<VersionedMetadata> CommitTableMetadata(Catalog& catalog, const TableIdentifier& table,
                                              const VersionedMetadata& base,
                                              const TableMetadata& next) {
  if (next.table_uuid != base.metadata.table_uuid) {
    return Status::InvalidArgument(
        fmt::format("the new metadata of table {} has table-uuid {}, not its base's {}",
                    table.ToString(), next.table_uuid, base.metadata.table_uuid));
  }
  int64_t version = base.version + 1;
  if (base.version == 0) {  // a base named by another writer: continue after every v{N}
    SKIPPR_ASSIGN_OR_RETURN(int64_t highest_version,
                            HighestMetadataVersion(next.location, &catalog.env()));
    version = highest_version + 1;
  }
  SKIPPR_ASSIGN_OR_RETURN(std::string location, WriteMetadataFile(next, version, &catalog.env()));
  CrashPoint("iceberg.after_metadata_file");
  SKIPPR_RETURN_IF_ERROR(SwapToNewFile(catalog, table, base.location, location));
  CrashPoint("iceberg.after_catalog_swap");
  VersionedMetadata committed{version, std::move(location), next};
  SKIPPR_RETURN_IF_ERROR(UpdateHintAfterCommit(catalog.env(), committed, table));
  return committed;
}

}  // namespace skippr::iceberg
