// POSIX file helpers whose errors name the path, and durable writes: a file written here survives a
// crash once the call returns (its data is synced, and so is the directory entry naming it).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "core/status.hpp"

namespace skippr {

// A failed system call as a Status, "<what>: <strerror>": ENOSPC/EDQUOT → NoSpace (with what to
// do), ENOENT → NotFound, anything else IOError. Pass errno saved right after the failure.
Status ErrnoStatus(int error_number, std::string_view what);

// write() until every byte is written (EINTR retried).
Status WriteAll(int fd, std::string_view bytes, const std::string& path);

Status FsyncDirectory(const std::string& directory);

// Creates the missing components of `directory` (mode 0755), syncing each parent so that a new
// entry survives a crash (a file synced inside a directory whose own entry was lost is lost too).
Status CreateDirectoriesDurably(const std::filesystem::path& directory);

// Creates `directory` and every missing parent with mode 0700 — DATA_DIR, pipeline, store, WAL and
// log directories hold data and connector state only this user may read. chmod after mkdir, so
// neither a permissive nor a strict umask changes the mode; components that exist keep theirs.
// `what` names the directory in errors ("pipeline", "log").
Status CreatePrivateDirectories(const std::string& directory, std::string_view what);

Result<std::string> ReadWholeFile(const std::string& path);

// A durable file under a temporary name, removed on destruction unless Release()d (renamed away).
class TemporaryFile {
 public:
  explicit TemporaryFile(std::string path) : path_(std::move(path)) {}
  TemporaryFile(TemporaryFile&& other) noexcept;
  TemporaryFile& operator=(TemporaryFile&&) = delete;
  ~TemporaryFile();
  const std::string& path() const { return path_; }
  void Release() { path_.clear(); }

 private:
  std::string path_;
};

// Writes `bytes` to a fresh `.{name}.{random}.tmp` in `directory` (mode 0644: other tools read what
// we write) and fdatasyncs it. The leading dot keeps readers' directory listings from taking it for
// a real file. An fdatasync failure is final for the file (the kernel may have dropped its dirty
// pages; a retry on the same descriptor could falsely succeed): it is removed.
Result<TemporaryFile> WriteTemporaryFile(const std::string& directory, std::string_view name,
                                         std::string_view bytes);

// rename() that fails with EEXIST instead of replacing `to` (link + unlink where the filesystem has
// no RENAME_NOREPLACE). Returns 0 or the errno.
int RenameNoReplace(const std::string& from, const std::string& to);

// Replaces `path` with `bytes` atomically and durably: temporary file, fdatasync, rename, directory
// fsync. Readers see the old or the new file, never a part.
Status WriteFileAtomically(const std::string& path, std::string_view bytes);

}  // namespace skippr
