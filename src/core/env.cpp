#include "core/env.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/check.hpp"

namespace skippr {

Status ErrnoStatus(int error_number, std::string_view what) {
  const std::string message = fmt::format("{}: {}", what, std::strerror(error_number));
  if (error_number == ENOSPC || error_number == EDQUOT) {
    return Status::NoSpace(message + "; free disk space and run again");
  }
  if (error_number == ENOENT) return Status::NotFound(message);
  return Status::IOError(message);
}

// ----- WritableFile ------------------------------------------------------------------------------

Status WritableFile::CheckUsable(std::string_view operation) const {
  if (is_closed_) {
    return Status::Internal(
        fmt::format("{} of '{}' after it was closed (a skipprd bug)", operation, path_));
  }
  if (!sync_failure_.ok()) {
    return Status(sync_failure_.code(),
                  fmt::format("{} of '{}' refused: an earlier fdatasync of it failed ({}), so what "
                              "the file holds is unknown and it is not used again",
                              operation, path_, sync_failure_.message()));
  }
  return Status::OK();
}

Status WritableFile::WriteAt(uint64_t offset, std::string_view bytes) {
  SKIPPR_RETURN_IF_ERROR(CheckUsable("write"));
  while (!bytes.empty()) {
    SKIPPR_ASSIGN_OR_RETURN(const size_t written, WriteSome(offset, bytes));
    if (written == 0) {
      return Status::IOError(
          fmt::format("cannot write '{}' at offset {}: the write stored no bytes", path_, offset));
    }
    SKIPPR_CHECK_MSG(written <= bytes.size(), "a write stored more bytes than it was given");
    bytes.remove_prefix(written);
    offset += written;
  }
  return Status::OK();
}

Status WritableFile::Sync() {
  SKIPPR_RETURN_IF_ERROR(CheckUsable("fdatasync"));
  Status synced = SyncData();
  if (!synced.ok()) sync_failure_ = synced;
  return synced;
}

Status WritableFile::Truncate(uint64_t size_bytes) {
  SKIPPR_RETURN_IF_ERROR(CheckUsable("truncate"));
  return TruncateTo(size_bytes);
}

Status WritableFile::Close() {
  if (is_closed_) return CheckUsable("close");
  is_closed_ = true;
  return CloseFile();
}

// ----- PosixEnv ----------------------------------------------------------------------------------

namespace {

constexpr uint64_t kDirectIoBlockBytes = 4096;
constexpr uint64_t kWritebackChunkBytes = uint64_t{1} << 20;

bool IsBlockAligned(uint64_t value) { return value % kDirectIoBlockBytes == 0; }

class Descriptor {
 public:
  explicit Descriptor(int fd) : fd_(fd) {}
  ~Descriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  int get() const { return fd_; }
  int Release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

int OpenRetryingInterrupts(const std::string& path, int flags, mode_t mode = 0) {
  int fd;
  do {
    fd = ::open(path.c_str(), flags | O_CLOEXEC, mode);
  } while (fd < 0 && errno == EINTR);
  return fd;
}

Status WriteAllAt(int fd, uint64_t offset, std::string_view bytes, const std::string& path) {
  while (!bytes.empty()) {
    const ssize_t n = ::pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return ErrnoStatus(n < 0 ? errno : EIO, fmt::format("cannot write '{}'", path));
    }
    bytes.remove_prefix(static_cast<size_t>(n));
    offset += static_cast<uint64_t>(n);
  }
  return Status::OK();
}

class PosixWritableFile final : public WritableFile {
 public:
  PosixWritableFile(std::string path, int fd, bool is_direct, bool starts_writeback_early)
      : WritableFile(std::move(path)),
        fd_(fd),
        is_direct_(is_direct),
        starts_writeback_early_(starts_writeback_early) {}
  ~PosixWritableFile() override {
    if (fd_ >= 0) ::close(fd_);
  }

