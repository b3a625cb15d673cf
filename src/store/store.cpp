// The Skippr Store's transactions, its LMDB backend, and the pipeline writer lease
// (docs/formats/store.md).
#include "store/store.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <lmdb.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>

#include "core/check.hpp"
#include "core/file.hpp"
#include "core/disk.hpp"
#include "core/random.hpp"
#include "store/internal/backend.hpp"

namespace skippr::store {
namespace internal {
class Environment;
}  // namespace internal
namespace {

namespace fs = std::filesystem;

constexpr const char* kMetaName = "meta";
constexpr std::string_view kFormatVersionKey = "format_version";
constexpr std::string_view kInstanceIdKey = "instance_id";
constexpr std::string_view kInstanceOriginKey = "instance_origin";
constexpr std::string_view kOriginCreated = "created";    // minted with the store
constexpr std::string_view kOriginUpgraded = "upgraded";  // minted for a format 1 store
constexpr size_t kInstanceIdBytes = 16;                   // 128 bits, 32 hex digits
constexpr mdb_mode_t kFileMode = 0600;
// Every query pins a snapshot; LMDB's default of 126 reader slots is tight for a busy daemon.
constexpr unsigned int kMaxReaders = 512;
constexpr std::array<const char*, kFamilyCount> kFamilyNames = {"catalog", "stream_state",
                                                                "offsets", "schema"};
constexpr std::array<Family, kFamilyCount> kFamilies = {Family::kCatalog, Family::kStreamState,
                                                        Family::kOffsets, Family::kSchema};

MDB_val Val(std::string_view bytes) {
  return MDB_val{bytes.size(), const_cast<char*>(bytes.data())};
}

std::string_view View(const MDB_val& value) {
  return {static_cast<const char*>(value.mv_data), value.mv_size};
}

std::string HexPrefix(std::string_view bytes) {
  constexpr size_t kShownBytes = 24;
  std::string hex;
  for (size_t i = 0; i < std::min(bytes.size(), kShownBytes); ++i) {
    hex += fmt::format("{:02x}", static_cast<unsigned char>(bytes[i]));
  }
  return bytes.size() > kShownBytes ? hex + "…" : hex;
}

// Aborts a transaction unless it was committed (or handed on) first.
class TxnGuard {
 public:
  explicit TxnGuard(MDB_txn* txn) : txn_(txn) {}
  ~TxnGuard() {
    if (txn_ != nullptr) mdb_txn_abort(txn_);
  }
  MDB_txn* Release() { return std::exchange(txn_, nullptr); }
  MDB_txn* get() const { return txn_; }

 private:
  MDB_txn* txn_;
};

class CursorGuard {
 public:
  explicit CursorGuard(MDB_cursor* cursor) : cursor_(cursor) {}
  ~CursorGuard() { mdb_cursor_close(cursor_); }

 private:
  MDB_cursor* cursor_;
};

// Process-wide map of open environments: LMDB forbids opening one environment twice in a process
// (closing either copy would drop the other's file locks), so every Store::Open of a directory
// shares one. Leaked on purpose: environments may close during static destruction.
struct Registry {
  struct Entry {
    const internal::Environment* env;  // identifies the entry when that environment closes
    std::weak_ptr<internal::Environment> weak;
  };
  std::mutex mutex;
  std::condition_variable closed;  // an entry was erased
  std::map<std::string, Entry> entries;
};

Registry& GetRegistry() {
  static Registry* registry = new Registry();
  return *registry;
}

}  // namespace

std::string_view FamilyName(Family family) {
  const auto index = static_cast<size_t>(family);
  SKIPPR_CHECK_MSG(index < kFamilyNames.size(), "unknown store family");
  return kFamilyNames[index];
}

namespace internal {

class Environment {
 public:
  static Result<std::shared_ptr<Environment>> Open(const std::string& directory,
                                                   uint64_t map_size_bytes);
  ~Environment();

  MDB_env* env() const { return env_; }
  const std::string& directory() const { return directory_; }
  const StoreIdentity& identity() const { return identity_; }
  MDB_dbi dbi(Family family) const { return family_dbis_[static_cast<size_t>(family)]; }

  // Maps an LMDB or errno code to a Status that names the operation, family and directory.
  Status Error(int rc, std::string_view operation, std::optional<Family> family) const;
  Status CheckKey(Family family, std::string_view key, std::string_view operation) const;

  Result<std::optional<std::string>> Get(MDB_txn* txn, Family family, std::string_view key) const;
  // Keys starting with `prefix`, from the first one at or after `start` (empty: from the prefix).
  Status Scan(MDB_txn* txn, Family family, std::string_view prefix, const ScanVisitor& visit,
              std::string_view start = {}) const;
  Result<std::optional<std::string>> LastKey(MDB_txn* txn, Family family,
                                             std::string_view prefix) const;

  // The in-process half of "one writer at a time": LMDB's writer mutex is not recursive, so a
  // thread that begins a second write transaction would deadlock on itself.
  bool IsWriterThread() const;
  void SetWriterThread();
  void ClearWriterThread();

  void MarkRegistered() { is_registered_ = true; }
  // The store directory's fsync, once per environment, by the first opener that asks for it
  // (under the registry's mutex).
  Status SyncDirectoryOnce(Env& file_env) {
    if (is_directory_synced_) return Status::OK();
    if (Status synced = file_env.SyncDirectory(directory_); !synced.ok()) {
      return Status(synced.code(),
                    fmt::format("store {}: {}; check the disk", directory_, synced.message()));
    }
    is_directory_synced_ = true;
    return Status::OK();
  }

 private:
  Environment(MDB_env* env, std::string directory, uint64_t map_size_bytes)
      : env_(env), directory_(std::move(directory)), map_size_bytes_(map_size_bytes) {}
  Status OpenDatabases();
  Status OpenFamilies(MDB_txn* txn);
  Result<uint64_t> CheckFormatVersion(MDB_txn* txn, MDB_dbi meta_dbi) const;
  Status CreateDatabases(MDB_txn* txn);
  // Reads the instance id into identity_; false when the store has none yet (format 1).
  Result<bool> ReadIdentity(MDB_txn* txn, MDB_dbi meta_dbi);
  // Writes a new instance id (and its origin) and the current format version.
  Status MintIdentity(MDB_txn* txn, MDB_dbi meta_dbi, std::string_view origin);
  Result<std::optional<std::string>> GetMeta(MDB_txn* txn, MDB_dbi meta_dbi,
                                             std::string_view key) const;
  Status PutMeta(MDB_txn* txn, MDB_dbi meta_dbi, std::string_view key, std::string_view value);
  Status TightenFileModes() const;

