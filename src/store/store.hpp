// src/store/store.hpp — the only header other modules include from store/.
//
// The Skippr Store: one LMDB environment per pipeline directory holding four ordered key/value
// families. A write transaction spans every family and is the commit point of the pipeline (a WAL
// segment and its source offsets become durable together); a read transaction pins one consistent
// snapshot that writers never disturb. The bytes on disk are documented in docs/formats/store.md.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "aws/aws.hpp"
#include "core/env.hpp"
#include "core/environment.hpp"
#include "core/status.hpp"

namespace skippr::store {

// The families are LMDB sub-databases; their names are part of the on-disk format.
enum class Family : uint8_t { kCatalog, kStreamState, kOffsets, kSchema };
inline constexpr int kFamilyCount = 4;

// "catalog", "stream_state", "offsets", "schema": the sub-database names.
std::string_view FamilyName(Family family);

// The store format this code writes, and the newest it can open (docs/formats/store.md). A
// version 1 store is upgraded to 2 when it is opened (it gains its instance id).
inline constexpr uint64_t kFormatVersion = 2;

// Who a store is: a random 128-bit id minted when the store is created and kept in it for its whole
// life. A store rebuilt from nothing (a wiped or replaced DATA_DIR) is another instance, so
// everything named after it — WAL segment headers, landing ids, snapshot summaries — can never be
// mistaken for what an earlier store wrote.
struct StoreIdentity {
  std::string instance_id;  // 32 lowercase hex digits
  // Whether the store was created before stores had instance ids (format 1, upgraded at open): it
  // may hold WAL segments written without one.
  bool predates_instance_ids = false;
};

// The LMDB map size stores open with unless told otherwise: 1 TiB of address space, not disk.
// ThreadSanitizer's shadow memory leaves a process too little address space for that, so its
// builds (make tsan) use 64 GiB.
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SKIPPR_STORE_UNDER_TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__) || defined(SKIPPR_STORE_UNDER_TSAN)
inline constexpr uint64_t kDefaultStoreMapSizeBytes = uint64_t{1} << 36;
#else
inline constexpr uint64_t kDefaultStoreMapSizeBytes = uint64_t{1} << 40;
#endif

struct StoreOptions {
  std::string directory;  // created if missing (each created component 0700); files inside are 0600
  // LMDB map size: the upper bound of the data file, reserved as address space, not preallocated.
  // The first Open of a directory in a process decides it; later Opens share that environment.
  uint64_t map_size_bytes = kDefaultStoreMapSizeBytes;
  // The store's own file operations (its directories, their fsync); LMDB writes its files itself.
  Env* env = Env::Default();
  // Whether Open fsyncs the store's directory (LMDB creates its files without): a writer must
  // before it commits, so that a power cut cannot lose files whose commits were synced. A reader
  // (query, status) makes nothing durable and skips the fsync (about 5 ms a store).
  bool syncs_directory = true;
};

namespace internal {
class Backend;
class Snapshot;
class WriteSession;
}  // namespace internal

// Called once per key in byte order. The views point into the store's memory map and are valid
// only during the call: copy what you keep. Return false to stop early.
using ScanVisitor = std::function<bool(std::string_view key, std::string_view value)>;

// Pins one consistent snapshot (an LMDB read transaction, or a commit of a DynamoDB store) until
// destroyed. Movable, not copyable; may be used and destroyed on any thread (the LMDB environment
// runs with MDB_NOTLS), but by one thread at a time. Keeps the store open even if the Store is
// destroyed first. A long-lived LMDB reader keeps the pages of its snapshot from being reused, so
// the data file grows while it lives.
class ReadTransaction {
 public:
  ReadTransaction(ReadTransaction&& other) noexcept;
  ReadTransaction& operator=(ReadTransaction&& other) noexcept;
  ReadTransaction(const ReadTransaction&) = delete;
  ReadTransaction& operator=(const ReadTransaction&) = delete;
  ~ReadTransaction();

  // nullopt when the key is absent. Keys are 1..511 bytes; others are InvalidArgument.
  Result<std::optional<std::string>> Get(Family family, std::string_view key) const;
  // Visits keys starting with `prefix` in byte order; `visit` returns false to stop early.
  Status Scan(Family family, std::string_view prefix, const ScanVisitor& visit) const;
  // Scan, from the first key at or after `start` (a scan resumed where an earlier one stopped).
  Status ScanFrom(Family family, std::string_view prefix, std::string_view start,
                  const ScanVisitor& visit) const;
  // The greatest key starting with `prefix` (non-empty); nullopt when there is none. A key that
  // sorts after it cannot be in this snapshot: a reader of keys that only grow skips their Gets.
  Result<std::optional<std::string>> LastKey(Family family, std::string_view prefix) const;