 protected:
  Result<size_t> WriteSome(uint64_t offset, std::string_view bytes) override {
    if (is_direct_ && !CanWriteDirect(offset, bytes)) SKIPPR_RETURN_IF_ERROR(StopDirectIo());
    while (true) {
      size_t length = bytes.size();
      if (is_direct_) {
        length -= length % kDirectIoBlockBytes;
      } else if (starts_writeback_early_) {
        length = std::min<size_t>(length, kWritebackChunkBytes);
        StartWriteback(offset);
      }
      const ssize_t n = ::pwrite(fd_, bytes.data(), length, static_cast<off_t>(offset));
      if (n >= 0) {
        has_written_ = has_written_ || n > 0;
        return static_cast<size_t>(n);
      }
      if (errno == EINTR) continue;
      if (errno == EINVAL && is_direct_ && !has_written_) {
        // O_DIRECT was accepted at open but not for I/O (some file systems): the page cache.
        SKIPPR_RETURN_IF_ERROR(StopDirectIo());
        continue;
      }
      return ErrnoStatus(errno, fmt::format("cannot write '{}' at offset {}", path(), offset));
    }
  }

  Status SyncData() override {
    if (::fdatasync(fd_) != 0) {
      return ErrnoStatus(errno, fmt::format("fdatasync of '{}' failed", path()));
    }
    return Status::OK();
  }

  Status TruncateTo(uint64_t size_bytes) override {
    if (::ftruncate(fd_, static_cast<off_t>(size_bytes)) != 0) {
      return ErrnoStatus(errno, fmt::format("cannot truncate '{}' to {} bytes", path(), size_bytes));
    }
    return Status::OK();
  }

  Status CloseFile() override {
    const int rc = ::close(std::exchange(fd_, -1));
    if (rc != 0 && errno != EINTR) return ErrnoStatus(errno, fmt::format("closing '{}' failed", path()));
    return Status::OK();
  }

 private:
  static bool CanWriteDirect(uint64_t offset, std::string_view bytes) {
    return IsBlockAligned(offset) && IsBlockAligned(reinterpret_cast<uintptr_t>(bytes.data())) &&
           bytes.size() >= kDirectIoBlockBytes;
  }

  Status StopDirectIo() {
    const int flags = ::fcntl(fd_, F_GETFL);
    if (flags < 0 || ::fcntl(fd_, F_SETFL, flags & ~O_DIRECT) != 0) {
      return ErrnoStatus(errno, fmt::format("cannot turn off direct I/O on '{}'", path()));
    }
    is_direct_ = false;
    return Status::OK();
  }

  // Hands what was written through the page cache since the last hint to writeback once it
  // reaches a chunk, so the device works while the next chunk is copied in.
  void StartWriteback(uint64_t offset) {
    if (offset < writeback_from_ + kWritebackChunkBytes) return;
    (void)::sync_file_range(fd_, static_cast<off_t>(writeback_from_),
                            static_cast<off_t>(offset - writeback_from_), SYNC_FILE_RANGE_WRITE);
    writeback_from_ = offset;
  }

  int fd_;
  bool is_direct_;
  const bool starts_writeback_early_;
  bool has_written_ = false;
  uint64_t writeback_from_ = 0;
};

class PosixSequentialFile final : public SequentialFile {
 public:
  PosixSequentialFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~PosixSequentialFile() override { ::close(fd_); }

  Result<size_t> Read(char* out, size_t bytes) override {
    while (true) {
      const ssize_t n = ::read(fd_, out, bytes);
      if (n >= 0) return static_cast<size_t>(n);
      if (errno != EINTR) return ErrnoStatus(errno, fmt::format("cannot read '{}'", path_));
    }
  }

 private:
  std::string path_;
  int fd_;
};

class PosixRandomAccessFile final : public RandomAccessFile {
 public:
  PosixRandomAccessFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~PosixRandomAccessFile() override { ::close(fd_); }

  Result<size_t> ReadAt(uint64_t offset, char* out, size_t bytes) const override {
    while (true) {
      const ssize_t n = ::pread(fd_, out, bytes, static_cast<off_t>(offset));
      if (n >= 0) return static_cast<size_t>(n);
      if (errno != EINTR) {
        return ErrnoStatus(errno, fmt::format("cannot read '{}' at offset {}", path_, offset));
      }
    }
  }

