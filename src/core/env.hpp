// The file-system seam (LevelDB's Env, RocksDB's FileSystem): every file skipprd writes itself —
// WAL segments, the writer lease, Iceberg metadata files, manifests and manifest lists, the lake's
// directories, the syncs of the Parquet files DuckDB writes — goes through an Env, so that tests can
// put a fault-injecting one underneath (fsync EIO, ENOSPC after N bytes, short writes, a power cut
// that drops everything not synced: tests/support/fault_env.hpp). LMDB, SQLite and DuckDB do their
// own I/O; tests cover them one level lower (tests/fault/fault_preload.c, an LD_PRELOAD
// interposer). Production code takes its Env from options and defaults to Env::Default().
//
// Errors name the path and the operation; ENOSPC/EDQUOT are NoSpace, ENOENT NotFound, anything else
// IOError. An Env and the files it opens may be used from several threads (one file per thread).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.hpp"

namespace skippr {

// A failed system call as a Status, "<what>: <strerror>": ENOSPC/EDQUOT → NoSpace (with what to
// do), ENOENT → NotFound, anything else IOError. Pass errno saved right after the failure.
Status ErrnoStatus(int error_number, std::string_view what);

struct WritableFileOptions {
  enum class Mode {
    kCreateNew,     // fails (Conflict) when the path exists: O_CREAT | O_EXCL
    kOpenExisting,  // fails (NotFound) when it does not
    kCreateOrOpen,  // neither truncates
  };
  Mode mode = Mode::kCreateNew;
  uint32_t permissions = 0644;  // of a file this open creates
  // O_DIRECT: whole 4 KiB blocks at aligned offsets from an aligned buffer go to the device
  // without the page cache; anything else (the tail) goes through the page cache, as does
  // everything on a file system that refuses O_DIRECT.
  bool use_direct_io = false;
  // Writes through the page cache go in chunks of 1 MiB, each handed to writeback at once
  // (sync_file_range), so that Sync waits for the tail only. A hint: Sync is what counts.
  bool start_writeback_early = false;
};

// A file open for writing. Not thread-safe; Close (or the destructor) releases it.
//
// A failed Sync is final for the file (PostgreSQL's fsyncgate): the kernel may have dropped the
// pages it could not write and marked them clean, so a second fdatasync on the same descriptor
// could report success for data that is gone. After one, every later write and sync fails with the
// first error; the caller fails its run, and the next run recovers from what was durable before.
class WritableFile {
 public:
  virtual ~WritableFile() = default;
  WritableFile(const WritableFile&) = delete;
  WritableFile& operator=(const WritableFile&) = delete;

  // Writes all of `bytes` at `offset`: a write that stores fewer bytes is continued where it
  // stopped; one that stores none fails.
  Status WriteAt(uint64_t offset, std::string_view bytes);
  // fdatasync: what was written is durable when this returns OK (the directory entry of a new
  // file needs Env::SyncDir of its directory too).
  Status Sync();
  Status Truncate(uint64_t size_bytes);
  // Closes the descriptor (a close error can carry a deferred write error). Later calls fail.
  Status Close();

  const std::string& path() const { return path_; }

 protected:
  explicit WritableFile(std::string path) : path_(std::move(path)) {}
  // What an Env implements. WriteSome is one write call: it may store fewer bytes than asked.
  virtual Result<size_t> WriteSome(uint64_t offset, std::string_view bytes) = 0;
  virtual Status SyncData() = 0;
  virtual Status TruncateTo(uint64_t size_bytes) = 0;
  virtual Status CloseFile() = 0;

 private:
  Status CheckUsable(std::string_view operation) const;

  std::string path_;
  Status sync_failure_;  // the first failed Sync: the file is unusable from then on
  bool is_closed_ = false;
};

class SequentialFile {
 public:
  virtual ~SequentialFile() = default;
  // Reads up to `bytes` into `out`; 0 at the end of the file.
  virtual Result<size_t> Read(char* out, size_t bytes) = 0;
};

class RandomAccessFile {
 public:
  virtual ~RandomAccessFile() = default;
  // Reads up to `bytes` at `offset` into `out`; fewer only at the end of the file (0 past it).
  virtual Result<size_t> ReadAt(uint64_t offset, char* out, size_t bytes) const = 0;
  virtual Result<uint64_t> Size() const = 0;
};

// An exclusive advisory lock on a file (flock), held until destroyed. Belongs to the open file: a
// child forked while it is held holds it too until it exits or execs.
class FileLock {
 public:
  virtual ~FileLock() = default;
  // Replaces the lock file's contents (the holder's pid, for other processes' messages).
  virtual Status Rewrite(std::string_view contents) = 0;
};

class Env {
 public:
  // The POSIX file system. Lives as long as the process.
  static Env* Default();

  virtual ~Env() = default;

  virtual Result<std::unique_ptr<WritableFile>> OpenWritable(const std::string& path,
                                                             const WritableFileOptions& options) = 0;
  virtual Result<std::unique_ptr<SequentialFile>> OpenSequential(const std::string& path) = 0;
  virtual Result<std::unique_ptr<RandomAccessFile>> OpenRandomAccess(const std::string& path) = 0;

  virtual Result<uint64_t> FileSize(const std::string& path) = 0;
  virtual Result<bool> FileExists(const std::string& path) = 0;
  // Names in `directory`, without "." and "..", in no particular order.
  virtual Result<std::vector<std::string>> ListDirectory(const std::string& directory) = 0;

  // true when this call created the directory, false when one was there already.
  virtual Result<bool> CreateDirectory(const std::string& path, uint32_t permissions) = 0;
  // rename(): replaces `to` atomically when it exists.
  virtual Status RenameFile(const std::string& from, const std::string& to) = 0;
  // Conflict when `to` exists (RENAME_NOREPLACE, or link + unlink where the file system has none).
  virtual Status RenameFileNoReplace(const std::string& from, const std::string& to) = 0;
  virtual Status RemoveFile(const std::string& path) = 0;
  // fsync of a directory: the entries created, renamed or removed in it are durable after it.
  virtual Status SyncDirectory(const std::string& directory) = 0;
  // fsync of a file another component wrote (DuckDB's Parquet files), opened by name. Final for
  // the file in the same way as WritableFile::Sync: the caller fails, and rewrites it on retry.
  virtual Status SyncFile(const std::string& path) = 0;
  // Starts writing back what is written of `path` (a file another component is still writing)
  // without waiting, so that its SyncFile at the end has little left to write — RocksDB's
  // bytes_per_sync. A hint, ignored where it cannot be given: nothing is durable until SyncFile.
  virtual void StartWriteBack(const std::string& path) {}
  // Files another component writes or reads by name (DuckDB's Parquet files) need a path on the
  // local file system. LocalPathForWriting: where to write the file `path` names; SyncFile(path)
  // then makes it durable at `path`. LocalPathForReading: a local file with the bytes of `path`,
  // fetched first where `path` is remote. On the POSIX file system both are `path` itself.
  virtual Result<std::string> LocalPathForWriting(const std::string& path) { return path; }
  virtual Result<std::string> LocalPathForReading(const std::string& path) { return path; }

  // An exclusive, non-blocking lock on `path` (created with `permissions` when missing, never
  // followed when it is a symlink). Unavailable when another open file holds it.
  virtual Result<std::unique_ptr<FileLock>> LockFile(const std::string& path,
                                                     uint32_t permissions) = 0;
};

}  // namespace skippr