 private:
  friend class Store;
  explicit ReadTransaction(std::unique_ptr<internal::Snapshot> snapshot);

  std::unique_ptr<internal::Snapshot> snapshot_;
};

// One write transaction spanning all families; aborted on destruction unless committed. LMDB ties
// the writer lock to the thread that took it: begin, use, commit and destroy a WriteTransaction on
// one thread (checked; moving it to another thread aborts the process). After any operation fails
// with a store error the transaction is spent: every later call, and Commit, return that error
// again and nothing of it is written.
class WriteTransaction {
 public:
  WriteTransaction(WriteTransaction&& other) noexcept;
  WriteTransaction& operator=(WriteTransaction&& other) noexcept;
  WriteTransaction(const WriteTransaction&) = delete;
  WriteTransaction& operator=(const WriteTransaction&) = delete;
  ~WriteTransaction();

  // Both see this transaction's own uncommitted writes. `visit` must not write through this
  // transaction (that would move the cursor under it); writes during a Scan return Internal.
  Result<std::optional<std::string>> Get(Family family, std::string_view key) const;
  Status Scan(Family family, std::string_view prefix, const ScanVisitor& visit) const;

  // Keys are 1..511 bytes (LMDB's limit); values up to 4 GiB.
  Status Put(Family family, std::string_view key, std::string_view value);
  Status Delete(Family family, std::string_view key);           // deleting a missing key is OK
  Status DeletePrefix(Family family, std::string_view prefix);  // empty prefix: the whole family
  // Durable on return: LMDB writes and fsyncs the data file before it returns (the environment
  // never runs with MDB_NOSYNC or MDB_NOMETASYNC); a DynamoDB store's commit item is written. The
  // transaction is finished either way.
  Status Commit();

 private:
  friend class Store;
  enum class State : uint8_t { kOpen, kCommitted, kFailed };
  WriteTransaction(std::unique_ptr<internal::WriteSession> session, std::string store_name);
  Status CheckUsable(std::string_view operation, bool is_write) const;
  // `status` of a session operation: spends the transaction when the session says it is spent.
  Status Checked(Status status);
  Status Fail(Status status);

  std::unique_ptr<internal::WriteSession> session_;  // null once committed, failed or moved from
  std::string store_name_;                           // for messages
  std::thread::id owner_thread_;
  State state_ = State::kOpen;
  Status failure_;  // the error that spent the transaction, once state_ is kFailed
  mutable int scan_depth_ = 0;
};

// A handle on one store: an LMDB directory, or a pipeline's items in a DynamoDB table. Every
// Store::Open of the same directory in one process shares one LMDB environment (LMDB forbids
// opening an environment twice in a process); the environment closes when the last Store and
// transaction using it are gone. Do not use a Store, or any of its transactions, in a child after
// fork(): open the store again in the child instead.
class Store {
 public:
  // Creates the directory, the files, format_version and a new instance id when missing; upgrades
  // a format 1 store (minting its instance id); refuses a store written by a newer format
  // (NotSupported) and a directory holding some other LMDB environment (Corruption).
  static Result<std::unique_ptr<Store>> Open(const StoreOptions& options);
  // A store whose families live in another backend (a DynamoDB table: dynamodb_store.hpp).
  explicit Store(std::unique_ptr<internal::Backend> backend);

  // Many at once, from any thread.
  Result<ReadTransaction> BeginRead() const;
  // One at a time per store: a second BeginWrite from another thread (or process) waits until the
  // first transaction finishes; from the thread that already holds one it returns Internal.
  Result<WriteTransaction> BeginWrite();

  // The absolute, symlink-free path of the store directory (a DynamoDB store: its table and
  // pipeline, for messages).
  const std::string& directory() const;
  const StoreIdentity& identity() const;

  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;
  ~Store();

 private:
  std::unique_ptr<internal::Backend> backend_;
};

// ----- The store on DynamoDB ---------------------------------------------------------------------

