// Internal to sources/: where the files a file-reading source reads come from. The File source
// lists a local path (a file, a directory, a glob); the S3 source lists a bucket prefix and spools
// each object it reads to an unlinked local file. Everything after — formats, compression,
// positions, what changed since the last pass — is the same code (file_source.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sources/input_stream.hpp"
#include "sources/sources.hpp"

namespace skippr::sources::internal {

// What one listed file is now.
struct FileVersion {
  uint64_t size_bytes = 0;
  int64_t mtime_ns = 0;
  std::string etag;  // an S3 object's; empty for local files
  // (device, inode) of a local file: two names of one file are read once. None for objects.
  std::optional<std::pair<uint64_t, uint64_t>> identity;
};

class FileCatalog {
 public:
  virtual ~FileCatalog() = default;
  // The names (partitions) a pass reads, in the order it reads them: absolute paths, or
  // s3://bucket/key URIs.
  // `options.scratch_directory` is where a catalog may spool what it reads (empty: the system's
  // temporary directory).
  virtual Result<std::vector<std::string>> List(const ReadOptions& options) = 0;
  // What `name` is now; nullopt when it is gone since it was listed.
  virtual Result<std::optional<FileVersion>> Describe(const std::string& name) = 0;
  // `name`'s bytes for this pass, named `name` in messages; NotFound when it is gone (or, for an
  // object, replaced since it was listed: the next pass lists the new one).
  virtual Result<std::unique_ptr<OpenedFile>> Open(const std::string& name,
                                                   const FileVersion& version) = 0;
  // Whether Open is slow (a download), so that the source tells the catalog what it opens next.
  virtual bool HasSlowOpen() const { return false; }
  // A hint: `name` is the next file this pass opens. The catalog may start opening it now, so that
  // it overlaps the reading of the current one.
  virtual void Prefetch(const std::string& name, const FileVersion& version) {}
};

// The file-reading source over `catalog`; `format` as File.format / S3.format (nullopt: detect).
std::unique_ptr<Source> MakeCatalogSource(std::unique_ptr<FileCatalog> catalog,
                                          std::optional<std::string> format);

}  // namespace skippr::sources::internal
