// S3Env (aws.hpp): the Env seam over S3 objects.
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <mutex>
#include <set>

#include "aws/aws.hpp"
#include "aws/internal/service.hpp"

namespace skippr::aws {

namespace {

// Bytes a sequential reader asks for at a time.
constexpr uint64_t kSequentialChunkBytes = uint64_t{4} << 20;

struct Location {
  std::string bucket;
  std::string key;
};

Result<Location> LocationOf(const std::string& path) {
  SKIPPR_ASSIGN_OR_RETURN(auto parts, ParseS3Uri(path));
  return Location{std::move(parts.first), std::move(parts.second)};
}

// A directory's key prefix: "s3://b/a/b" → "a/b/", "s3://b" → "".
std::string DirectoryPrefix(const Location& location) {
  if (location.key.empty() || location.key.back() == '/') return location.key;
  return location.key + "/";
}

}  // namespace

struct S3Env::Impl {
  S3Options options;
  MapEnvironment environment;
  std::string spool_directory;
  LocalCopyOptions local_copies;
  std::mutex mutex;
  std::vector<std::unique_ptr<S3Client>> idle;
  // Local paths (files or directories) handed out for writing and not yet uploaded: never evicted.
  std::set<std::string> being_written;

  // A client of the pool, back in it when the lease ends.
  class Lease {
   public:
    Lease(Impl& impl, std::unique_ptr<S3Client> client) : impl_(impl), client_(std::move(client)) {}
    Lease(Lease&& other) noexcept : impl_(other.impl_), client_(std::move(other.client_)) {}
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    Lease& operator=(Lease&&) = delete;
    ~Lease() {
      if (!client_) return;
      std::lock_guard lock(impl_.mutex);
      impl_.idle.push_back(std::move(client_));
    }
    S3Client* operator->() { return client_.get(); }
    S3Client& operator*() { return *client_; }

   private:
    Impl& impl_;
    std::unique_ptr<S3Client> client_;
  };

  Result<Lease> Borrow() {
    {
      std::lock_guard lock(mutex);
      if (!idle.empty()) {
        std::unique_ptr<S3Client> client = std::move(idle.back());
        idle.pop_back();
        return Lease(*this, std::move(client));
      }
    }
    SKIPPR_ASSIGN_OR_RETURN(std::unique_ptr<S3Client> client, S3Client::Open(options, environment));
    return Lease(*this, std::move(client));
  }
};

namespace {

using Impl = S3Env::Impl;

// Uploads the bytes of the open file `fd` as the object at `location` (multipart when large).
Status UploadFromDescriptor(S3Client& client, const Location& location, int fd,
                            const PutOptions& put, std::string_view what) {
  uint64_t offset = 0;
  Result<std::string> uploaded = client.UploadObject(
      location.bucket, location.key,
      [&](char* buffer, size_t capacity) -> Result<size_t> {
        const ssize_t n = ::pread(fd, buffer, capacity, static_cast<off_t>(offset));
        if (n < 0) return ErrnoStatus(errno, fmt::format("reading {}", what));
        offset += static_cast<uint64_t>(n);
        return static_cast<size_t>(n);
      },
      put);
  return uploaded.status();
}

// Writes go to a spool file; Sync and Close upload it whole when it changed since the last upload.
class S3WritableFile final : public WritableFile {
 public:
  S3WritableFile(std::shared_ptr<Impl> impl, std::string path, Location location, int fd,
                 bool creates_new, bool is_dirty)
      : WritableFile(std::move(path)),
        impl_(std::move(impl)),
        location_(std::move(location)),
        fd_(fd),
        creates_new_(creates_new),
        is_dirty_(is_dirty) {}
  ~S3WritableFile() override {
    if (fd_ >= 0) ::close(fd_);
  }

 protected:
  Result<size_t> WriteSome(uint64_t offset, std::string_view bytes) override {
    const ssize_t written = ::pwrite(fd_, bytes.data(), bytes.size(), static_cast<off_t>(offset));
    if (written < 0) return ErrnoStatus(errno, fmt::format("spooling {}", path()));
    is_dirty_ = true;
    return static_cast<size_t>(written);
  }