// A store kept in a DynamoDB table instead of under DATA_DIR (docs/formats/store.md, "On
// DynamoDB"), for hosts that keep no state: the families as versioned items, a head item per
// pipeline whose conditional update commits a write transaction atomically however many keys it
// writes, snapshots pinned at a commit. A writer holds the pipeline's lease (in the head item)
// while the Store lives: taken when free, when released, or when its holder's heartbeat stood
// still for a whole lease period; renewed by a heartbeat thread; every commit is conditional on
// still holding it, so a writer that lost it commits nothing more. Readers take no lease.
struct DynamoStoreOptions {
  std::string table;         // created (pk and sk strings, on-demand) when a writer finds none
  std::string pipeline_key;  // "{tenant}#{workspace}#{pipeline}": the items' partition prefix
  aws::DynamoOptions dynamodb;
  const Environment* environment = nullptr;  // AWS settings; nullptr: the process environment
  bool takes_writer_lease = false;
  std::chrono::milliseconds lease_duration{30'000};
};

// A writer: Unavailable ("pipeline writer lease unavailable ...") while another writer's heartbeat
// advances. A reader: NotFound when the pipeline has no state in the table.
Result<std::unique_ptr<Store>> OpenDynamoStore(const DynamoStoreOptions& options);

// One writer process per pipeline: an exclusive, non-blocking flock() on the pipeline directory
// itself (opened O_RDONLY | O_DIRECTORY), so deleting or replacing anything inside it cannot let a
// second writer in. <pipeline_dir>/writer.lock (0600) holds the holder's pid for the refusal
// message, and is flocked too so that an older skipprd, which locks only that file, stays out.
// Released by the destructor or by the kernel when the process dies (including SIGKILL). flock()
// belongs to the open file, so a child forked while the lease is held holds it too until it exits
// or execs. docs/formats/store.md "Writer lease".
class WriterLease {
 public:
  // Creates pipeline_dir (0700) if missing. When another holder has the lease: Unavailable whose
  // message starts with "pipeline writer lease unavailable" and names the holder's pid, the lock
  // file and what to do. A second Acquire in the holding process is refused the same way.
  static Result<WriterLease> Acquire(const std::string& pipeline_dir,
                                     const std::string& pipeline_name, Env* env = Env::Default());

  WriterLease(WriterLease&& other) noexcept;
  WriterLease& operator=(WriterLease&& other) noexcept;
  WriterLease(const WriterLease&) = delete;
  WriterLease& operator=(const WriterLease&) = delete;
  ~WriterLease();

  const std::string& lock_path() const { return lock_path_; }

 private:
  WriterLease(int directory_fd, std::unique_ptr<FileLock> lock, std::string lock_path);
  void Release();

  int directory_fd_ = -1;           // the pipeline directory, flocked: the lease
  std::unique_ptr<FileLock> lock_;  // writer.lock (through the Env), flocked too, holding our pid
  std::string lock_path_;
};

// Order-preserving key encoding shared by every module that stores keys. Encoded keys compare
// (bytewise, as the store orders them) exactly like their component tuples. A key built from
// leading components is a Scan prefix that matches exactly the keys with those components.
//
//   Text:  each byte as is, except 0x00 -> 0x00 0xFF; then the terminator 0x00 0x01
//   U64:   8 bytes big-endian
//   Bytes: raw, and only as the last component (it has no terminator)
class KeyBuilder {
 public:
  KeyBuilder& Text(std::string_view text);
  KeyBuilder& U64(uint64_t value);
  KeyBuilder& Bytes(std::string_view raw);  // a component after Bytes aborts: it could not decode
  const std::string& key() const { return key_; }
  // Starts a new key in the same buffer (a key per row costs no allocation).
  void Clear() {
    key_.clear();
    has_bytes_ = false;
  }

 private:
  std::string key_;
  bool has_bytes_ = false;
};

// Decodes a KeyBuilder key component by component, in the order it was built. Holds a view of
// `key`: the key must outlive the reader. Malformed or truncated components are Corruption.
class KeyReader {
 public:
  explicit KeyReader(std::string_view key) : key_(key) {}

  Result<std::string> Text();
  Result<uint64_t> U64();
  std::string_view Bytes();  // the rest of the key, raw
  bool at_end() const { return offset_ == key_.size(); }
  // Corruption when bytes remain: the key has more components than the caller's layout.
  Status ExpectEnd() const;

 private:
  Status Malformed(std::string_view what) const;

  std::string_view key_;
  size_t offset_ = 0;
};

}  // namespace skippr::store
