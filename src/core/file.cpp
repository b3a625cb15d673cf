#include "core/file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <stdio.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace skippr {

namespace fs = std::filesystem;

namespace {
constexpr mode_t kFileMode = 0644;
constexpr mode_t kDirectoryMode = 0755;
constexpr mode_t kPrivateDirectoryMode = 0700;

uint64_t RandomSuffix() {
  uint64_t value = 0;
  if (getrandom(&value, sizeof(value), 0) != sizeof(value)) {
    value = static_cast<uint64_t>(getpid()) << 32 ^ static_cast<uint64_t>(time(nullptr));
  }
  return value;
}
}  // namespace

Status ErrnoStatus(int error_number, std::string_view what) {
  const std::string message = fmt::format("{}: {}", what, std::strerror(error_number));
  if (error_number == ENOSPC || error_number == EDQUOT) {
    return Status::NoSpace(message + "; free disk space and run again");
  }
  if (error_number == ENOENT) return Status::NotFound(message);
  return Status::IOError(message);
}

Status WriteAll(int fd, std::string_view bytes, const std::string& path) {
  size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n = write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus(errno, fmt::format("cannot write '{}'", path));
    if (n == 0) return Status::IOError(fmt::format("cannot write '{}': no progress", path));
    written += static_cast<size_t>(n);
  }
  return Status::OK();
}

Status FsyncDirectory(const std::string& directory) {
  const int fd = open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    return ErrnoStatus(errno, fmt::format("cannot open directory '{}' to sync it", directory));
  }
  const int rc = fsync(fd);
  const int saved_errno = errno;
  close(fd);
  if (rc != 0) {
    return ErrnoStatus(saved_errno, fmt::format("fsync of directory '{}' failed", directory));
  }
  return Status::OK();
}

Status CreateDirectoriesDurably(const fs::path& directory) {
  std::error_code ignored;
  if (fs::is_directory(directory, ignored)) return Status::OK();
  if (directory.has_parent_path() && directory.parent_path() != directory) {
    SKIPPR_RETURN_IF_ERROR(CreateDirectoriesDurably(directory.parent_path()));
  }
  if (mkdir(directory.c_str(), kDirectoryMode) != 0 && errno != EEXIST) {
    return ErrnoStatus(errno, fmt::format("cannot create directory '{}'", directory.string()));
  }
  return FsyncDirectory(directory.has_parent_path() ? directory.parent_path().string() : ".");
}

Status CreatePrivateDirectories(const std::string& directory, std::string_view what) {
  std::error_code error;
  const fs::path absolute = fs::absolute(directory, error).lexically_normal();
  if (error) {
    return Status::IOError(
        fmt::format("cannot resolve {} directory '{}': {}", what, directory, error.message()));
  }
  fs::path current;
  for (const fs::path& component : absolute) {
    if (component.empty()) continue;  // the trailing "" of "a/b/"
    current /= component;
    if (::mkdir(current.c_str(), kPrivateDirectoryMode) == 0) {
      if (::chmod(current.c_str(), kPrivateDirectoryMode) != 0) {
        return Status::IOError(fmt::format("cannot set mode 0700 on {} directory '{}': {}", what,
                                           current.string(), std::strerror(errno)));
      }
      continue;
    }
    const int mkdir_errno = errno;
    if (mkdir_errno == EEXIST && fs::is_directory(current, error)) continue;
    return Status::IOError(fmt::format(
        "cannot create {} directory '{}': {}; check that the path is a directory this user may "
        "write to",
        what, current.string(),
        mkdir_errno == EEXIST ? "a file that is not a directory is in the way"
                              : std::strerror(mkdir_errno)));
  }
  return Status::OK();
}

Result<std::string> ReadWholeFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, fmt::format("cannot open '{}'", path));
  std::string bytes;
  struct stat info {};
  if (fstat(fd, &info) == 0 && info.st_size > 0) bytes.reserve(static_cast<size_t>(info.st_size));
  char buffer[64 * 1024];
  while (true) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int saved_errno = errno;
      close(fd);
      return ErrnoStatus(saved_errno, fmt::format("cannot read '{}'", path));
    }
    if (n == 0) break;
    bytes.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  return bytes;
}

TemporaryFile::TemporaryFile(TemporaryFile&& other) noexcept
    : path_(std::exchange(other.path_, "")) {}

TemporaryFile::~TemporaryFile() {
  if (!path_.empty()) unlink(path_.c_str());
}

Result<TemporaryFile> WriteTemporaryFile(const std::string& directory, std::string_view name,
                                         std::string_view bytes) {
  TemporaryFile file(fmt::format("{}/.{}.{:016x}.tmp", directory, name, RandomSuffix()));
  const int fd = open(file.path().c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, kFileMode);
  if (fd < 0) {
    const int saved_errno = errno;
    file.Release();  // not ours: never created
    return ErrnoStatus(saved_errno, fmt::format("cannot create '{}'", file.path()));
  }
  Status written = WriteAll(fd, bytes, file.path());
  if (written.ok() && fdatasync(fd) != 0) {
    written = ErrnoStatus(errno, fmt::format("fdatasync of '{}' failed", file.path()));
  }
  close(fd);
  SKIPPR_RETURN_IF_ERROR(written);
  return file;
}

int RenameNoReplace(const std::string& from, const std::string& to) {
  if (renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) return 0;
  if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP) return errno;
  if (link(from.c_str(), to.c_str()) != 0) return errno;
  unlink(from.c_str());
  return 0;
}

Status WriteFileAtomically(const std::string& path, std::string_view bytes) {
  const fs::path target(path);
  const std::string directory = target.has_parent_path() ? target.parent_path().string() : ".";
  SKIPPR_ASSIGN_OR_RETURN(TemporaryFile temporary,
                          WriteTemporaryFile(directory, target.filename().string(), bytes));
  if (rename(temporary.path().c_str(), path.c_str()) != 0) {
    return ErrnoStatus(errno,
                       fmt::format("cannot move '{}' into place as '{}'", temporary.path(), path));
  }
  temporary.Release();
  return FsyncDirectory(directory);
}

}  // namespace skippr