  MDB_env* env_;
  std::string directory_;
  uint64_t map_size_bytes_;
  size_t max_key_bytes_ = 0;
  std::array<MDB_dbi, kFamilyCount> family_dbis_{};
  StoreIdentity identity_;
  bool is_registered_ = false;
  bool is_directory_synced_ = false;

  mutable std::mutex writer_mutex_;
  std::optional<std::thread::id> writer_thread_;  // set while a write transaction is open
};

Result<std::shared_ptr<Environment>> Environment::Open(const std::string& directory,
                                                       uint64_t map_size_bytes) {
  MDB_env* raw_env = nullptr;
  int rc = mdb_env_create(&raw_env);
  if (rc != 0) {
    return Status::IOError(fmt::format("store {}: cannot create an LMDB environment handle: {}",
                                       directory, mdb_strerror(rc)));
  }
  // From here the destructor closes raw_env, which LMDB requires after a failed mdb_env_open too.
  std::shared_ptr<Environment> env(new Environment(raw_env, directory, map_size_bytes));
  rc = mdb_env_set_maxdbs(raw_env, kFamilyCount + 1);  // the families and meta
  if (rc == 0) rc = mdb_env_set_mapsize(raw_env, map_size_bytes);
  if (rc == 0) rc = mdb_env_set_maxreaders(raw_env, kMaxReaders);
  if (rc != 0) return env->Error(rc, "configure environment", std::nullopt);

  // MDB_NOTLS: read transactions are not tied to threads, so many can live on one thread and move
  // between threads. Durability: no MDB_NOSYNC / MDB_NOMETASYNC / MDB_WRITEMAP, so mdb_txn_commit
  // fsyncs before it returns.
  rc = mdb_env_open(raw_env, directory.c_str(), MDB_NOTLS, kFileMode);
  if (rc != 0) return env->Error(rc, "open environment", std::nullopt);
  unsigned int env_flags = 0;
  rc = mdb_env_get_flags(raw_env, &env_flags);
  if (rc != 0) return env->Error(rc, "read environment flags", std::nullopt);
  SKIPPR_CHECK_MSG(
      (env_flags & (MDB_NOSYNC | MDB_NOMETASYNC | MDB_MAPASYNC | MDB_WRITEMAP | MDB_RDONLY)) == 0 &&
          (env_flags & MDB_NOTLS) != 0,
      "the store environment must sync on commit and run with MDB_NOTLS");
  env->max_key_bytes_ = static_cast<size_t>(mdb_env_get_maxkeysize(raw_env));

  // Reader slots of processes that died (SIGKILL) would otherwise pin old pages forever.
  int dead_readers = 0;
  rc = mdb_reader_check(raw_env, &dead_readers);
  if (rc != 0) return env->Error(rc, "clear stale reader slots", std::nullopt);

  SKIPPR_RETURN_IF_ERROR(env->TightenFileModes());
  SKIPPR_RETURN_IF_ERROR(env->OpenDatabases());
  return env;
}

Environment::~Environment() {
  if (!is_registered_) {
    mdb_env_close(env_);
    return;
  }
  // Close while holding the registry lock, so a concurrent Open of this directory waits for the
  // close instead of opening the same environment a second time.
  Registry& registry = GetRegistry();
  std::lock_guard lock(registry.mutex);
  mdb_env_close(env_);
  auto entry = registry.entries.find(directory_);
  if (entry != registry.entries.end() && entry->second.env == this) registry.entries.erase(entry);
  registry.closed.notify_all();
}

Status Environment::TightenFileModes() const {
  // mdb_env_open applies the mode only to files it creates; files copied in keep theirs.
  for (const char* name : {"data.mdb", "lock.mdb"}) {
    const std::string path = fmt::format("{}/{}", directory_, name);
    struct stat file_stat {};
    if (::stat(path.c_str(), &file_stat) != 0 || (file_stat.st_mode & 0777) == kFileMode) continue;
    if (::chmod(path.c_str(), kFileMode) != 0) {
      return Status::IOError(
          fmt::format("cannot set mode 0600 on store file '{}': {}; make this "
                      "user the owner of the store directory",
                      path, std::strerror(errno)));
    }
  }
  return Status::OK();
}

Status Environment::OpenDatabases() {
  // A read transaction suffices for a store that exists, so opening never waits for a writer; only
  // a missing store, or a format 1 store that needs its instance id, takes the write transaction.
  for (const bool is_write : {false, true}) {
    MDB_txn* raw_txn = nullptr;
    int rc = mdb_txn_begin(env_, nullptr, is_write ? 0 : MDB_RDONLY, &raw_txn);
    if (rc != 0) return Error(rc, "begin the opening transaction", std::nullopt);
    TxnGuard txn(raw_txn);

    MDB_dbi meta_dbi = 0;
    rc = mdb_dbi_open(txn.get(), kMetaName, 0, &meta_dbi);
    if (rc == MDB_NOTFOUND) {
      if (!is_write) continue;
      SKIPPR_RETURN_IF_ERROR(CreateDatabases(txn.get()));
    } else if (rc != 0) {
      return Error(rc, "open sub-database 'meta'", std::nullopt);
    } else {
      SKIPPR_ASSIGN_OR_RETURN(const uint64_t version, CheckFormatVersion(txn.get(), meta_dbi));
      SKIPPR_RETURN_IF_ERROR(OpenFamilies(txn.get()));
      SKIPPR_ASSIGN_OR_RETURN(const bool has_identity, ReadIdentity(txn.get(), meta_dbi));
      if (!has_identity && version >= 2) {
        return Status::Corruption(fmt::format(
            "store {} has format version {} but no meta/instance_id; version 2 creates it with the "
            "store, so the store is damaged: restore DATA_DIR from backup",
            directory_, version));
      }
      if (!has_identity) {
        if (!is_write) continue;  // format 1: upgrade in the write transaction
        SKIPPR_RETURN_IF_ERROR(MintIdentity(txn.get(), meta_dbi, kOriginUpgraded));
      }
    }
    // Committing (even a read transaction) keeps the database handles open for the environment.
    rc = mdb_txn_commit(txn.Release());
    if (rc != 0) return Error(rc, "commit the opening transaction", std::nullopt);
    return Status::OK();
  }
  SKIPPR_CHECK_MSG(false, "the opening write transaction always returns");
  return Status::Internal("unreachable");
}

Status Environment::OpenFamilies(MDB_txn* txn) {
  for (Family family : kFamilies) {
    const int rc = mdb_dbi_open(txn, kFamilyNames[static_cast<size_t>(family)], 0,
                                &family_dbis_[static_cast<size_t>(family)]);
    if (rc == MDB_NOTFOUND) {
      return Status::Corruption(fmt::format(
          "store {} has a meta sub-database but no sub-database '{}'; every format creates each "
          "family with its meta, so the store is damaged: restore DATA_DIR from backup",
          directory_, FamilyName(family)));
    }
    if (rc != 0) return Error(rc, "open sub-database", family);
  }
  return Status::OK();
}

Result<std::optional<std::string>> Environment::GetMeta(MDB_txn* txn, MDB_dbi meta_dbi,
                                                        std::string_view key) const {
  MDB_val mdb_key = Val(key);
  MDB_val value{};
  const int rc = mdb_get(txn, meta_dbi, &mdb_key, &value);
  if (rc == MDB_NOTFOUND) return std::optional<std::string>();
  if (rc != 0) return Error(rc, fmt::format("read meta/{}", key), std::nullopt);
  return std::optional<std::string>(View(value));
}

Status Environment::PutMeta(MDB_txn* txn, MDB_dbi meta_dbi, std::string_view key,
                            std::string_view value) {
  MDB_val mdb_key = Val(key);
  MDB_val mdb_value = Val(value);
  const int rc = mdb_put(txn, meta_dbi, &mdb_key, &mdb_value, 0);
  if (rc != 0) return Error(rc, fmt::format("write meta/{}", key), std::nullopt);
  return Status::OK();
}

Result<bool> Environment::ReadIdentity(MDB_txn* txn, MDB_dbi meta_dbi) {
  SKIPPR_ASSIGN_OR_RETURN(std::optional<std::string> id, GetMeta(txn, meta_dbi, kInstanceIdKey));
  if (!id) return false;
  const bool is_hex = std::all_of(id->begin(), id->end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
  });
  if (id->size() != 2 * kInstanceIdBytes || !is_hex) {
    return Status::Corruption(fmt::format(
        "store {} has meta/instance_id '{}', not 32 lowercase hex digits; the store is damaged: "
        "restore DATA_DIR from backup",
        directory_, HexPrefix(*id)));
  }
  SKIPPR_ASSIGN_OR_RETURN(std::optional<std::string> origin,
                          GetMeta(txn, meta_dbi, kInstanceOriginKey));
  identity_.instance_id = std::move(*id);
  identity_.predates_instance_ids = origin.has_value() && *origin == kOriginUpgraded;
  return true;
}

Status Environment::MintIdentity(MDB_txn* txn, MDB_dbi meta_dbi, std::string_view origin) {
  SKIPPR_ASSIGN_OR_RETURN(std::string instance_id, RandomHex(kInstanceIdBytes));
  SKIPPR_RETURN_IF_ERROR(PutMeta(txn, meta_dbi, kInstanceIdKey, instance_id));
  SKIPPR_RETURN_IF_ERROR(PutMeta(txn, meta_dbi, kInstanceOriginKey, origin));
  SKIPPR_RETURN_IF_ERROR(PutMeta(txn, meta_dbi, kFormatVersionKey, std::to_string(kFormatVersion)));
  identity_.instance_id = std::move(instance_id);
  identity_.predates_instance_ids = origin == kOriginUpgraded;
  return Status::OK();
}

Status Environment::CreateDatabases(MDB_txn* txn) {
  // Without a meta sub-database this must be a new, empty environment: the main database lists the
  // named sub-databases, so any entry means someone else's data.
  MDB_dbi main_dbi = 0;
  int rc = mdb_dbi_open(txn, nullptr, 0, &main_dbi);
  if (rc != 0) return Error(rc, "open the main database", std::nullopt);
  MDB_stat main_stat{};
  rc = mdb_stat(txn, main_dbi, &main_stat);
  if (rc != 0) return Error(rc, "inspect the main database", std::nullopt);
  if (main_stat.ms_entries != 0) {
    return Status::Corruption(fmt::format(
        "store {} holds an LMDB environment with {} entries but no 'meta' sub-database: it is not "
        "a "
        "Skippr Store, or its meta was lost; move it aside or choose an empty directory",
        directory_, main_stat.ms_entries));
  }
  MDB_dbi meta_dbi = 0;
  rc = mdb_dbi_open(txn, kMetaName, MDB_CREATE, &meta_dbi);
  if (rc != 0) return Error(rc, "create sub-database 'meta'", std::nullopt);
  for (Family family : kFamilies) {
    rc = mdb_dbi_open(txn, kFamilyNames[static_cast<size_t>(family)], MDB_CREATE,
                      &family_dbis_[static_cast<size_t>(family)]);
    if (rc != 0) return Error(rc, "create sub-database", family);
  }
  return MintIdentity(txn, meta_dbi, kOriginCreated);
}

Result<uint64_t> Environment::CheckFormatVersion(MDB_txn* txn, MDB_dbi meta_dbi) const {
  SKIPPR_ASSIGN_OR_RETURN(const std::optional<std::string> stored,
                          GetMeta(txn, meta_dbi, kFormatVersionKey));
  if (!stored) {
    return Status::Corruption(fmt::format(
        "store {} has a 'meta' sub-database without 'format_version'; it was not written by "
        "skipprd, or it is damaged: restore DATA_DIR from backup or move the directory aside",
        directory_));
  }
  const std::string_view text = *stored;
  uint64_t version = 0;
  const auto [end, parse_error] = std::from_chars(text.data(), text.data() + text.size(), version);
  if (text.empty() || parse_error != std::errc() || end != text.data() + text.size() ||
      version == 0) {
    return Status::Corruption(fmt::format(
        "store {} has format_version '{}', which is not a positive decimal number; the store is "
        "damaged: restore DATA_DIR from backup",
        directory_, text.substr(0, 32)));
  }
  if (version > kFormatVersion) {
    return Status::NotSupported(fmt::format(
        "store {} has format version {}, but this skipprd reads format version {} at most; it was "
        "written by a newer skipprd: upgrade skipprd, or point this pipeline at another directory",
        directory_, version, kFormatVersion));
  }
  return version;  // version 1 is upgraded by the caller (it lacks only the instance id)
}

Status Environment::Error(int rc, std::string_view operation, std::optional<Family> family) const {
  const std::string what = family ? fmt::format("{} in family '{}'", operation, FamilyName(*family))
                                  : std::string(operation);
  const std::string base =
      fmt::format("store {}: {} failed: {}", directory_, what, mdb_strerror(rc));
  switch (rc) {
    case MDB_MAP_FULL:
      return Status::NoSpace(fmt::format(
          "{}; the store reached its map size of {} (StoreOptions::map_size_bytes = {}): raise "
          "it, or let landing reclaim segments so their pages are reused",
          base, FormatBytes(map_size_bytes_), map_size_bytes_));
    case ENOMEM:
      return Status::IOError(fmt::format(
          "{}; the map size of {} does not fit this process's address space (see `ulimit -v`): "
          "lower StoreOptions::map_size_bytes or raise the limit",
          base, FormatBytes(map_size_bytes_)));
    case ENOSPC:
    case EDQUOT:
      return Status::NoSpace(base + "; the disk holding the store is full: free space on it");
    case MDB_TXN_FULL:
      return Status::Internal(base +
                              "; one transaction changed more pages than LMDB allows: the caller "
                              "must commit in smaller transactions (a skipprd bug)");
    case MDB_READERS_FULL:
      return Status::Unavailable(fmt::format(
          "{}; all {} reader slots are in use: finish idle queries and retry", base, kMaxReaders));
    case MDB_MAP_RESIZED:
      return Status::Unavailable(base +
                                 "; another process raised the map size: restart this process");
    case MDB_CORRUPTED:
    case MDB_PAGE_NOTFOUND:
    case MDB_INVALID:
      return Status::Corruption(base +
                                "; the store files are damaged: restore DATA_DIR from backup");
    case MDB_VERSION_MISMATCH:
      return Status::NotSupported(
          base +
          "; the store was written by an incompatible LMDB build: use the same skipprd build");
    case MDB_BAD_VALSIZE:
      return Status::InvalidArgument(base + "; keys are 1 to 511 bytes (a skipprd bug)");
    case EACCES:
    case EPERM:
    case EROFS:
      return Status::IOError(base +
                             "; the store directory and its files must be writable by this user");
    case EIO:
      return Status::IOError(fmt::format(
          "{}; the disk failed under '{}/data.mdb': nothing of this transaction was committed, "
          "and the run stops; check the disk, then run again (the next run starts from the last "
          "commit)",
          base, directory_));
    default:
      return Status::IOError(base + "; check the disk and the directory, then retry");
  }
}

Status Environment::CheckKey(Family family, std::string_view key,
                             std::string_view operation) const {
  if (key.empty()) {
    return Status::InvalidArgument(
        fmt::format("store {}: {} in family '{}' was given an empty key; keys are 1 to {} bytes "
                    "(build them with KeyBuilder)",
                    directory_, operation, FamilyName(family), max_key_bytes_));
  }
  if (key.size() > max_key_bytes_) {
    return Status::InvalidArgument(fmt::format(
        "store {}: {} in family '{}' was given a key of {} bytes (starting {}), over LMDB's limit "
        "of {}; keep long names in the value and a short id or hash in the key",
        directory_, operation, FamilyName(family), key.size(), HexPrefix(key), max_key_bytes_));
  }
  return Status::OK();
}

Result<std::optional<std::string>> Environment::Get(MDB_txn* txn, Family family,
                                                    std::string_view key) const {
  SKIPPR_RETURN_IF_ERROR(CheckKey(family, key, "get"));
  MDB_val mdb_key = Val(key);
  MDB_val mdb_value{};
  const int rc = mdb_get(txn, dbi(family), &mdb_key, &mdb_value);
  if (rc == MDB_NOTFOUND) return std::optional<std::string>();
  if (rc != 0) return Error(rc, "get", family);
  return std::optional<std::string>(View(mdb_value));
}

Result<std::optional<std::string>> Environment::LastKey(MDB_txn* txn, Family family,
                                                        std::string_view prefix) const {
  SKIPPR_CHECK_MSG(!prefix.empty(), "LastKey needs a prefix");
  if (prefix.size() > max_key_bytes_) return std::optional<std::string>();  // no such key
  MDB_cursor* cursor = nullptr;
  int rc = mdb_cursor_open(txn, dbi(family), &cursor);
  if (rc != 0) return Error(rc, "open a cursor", family);
  CursorGuard guard(cursor);
  // The first key past every key with the prefix: the prefix with its last byte below 0xff
  // incremented and what follows it dropped. The key before that (or the last key, when none
  // comes after) is the greatest with the prefix, if it has it.
  std::string past = std::string(prefix);
  while (!past.empty() && static_cast<uint8_t>(past.back()) == 0xff) past.pop_back();
  if (!past.empty()) past.back() = static_cast<char>(static_cast<uint8_t>(past.back()) + 1);
  MDB_val key = Val(past);
  MDB_val value{};
  rc = past.empty() ? MDB_NOTFOUND : mdb_cursor_get(cursor, &key, &value, MDB_SET_RANGE);
  if (rc == 0) {
    rc = mdb_cursor_get(cursor, &key, &value, MDB_PREV);
  } else if (rc == MDB_NOTFOUND) {
    rc = mdb_cursor_get(cursor, &key, &value, MDB_LAST);
  }
  if (rc == MDB_NOTFOUND) return std::optional<std::string>();
  if (rc != 0) return Error(rc, "find the last key", family);
  const std::string_view last = View(key);
  if (!last.starts_with(prefix)) return std::optional<std::string>();
  return std::optional<std::string>(std::string(last));
}

Status Environment::Scan(MDB_txn* txn, Family family, std::string_view prefix,
                         const ScanVisitor& visit, std::string_view start) const {
  if (prefix.size() > max_key_bytes_) return Status::OK();  // no key can be that long
  const std::string_view seek = start > prefix ? start : prefix;
  if (seek.size() > max_key_bytes_) return Status::OK();
  MDB_cursor* cursor = nullptr;
  int rc = mdb_cursor_open(txn, dbi(family), &cursor);
  if (rc != 0) return Error(rc, "open a scan cursor", family);
  CursorGuard guard(cursor);
  MDB_val key = Val(seek);
  MDB_val value{};
  // LMDB refuses an empty key for MDB_SET_RANGE, and an empty prefix means "from the first key".
  rc = mdb_cursor_get(cursor, &key, &value, seek.empty() ? MDB_FIRST : MDB_SET_RANGE);
  while (rc == 0) {
    const std::string_view key_view = View(key);
    if (!key_view.starts_with(prefix)) return Status::OK();
    if (!visit(key_view, View(value))) return Status::OK();
    rc = mdb_cursor_get(cursor, &key, &value, MDB_NEXT);
  }
  if (rc != MDB_NOTFOUND) return Error(rc, "scan", family);
  return Status::OK();
}

bool Environment::IsWriterThread() const {
  std::lock_guard lock(writer_mutex_);
  return writer_thread_ == std::this_thread::get_id();
}

void Environment::SetWriterThread() {
  std::lock_guard lock(writer_mutex_);
  // Only the holder of LMDB's writer mutex gets here, so no one else can be recorded.
  SKIPPR_CHECK_MSG(!writer_thread_.has_value(), "two write transactions open on one store");
  writer_thread_ = std::this_thread::get_id();
}

void Environment::ClearWriterThread() {
  std::lock_guard lock(writer_mutex_);
  writer_thread_.reset();
}

}  // namespace internal