  Result<uint64_t> Size() const override {
    struct stat info {};
    if (::fstat(fd_, &info) != 0) return ErrnoStatus(errno, fmt::format("cannot stat '{}'", path_));
    return static_cast<uint64_t>(info.st_size);
  }

 private:
  std::string path_;
  int fd_;
};

class PosixFileLock final : public FileLock {
 public:
  PosixFileLock(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~PosixFileLock() override { ::close(fd_); }  // the kernel drops the flock with the descriptor

  Status Rewrite(std::string_view contents) override {
    if (::ftruncate(fd_, 0) != 0) {
      return ErrnoStatus(errno, fmt::format("cannot truncate '{}'", path_));
    }
    return WriteAllAt(fd_, 0, contents, path_);
  }

 private:
  std::string path_;
  int fd_;
};

Status FsyncPath(const std::string& path, int flags, std::string_view what) {
  Descriptor fd(OpenRetryingInterrupts(path, flags));
  if (fd.get() < 0) return ErrnoStatus(errno, fmt::format("cannot open {} '{}' to sync it", what, path));
  if (::fsync(fd.get()) != 0) {
    return ErrnoStatus(errno, fmt::format("fsync of {} '{}' failed", what, path));
  }
  return Status::OK();
}

class PosixEnv final : public Env {
 public:
  Result<std::unique_ptr<WritableFile>> OpenWritable(const std::string& path,
                                                     const WritableFileOptions& options) override {
    int flags = O_WRONLY;
    if (options.mode == WritableFileOptions::Mode::kCreateNew) flags |= O_CREAT | O_EXCL;
    if (options.mode == WritableFileOptions::Mode::kCreateOrOpen) flags |= O_CREAT;
    bool is_direct = options.use_direct_io;
    int fd = OpenRetryingInterrupts(path, flags | (is_direct ? O_DIRECT : 0), options.permissions);
    if (fd < 0 && errno == EINVAL && is_direct) {  // no direct I/O here (some FUSE file systems)
      is_direct = false;
      fd = OpenRetryingInterrupts(path, flags, options.permissions);
    }
    if (fd < 0 && errno == EEXIST) {
      return Status::Conflict(fmt::format("cannot create '{}': it exists already", path));
    }
    if (fd < 0) {
      return ErrnoStatus(errno, fmt::format("cannot open '{}' for writing", path));
    }
    return std::unique_ptr<WritableFile>(
        new PosixWritableFile(path, fd, is_direct, options.start_writeback_early));
  }

  Result<std::unique_ptr<SequentialFile>> OpenSequential(const std::string& path) override {
    const int fd = OpenRetryingInterrupts(path, O_RDONLY);
    if (fd < 0) return ErrnoStatus(errno, fmt::format("cannot open '{}'", path));
    return std::unique_ptr<SequentialFile>(new PosixSequentialFile(path, fd));
  }

  Result<std::unique_ptr<RandomAccessFile>> OpenRandomAccess(const std::string& path) override {
    const int fd = OpenRetryingInterrupts(path, O_RDONLY);
    if (fd < 0) return ErrnoStatus(errno, fmt::format("cannot open '{}'", path));
    return std::unique_ptr<RandomAccessFile>(new PosixRandomAccessFile(path, fd));
  }

  Result<uint64_t> FileSize(const std::string& path) override {
    struct stat info {};
    if (::stat(path.c_str(), &info) != 0) {
      return ErrnoStatus(errno, fmt::format("cannot stat '{}'", path));
    }
    return static_cast<uint64_t>(info.st_size);
  }

  Result<bool> FileExists(const std::string& path) override {
    struct stat info {};
    if (::stat(path.c_str(), &info) == 0) return true;
    if (errno == ENOENT || errno == ENOTDIR) return false;
    return ErrnoStatus(errno, fmt::format("cannot stat '{}'", path));
  }

