// A table's metadata files, through an Env (docs/formats/iceberg-tables.md):
// metadata/v{N}.metadata.json, written once and never replaced, and metadata/version-hint.text.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <utility>

#include "core/check.hpp"
#include "core/file.hpp"
#include "iceberg/internal/random.hpp"
#include "iceberg/table_metadata.hpp"

namespace skippr::iceberg {
namespace {

constexpr std::string_view kMetadataDirectory = "metadata";
constexpr std::string_view kVersionHintFile = "version-hint.text";
constexpr std::string_view kMetadataFileSuffix = ".metadata.json";

std::optional<int64_t> ParsePositiveDecimal(std::string_view text) {
  constexpr size_t kMaxDigits = 18;  // stays inside int64_t
  if (text.empty() || text.size() > kMaxDigits) return std::nullopt;
  int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value <= 0) return std::nullopt;
  return value;
}

Result<std::string> MetadataDirectory(std::string_view table_location) {
  SKIPPR_ASSIGN_OR_RETURN(std::string table_path, EnvPathOfUri(table_location));
  return fmt::format("{}/{}", table_path, kMetadataDirectory);
}

std::string MetadataFileName(int64_t version) {
  return fmt::format("v{}{}", version, kMetadataFileSuffix);
}

// The version in version-hint.text; nullopt when it is missing or not a number (readers then list
// the directory, as the reference reader does).
Result<std::optional<int64_t>> ReadVersionHint(Env& env, const std::string& metadata_directory) {
  Result<std::string> hint =
      ReadWholeFile(env, fmt::format("{}/{}", metadata_directory, kVersionHintFile));
  if (!hint.ok()) {
    if (hint.status().code() == StatusCode::kNotFound) return std::optional<int64_t>();
    return hint.status();
  }
  std::string_view text = *hint;
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) {
    text.remove_suffix(1);
  }
  return ParsePositiveDecimal(text);
}

Result<bool> FileExists(Env& env, const std::string& path) { return env.FileExists(path); }

// What a metadata write leaves undone when it fails, for the message: the commit is retried.
Status MetadataWriteFailed(const Status& failure, const std::string& path) {
  if (failure.code() == StatusCode::kConflict) return failure;
  return Status(failure.code(),
                fmt::format("writing Iceberg metadata file {} failed: {}; nothing was committed "
                            "(check the disk; the next run retries the commit)",
                            path, failure.message()));
}

}  // namespace

Result<std::string> EnvPathOfUri(std::string_view uri) {
  std::string_view path = uri;
  if (uri.starts_with("s3://")) {
    if (uri.size() <= 5 || uri[5] == '/') {
      return Status::InvalidArgument(
          fmt::format("location '{}' names no bucket; write it as s3://bucket/prefix", uri));
    }
    while (path.size() > 5 && path.back() == '/') path.remove_suffix(1);
    return std::string(path);
  }
  if (uri.starts_with("file://")) {
    path = uri.substr(7);
    if (path.empty() || path[0] != '/') {
      return Status::NotSupported(fmt::format(
          "file URI '{}' names a host; use file:///absolute/path for a local directory", uri));
    }
  } else if (uri.starts_with("file:")) {
    path = uri.substr(5);  // Hadoop's file:/absolute/path
  } else if (uri.find("://") != std::string_view::npos) {
    return Status::NotSupported(fmt::format(
        "location '{}' is neither file:///absolute/path nor s3://bucket/prefix",
        uri));
  }
  if (path.empty() || path[0] != '/') {
    return Status::InvalidArgument(
        fmt::format("location '{}' is not absolute; write it as file:///absolute/path", uri));
  }
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  return std::string(path);
}

Result<std::string> TableLocation(std::string_view warehouse_uri, std::string_view table_namespace,
                                  std::string_view table_name) {
  for (std::string_view name : {table_namespace, table_name}) {
    if (name.empty() || name == "." || name == ".." ||
        name.find_first_of(std::string_view("/\0", 2)) != std::string_view::npos) {
      return Status::InvalidArgument(fmt::format(
          "'{}' cannot name a table directory: names must be non-empty, not '.' or '..', and "
          "without '/'",
          name));
    }
  }
  SKIPPR_ASSIGN_OR_RETURN(std::string warehouse_path, EnvPathOfUri(warehouse_uri));
  if (warehouse_path.starts_with("s3://")) {
    return fmt::format("{}/{}/{}", warehouse_path, table_namespace, table_name);
  }
  if (warehouse_path == "/") warehouse_path.clear();
  return fmt::format("file://{}/{}/{}", warehouse_path, table_namespace, table_name);
}

std::string MetadataFileLocation(std::string_view table_location, int64_t version) {
  return fmt::format("{}/{}/{}", table_location, kMetadataDirectory, MetadataFileName(version));
}

std::optional<int64_t> MetadataFileVersion(std::string_view metadata_location) {
  const size_t slash = metadata_location.rfind('/');
  std::string_view name =
      slash == std::string_view::npos ? metadata_location : metadata_location.substr(slash + 1);
  if (name.size() <= 1 + kMetadataFileSuffix.size() || name[0] != 'v' ||
      name.substr(name.size() - kMetadataFileSuffix.size()) != kMetadataFileSuffix) {
    return std::nullopt;
  }
  return ParsePositiveDecimal(name.substr(1, name.size() - 1 - kMetadataFileSuffix.size()));
}