// ----- The LMDB backend
// ---------------------------------------------------------------------------

namespace {

// A read transaction. Aborted before env_ is dropped: it may be the last reference to the
// environment.
class LmdbSnapshot final : public internal::Snapshot {
 public:
  LmdbSnapshot(std::shared_ptr<internal::Environment> env, MDB_txn* txn)
      : env_(std::move(env)), txn_(txn) {}
  ~LmdbSnapshot() override { mdb_txn_abort(txn_); }

  Result<std::optional<std::string>> Get(Family family, std::string_view key) const override {
    return env_->Get(txn_, family, key);
  }
  Status Scan(Family family, std::string_view prefix, std::string_view start,
              const ScanVisitor& visit) const override {
    return env_->Scan(txn_, family, prefix, visit, start);
  }
  Result<std::optional<std::string>> LastKey(Family family,
                                             std::string_view prefix) const override {
    return env_->LastKey(txn_, family, prefix);
  }

 private:
  std::shared_ptr<internal::Environment> env_;
  MDB_txn* txn_;
};

class LmdbWriteSession final : public internal::WriteSession {
 public:
  LmdbWriteSession(std::shared_ptr<internal::Environment> env, MDB_txn* txn)
      : env_(std::move(env)), txn_(txn), owner_thread_(std::this_thread::get_id()) {}
  ~LmdbWriteSession() override { Abort(); }