  Result<std::vector<std::string>> ListDirectory(const std::string& directory) override {
    DIR* listing = ::opendir(directory.c_str());
    if (listing == nullptr) return ErrnoStatus(errno, fmt::format("cannot list '{}'", directory));
    std::vector<std::string> names;
    errno = 0;
    while (const dirent* entry = ::readdir(listing)) {
      const std::string_view name = entry->d_name;
      if (name != "." && name != "..") names.emplace_back(name);
    }
    const int saved_errno = errno;
    ::closedir(listing);
    if (saved_errno != 0) return ErrnoStatus(saved_errno, fmt::format("cannot list '{}'", directory));
    return names;
  }

  Result<bool> CreateDirectory(const std::string& path, uint32_t permissions) override {
    if (::mkdir(path.c_str(), permissions) == 0) {
      // chmod after mkdir, so that the umask changes nothing.
      if (::chmod(path.c_str(), permissions) != 0) {
        return ErrnoStatus(errno, fmt::format("cannot set mode {:04o} on directory '{}'",
                                              permissions, path));
      }
      return true;
    }
    const int mkdir_errno = errno;
    struct stat info {};
    if (mkdir_errno == EEXIST && ::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode)) {
      return false;
    }
    if (mkdir_errno == EEXIST) {
      return Status::IOError(fmt::format(
          "cannot create directory '{}': a file that is not a directory is in the way", path));
    }
    return ErrnoStatus(mkdir_errno, fmt::format("cannot create directory '{}'", path));
  }

  Status RenameFile(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) {
      return ErrnoStatus(errno, fmt::format("cannot move '{}' into place as '{}'", from, to));
    }
    return Status::OK();
  }

  Status RenameFileNoReplace(const std::string& from, const std::string& to) override {
    int rc = ::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE);
    if (rc != 0 && (errno == EINVAL || errno == ENOSYS || errno == ENOTSUP)) {
      rc = ::link(from.c_str(), to.c_str());  // no RENAME_NOREPLACE here: link refuses `to` too
      if (rc == 0) ::unlink(from.c_str());
    }
    if (rc == 0) return Status::OK();
    if (errno == EEXIST) {
      return Status::Conflict(fmt::format("cannot move '{}' to '{}': it exists already", from, to));
    }
    return ErrnoStatus(errno, fmt::format("cannot move '{}' into place as '{}'", from, to));
  }

  Status RemoveFile(const std::string& path) override {
    if (::unlink(path.c_str()) != 0) return ErrnoStatus(errno, fmt::format("cannot delete '{}'", path));
    return Status::OK();
  }

  Status SyncDirectory(const std::string& directory) override {
    return FsyncPath(directory, O_RDONLY | O_DIRECTORY, "directory");
  }

  Status SyncFile(const std::string& path) override { return FsyncPath(path, O_RDONLY, "file"); }

  void StartWriteBack(const std::string& path) override {
    const Descriptor fd(OpenRetryingInterrupts(path, O_RDONLY));
    if (fd.get() >= 0) (void)::sync_file_range(fd.get(), 0, 0, SYNC_FILE_RANGE_WRITE);
  }

  Result<std::unique_ptr<FileLock>> LockFile(const std::string& path,
                                             uint32_t permissions) override {
    Descriptor fd(OpenRetryingInterrupts(path, O_RDWR | O_CREAT | O_NOFOLLOW, permissions));
    if (fd.get() < 0) return ErrnoStatus(errno, fmt::format("cannot open the lock file '{}'", path));
    int rc;
    do {
      rc = ::flock(fd.get(), LOCK_EX | LOCK_NB);
    } while (rc != 0 && errno == EINTR);
    if (rc != 0 && errno == EWOULDBLOCK) {
      return Status::Unavailable(fmt::format("'{}' is locked by another process", path));
    }
    if (rc != 0) return ErrnoStatus(errno, fmt::format("cannot lock '{}'", path));
    return std::unique_ptr<FileLock>(new PosixFileLock(path, fd.Release()));
  }
};

}  // namespace

Env* Env::Default() {
  static Env* env = new PosixEnv();  // never destroyed: files may close during static destruction
  return env;
}

}  // namespace skippr