Result<int64_t> HighestMetadataVersion(std::string_view table_location, Env* env) {
  SKIPPR_ASSIGN_OR_RETURN(std::string directory, MetadataDirectory(table_location));
  Result<std::vector<std::string>> names = env->ListDirectory(directory);
  if (!names.ok() && names.status().code() == StatusCode::kNotFound) return int64_t{0};
  SKIPPR_RETURN_IF_ERROR(names.status());
  int64_t highest_version = 0;
  for (const std::string& name : *names) {
    const std::optional<int64_t> version = MetadataFileVersion(name);
    if (version) highest_version = std::max(highest_version, *version);
  }
  return highest_version;
}

Result<std::string> WriteMetadataFile(const TableMetadata& metadata, int64_t version, Env* env) {
  SKIPPR_CHECK_MSG(version > 0, "metadata versions start at 1");
  SKIPPR_ASSIGN_OR_RETURN(std::string json, TableMetadataToJson(metadata));
  // Assert on this side of the disk boundary what every reader checks on the other.
  SKIPPR_DCHECK(ParseTableMetadata(json, "metadata being written").ok());
  SKIPPR_ASSIGN_OR_RETURN(std::string directory, MetadataDirectory(metadata.location));
  const std::string final_path = fmt::format("{}/{}", directory, MetadataFileName(version));
  if (Status created = CreateDirectoriesDurably(*env, directory); !created.ok()) {
    return MetadataWriteFailed(created, final_path);
  }
  Result<TemporaryFile> temporary =
      WriteTemporaryFile(*env, directory, MetadataFileName(version), json);
  if (!temporary.ok()) return MetadataWriteFailed(temporary.status(), final_path);
  Status renamed = env->RenameFileNoReplace(temporary->path(), final_path);
  if (renamed.code() == StatusCode::kConflict) {
    return Status::Conflict(fmt::format(
        "metadata version {} of table {} already exists ({}): another writer committed that "
        "version first; reload the table and retry",
        version, metadata.location, final_path));
  }
  if (!renamed.ok()) return MetadataWriteFailed(renamed, final_path);
  temporary->Release();
  if (Status synced = env->SyncDirectory(directory); !synced.ok()) {
    return MetadataWriteFailed(synced, final_path);
  }
  return MetadataFileLocation(metadata.location, version);
}

Status WriteVersionHint(std::string_view table_location, int64_t version, Env* env) {
  SKIPPR_CHECK_MSG(version > 0, "metadata versions start at 1");
  SKIPPR_ASSIGN_OR_RETURN(std::string directory, MetadataDirectory(table_location));
  SKIPPR_RETURN_IF_ERROR(CreateDirectoriesDurably(*env, directory));
  // No newline: some readers build "v" + contents + ".metadata.json" from the raw bytes.
  return WriteFileAtomically(*env, fmt::format("{}/{}", directory, kVersionHintFile),
                             std::to_string(version));
}

Result<TableMetadata> ReadMetadataFile(std::string_view metadata_location, Env* env) {
  SKIPPR_ASSIGN_OR_RETURN(std::string path, EnvPathOfUri(metadata_location));
  Result<std::string> json = ReadWholeFile(*env, path);
  if (!json.ok() && json.status().code() == StatusCode::kNotFound) {
    return Status::NotFound(
        fmt::format("Iceberg metadata file {} does not exist", metadata_location));
  }
  if (!json.ok()) return json.status();
  return ParseTableMetadata(*json, metadata_location);
}

Result<VersionedMetadata> ReadCurrentMetadata(std::string_view table_location, Env* env) {
  SKIPPR_ASSIGN_OR_RETURN(std::string directory, MetadataDirectory(table_location));
  SKIPPR_ASSIGN_OR_RETURN(std::optional<int64_t> hinted_version, ReadVersionHint(*env, directory));
  int64_t version = hinted_version.value_or(0);
  bool hinted_exists = false;
  if (version != 0) {
    SKIPPR_ASSIGN_OR_RETURN(hinted_exists,
                            FileExists(*env, fmt::format("{}/{}", directory, MetadataFileName(version))));
  }
  if (!hinted_exists) {
    SKIPPR_ASSIGN_OR_RETURN(version, HighestMetadataVersion(table_location, env));
  }
  if (version == 0) {
    return Status::NotFound(fmt::format("table {} has no metadata file ({}/v<N>{})", table_location,
                                        directory, kMetadataFileSuffix));
  }
  // The hint is written after the commit: a writer may have died in between.
  while (true) {
    SKIPPR_ASSIGN_OR_RETURN(
        const bool has_next,
        FileExists(*env, fmt::format("{}/{}", directory, MetadataFileName(version + 1))));
    if (!has_next) break;
    ++version;
  }
  VersionedMetadata current{version, MetadataFileLocation(table_location, version), {}};
  SKIPPR_ASSIGN_OR_RETURN(current.metadata, ReadMetadataFile(current.location, env));
  return current;
}

}  // namespace skippr::iceberg