  Result<std::optional<std::string>> Get(Family family, std::string_view key) const override {
    return env_->Get(txn_, family, key);
  }
  Status Scan(Family family, std::string_view prefix, const ScanVisitor& visit) const override {
    return env_->Scan(txn_, family, prefix, visit);
  }
  Status Put(Family family, std::string_view key, std::string_view value) override {
    SKIPPR_RETURN_IF_ERROR(env_->CheckKey(family, key, "put"));
    SKIPPR_ASSIGN_OR_RETURN(MDB_cursor* const cursor, PutCursor(family));
    MDB_val mdb_key = Val(key);
    MDB_val mdb_value = Val(value);
    const int rc = mdb_cursor_put(cursor, &mdb_key, &mdb_value, 0);
    if (rc != 0) return Spend(env_->Error(rc, "put", family));
    return Status::OK();
  }
  Status Delete(Family family, std::string_view key) override {
    SKIPPR_RETURN_IF_ERROR(env_->CheckKey(family, key, "delete"));
    MDB_val mdb_key = Val(key);
    const int rc = mdb_del(txn_, env_->dbi(family), &mdb_key, nullptr);
    if (rc != 0 && rc != MDB_NOTFOUND) return Spend(env_->Error(rc, "delete", family));
    return Status::OK();
  }
  Status DeletePrefix(Family family, std::string_view prefix) override;
  Status Commit() override {
    env_->ClearWriterThread();  // before LMDB releases its mutex to the next writer
    const int rc = mdb_txn_commit(std::exchange(txn_, nullptr));  // frees the txn either way
    put_cursors_ = {};                                              // and its cursors
    if (rc != 0) return Spend(env_->Error(rc, "commit", std::nullopt));
    return Status::OK();
  }
  bool spent() const override { return is_spent_; }

