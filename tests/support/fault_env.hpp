// FaultInjectionEnv: an Env (core/env.hpp) over a real one that injects the faults a disk has —
// fsync EIO, ENOSPC after N bytes, short writes, failed reads and creations — and simulates a power
// cut: DropUnsyncedData() puts every file and directory it has seen back to what a machine that
// lost power would find (the models are LevelDB's FaultInjectionTestEnv and RocksDB's
// FaultInjectionTestFS; this is written for skipprd).
//
// The model of durability:
//   - a file's bytes are durable up to its size at its last Sync (WritableFile::Sync, or
//     Env::SyncFile for a file another component wrote); bytes written in place below that size
//     since then are put back (the old bytes are kept before each such write);
//   - a directory's entries are durable as they were at its last SyncDirectory: names created in
//     it since are removed (whoever created them: LMDB, SQLite and DuckDB files included), names
//     removed or replaced through this Env come back (hard links kept in the trash directory);
//   - what existed when the Env first saw a file or directory counts as durable.
// Files and directories this Env never sees are left alone.
//
// The crash itself: CutPower() makes every later operation fail with EIO, as if the machine were
// off; CrashAtOperation(n, crash) cuts the power at the n-th mutating operation (0-based: file
// creations, writes, syncs, truncations, renames, removals, directories created) and calls `crash`,
// which throws, so the code under test stops right there. Tests use it with
// SetCrashPointObserver (core/crash.hpp) to crash at the named crash points too.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "core/env.hpp"

namespace skippr::testing {

enum class FaultKind {
  kSyncFails,          // a sync (file or directory) fails with EIO
  kNoSpaceAfterBytes,  // writes fail with ENOSPC once `after` bytes were written to matching files
  kShortWrites,        // every write stores about half of what it was given
  kReadFails,          // reads fail with EIO
  kNoSpaceOnCreate,    // creating a file or directory fails with ENOSPC
};

struct FaultRule {
  FaultKind kind = FaultKind::kSyncFails;
  std::string path_pattern = "*";  // fnmatch() over the whole path, '*' matching '/' too
  // kSyncFails: matching syncs that succeed before one fails (0: the first fails); afterwards every
  // matching sync fails. kNoSpaceAfterBytes: the bytes written before ENOSPC.
  uint64_t after = 0;
};

// Thrown by the crash callbacks tests pass in: the simulated process is dead from here.
struct SimulatedCrash {
  std::string where;
};

class FaultInjectionEnv final : public Env {
 public:
  // `trash_directory` (created if missing) must be on the same file system as the files: removed
  // and replaced files are kept there as hard links until their directory is synced.
  FaultInjectionEnv(Env* base, std::string trash_directory);
  ~FaultInjectionEnv() override;

  void AddRule(FaultRule rule);
  void ClearRules();

  // Every mutating operation so far, numbered from 0: "write /path (4096 bytes at 0)".
  std::vector<std::string> operations() const;
  // Cuts the power when operation `operation_index` is about to run, then calls `crash`.
  void CrashAtOperation(uint64_t operation_index, std::function<void(const std::string&)> crash);
  void CutPower();
  bool has_power() const;
  // The power cut's aftermath on the disk (see the model above); then the power is back, the rules
  // stay, and what is on disk now counts as durable.
  Status DropUnsyncedData();
  // What is on disk now counts as durable, as after sync(2): for set-ups whose durability is
  // another component's business (LMDB and SQLite sync their own files and directories).
  void MarkAllDurable();

  // Env
  Result<std::unique_ptr<WritableFile>> OpenWritable(const std::string& path,
                                                     const WritableFileOptions& options) override;
  Result<std::unique_ptr<SequentialFile>> OpenSequential(const std::string& path) override;
  Result<std::unique_ptr<RandomAccessFile>> OpenRandomAccess(const std::string& path) override;
  Result<uint64_t> FileSize(const std::string& path) override;
  Result<bool> FileExists(const std::string& path) override;
  Result<std::vector<std::string>> ListDirectory(const std::string& directory) override;
  Result<bool> CreateDirectory(const std::string& path, uint32_t permissions) override;
  Status RenameFile(const std::string& from, const std::string& to) override;
  Status RenameFileNoReplace(const std::string& from, const std::string& to) override;
  Status RemoveFile(const std::string& path) override;
  Status SyncDirectory(const std::string& directory) override;
  Status SyncFile(const std::string& path) override;
  Result<std::unique_ptr<FileLock>> LockFile(const std::string& path,
                                             uint32_t permissions) override;

 private:
  friend class FaultWritableFile;
  friend class FaultReadableFile;
  using InodeKey = std::pair<dev_t, ino_t>;
  struct Undo {
    uint64_t offset;
    std::string old_bytes;
  };
  struct FileState {
    std::vector<std::string> paths;  // names the inode had (some may be gone or reused since)
    uint64_t synced_bytes = 0;
    std::vector<Undo> undo;  // oldest first
  };
  struct Restore {
    std::string name;
    std::string trash_path;
  };
  struct DirectoryState {
    std::set<std::string> durable_names;
    std::vector<Restore> restores;  // oldest first
  };

  // Counts a mutating operation; IOError when the power is off (or cut by it: then `crash` runs).
  Status BeginOperation(std::string description);
  Status FaultFor(FaultKind kind, const std::string& path, uint64_t bytes, uint64_t* allowed);
  void SeeDirectory(const std::string& directory);
  void SeeFile(const std::string& path, bool is_new);
  std::optional<InodeKey> KeyOf(const std::string& path) const;
  Status KeepInTrash(const std::string& path, const std::string& name_to_restore);
  std::optional<std::string> PathOf(const InodeKey& key, const FileState& file) const;
  void RecordInPlaceWrite(const InodeKey& key, uint64_t offset, uint64_t bytes);
  void MarkSynced(const InodeKey& key);
  Status RevertFile(const InodeKey& key, const FileState& file) const;
  Status RevertDirectory(const std::string& directory, const DirectoryState& state) const;
  Status SyncFailure(const std::string& what, const std::string& path);

  Env* const base_;
  const std::string trash_directory_;
  mutable std::recursive_mutex mutex_;
  std::vector<FaultRule> rules_;
  std::vector<uint64_t> rule_counts_;  // syncs or bytes seen per rule
  std::vector<std::string> operations_;
  std::optional<uint64_t> crash_at_;
  std::function<void(const std::string&)> crash_;
  bool has_power_ = true;
  uint64_t trash_files_ = 0;
  std::map<InodeKey, FileState> files_;
  std::map<std::string, DirectoryState> directories_;
};

}  // namespace skippr::testing
