// The S3 source: every object under s3://<s3_bucket>/<s3_prefix>, read as the File source reads a
// directory — JSON lines, JSON arrays, CSV and Parquet, gzip and zstd — one partition per object
// key. Each object a pass reads is downloaded, pinned to the ETag the listing gave it, into an
// unlinked file in the pipeline's scratch directory (memory holds one download buffer, never the
// object), and read from there; an object read to its end is skipped while its ETag and size stay
// the same, and one whose ETag changed is compared with what was read, as a changed file is.
#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <ctime>
#include <filesystem>
#include <future>
#include <iomanip>
#include <map>
#include <sstream>

#include "aws/aws.hpp"
#include "core/environment.hpp"
#include "sources/file_catalog.hpp"
#include "sources/source_kinds.hpp"

namespace skippr::sources {

namespace {

// "2026-12-05T12:41:04.000Z" → nanoseconds since the epoch (0 when unreadable: then only the ETag
// tells versions apart, which is what counts).
int64_t LastModifiedNs(const std::string& text) {
  std::tm parts{};
  std::istringstream in(text);
  in >> std::get_time(&parts, "%Y-%m-%dT%H:%M:%S");
  if (in.fail()) return 0;
  int64_t nanoseconds = 0;
  if (in.peek() == '.') {
    in.get();
    int digits = 0;
    while (std::isdigit(in.peek()) && digits < 9) {
      nanoseconds = nanoseconds * 10 + (in.get() - '0');
      ++digits;
    }
    for (; digits < 9; ++digits) nanoseconds *= 10;
  }
  return static_cast<int64_t>(timegm(&parts)) * 1'000'000'000 + nanoseconds;
}

// As the File source skips hidden files and directories: a key with a component (below the
// prefix) that starts with '.' or '_' (`_SUCCESS`, `.staging/...`), and folder markers.
bool IsSkippedKey(std::string_view key_below_prefix) {
  if (key_below_prefix.empty() || key_below_prefix.back() == '/') return true;
  size_t start = 0;
  while (start < key_below_prefix.size()) {
    const char first = key_below_prefix[start];
    if (first == '.' || first == '_') return true;
    const size_t slash = key_below_prefix.find('/', start);
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return false;
}

// One object downloaded into a spool file: the descriptor, or why not.
using Download = Result<int>;

class S3Objects final : public internal::FileCatalog {
 public:
  S3Objects(aws::S3Options options, std::unique_ptr<aws::S3Client> client, std::string bucket,
            std::string prefix, std::string source_name)
      : options_(std::move(options)),
        client_(std::move(client)),
        bucket_(std::move(bucket)),
        prefix_(std::move(prefix)),
        source_name_(std::move(source_name)) {}

  ~S3Objects() override { DropPrefetch(); }

  Result<std::vector<std::string>> List(const ReadOptions& options) override {
    DropPrefetch();  // a new pass: its thread reads what is set here
    spool_directory_ = options.scratch_directory.empty()
                           ? std::filesystem::temp_directory_path().string()
                           : options.scratch_directory;
    versions_.clear();
    std::vector<std::string> names;
    const Status listed =
        client_->ForEachObject(bucket_, prefix_, [&](const aws::ObjectInfo& object) {
          if (IsSkippedKey(std::string_view(object.key).substr(prefix_.size())))
            return Status::OK();
          std::string name = aws::S3Uri(bucket_, object.key);
          versions_[name] = internal::FileVersion{
              object.size_bytes, LastModifiedNs(object.last_modified), object.etag, std::nullopt};
          names.push_back(std::move(name));
          return Status::OK();
        });
    if (!listed.ok()) {
      return Status(listed.code(), fmt::format("S3 source {}: {}", source_name_, listed.message()));
    }
    return names;  // in key order, as S3 lists them
  }

  Result<std::optional<internal::FileVersion>> Describe(const std::string& name) override {
    auto found = versions_.find(name);
    if (found == versions_.end()) return std::optional<internal::FileVersion>();
    return std::optional<internal::FileVersion>(found->second);
  }

  Result<std::unique_ptr<OpenedFile>> Open(const std::string& name,
                                           const internal::FileVersion& version) override {
    const bool is_prefetched =
        prefetch_ && prefetch_->name == name && prefetch_->etag == version.etag;
    if (!is_prefetched) DropPrefetch();
    SKIPPR_ASSIGN_OR_RETURN(const int fd,
                            is_prefetched ? TakePrefetch() : Fetch(*client_, name, version));
    return OpenedFile::Adopt(fd, name, version.mtime_ns);
  }

  bool HasSlowOpen() const override { return true; }

  // Downloads the next object on a thread (and a connection) of its own while this one is read.
  void Prefetch(const std::string& name, const internal::FileVersion& version) override {
    DropPrefetch();
    prefetch_.emplace();
    prefetch_->name = name;
    prefetch_->etag = version.etag;
    prefetch_->download = std::async(std::launch::async, [this, name, version]() -> Download {
      static const ProcessEnvironment environment;
      if (!prefetch_client_) {
        SKIPPR_ASSIGN_OR_RETURN(prefetch_client_, aws::S3Client::Open(options_, environment));
      }
      return Fetch(*prefetch_client_, name, version);
    });
  }

 private:
  struct Prefetched {
    std::string name;
    std::string etag;
    std::future<Download> download;
  };

  Download TakePrefetch() {
    Download download = prefetch_->download.get();
    prefetch_.reset();
    return download;
  }

  // Waits for a prefetch nobody will open (the pass ended, or opens another) and closes its file.
  void DropPrefetch() {
    if (!prefetch_) return;
    Download unused = TakePrefetch();
    if (unused.ok()) ::close(*unused);
  }

  // `name` downloaded into a spool file, pinned to its listed ETag. NotFound when it is gone or was
  // replaced since the listing (the next pass lists the new one).
  Download Fetch(aws::S3Client& client, const std::string& name,
                 const internal::FileVersion& version) const {
    const std::string key = name.substr(aws::S3Uri(bucket_, "").size());
    SKIPPR_ASSIGN_OR_RETURN(const int fd, aws::OpenSpoolFile(spool_directory_));
    spdlog::debug("downloading {} ({} bytes, ETag {})", name, version.size_bytes, version.etag);
    const Result<uint64_t> fetched = client.DownloadInto(fd, bucket_, key, version.etag);
    if (!fetched.ok()) {
      ::close(fd);
      if (fetched.status().code() == StatusCode::kNotFound) {
        return Status::NotFound(fmt::format("object {} is gone since it was listed", name));
      }
      if (fetched.status().code() == StatusCode::kConflict) {
        return Status::NotFound(fmt::format(
            "object {} was replaced since it was listed (the next pass reads the new one)", name));
      }
      return fetched.status();
    }
    if (*fetched != version.size_bytes) {
      ::close(fd);
      return Status::IOError(fmt::format(
          "object {}: {} bytes arrived where the listing said {}; the next pass tries again", name,
          *fetched, version.size_bytes));
    }
    return fd;
  }

  aws::S3Options options_;
  std::unique_ptr<aws::S3Client> client_;
  std::unique_ptr<aws::S3Client> prefetch_client_;  // used by the prefetch thread only
  std::string bucket_;
  std::string prefix_;
  std::string source_name_;
  std::string spool_directory_;
  std::map<std::string, internal::FileVersion> versions_;  // this pass's listing
  std::optional<Prefetched> prefetch_;
};

aws::S3Options OptionsOf(const config::ConnectorConfig& connector) {
  aws::S3Options options;
  if (connector.Has("region")) options.region = connector.GetString("region");
  if (connector.Has("endpoint_url")) options.endpoint_url = connector.GetString("endpoint_url");
  return options;
}

}  // namespace

namespace internal {

Result<std::unique_ptr<Source>> MakeS3Source(const config::ConnectorConfig& connector,
                                             const std::string& source_name) {
  static const ProcessEnvironment environment;
  SKIPPR_ASSIGN_OR_RETURN(std::unique_ptr<aws::S3Client> client,
                          aws::S3Client::Open(OptionsOf(connector), environment));
  std::optional<std::string> format;
  if (connector.Has("format")) format = connector.GetString("format");
  auto objects = std::make_unique<S3Objects>(OptionsOf(connector), std::move(client),
                                             connector.GetString("s3_bucket"),
                                             connector.GetString("s3_prefix"), source_name);
  return MakeCatalogSource(std::move(objects), format);
}

std::vector<SourceCheck> CheckS3(const config::ConnectorConfig& connector,
                                 const std::string& source_name) {
  static const ProcessEnvironment environment;
  const std::string bucket = connector.GetString("s3_bucket");
  const std::string prefix = connector.GetString("s3_prefix");
  const std::string where = aws::S3Uri(bucket, prefix);
  Result<std::unique_ptr<aws::S3Client>> client =
      aws::S3Client::Open(OptionsOf(connector), environment);
  if (!client.ok())
    return {{false, fmt::format("source {}: {}", source_name, client.status().message())}};
  Result<aws::ListPage> page = (*client)->ListObjects(bucket, prefix);
  if (!page.ok()) {
    return {{false, fmt::format("source {}: cannot list {} at {}: {}", source_name, where,
                                (*client)->endpoint(), page.status().message())}};
  }
  return {{true, fmt::format("source {}: {} is readable at {} ({}{} objects under the prefix)",
                             source_name, where, (*client)->endpoint(), page->objects.size(),
                             page->continuation_token ? "+" : "")}};
}

}  // namespace internal

}  // namespace skippr::sources