 private:
  Status Spend(Status status) {
    Abort();  // releases the writer lock now; nothing of this transaction can commit anymore
    is_spent_ = true;
    return status;
  }
  void Abort() {
    if (txn_ == nullptr) return;
    // Unlocking LMDB's writer mutex from another thread fails silently and leaves the store locked
    // for every writer: better to stop here.
    SKIPPR_CHECK_MSG(
        std::this_thread::get_id() == owner_thread_,
        "a WriteTransaction was finished on a thread other than the one that began it");
    env_->ClearWriterThread();
    mdb_txn_abort(std::exchange(txn_, nullptr));
    put_cursors_ = {};  // freed with the transaction
  }
  Result<MDB_cursor*> PutCursor(Family family) {
    MDB_cursor*& cursor = put_cursors_[static_cast<size_t>(family)];
    if (cursor == nullptr) {
      const int rc = mdb_cursor_open(txn_, env_->dbi(family), &cursor);
      if (rc != 0) {
        cursor = nullptr;
        return Spend(env_->Error(rc, "open a put cursor", family));
      }
    }
    return cursor;
  }

  std::shared_ptr<internal::Environment> env_;
  MDB_txn* txn_;  // null once committed or aborted
  // One cursor per family for Put: LMDB searches only the cursor's page when a key falls within
  // it, so keys put in order skip the descent from the root. LMDB frees them with txn_.
  std::array<MDB_cursor*, kFamilyCount> put_cursors_{};
  std::thread::id owner_thread_;
  bool is_spent_ = false;
};

Status LmdbWriteSession::DeletePrefix(Family family, std::string_view prefix) {
  MDB_cursor* cursor = nullptr;
  int rc = mdb_cursor_open(txn_, env_->dbi(family), &cursor);
  if (rc != 0) return Spend(env_->Error(rc, "open a delete cursor", family));
  {
    CursorGuard guard(cursor);
    if (!prefix.empty() &&
        prefix.size() <= static_cast<size_t>(mdb_env_get_maxkeysize(env_->env()))) {
      // Seek afresh after every delete: where a cursor points after mdb_cursor_del differs between
      // LMDB releases, a seek does not.
      while (true) {
        MDB_val key = Val(prefix);
        MDB_val value{};
        rc = mdb_cursor_get(cursor, &key, &value, MDB_SET_RANGE);
        if (rc != 0 || !View(key).starts_with(prefix)) break;
        rc = mdb_cursor_del(cursor, 0);
        if (rc != 0) break;
      }
    } else if (prefix.empty()) {
      while (true) {
        MDB_val key{};
        MDB_val value{};
        rc = mdb_cursor_get(cursor, &key, &value, MDB_FIRST);
        if (rc != 0) break;
        rc = mdb_cursor_del(cursor, 0);
        if (rc != 0) break;
      }
    }
  }
  if (rc != 0 && rc != MDB_NOTFOUND) return Spend(env_->Error(rc, "delete by prefix", family));
  return Status::OK();
}

class LmdbBackend final : public internal::Backend {
 public:
  explicit LmdbBackend(std::shared_ptr<internal::Environment> env) : env_(std::move(env)) {}