  Status SyncData() override { return Upload(); }

  Status TruncateTo(uint64_t size_bytes) override {
    if (::ftruncate(fd_, static_cast<off_t>(size_bytes)) != 0) {
      return ErrnoStatus(errno, fmt::format("spooling {}", path()));
    }
    is_dirty_ = true;
    return Status::OK();
  }

  Status CloseFile() override {
    Status uploaded = Upload();
    ::close(fd_);
    fd_ = -1;
    return uploaded;
  }

 private:
  Status Upload() {
    if (!is_dirty_) return Status::OK();
    SKIPPR_ASSIGN_OR_RETURN(Impl::Lease client, impl_->Borrow());
    PutOptions put;
    put.if_none_match = creates_new_;
    SKIPPR_RETURN_IF_ERROR(UploadFromDescriptor(*client, location_, fd_, put,
                                                fmt::format("the spool of {}", path())));
    is_dirty_ = false;
    creates_new_ = false;  // it exists now: later uploads replace our own object
    return Status::OK();
  }

  std::shared_ptr<Impl> impl_;
  Location location_;
  int fd_;
  bool creates_new_;
  bool is_dirty_;
};

class S3RandomAccessFile final : public RandomAccessFile {
 public:
  S3RandomAccessFile(std::shared_ptr<Impl> impl, std::string path, Location location,
                     ObjectInfo object)
      : impl_(std::move(impl)),
        path_(std::move(path)),
        location_(std::move(location)),
        object_(std::move(object)) {}

  Result<size_t> ReadAt(uint64_t offset, char* out, size_t bytes) const override {
    if (offset >= object_.size_bytes || bytes == 0) return size_t{0};
    const uint64_t length = std::min<uint64_t>(bytes, object_.size_bytes - offset);
    SKIPPR_ASSIGN_OR_RETURN(Impl::Lease client, impl_->Borrow());
    size_t filled = 0;
    const Status got = client->GetObject(
        location_.bucket, location_.key,
        [&](std::string_view piece) {
          if (filled + piece.size() > length) {
            return Status::IOError(
                fmt::format("{}: the server sent more than the range asked", path_));
          }
          std::copy(piece.begin(), piece.end(), out + filled);
          filled += piece.size();
          return Status::OK();
        },
        offset, object_.etag, length);
    SKIPPR_RETURN_IF_ERROR(got);
    return filled;
  }

  Result<uint64_t> Size() const override { return object_.size_bytes; }

 private:
  std::shared_ptr<Impl> impl_;
  std::string path_;
  Location location_;
  ObjectInfo object_;  // when opened: size and the ETag every read is pinned to
};

class S3SequentialFile final : public SequentialFile {
 public:
  explicit S3SequentialFile(std::unique_ptr<S3RandomAccessFile> file) : file_(std::move(file)) {}

  Result<size_t> Read(char* out, size_t bytes) override {
    SKIPPR_ASSIGN_OR_RETURN(
        const size_t read,
        file_->ReadAt(offset_, out, std::min<uint64_t>(bytes, kSequentialChunkBytes)));
    offset_ += read;
    return read;
  }