  Result<std::unique_ptr<internal::Snapshot>> BeginRead() const override {
    MDB_txn* txn = nullptr;
    const int rc = mdb_txn_begin(env_->env(), nullptr, MDB_RDONLY, &txn);
    if (rc != 0) return env_->Error(rc, "begin read transaction", std::nullopt);
    return std::unique_ptr<internal::Snapshot>(std::make_unique<LmdbSnapshot>(env_, txn));
  }

  Result<std::unique_ptr<internal::WriteSession>> BeginWrite() override {
    if (env_->IsWriterThread()) {
      return Status::Internal(fmt::format(
          "store {}: this thread already has a write transaction open; commit or drop it before "
          "beginning another (a skipprd bug: waiting would deadlock)",
          env_->directory()));
    }
    MDB_txn* txn = nullptr;
    const int rc = mdb_txn_begin(env_->env(), nullptr, 0, &txn);  // waits for the current writer
    if (rc != 0) return env_->Error(rc, "begin write transaction", std::nullopt);
    env_->SetWriterThread();
    return std::unique_ptr<internal::WriteSession>(std::make_unique<LmdbWriteSession>(env_, txn));
  }

  const std::string& directory() const override { return env_->directory(); }
  const StoreIdentity& identity() const override { return env_->identity(); }

 private:
  std::shared_ptr<internal::Environment> env_;
};

}  // namespace

// ----- ReadTransaction
// ----------------------------------------------------------------------------

ReadTransaction::ReadTransaction(std::unique_ptr<internal::Snapshot> snapshot)
    : snapshot_(std::move(snapshot)) {}
ReadTransaction::ReadTransaction(ReadTransaction&& other) noexcept = default;
ReadTransaction& ReadTransaction::operator=(ReadTransaction&& other) noexcept = default;
ReadTransaction::~ReadTransaction() = default;

Result<std::optional<std::string>> ReadTransaction::Get(Family family, std::string_view key) const {
  SKIPPR_CHECK_MSG(snapshot_ != nullptr, "use of a moved-from ReadTransaction");
  return snapshot_->Get(family, key);
}

Status ReadTransaction::Scan(Family family, std::string_view prefix,
                             const ScanVisitor& visit) const {
  SKIPPR_CHECK_MSG(snapshot_ != nullptr, "use of a moved-from ReadTransaction");
  return snapshot_->Scan(family, prefix, {}, visit);
}

Result<std::optional<std::string>> ReadTransaction::LastKey(Family family,
                                                            std::string_view prefix) const {
  SKIPPR_CHECK_MSG(snapshot_ != nullptr, "use of a moved-from ReadTransaction");
  SKIPPR_CHECK_MSG(!prefix.empty(), "LastKey needs a prefix");
  return snapshot_->LastKey(family, prefix);
}

Status ReadTransaction::ScanFrom(Family family, std::string_view prefix, std::string_view start,
                                 const ScanVisitor& visit) const {
  SKIPPR_CHECK_MSG(snapshot_ != nullptr, "use of a moved-from ReadTransaction");
  return snapshot_->Scan(family, prefix, start, visit);
}

// ----- WriteTransaction
// ---------------------------------------------------------------------------

WriteTransaction::WriteTransaction(std::unique_ptr<internal::WriteSession> session,
                                   std::string store_name)
    : session_(std::move(session)),
      store_name_(std::move(store_name)),
      owner_thread_(std::this_thread::get_id()) {}

WriteTransaction::WriteTransaction(WriteTransaction&& other) noexcept
    : session_(std::move(other.session_)),
      store_name_(std::move(other.store_name_)),
      owner_thread_(other.owner_thread_),
      state_(other.state_),
      failure_(std::move(other.failure_)),
      scan_depth_(other.scan_depth_) {}

WriteTransaction& WriteTransaction::operator=(WriteTransaction&& other) noexcept {
  if (this != &other) {
    session_ = std::move(other.session_);
    store_name_ = std::move(other.store_name_);
    owner_thread_ = other.owner_thread_;
    state_ = other.state_;
    failure_ = std::move(other.failure_);
    scan_depth_ = other.scan_depth_;
  }
  return *this;
}

WriteTransaction::~WriteTransaction() = default;  // the session discards what was not committed

Status WriteTransaction::Fail(Status status) {
  session_.reset();  // releases the writer lock now; nothing of this transaction can commit
  state_ = State::kFailed;
  failure_ = status;
  return status;
}

Status WriteTransaction::Checked(Status status) {
  if (!status.ok() && session_ != nullptr && session_->spent()) return Fail(std::move(status));
  return status;
}

Status WriteTransaction::CheckUsable(std::string_view operation, bool is_write) const {
  switch (state_) {
    case State::kCommitted:
      return Status::Internal(
          fmt::format("store {}: {} on a write transaction that is already committed; begin a "
                      "new one (a skipprd bug)",
                      store_name_, operation));
    case State::kFailed:
      return Status(failure_.code(),
                    fmt::format("{} refused: this write transaction already failed and was "
                                "rolled back; begin a new one. The failure was: {}",
                                operation, failure_.message()));
    case State::kOpen:
      break;
  }
  SKIPPR_CHECK_MSG(session_ != nullptr, "use of a moved-from WriteTransaction");
  SKIPPR_CHECK_MSG(std::this_thread::get_id() == owner_thread_,
                   "a WriteTransaction was used on a thread other than the one that began it");
  if (is_write && scan_depth_ > 0) {
    return Status::Internal(fmt::format(
        "store {}: {} inside a Scan visitor of the same write transaction; collect the keys "
        "during the Scan and write after it returns (a skipprd bug)",
        store_name_, operation));
  }
  return Status::OK();
}

Result<std::optional<std::string>> WriteTransaction::Get(Family family,
                                                         std::string_view key) const {
  SKIPPR_RETURN_IF_ERROR(CheckUsable("get", /*is_write=*/false));
  return session_->Get(family, key);
}

Status WriteTransaction::Scan(Family family, std::string_view prefix,
                              const ScanVisitor& visit) const {
  SKIPPR_RETURN_IF_ERROR(CheckUsable("scan", /*is_write=*/false));
  ++scan_depth_;
  Status status = session_->Scan(family, prefix, visit);
  --scan_depth_;
  return status;
}

Status WriteTransaction::Put(Family family, std::string_view key, std::string_view value) {
  SKIPPR_RETURN_IF_ERROR(CheckUsable("put", /*is_write=*/true));
  return Checked(session_->Put(family, key, value));
}

Status WriteTransaction::Delete(Family family, std::string_view key) {
  SKIPPR_RETURN_IF_ERROR(CheckUsable("delete", /*is_write=*/true));
  return Checked(session_->Delete(family, key));
}

Status WriteTransaction::DeletePrefix(Family family, std::string_view prefix) {
  SKIPPR_RETURN_IF_ERROR(CheckUsable("delete by prefix", /*is_write=*/true));
  return Checked(session_->DeletePrefix(family, prefix));
}

Status WriteTransaction::Commit() {
  SKIPPR_RETURN_IF_ERROR(CheckUsable("commit", /*is_write=*/true));
  std::unique_ptr<internal::WriteSession> session = std::move(session_);
  Status committed = session->Commit();
  session.reset();
  if (!committed.ok()) {
    state_ = State::kFailed;
    failure_ = committed;
    return committed;
  }
  state_ = State::kCommitted;
  return Status::OK();
}

// ----- Store
// --------------------------------------------------------------------------------------

Store::Store(std::unique_ptr<internal::Backend> backend) : backend_(std::move(backend)) {}
Store::~Store() = default;

const std::string& Store::directory() const { return backend_->directory(); }
const StoreIdentity& Store::identity() const { return backend_->identity(); }

Result<std::unique_ptr<Store>> Store::Open(const StoreOptions& options) {
  if (options.directory.empty()) {
    return Status::InvalidArgument(
        "store directory is empty; pass the directory that holds (or will hold) the store");
  }
  if (options.map_size_bytes == 0) {
    return Status::InvalidArgument(fmt::format(
        "store {}: map_size_bytes is 0; leave the default (1 TiB of address space, not disk)",
        options.directory));
  }
  SKIPPR_RETURN_IF_ERROR(CreatePrivateDirectories(*options.env, options.directory, "store"));
  std::error_code error;
  const std::string directory = fs::canonical(options.directory, error).string();
  if (error) {
    return Status::IOError(
        fmt::format("cannot resolve store directory '{}': {}", options.directory, error.message()));
  }

  Registry& registry = GetRegistry();
  std::unique_lock lock(registry.mutex);
  while (true) {
    auto entry = registry.entries.find(directory);
    if (entry == registry.entries.end()) break;
    if (std::shared_ptr<internal::Environment> shared = entry->second.weak.lock()) {
      // A reader may have opened it first, without the fsync a writer needs.
      if (options.syncs_directory) SKIPPR_RETURN_IF_ERROR(shared->SyncDirectoryOnce(*options.env));
      return std::make_unique<Store>(std::make_unique<LmdbBackend>(std::move(shared)));
    }
    registry.closed.wait(lock);  // its last user is closing it right now
  }
  SKIPPR_ASSIGN_OR_RETURN(std::shared_ptr<internal::Environment> env,
                          internal::Environment::Open(directory, options.map_size_bytes));
  // LMDB creates data.mdb and lock.mdb without syncing the directory; a power cut could otherwise
  // lose the files of a store whose commits were all synced.
  if (options.syncs_directory) SKIPPR_RETURN_IF_ERROR(env->SyncDirectoryOnce(*options.env));
  env->MarkRegistered();
  registry.entries[directory] = Registry::Entry{env.get(), env};
  return std::make_unique<Store>(std::make_unique<LmdbBackend>(std::move(env)));
}

Result<ReadTransaction> Store::BeginRead() const {
  SKIPPR_ASSIGN_OR_RETURN(std::unique_ptr<internal::Snapshot> snapshot, backend_->BeginRead());
  return ReadTransaction(std::move(snapshot));
}

Result<WriteTransaction> Store::BeginWrite() {
  SKIPPR_ASSIGN_OR_RETURN(std::unique_ptr<internal::WriteSession> session, backend_->BeginWrite());
  return WriteTransaction(std::move(session), backend_->directory());
}

// ----- WriterLease
// --------------------------------------------------------------------------------