 private:
  std::unique_ptr<S3RandomAccessFile> file_;
  uint64_t offset_ = 0;
};

// ----- local copies --------------------------------------------------------------------------

// {local_copies.directory}/{bucket}/{key}. NotSupported when the Env has no such directory.
Result<std::string> LocalCopyPath(const Impl& impl, const Location& location,
                                  const std::string& path) {
  if (impl.local_copies.directory.empty()) {
    return Status::NotSupported(fmt::format(
        "{} cannot be written or read by name: this S3 Env keeps no local copies", path));
  }
  if (location.key.empty()) {
    return Status::InvalidArgument(fmt::format("{} names a bucket, not an object", path));
  }
  return fmt::format("{}/{}/{}", impl.local_copies.directory, location.bucket, location.key);
}

Status EnsureParentDirectory(const std::string& local_path) {
  std::error_code error;
  std::filesystem::create_directories(std::filesystem::path(local_path).parent_path(), error);
  if (error) {
    return Status::IOError(
        fmt::format("creating the directory of {}: {}", local_path, error.message()));
  }
  return Status::OK();
}

bool IsBeingWritten(const Impl& impl, const std::string& local_path) {
  for (std::filesystem::path at(local_path); !at.empty() && at != at.root_path();
       at = at.parent_path()) {
    if (impl.being_written.contains(at.string())) return true;
  }
  return false;
}

// Removes the least recently used copies (by modification time, which a read refreshes) while
// the copies hold more than max_bytes; never `keep` nor a copy being written. Best effort: a copy
// is only a cache of its object.
void TrimLocalCopies(Impl& impl, const std::string& keep) {
  namespace fs = std::filesystem;
  struct Copy {
    fs::file_time_type modified;
    uint64_t bytes;
    std::string path;
  };
  std::vector<Copy> copies;
  uint64_t total_bytes = 0;
  std::error_code error;
  for (auto it = fs::recursive_directory_iterator(impl.local_copies.directory, error);
       !error && it != fs::recursive_directory_iterator(); it.increment(error)) {
    if (!it->is_regular_file(error)) continue;
    const uint64_t bytes = it->file_size(error);
    total_bytes += bytes;
    copies.push_back({it->last_write_time(error), bytes, it->path().string()});
  }
  if (total_bytes <= impl.local_copies.max_bytes) return;
  std::sort(copies.begin(), copies.end(),
            [](const Copy& a, const Copy& b) { return a.modified < b.modified; });
  std::lock_guard lock(impl.mutex);
  for (const Copy& copy : copies) {
    if (total_bytes <= impl.local_copies.max_bytes) break;
    if (copy.path == keep || IsBeingWritten(impl, copy.path)) continue;
    if (fs::remove(copy.path, error)) total_bytes -= copy.bytes;
  }
}

// Uploads the local copy at `local_path` as the object `location`.
Status UploadLocalCopy(Impl& impl, const Location& location, const std::string& local_path) {
  const int fd = ::open(local_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, fmt::format("opening {} to upload it", local_path));
  Status uploaded = [&] {
    SKIPPR_ASSIGN_OR_RETURN(Impl::Lease client, impl.Borrow());
    return UploadFromDescriptor(*client, location, fd, {}, local_path);
  }();
  ::close(fd);
  return uploaded;
}

// Downloads the object into a new file beside `local_path`, then renames it into place, so that
// the copy is whole or absent.
Status DownloadLocalCopy(Impl& impl, const Location& location, const ObjectInfo& object,
                         const std::string& local_path) {
  SKIPPR_RETURN_IF_ERROR(EnsureParentDirectory(local_path));
  const std::string partial = local_path + ".download";
  const int fd = ::open(partial.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus(errno, fmt::format("creating {}", partial));
  Status downloaded = [&]() -> Status {
    SKIPPR_ASSIGN_OR_RETURN(Impl::Lease client, impl.Borrow());
    SKIPPR_ASSIGN_OR_RETURN(const uint64_t bytes,
                            client->DownloadInto(fd, location.bucket, location.key, object.etag));
    if (bytes != object.size_bytes) {
      return Status::IOError(fmt::format("{} changed while it was downloaded to {}",
                                         S3Uri(location.bucket, location.key), local_path));
    }
    return Status::OK();
  }();
  ::close(fd);
  if (downloaded.ok() && ::rename(partial.c_str(), local_path.c_str()) != 0) {
    downloaded = ErrnoStatus(errno, fmt::format("renaming {} to {}", partial, local_path));
  }
  if (!downloaded.ok()) ::unlink(partial.c_str());
  return downloaded;
}

}  // namespace

S3Env::S3Env(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
S3Env::~S3Env() = default;

Result<std::unique_ptr<S3Env>> S3Env::Open(const S3Options& options, const Environment& environment,
                                           std::string spool_directory,
                                           LocalCopyOptions local_copies) {
  auto impl = std::make_shared<Impl>();
  impl->options = options;
  impl->spool_directory = std::move(spool_directory);
  impl->local_copies = std::move(local_copies);
  impl->environment = internal::CopyAwsVariables(environment);  // for the clients opened later
  // Settles the endpoint and region now, so that a bad one is an error here.
  SKIPPR_ASSIGN_OR_RETURN(std::unique_ptr<S3Client> first,
                          S3Client::Open(options, impl->environment));
  impl->idle.push_back(std::move(first));
  return std::unique_ptr<S3Env>(new S3Env(std::move(impl)));
}

Result<std::unique_ptr<WritableFile>> S3Env::OpenWritable(const std::string& path,
                                                          const WritableFileOptions& options) {
  SKIPPR_ASSIGN_OR_RETURN(Location location, LocationOf(path));
  SKIPPR_ASSIGN_OR_RETURN(Impl::Lease client, impl_->Borrow());
  Result<ObjectInfo> existing = client->HeadObject(location.bucket, location.key);
  if (!existing.ok() && existing.status().code() != StatusCode::kNotFound) return existing.status();
  const bool exists = existing.ok();
  using Mode = WritableFileOptions::Mode;
  if (options.mode == Mode::kCreateNew && exists) {
    return Status::Conflict(fmt::format("cannot create {}: it exists", path));
  }
  if (options.mode == Mode::kOpenExisting && !exists) {
    return Status::NotFound(fmt::format("cannot open {}: no such object", path));
  }
  SKIPPR_ASSIGN_OR_RETURN(const int fd, OpenSpoolFile(impl_->spool_directory));
  if (exists) {
    if (Result<uint64_t> downloaded = client->DownloadInto(fd, location.bucket, location.key);
        !downloaded.ok()) {
      ::close(fd);
      return downloaded.status();
    }
  }
  // A new file exists from its open on, as an empty object, like one a POSIX open creates.
  return std::unique_ptr<WritableFile>(std::make_unique<S3WritableFile>(
      impl_, path, std::move(location), fd, /*creates_new=*/!exists, /*is_dirty=*/!exists));
}

Result<std::unique_ptr<RandomAccessFile>> S3Env::OpenRandomAccess(const std::string& path) {
  SKIPPR_ASSIGN_OR_RETURN(Location location, LocationOf(path));
  SKIPPR_ASSIGN_OR_RETURN(Impl::Lease client, impl_->Borrow());
  SKIPPR_ASSIGN_OR_RETURN(ObjectInfo object, client->HeadObject(location.bucket, location.key));
  return std::unique_ptr<RandomAccessFile>(
      std::make_unique<S3RandomAccessFile>(impl_, path, std::move(location), std::move(object)));
}

Result<std::unique_ptr<SequentialFile>> S3Env::OpenSequential(const std::string& path) {
  SKIPPR_ASSIGN_OR_RETURN(Location location, LocationOf(path));
  SKIPPR_ASSIGN_OR_RETURN(Impl::Lease client, impl_->Borrow());
  SKIPPR_ASSIGN_OR_RETURN(ObjectInfo object, client->HeadObject(location.bucket, location.key));
  return std::unique_ptr<SequentialFile>(std::make_unique<S3SequentialFile>(
      std::make_unique<S3RandomAccessFile>(impl_, path, std::move(location), std::move(object))));
}

Result<uint64_t> S3Env::FileSize(const std::string& path) {
  SKIPPR_ASSIGN_OR_RETURN(Location location, LocationOf(path));
  SKIPPR_ASSIGN_OR_RETURN(Impl::Lease client, impl_->Borrow());
  SKIPPR_ASSIGN_OR_RETURN(ObjectInfo object, client->HeadObject(location.bucket, location.key));
  return object.size_bytes;
}

Result<bool> S3Env::FileExists(const std::string& path) {
  SKIPPR_ASSIGN_OR_RETURN(Location location, LocationOf(path));
  SKIPPR_ASSIGN_OR_RETURN(Impl::Lease client, impl_->Borrow());
  Result<ObjectInfo> object = client->HeadObject(location.bucket, location.key);
  if (object.ok()) return true;
  if (object.status().code() == StatusCode::kNotFound) return false;
  return object.status();
}

Result<std::vector<std::string>> S3Env::ListDirectory(const std::string& directory) {
  SKIPPR_ASSIGN_OR_RETURN(Location location, LocationOf(directory));
  const std::string prefix = DirectoryPrefix(location);
  SKIPPR_ASSIGN_OR_RETURN(Impl::Lease client, impl_->Borrow());
  std::vector<std::string> names;
  std::optional<std::string> token;
  do {
    SKIPPR_ASSIGN_OR_RETURN(ListPage page,
                            client->ListObjects(location.bucket, prefix, "/", token));
    for (const ObjectInfo& object : page.objects) {
      if (object.key.size() > prefix.size()) names.push_back(object.key.substr(prefix.size()));
    }
    for (const std::string& common : page.common_prefixes) {
      std::string name = common.substr(prefix.size());
      if (!name.empty() && name.back() == '/') name.pop_back();
      if (!name.empty()) names.push_back(std::move(name));
    }
    token = std::move(page.continuation_token);
  } while (token);
  return names;
}

Result<bool> S3Env::CreateDirectory(const std::string& path, uint32_t) {
  SKIPPR_RETURN_IF_ERROR(LocationOf(path).status());
  return true;  // a prefix exists as soon as a key under it does: nothing to make
}

Status S3Env::RenameFile(const std::string& from, const std::string& to) {
  SKIPPR_ASSIGN_OR_RETURN(Location source, LocationOf(from));
  SKIPPR_ASSIGN_OR_RETURN(Location target, LocationOf(to));
  if (source.bucket != target.bucket) {
    return Status::InvalidArgument(fmt::format("cannot rename {} to {}: not one bucket", from, to));
  }
  SKIPPR_ASSIGN_OR_RETURN(Impl::Lease client, impl_->Borrow());
  SKIPPR_RETURN_IF_ERROR(client->CopyObject(source.bucket, source.key, target.key));
  SKIPPR_RETURN_IF_ERROR(client->DeleteObject(source.bucket, source.key));
  if (impl_->local_copies.directory.empty()) return Status::OK();
  // The local copy follows the object, or goes.
  SKIPPR_ASSIGN_OR_RETURN(const std::string local_from, LocalCopyPath(*impl_, source, from));
  SKIPPR_ASSIGN_OR_RETURN(const std::string local_to, LocalCopyPath(*impl_, target, to));
  std::error_code error;
  if (!std::filesystem::exists(local_from, error)) return Status::OK();
  if (EnsureParentDirectory(local_to).ok()) std::filesystem::rename(local_from, local_to, error);
  if (error) std::filesystem::remove(local_from, error);
  return Status::OK();
}

Status S3Env::RenameFileNoReplace(const std::string& from, const std::string& to) {
  SKIPPR_ASSIGN_OR_RETURN(const bool exists, FileExists(to));
  if (exists) return Status::Conflict(fmt::format("cannot rename {} to {}: it exists", from, to));
  return RenameFile(from, to);
}

Status S3Env::RemoveFile(const std::string& path) {
  SKIPPR_ASSIGN_OR_RETURN(Location location, LocationOf(path));
  SKIPPR_ASSIGN_OR_RETURN(Impl::Lease client, impl_->Borrow());
  SKIPPR_RETURN_IF_ERROR(client->DeleteObject(location.bucket, location.key));
  if (impl_->local_copies.directory.empty() || location.key.empty()) return Status::OK();
  SKIPPR_ASSIGN_OR_RETURN(const std::string local, LocalCopyPath(*impl_, location, path));
  std::error_code error;
  std::filesystem::remove(local, error);
  return Status::OK();
}

Status S3Env::SyncDirectory(const std::string& directory) {
  // Listings are strongly consistent: nothing to sync. A directory handed out for writing by
  // name is done with once synced.
  SKIPPR_ASSIGN_OR_RETURN(Location location, LocationOf(directory));
  if (!impl_->local_copies.directory.empty() && !location.key.empty()) {
    SKIPPR_ASSIGN_OR_RETURN(const std::string local, LocalCopyPath(*impl_, location, directory));
    std::lock_guard lock(impl_->mutex);
    impl_->being_written.erase(local);
  }
  return Status::OK();
}

Status S3Env::SyncFile(const std::string& path) {
  SKIPPR_ASSIGN_OR_RETURN(Location location, LocationOf(path));
  if (!impl_->local_copies.directory.empty()) {
    SKIPPR_ASSIGN_OR_RETURN(const std::string local, LocalCopyPath(*impl_, location, path));
    bool written_here = false;
    {
      std::lock_guard lock(impl_->mutex);
      written_here = IsBeingWritten(*impl_, local);
    }
    std::error_code error;
    if (written_here && std::filesystem::exists(local, error)) {
      // Another component wrote the file by name: durable once it is an object.
      SKIPPR_RETURN_IF_ERROR(UploadLocalCopy(*impl_, location, local));
      {
        std::lock_guard lock(impl_->mutex);
        impl_->being_written.erase(local);
      }
      TrimLocalCopies(*impl_, local);
      return Status::OK();
    }
  }
  SKIPPR_ASSIGN_OR_RETURN(const bool exists, FileExists(path));
  if (!exists) return Status::NotFound(fmt::format("cannot sync {}: no such object", path));
  return Status::OK();  // an object is durable once its upload returned
}

Result<std::string> S3Env::LocalPathForWriting(const std::string& path) {
  SKIPPR_ASSIGN_OR_RETURN(Location location, LocationOf(path));
  SKIPPR_ASSIGN_OR_RETURN(std::string local, LocalCopyPath(*impl_, location, path));
  SKIPPR_RETURN_IF_ERROR(EnsureParentDirectory(local));
  std::error_code error;
  // A copy of an earlier object of the name is not what is about to be written.
  if (std::filesystem::is_regular_file(local, error)) std::filesystem::remove(local, error);
  std::lock_guard lock(impl_->mutex);
  impl_->being_written.insert(local);
  return local;
}

Result<std::string> S3Env::LocalPathForReading(const std::string& path) {
  SKIPPR_ASSIGN_OR_RETURN(Location location, LocationOf(path));
  SKIPPR_ASSIGN_OR_RETURN(std::string local, LocalCopyPath(*impl_, location, path));
  {
    std::lock_guard lock(impl_->mutex);
    if (IsBeingWritten(*impl_, local)) return local;  // its writer reading it back
  }
  SKIPPR_ASSIGN_OR_RETURN(Impl::Lease client, impl_->Borrow());
  SKIPPR_ASSIGN_OR_RETURN(const ObjectInfo object,
                          client->HeadObject(location.bucket, location.key));
  std::error_code error;
  const uint64_t local_bytes = std::filesystem::file_size(local, error);
  if (!error && local_bytes == object.size_bytes) {
    // A copy of the object (objects skipprd reads by name are never rewritten with other bytes
    // of the same size): kept, and marked recently used.
    std::filesystem::last_write_time(local, std::filesystem::file_time_type::clock::now(), error);
    return local;
  }
  SKIPPR_RETURN_IF_ERROR(DownloadLocalCopy(*impl_, location, object, local));
  TrimLocalCopies(*impl_, local);
  return local;
}

Result<std::unique_ptr<FileLock>> S3Env::LockFile(const std::string& path, uint32_t) {
  return Status::NotSupported(fmt::format(
      "cannot lock {}: S3 has no file locks (a writer lease on S3 lives in the store)", path));
}

}  // namespace skippr::aws