namespace {

// The pid the holder wrote into the lock file, if it can be read.
std::optional<pid_t> ReadHolderPid(Env& env, const std::string& lock_path) {
  Result<std::string> text = ReadWholeFile(env, lock_path);
  if (!text.ok() || text->empty()) return std::nullopt;
  pid_t pid = 0;
  const auto [parsed_end, parse_error] = std::from_chars(text->data(), text->data() + text->size(), pid);
  if (parse_error != std::errc() || pid <= 0) return std::nullopt;
  return pid;
}

// flock(LOCK_EX | LOCK_NB), EINTR retried: 0, or the errno (EWOULDBLOCK: someone holds it).
int TryLockExclusive(int fd) {
  int rc = 0;
  do {
    rc = ::flock(fd, LOCK_EX | LOCK_NB);
  } while (rc != 0 && errno == EINTR);
  return rc == 0 ? 0 : errno;
}

Status LeaseHeldElsewhere(Env& env, const std::string& pipeline_dir,
                          const std::string& pipeline_name, const std::string& lock_path) {
  const std::optional<pid_t> holder_pid = ReadHolderPid(env, lock_path);
  std::string holder = "another process (its pid is not recorded yet)";
  std::string advice = "wait for it to finish, or stop it, then retry";
  if (holder_pid) {
    holder = *holder_pid == ::getpid() ? fmt::format("pid {} (this process)", *holder_pid)
                                       : fmt::format("pid {}", *holder_pid);
    advice = fmt::format("wait for it to finish, or stop it (kill {}), then retry", *holder_pid);
  }
  return Status::Unavailable(fmt::format(
      "pipeline writer lease unavailable: pipeline '{}' in {} is being written by {}, which "
      "holds {}; {}",
      pipeline_name, pipeline_dir, holder, lock_path, advice));
}

// Takes the exclusive lock on `fd` (the pipeline directory's or writer.lock's, `locked_path`); on
// failure closes `fd` and says who holds the lease, or what went wrong.
Status LockForLease(Env& env, int fd, const std::string& locked_path,
                    const std::string& pipeline_dir, const std::string& pipeline_name,
                    const std::string& lock_path) {
  const int lock_errno = TryLockExclusive(fd);
  if (lock_errno == 0) return Status::OK();
  ::close(fd);
  if (lock_errno == EWOULDBLOCK) {
    return LeaseHeldElsewhere(env, pipeline_dir, pipeline_name, lock_path);
  }
  return Status::IOError(fmt::format("cannot lock '{}' for pipeline '{}': {}", locked_path,
                                     pipeline_name, std::strerror(lock_errno)));
}

// The lease proper: the pipeline directory, locked through a descriptor of the directory itself.
// Nothing inside it can be deleted or replaced to lose the lock; a directory renamed away and
// recreated between our open and our flock is caught by comparing inodes.
Result<int> LockPipelineDirectory(Env& env, const std::string& pipeline_dir,
                                  const std::string& pipeline_name,
                                  const std::string& lock_path) {
  // A pipeline directory that is a symbolic link (to another disk) is the user's choice: followed.
  const int fd = ::open(pipeline_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    return Status::IOError(fmt::format(
        "cannot open the pipeline directory '{}' of pipeline '{}' to take the writer lease: {}; "
        "it must be a directory this user may read",
        pipeline_dir, pipeline_name, std::strerror(errno)));
  }
  SKIPPR_RETURN_IF_ERROR(
      LockForLease(env, fd, pipeline_dir, pipeline_dir, pipeline_name, lock_path));
  struct stat locked {};
  struct stat named {};
  if (::fstat(fd, &locked) != 0 || ::stat(pipeline_dir.c_str(), &named) != 0 ||
      locked.st_dev != named.st_dev || locked.st_ino != named.st_ino) {
    ::close(fd);
    return Status::Unavailable(fmt::format(
        "pipeline writer lease unavailable: the directory '{}' of pipeline '{}' was replaced while "
        "the lease was being taken; retry",
        pipeline_dir, pipeline_name));
  }
  return fd;
}

}  // namespace

WriterLease::WriterLease(int directory_fd, std::unique_ptr<FileLock> lock, std::string lock_path)
    : directory_fd_(directory_fd), lock_(std::move(lock)), lock_path_(std::move(lock_path)) {}

WriterLease::WriterLease(WriterLease&& other) noexcept
    : directory_fd_(std::exchange(other.directory_fd_, -1)),
      lock_(std::move(other.lock_)),
      lock_path_(std::move(other.lock_path_)) {}

WriterLease& WriterLease::operator=(WriterLease&& other) noexcept {
  if (this != &other) {
    Release();
    directory_fd_ = std::exchange(other.directory_fd_, -1);
    lock_ = std::move(other.lock_);
    lock_path_ = std::move(other.lock_path_);
  }
  return *this;
}

WriterLease::~WriterLease() { Release(); }

void WriterLease::Release() {
  if (lock_ != nullptr) {
    // Still holding the lock, so no later holder's pid can be erased here. Best effort: a stale
    // pid only makes a refusal message less exact, and the kernel drops the lock on close.
    (void)lock_->Rewrite("");
    lock_.reset();
  }
  if (directory_fd_ >= 0) ::close(std::exchange(directory_fd_, -1));  // the lease itself, last
}

Result<WriterLease> WriterLease::Acquire(const std::string& pipeline_dir,
                                         const std::string& pipeline_name, Env* env) {
  SKIPPR_RETURN_IF_ERROR(CreatePrivateDirectories(*env, pipeline_dir, "pipeline"));
  const std::string lock_path = (fs::path(pipeline_dir) / "writer.lock").string();
  SKIPPR_ASSIGN_OR_RETURN(const int directory_fd,
                          LockPipelineDirectory(*env, pipeline_dir, pipeline_name, lock_path));
  WriterLease lease(directory_fd, nullptr, lock_path);  // ours now: released on every return below
  // skipprd before the directory lease locked only this file: keep such a writer out too. Through
  // the Env, which writes the pid into it (LockFile never follows a symbolic link).
  Result<std::unique_ptr<FileLock>> lock = env->LockFile(lock_path, kFileMode);
  if (!lock.ok() && lock.status().code() == StatusCode::kUnavailable) {
    return LeaseHeldElsewhere(*env, pipeline_dir, pipeline_name, lock_path);
  }
  if (!lock.ok()) {
    return Status(lock.status().code(),
                  fmt::format("cannot take the writer lock file '{}' of pipeline '{}': {}; the "
                              "pipeline directory must be writable by this user (and writer.lock "
                              "a regular file, not a symbolic link)",
                              lock_path, pipeline_name, lock.status().message()));
  }
  lease.lock_ = std::move(lock).value();
  if (Status recorded = lease.lock_->Rewrite(fmt::format("{}\n", ::getpid())); !recorded.ok()) {
    return Status(recorded.code(),
                  fmt::format("cannot record this process's pid for pipeline '{}': {}; check free "
                              "space and permissions",
                              pipeline_name, recorded.message()));
  }
  return lease;
}

}  // namespace skippr::store
