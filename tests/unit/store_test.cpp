// store/: the Skippr Store on LMDB, the pipeline writer lease and the key encoding.
#include "store/store.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <lmdb.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <thread>
#include <tuple>
#include <vector>

#include "support/status_matchers.hpp"
#include "support/temp_dir.hpp"

namespace skippr::store {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr std::array<Family, kFamilyCount> kAllFamilies = {Family::kCatalog, Family::kStreamState,
                                                           Family::kOffsets, Family::kSchema};

using skippr::testing::TempDir;

std::unique_ptr<Store> OpenOrDie(const std::string& directory, uint64_t map_size_bytes = 0) {
  StoreOptions options;
  options.directory = directory;
  if (map_size_bytes != 0) options.map_size_bytes = map_size_bytes;
  Result<std::unique_ptr<Store>> store = Store::Open(options);
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  if (!store.ok()) std::abort();
  return std::move(store).value();
}

using skippr::testing::ExpectOk;
using skippr::testing::ValueOrDie;

template <typename Txn>
std::optional<std::string> GetOrDie(const Txn& txn, Family family, std::string_view key) {
  return ValueOrDie(txn.Get(family, key));
}

using Pairs = std::vector<std::pair<std::string, std::string>>;

template <typename Txn>
Pairs ScanAll(const Txn& txn, Family family, std::string_view prefix = "",
              size_t stop_after = std::numeric_limits<size_t>::max()) {
  Pairs seen;
  ExpectOk(txn.Scan(family, prefix, [&](std::string_view key, std::string_view value) {
    seen.emplace_back(std::string(key), std::string(value));
    return seen.size() < stop_after;
  }));
  return seen;
}

int ModeOf(const std::string& path) {
  struct stat file_stat {};
  if (::stat(path.c_str(), &file_stat) != 0) return -1;
  return static_cast<int>(file_stat.st_mode & 0777);
}

// ----- Families, Put/Get/Delete/Scan ----------------------------------------------------------

TEST(Family, NamesAreTheSubDatabaseNames) {
  EXPECT_EQ(FamilyName(Family::kCatalog), "catalog");
  EXPECT_EQ(FamilyName(Family::kStreamState), "stream_state");
  EXPECT_EQ(FamilyName(Family::kOffsets), "offsets");
  EXPECT_EQ(FamilyName(Family::kSchema), "schema");
}

TEST(Store, PutGetDeleteInEveryFamily) {
  TempDir dir;
  auto store = OpenOrDie(dir.path());
  for (Family family : kAllFamilies) {
    SCOPED_TRACE(std::string(FamilyName(family)));
    const std::string value = fmt::format("value of {}", FamilyName(family));
    {
      auto txn = ValueOrDie(store->BeginWrite());
      ExpectOk(txn.Put(family, "k1", value));
      ExpectOk(txn.Put(family, "k2", std::string("with\0zero", 9)));
      ExpectOk(txn.Put(family, "empty-value", ""));
      ExpectOk(txn.Commit());
    }
    {
      auto read = ValueOrDie(store->BeginRead());
      EXPECT_EQ(GetOrDie(read, family, "k1"), value);
      EXPECT_EQ(GetOrDie(read, family, "k2"), std::string("with\0zero", 9));
      EXPECT_EQ(GetOrDie(read, family, "empty-value"), "");
      EXPECT_EQ(GetOrDie(read, family, "missing"), std::nullopt);
    }
    {
      auto txn = ValueOrDie(store->BeginWrite());
      ExpectOk(txn.Put(family, "k1", "overwritten"));
      ExpectOk(txn.Delete(family, "k2"));
      ExpectOk(txn.Delete(family, "never-written"));  // deleting a missing key is fine
      ExpectOk(txn.Commit());
    }
    auto read = ValueOrDie(store->BeginRead());
    EXPECT_EQ(GetOrDie(read, family, "k1"), "overwritten");
    EXPECT_EQ(GetOrDie(read, family, "k2"), std::nullopt);
  }
}

TEST(Store, ScanVisitsThePrefixInByteOrderAndStopsEarly) {
  TempDir dir;
  auto store = OpenOrDie(dir.path());
  const std::vector<std::string> inserted = {
      "b/2", "a", "b/10", "b", "b/1", std::string("b\0", 2), "b/\xff", "c", "b/", "ba", "b0"};
  for (Family family : kAllFamilies) {
    SCOPED_TRACE(std::string(FamilyName(family)));
    auto txn = ValueOrDie(store->BeginWrite());
    for (const std::string& key : inserted) ExpectOk(txn.Put(family, key, "v:" + key));
    ExpectOk(txn.Commit());

    auto read = ValueOrDie(store->BeginRead());
    const Pairs expected = {{"b/", "v:b/"},
                            {"b/1", "v:b/1"},
                            {"b/10", "v:b/10"},
                            {"b/2", "v:b/2"},
                            {"b/\xff", "v:b/\xff"}};
    EXPECT_EQ(ScanAll(read, family, "b/"), expected);
    EXPECT_EQ(ScanAll(read, family, "b/", /*stop_after=*/2),
              Pairs(expected.begin(), expected.begin() + 2));
    EXPECT_TRUE(ScanAll(read, family, "zz").empty());
    EXPECT_TRUE(ScanAll(read, family, "b/3").empty());

    // The empty prefix is the whole family, in unsigned byte order.
    std::vector<std::string> sorted = inserted;
    std::sort(sorted.begin(), sorted.end());
    std::vector<std::string> scanned;
    for (const auto& [key, value] : ScanAll(read, family)) scanned.push_back(key);
    EXPECT_EQ(scanned, sorted);
  }
}

// The greatest key with a prefix, checked against a scan: prefixes ending in 0xff bytes (whose
// successor drops them), a prefix past every key, one between keys, one that is itself a key.
TEST(Store, LastKeyIsTheGreatestKeyWithThePrefix) {
  TempDir dir;
  auto store = OpenOrDie(dir.path());
  const std::vector<std::string> inserted = {"a",     "b",       "b/1",  "b/10", "b/\xff",
                                             "b/\xff\xff", "b\xff", "b\xff/", "c",    "d/1"};
  for (Family family : kAllFamilies) {
    SCOPED_TRACE(std::string(FamilyName(family)));
    auto txn = ValueOrDie(store->BeginWrite());
    for (const std::string& key : inserted) ExpectOk(txn.Put(family, key, "v"));
    ExpectOk(txn.Commit());
    auto read = ValueOrDie(store->BeginRead());
    for (const std::string prefix :
         {"a", "b", "b/", "b/1", "b/\xff", "b\xff", "c", "d", "d/", "e", "0", "\xff", "b/2"}) {
      SCOPED_TRACE(prefix);
      std::optional<std::string> expected;
      for (const auto& [key, value] : ScanAll(read, family, prefix)) expected = key;
      Result<std::optional<std::string>> last = read.LastKey(family, prefix);
      ASSERT_TRUE(last.ok()) << last.status().message();
      EXPECT_EQ(*last, expected);
    }
  }
}

TEST(Store, FamiliesAreIndependent) {
  TempDir dir;
  auto store = OpenOrDie(dir.path());
  {
    auto txn = ValueOrDie(store->BeginWrite());
    for (Family family : kAllFamilies) {
      ExpectOk(txn.Put(family, "same-key", std::string(FamilyName(family))));
    }
    ExpectOk(txn.Commit());
  }
  {
    auto txn = ValueOrDie(store->BeginWrite());
    ExpectOk(txn.Delete(Family::kOffsets, "same-key"));
    ExpectOk(txn.DeletePrefix(Family::kSchema, "same"));
    ExpectOk(txn.Commit());
  }
  auto read = ValueOrDie(store->BeginRead());
  EXPECT_EQ(GetOrDie(read, Family::kCatalog, "same-key"), "catalog");
  EXPECT_EQ(GetOrDie(read, Family::kStreamState, "same-key"), "stream_state");
  EXPECT_EQ(GetOrDie(read, Family::kOffsets, "same-key"), std::nullopt);
  EXPECT_EQ(GetOrDie(read, Family::kSchema, "same-key"), std::nullopt);
  EXPECT_EQ(ScanAll(read, Family::kCatalog).size(), 1u);
}

TEST(Store, DeletePrefixRemovesExactlyThatPrefix) {
  TempDir dir;
  auto store = OpenOrDie(dir.path());
  auto txn = ValueOrDie(store->BeginWrite());
  for (int i = 0; i < 1000; ++i) {
    ExpectOk(txn.Put(Family::kCatalog, KeyBuilder().Text("seg").U64(i).key(), "x"));
    ExpectOk(txn.Put(Family::kCatalog, KeyBuilder().Text("segment").U64(i).key(), "y"));
  }
  ExpectOk(txn.Put(Family::kCatalog, "a", "before"));
  ExpectOk(txn.Put(Family::kCatalog, "z", "after"));
  // Text("seg") ends in its terminator, so it does not match the "segment" keys.
  ExpectOk(txn.DeletePrefix(Family::kCatalog, KeyBuilder().Text("seg").key()));
  EXPECT_TRUE(ScanAll(txn, Family::kCatalog, KeyBuilder().Text("seg").key()).empty());
  EXPECT_EQ(ScanAll(txn, Family::kCatalog, KeyBuilder().Text("segment").key()).size(), 1000u);
  ExpectOk(txn.DeletePrefix(Family::kCatalog, "nothing-here"));
  ExpectOk(txn.Commit());

  auto read = ValueOrDie(store->BeginRead());
  EXPECT_EQ(ScanAll(read, Family::kCatalog).size(), 1002u);
  EXPECT_EQ(GetOrDie(read, Family::kCatalog, "a"), "before");
  EXPECT_EQ(GetOrDie(read, Family::kCatalog, "z"), "after");

  auto wipe = ValueOrDie(store->BeginWrite());
  ExpectOk(wipe.DeletePrefix(Family::kCatalog, ""));
  ExpectOk(wipe.Commit());
  EXPECT_TRUE(ScanAll(ValueOrDie(store->BeginRead()), Family::kCatalog).empty());
}

TEST(Store, WriteTransactionSeesItsOwnWrites) {
  TempDir dir;
  auto store = OpenOrDie(dir.path());
  auto txn = ValueOrDie(store->BeginWrite());
  ExpectOk(txn.Put(Family::kSchema, "ns/a", "1"));
  ExpectOk(txn.Put(Family::kSchema, "ns/b", "2"));
  EXPECT_EQ(GetOrDie(txn, Family::kSchema, "ns/a"), "1");
  ExpectOk(txn.Delete(Family::kSchema, "ns/a"));
  EXPECT_EQ(GetOrDie(txn, Family::kSchema, "ns/a"), std::nullopt);
  EXPECT_EQ(ScanAll(txn, Family::kSchema, "ns/"), (Pairs{{"ns/b", "2"}}));
  // Nothing is visible outside before Commit.
  EXPECT_EQ(GetOrDie(ValueOrDie(store->BeginRead()), Family::kSchema, "ns/b"), std::nullopt);
}

TEST(Store, WritingInsideOwnScanIsRefused) {
  TempDir dir;
  auto store = OpenOrDie(dir.path());
  auto txn = ValueOrDie(store->BeginWrite());
  ExpectOk(txn.Put(Family::kCatalog, "k", "v"));
  Status inner;
  ExpectOk(txn.Scan(Family::kCatalog, "", [&](std::string_view, std::string_view) {
    inner = txn.Put(Family::kCatalog, "k2", "v2");
    return true;
  }));
  EXPECT_EQ(inner.code(), StatusCode::kInternal);
  EXPECT_THAT(inner.message(), HasSubstr("after it returns"));
  ExpectOk(txn.Put(Family::kCatalog, "k2", "v2"));  // fine once the Scan is over
  ExpectOk(txn.Commit());
}

TEST(Store, InvalidKeysAreRefusedWithTheLimit) {
  TempDir dir;
  auto store = OpenOrDie(dir.path());
  auto txn = ValueOrDie(store->BeginWrite());
  Status empty = txn.Put(Family::kOffsets, "", "v");
  EXPECT_EQ(empty.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(empty.message(), HasSubstr("empty key"));
  Status too_long = txn.Put(Family::kOffsets, std::string(512, 'k'), "v");
  EXPECT_EQ(too_long.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(too_long.message(), HasSubstr("511"));
  EXPECT_THAT(too_long.message(), HasSubstr("offsets"));
  // Argument errors leave the transaction usable.
  ExpectOk(txn.Put(Family::kOffsets, std::string(511, 'k'), "longest"));
  ExpectOk(txn.Commit());
  EXPECT_EQ(GetOrDie(ValueOrDie(store->BeginRead()), Family::kOffsets, std::string(511, 'k')),
            "longest");
}

// ----- Transactions ---------------------------------------------------------------------------

TEST(Store, MultiFamilyCommitIsAtomic) {
  TempDir dir;
  auto store = OpenOrDie(dir.path());
  {
    auto txn = ValueOrDie(store->BeginWrite());
    ExpectOk(txn.Put(Family::kCatalog, "segment/1", "live"));
    ExpectOk(txn.Put(Family::kOffsets, "file/a.csv", "1024"));
    ExpectOk(txn.Put(Family::kSchema, "ns/rides", "v1"));
    ExpectOk(txn.Put(Family::kStreamState, "cursor", "1:0:0"));
    ExpectOk(txn.Commit());
  }
  {
    auto dropped = ValueOrDie(store->BeginWrite());
    ExpectOk(dropped.Put(Family::kCatalog, "segment/2", "live"));
    ExpectOk(dropped.Put(Family::kOffsets, "file/a.csv", "2048"));
    ExpectOk(dropped.Put(Family::kSchema, "ns/trips", "v1"));
    ExpectOk(dropped.Put(Family::kStreamState, "cursor", "2:0:0"));
    ExpectOk(dropped.Delete(Family::kCatalog, "segment/1"));
  }  // destroyed without Commit

  // Reopen so that the result is what the files hold, not what this process remembers.
  store.reset();
  store = OpenOrDie(dir.path());
  auto read = ValueOrDie(store->BeginRead());
  EXPECT_EQ(ScanAll(read, Family::kCatalog), (Pairs{{"segment/1", "live"}}));
  EXPECT_EQ(ScanAll(read, Family::kOffsets), (Pairs{{"file/a.csv", "1024"}}));
  EXPECT_EQ(ScanAll(read, Family::kSchema), (Pairs{{"ns/rides", "v1"}}));
  EXPECT_EQ(ScanAll(read, Family::kStreamState), (Pairs{{"cursor", "1:0:0"}}));
}

TEST(Store, ReaderSnapshotIsStableWhileWriterCommits) {
  TempDir dir;
  auto store = OpenOrDie(dir.path());
  {
    auto txn = ValueOrDie(store->BeginWrite());
    ExpectOk(txn.Put(Family::kCatalog, "a", "old-a"));
    ExpectOk(txn.Put(Family::kCatalog, "b", "old-b"));
    ExpectOk(txn.Put(Family::kOffsets, "pos", "10"));
    ExpectOk(txn.Commit());
  }
  auto old_reader = ValueOrDie(store->BeginRead());
  {
    auto txn = ValueOrDie(store->BeginWrite());
    ExpectOk(txn.Put(Family::kCatalog, "a", "new-a"));
    ExpectOk(txn.Delete(Family::kCatalog, "b"));
    ExpectOk(txn.Put(Family::kCatalog, "c", "new-c"));
    ExpectOk(txn.Put(Family::kOffsets, "pos", "20"));
    ExpectOk(txn.Commit());
  }
  EXPECT_EQ(ScanAll(old_reader, Family::kCatalog), (Pairs{{"a", "old-a"}, {"b", "old-b"}}));
  EXPECT_EQ(GetOrDie(old_reader, Family::kOffsets, "pos"), "10");

  auto new_reader = ValueOrDie(store->BeginRead());
  EXPECT_EQ(ScanAll(new_reader, Family::kCatalog), (Pairs{{"a", "new-a"}, {"c", "new-c"}}));
  EXPECT_EQ(GetOrDie(new_reader, Family::kOffsets, "pos"), "20");
  // Still the old snapshot after the newer reader started.
  EXPECT_EQ(GetOrDie(old_reader, Family::kCatalog, "b"), "old-b");
}

TEST(Store, ReadersOnManyThreadsSeeConsistentSnapshots) {
  TempDir dir;
  auto store = OpenOrDie(dir.path());
  constexpr int kCommits = 200;
  constexpr int kReaders = 4;
  {
    auto txn = ValueOrDie(store->BeginWrite());
    ExpectOk(txn.Put(Family::kOffsets, "left", "0"));
    ExpectOk(txn.Put(Family::kStreamState, "right", "0"));
    ExpectOk(txn.Commit());
  }
  // A snapshot begun here, read and dropped on another thread (MDB_NOTLS).
  auto handed_over = ValueOrDie(store->BeginRead());

  std::atomic<bool> is_writer_done{false};
  std::atomic<int> inconsistent_snapshots{0};
  std::atomic<int> failed_reads{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < kReaders; ++r) {
    readers.emplace_back([&] {
      // At least a few rounds even when the writer is done first.
      for (int round = 0; round < 20 || !is_writer_done.load(); ++round) {
        Result<ReadTransaction> read = store->BeginRead();
        if (!read.ok()) {
          ++failed_reads;
          return;
        }
        auto left = read->Get(Family::kOffsets, "left");
        auto right = read->Get(Family::kStreamState, "right");
        if (!left.ok() || !right.ok() || !left->has_value() || !right->has_value()) {
          ++failed_reads;
          return;
        }
        if (**left != **right) ++inconsistent_snapshots;
      }
    });
  }
  std::thread other([&] {
    auto left = handed_over.Get(Family::kOffsets, "left");
    if (!left.ok() || *left != std::optional<std::string>("0")) ++inconsistent_snapshots;
    ReadTransaction destroyed_here = std::move(handed_over);
  });
  for (int i = 1; i <= kCommits; ++i) {
    auto txn = ValueOrDie(store->BeginWrite());
    ExpectOk(txn.Put(Family::kOffsets, "left", std::to_string(i)));
    ExpectOk(txn.Put(Family::kStreamState, "right", std::to_string(i)));
    ExpectOk(txn.Commit());
  }
  is_writer_done = true;
  for (std::thread& reader : readers) reader.join();
  other.join();
  EXPECT_EQ(failed_reads.load(), 0);
  EXPECT_EQ(inconsistent_snapshots.load(), 0);
  EXPECT_EQ(GetOrDie(ValueOrDie(store->BeginRead()), Family::kOffsets, "left"),
            std::to_string(kCommits));
}

TEST(Store, WritersOnTwoThreadsAreSerialized) {
  TempDir dir;
  auto store = OpenOrDie(dir.path());
  constexpr int kIncrementsPerThread = 100;
  std::atomic<int> failures{0};
  auto increment = [&] {
    for (int i = 0; i < kIncrementsPerThread; ++i) {
      Result<WriteTransaction> txn = store->BeginWrite();  // waits for the other thread's txn
      if (!txn.ok()) {
        ++failures;
        return;
      }
      auto current = txn->Get(Family::kStreamState, "counter");
      if (!current.ok()) {
        ++failures;
        return;
      }
      const int next = current->has_value() ? std::stoi(**current) + 1 : 1;
      if (!txn->Put(Family::kStreamState, "counter", std::to_string(next)).ok() ||
          !txn->Commit().ok()) {
        ++failures;
        return;
      }
    }
  };
  std::thread first(increment);
  std::thread second(increment);
  first.join();
  second.join();
  EXPECT_EQ(failures.load(), 0);
  // A lost update would leave less than the sum.
  EXPECT_EQ(GetOrDie(ValueOrDie(store->BeginRead()), Family::kStreamState, "counter"),
            std::to_string(2 * kIncrementsPerThread));
}

TEST(Store, SecondWriteOnTheSameThreadIsRefusedNotDeadlocked) {
  TempDir dir;
  auto store = OpenOrDie(dir.path());
  auto first = ValueOrDie(store->BeginWrite());
  Result<WriteTransaction> second = store->BeginWrite();
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kInternal);
  EXPECT_THAT(second.status().message(), HasSubstr("already has a write transaction open"));
  ExpectOk(first.Commit());
  auto third = ValueOrDie(store->BeginWrite());  // fine once the first is finished
  ExpectOk(third.Commit());
}

TEST(Store, CommittedTransactionRefusesFurtherUse) {
  TempDir dir;
  auto store = OpenOrDie(dir.path());
  auto txn = ValueOrDie(store->BeginWrite());
  ExpectOk(txn.Commit());
  EXPECT_EQ(txn.Put(Family::kCatalog, "k", "v").code(), StatusCode::kInternal);
  EXPECT_EQ(txn.Commit().code(), StatusCode::kInternal);
}

TEST(Store, MapFullIsNoSpaceAndRollsTheTransactionBack) {
  TempDir dir;
  auto store = OpenOrDie(dir.path(), /*map_size_bytes=*/1 << 20);
  {
    auto txn = ValueOrDie(store->BeginWrite());
    ExpectOk(txn.Put(Family::kCatalog, "kept", "committed before the map filled"));
    ExpectOk(txn.Commit());
  }
  auto txn = ValueOrDie(store->BeginWrite());
  const std::string value(64 * 1024, 'v');
  Status put;
  int written = 0;
  for (; written < 1000 && put.ok(); ++written) {
    put = txn.Put(Family::kCatalog, KeyBuilder().U64(written).key(), value);
  }
  ASSERT_FALSE(put.ok()) << "1000 x 64 KiB fit in a 1 MiB map";
  EXPECT_EQ(put.code(), StatusCode::kNoSpace);
  EXPECT_THAT(put.message(), HasSubstr("map size of 1.0 MiB"));
  EXPECT_THAT(put.message(), HasSubstr(store->directory()));
  EXPECT_THAT(put.message(), HasSubstr("catalog"));
  Status commit = txn.Commit();
  EXPECT_EQ(commit.code(), StatusCode::kNoSpace);
  EXPECT_THAT(commit.message(), HasSubstr("rolled back"));

  // The writer lock was released and nothing of the failed transaction is visible.
  auto next = ValueOrDie(store->BeginWrite());
  ExpectOk(next.Put(Family::kCatalog, "after", "ok"));
  ExpectOk(next.Commit());
  auto read = ValueOrDie(store->BeginRead());
  EXPECT_EQ(ScanAll(read, Family::kCatalog),
            (Pairs{{"after", "ok"}, {"kept", "committed before the map filled"}}));
}

TEST(Store, SecondOpenOfTheSameDirectorySharesTheEnvironment) {
  TempDir dir;
  auto first = OpenOrDie(dir.path());
  auto second = OpenOrDie(dir.path() + "/./");  // another spelling of the same directory
  EXPECT_EQ(first->directory(), second->directory());
  {
    auto txn = ValueOrDie(first->BeginWrite());
    ExpectOk(txn.Put(Family::kCatalog, "k", "from first"));
    ExpectOk(txn.Commit());
  }
  // One environment, so one writer lock: the second store's writer sees the first's as its own
  // thread's and refuses instead of deadlocking.
  auto held = ValueOrDie(first->BeginWrite());
  EXPECT_EQ(second->BeginWrite().status().code(), StatusCode::kInternal);
  ExpectOk(held.Commit());

  auto reader_of_first = ValueOrDie(first->BeginRead());
  first.reset();  // the environment stays open for the second store and the reader
  EXPECT_EQ(GetOrDie(reader_of_first, Family::kCatalog, "k"), "from first");
  auto txn = ValueOrDie(second->BeginWrite());
  ExpectOk(txn.Put(Family::kCatalog, "k", "from second"));
  ExpectOk(txn.Commit());
  EXPECT_EQ(GetOrDie(ValueOrDie(second->BeginRead()), Family::kCatalog, "k"), "from second");
}

// The file system, counting the directory fsyncs asked of it.
class SyncCountingEnv final : public Env {
 public:
  int directory_syncs = 0;
  Result<std::unique_ptr<WritableFile>> OpenWritable(const std::string& path,
                                                     const WritableFileOptions& options) override {
    return base_->OpenWritable(path, options);
  }
  Result<std::unique_ptr<SequentialFile>> OpenSequential(const std::string& path) override {
    return base_->OpenSequential(path);
  }
  Result<std::unique_ptr<RandomAccessFile>> OpenRandomAccess(const std::string& path) override {
    return base_->OpenRandomAccess(path);
  }
  Result<uint64_t> FileSize(const std::string& path) override { return base_->FileSize(path); }
  Result<bool> FileExists(const std::string& path) override { return base_->FileExists(path); }
  Result<std::vector<std::string>> ListDirectory(const std::string& directory) override {
    return base_->ListDirectory(directory);
  }
  Result<bool> CreateDirectory(const std::string& path, uint32_t permissions) override {
    return base_->CreateDirectory(path, permissions);
  }
  Status RenameFile(const std::string& from, const std::string& to) override {
    return base_->RenameFile(from, to);
  }
  Status RenameFileNoReplace(const std::string& from, const std::string& to) override {
    return base_->RenameFileNoReplace(from, to);
  }
  Status RemoveFile(const std::string& path) override { return base_->RemoveFile(path); }
  Status SyncDirectory(const std::string& directory) override {
    ++directory_syncs;
    return base_->SyncDirectory(directory);
  }
  Status SyncFile(const std::string& path) override { return base_->SyncFile(path); }
  Result<std::unique_ptr<FileLock>> LockFile(const std::string& path,
                                             uint32_t permissions) override {
    return base_->LockFile(path, permissions);
  }

 private:
  Env* base_ = Env::Default();
};

// A reader makes nothing durable and skips the directory fsync; a writer opening the environment
// a reader opened first in the process still gets it, once.
TEST(Store, OnlyAWritersOpenSyncsTheDirectory) {
  TempDir dir;
  SyncCountingEnv env;
  auto created = ValueOrDie(Store::Open({.directory = dir.path(), .env = &env}));
  EXPECT_EQ(env.directory_syncs, 1);
  created.reset();
  env.directory_syncs = 0;
  auto reader =
      ValueOrDie(Store::Open({.directory = dir.path(), .env = &env, .syncs_directory = false}));
  EXPECT_EQ(env.directory_syncs, 0);
  auto writer = ValueOrDie(Store::Open({.directory = dir.path(), .env = &env}));
  EXPECT_EQ(env.directory_syncs, 1);
  auto second_writer = ValueOrDie(Store::Open({.directory = dir.path(), .env = &env}));
  EXPECT_EQ(env.directory_syncs, 1);
}

TEST(Store, TransactionsOutliveTheirStore) {
  TempDir dir;
  auto store = OpenOrDie(dir.path());
  auto txn = ValueOrDie(store->BeginWrite());
  store.reset();
  ExpectOk(txn.Put(Family::kSchema, "k", "v"));
  ExpectOk(txn.Commit());
  auto reopened = OpenOrDie(dir.path());
  EXPECT_EQ(GetOrDie(ValueOrDie(reopened->BeginRead()), Family::kSchema, "k"), "v");
}

// ----- Files and format -----------------------------------------------------------------------

class UmaskZero {
 public:
  UmaskZero() : previous_(::umask(0)) {}
  ~UmaskZero() { ::umask(previous_); }

 private:
  mode_t previous_;
};

TEST(Store, FilesAre0600AndDirectories0700EvenWithAPermissiveUmask) {
  TempDir dir;
  const std::string pipeline_dir = dir.Sub("pipelines/rides");
  const std::string store_dir = pipeline_dir + "/store";
  {
    UmaskZero umask_zero;
    auto store = OpenOrDie(store_dir);
    auto txn = ValueOrDie(store->BeginWrite());
    ExpectOk(txn.Put(Family::kCatalog, "k", "v"));
    ExpectOk(txn.Commit());
    auto lease = ValueOrDie(WriterLease::Acquire(pipeline_dir, "rides"));
    EXPECT_EQ(ModeOf(pipeline_dir + "/writer.lock"), 0600);
  }
  EXPECT_EQ(ModeOf(store_dir), 0700);
  EXPECT_EQ(ModeOf(pipeline_dir), 0700);
  EXPECT_EQ(ModeOf(dir.Sub("pipelines")), 0700);
  EXPECT_EQ(ModeOf(store_dir + "/data.mdb"), 0600);
  EXPECT_EQ(ModeOf(store_dir + "/lock.mdb"), 0600);
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(store_dir)) {
    names.insert(entry.path().filename().string());
  }
  EXPECT_EQ(names, (std::set<std::string>{"data.mdb", "lock.mdb"}));
}

TEST(Store, OpenRefusesAFileInPlaceOfTheDirectory) {
  TempDir dir;
  std::ofstream(dir.Sub("not-a-dir")) << "x";
  StoreOptions options;
  options.directory = dir.Sub("not-a-dir");
  Result<std::unique_ptr<Store>> store = Store::Open(options);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kIOError);
  EXPECT_THAT(store.status().message(), HasSubstr("not-a-dir"));
  EXPECT_THAT(store.status().message(), HasSubstr("not a directory"));
}

// Plain LMDB on the store's files, as a reader written from docs/formats/store.md would use it.
// The store must not be open in this process meanwhile.
class RawEnvironment {
 public:
  explicit RawEnvironment(const std::string& directory) {
    if (mdb_env_create(&env_) != 0 || mdb_env_set_maxdbs(env_, 16) != 0 ||
        mdb_env_open(env_, directory.c_str(), 0, 0600) != 0) {
      std::abort();
    }
  }
  ~RawEnvironment() { mdb_env_close(env_); }

  std::vector<std::string> MainKeys() {
    std::vector<std::string> keys;
    MDB_txn* txn = Begin(MDB_RDONLY);
    MDB_dbi main_dbi;
    Check(mdb_dbi_open(txn, nullptr, 0, &main_dbi));
    MDB_cursor* cursor;
    Check(mdb_cursor_open(txn, main_dbi, &cursor));
    MDB_val key, value;
    for (int rc = mdb_cursor_get(cursor, &key, &value, MDB_FIRST); rc == 0;
         rc = mdb_cursor_get(cursor, &key, &value, MDB_NEXT)) {
      keys.emplace_back(static_cast<const char*>(key.mv_data), key.mv_size);
    }
    mdb_cursor_close(cursor);
    mdb_txn_abort(txn);
    return keys;
  }

  std::optional<std::string> Get(const char* db, std::string_view key_text) {
    MDB_txn* txn = Begin(MDB_RDONLY);
    MDB_dbi dbi;
    Check(mdb_dbi_open(txn, db, 0, &dbi));
    MDB_val key{key_text.size(), const_cast<char*>(key_text.data())}, value;
    std::optional<std::string> result;
    if (mdb_get(txn, dbi, &key, &value) == 0) {
      result.emplace(static_cast<const char*>(value.mv_data), value.mv_size);
    }
    mdb_txn_abort(txn);
    return result;
  }

  void Delete(const char* db, std::string_view key_text) {
    MDB_txn* txn = Begin(0);
    MDB_dbi dbi;
    Check(mdb_dbi_open(txn, db, 0, &dbi));
    MDB_val key{key_text.size(), const_cast<char*>(key_text.data())};
    const int rc = mdb_del(txn, dbi, &key, nullptr);
    if (rc != MDB_NOTFOUND) Check(rc);
    Check(mdb_txn_commit(txn));
  }

  void Put(const char* db, std::string_view key_text, std::string_view value_text) {
    MDB_txn* txn = Begin(0);
    MDB_dbi dbi;
    Check(mdb_dbi_open(txn, db, MDB_CREATE, &dbi));
    MDB_val key{key_text.size(), const_cast<char*>(key_text.data())};
    MDB_val value{value_text.size(), const_cast<char*>(value_text.data())};
    Check(mdb_put(txn, dbi, &key, &value, 0));
    Check(mdb_txn_commit(txn));
  }

 private:
  static void Check(int rc) {
    if (rc != 0) {
      ADD_FAILURE() << mdb_strerror(rc);
      std::abort();
    }
  }
  MDB_txn* Begin(unsigned int flags) {
    MDB_txn* txn = nullptr;
    Check(mdb_txn_begin(env_, nullptr, flags, &txn));
    return txn;
  }
  MDB_env* env_ = nullptr;
};

TEST(StoreFormat, OnDiskLayoutMatchesTheFormatDocument) {
  TempDir dir;
  {
    auto store = OpenOrDie(dir.path());
    auto txn = ValueOrDie(store->BeginWrite());
    ExpectOk(txn.Put(Family::kSchema, KeyBuilder().Text("rides").U64(7).key(), "schema v7"));
    ExpectOk(txn.Commit());
  }  // closed: the raw environment may open it now
  RawEnvironment raw(dir.path());
  EXPECT_EQ(raw.MainKeys(),
            (std::vector<std::string>{"catalog", "meta", "offsets", "schema", "stream_state"}));
  EXPECT_EQ(raw.Get("meta", "format_version"), "2");
  EXPECT_EQ(raw.Get("meta", "instance_origin"), "created");
  const std::optional<std::string> instance_id = raw.Get("meta", "instance_id");
  ASSERT_TRUE(instance_id.has_value());
  EXPECT_THAT(*instance_id, ::testing::MatchesRegex("[0-9a-f]{32}"));
  EXPECT_EQ(raw.Get("schema", std::string("rides\0\x01\0\0\0\0\0\0\0\x07", 15)), "schema v7");
}

// The instance id is minted once, with the store, and read back by every later open; another store
// (a wiped directory) gets another one.
TEST(StoreIdentity, MintedWithTheStoreAndKeptForItsLife) {
  TempDir dir;
  std::string first;
  {
    auto store = OpenOrDie(dir.path());
    first = store->identity().instance_id;
    EXPECT_THAT(first, ::testing::MatchesRegex("[0-9a-f]{32}"));
    EXPECT_FALSE(store->identity().predates_instance_ids);
  }
  EXPECT_EQ(OpenOrDie(dir.path())->identity().instance_id, first);
  fs::remove_all(dir.path());
  EXPECT_NE(OpenOrDie(dir.path())->identity().instance_id, first);
}

// A format 1 store (written before instance ids) gets one at its first open, is marked as older
// than instance ids, and is format 2 from then on; its data stays as it was.
TEST(StoreIdentity, AFormat1StoreIsUpgradedWithANewInstanceId) {
  TempDir dir;
  {
    auto store = OpenOrDie(dir.path());
    auto txn = ValueOrDie(store->BeginWrite());
    ExpectOk(txn.Put(Family::kOffsets, "kept", "as it was"));
    ExpectOk(txn.Commit());
  }
  {
    RawEnvironment raw(dir.path());
    raw.Put("meta", "format_version", "1");
    raw.Delete("meta", "instance_id");
    raw.Delete("meta", "instance_origin");
  }
  std::string minted;
  {
    auto store = OpenOrDie(dir.path());
    minted = store->identity().instance_id;
    EXPECT_THAT(minted, ::testing::MatchesRegex("[0-9a-f]{32}"));
    EXPECT_TRUE(store->identity().predates_instance_ids);
    auto read = ValueOrDie(store->BeginRead());
    EXPECT_EQ(ValueOrDie(read.Get(Family::kOffsets, "kept")), "as it was");
  }
  RawEnvironment raw(dir.path());
  EXPECT_EQ(raw.Get("meta", "format_version"), "2");
  EXPECT_EQ(raw.Get("meta", "instance_id"), minted);
  EXPECT_EQ(raw.Get("meta", "instance_origin"), "upgraded");
}

TEST(StoreIdentity, AFormat2StoreWithoutItsInstanceIdIsCorruption) {
  TempDir dir;
  OpenOrDie(dir.path()).reset();
  RawEnvironment(dir.path()).Delete("meta", "instance_id");
  StoreOptions options;
  options.directory = dir.path();
  Result<std::unique_ptr<Store>> store = Store::Open(options);
  ASSERT_EQ(store.status().code(), StatusCode::kCorruption);
  EXPECT_THAT(store.status().message(), HasSubstr("no meta/instance_id"));
  RawEnvironment(dir.path()).Put("meta", "instance_id", "not hex");
  store = Store::Open(options);
  ASSERT_EQ(store.status().code(), StatusCode::kCorruption);
  EXPECT_THAT(store.status().message(), HasSubstr("not 32 lowercase hex digits"));
}

TEST(StoreFormat, NewerFormatVersionIsNotSupportedAndLeftUntouched) {
  TempDir dir;
  OpenOrDie(dir.path()).reset();
  RawEnvironment(dir.path()).Put("meta", "format_version", "999");

  StoreOptions options;
  options.directory = dir.path();
  Result<std::unique_ptr<Store>> store = Store::Open(options);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kNotSupported);
  EXPECT_THAT(store.status().message(), HasSubstr("format version 999"));
  EXPECT_THAT(store.status().message(), HasSubstr("format version 2 at most"));
  EXPECT_THAT(store.status().message(), HasSubstr(fs::canonical(dir.path()).string()));
  EXPECT_THAT(store.status().message(), HasSubstr("upgrade skipprd"));
  EXPECT_EQ(RawEnvironment(dir.path()).Get("meta", "format_version"), "999");
}

TEST(StoreFormat, UnreadableFormatVersionIsCorruption) {
  TempDir dir;
  OpenOrDie(dir.path()).reset();
  RawEnvironment(dir.path()).Put("meta", "format_version", "one");
  StoreOptions options;
  options.directory = dir.path();
  Result<std::unique_ptr<Store>> store = Store::Open(options);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kCorruption);
  EXPECT_THAT(store.status().message(), HasSubstr("'one'"));
}

TEST(StoreFormat, ForeignLmdbEnvironmentIsRefused) {
  TempDir dir;
  RawEnvironment(dir.path()).Put(nullptr, "someone else's", "data");
  StoreOptions options;
  options.directory = dir.path();
  Result<std::unique_ptr<Store>> store = Store::Open(options);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kCorruption);
  EXPECT_THAT(store.status().message(), HasSubstr("not a Skippr Store"));
}

// ----- Crash safety ---------------------------------------------------------------------------
//
// A child process commits transactions 1..k from a deterministic model; the parent, which never
// has the store open while forking, reopens it after the child was SIGKILLed and compares every
// family with the model after exactly the transaction named by the stored counter.

using FamilyContents = std::array<std::map<std::string, std::string>, kFamilyCount>;
constexpr int kSharedKeys = 8;

std::string ModelValue(uint64_t txn_number, uint64_t index, Family family) {
  // ~100 bytes, so that transactions span pages and split them.
  return fmt::format("txn {} key {} family {} {:->70}", txn_number, index, FamilyName(family), "");
}

// Transaction t: the counter, shared keys overwritten, keys_per_txn new keys in every family, and
// the stream_state keys of transaction t-2 deleted.
Status WriteModelTransaction(WriteTransaction& txn, uint64_t txn_number, int keys_per_txn) {
  SKIPPR_RETURN_IF_ERROR(txn.Put(Family::kOffsets, "counter", std::to_string(txn_number)));
  for (int j = 0; j < kSharedKeys; ++j) {
    SKIPPR_RETURN_IF_ERROR(txn.Put(Family::kCatalog, KeyBuilder().Text("shared").U64(j).key(),
                                   std::to_string(txn_number)));
  }
  for (Family family : kAllFamilies) {
    for (int i = 0; i < keys_per_txn; ++i) {
      SKIPPR_RETURN_IF_ERROR(txn.Put(family, KeyBuilder().U64(txn_number).U64(i).key(),
                                     ModelValue(txn_number, i, family)));
    }
  }
  if (txn_number > 2) {
    SKIPPR_RETURN_IF_ERROR(
        txn.DeletePrefix(Family::kStreamState, KeyBuilder().U64(txn_number - 2).key()));
  }
  return Status::OK();
}

FamilyContents ModelAfter(uint64_t last_txn, int keys_per_txn) {
  FamilyContents model;
  auto& offsets = model[static_cast<size_t>(Family::kOffsets)];
  auto& catalog = model[static_cast<size_t>(Family::kCatalog)];
  if (last_txn == 0) return model;
  offsets["counter"] = std::to_string(last_txn);
  for (int j = 0; j < kSharedKeys; ++j) {
    catalog[KeyBuilder().Text("shared").U64(j).key()] = std::to_string(last_txn);
  }
  for (uint64_t t = 1; t <= last_txn; ++t) {
    for (Family family : kAllFamilies) {
      if (family == Family::kStreamState && t + 2 <= last_txn) continue;  // deleted by t+2
      for (int i = 0; i < keys_per_txn; ++i) {
        model[static_cast<size_t>(family)][KeyBuilder().U64(t).U64(i).key()] =
            ModelValue(t, i, family);
      }
    }
  }
  return model;
}

FamilyContents ReadEverything(const Store& store) {
  FamilyContents contents;
  auto read = ValueOrDie(store.BeginRead());
  for (Family family : kAllFamilies) {
    for (auto& [key, value] : ScanAll(read, family)) {
      contents[static_cast<size_t>(family)][key] = value;
    }
  }
  return contents;
}

// "" when equal, else the first difference, readable (the maps are large).
std::string FirstDifference(const FamilyContents& actual, const FamilyContents& expected) {
  for (Family family : kAllFamilies) {
    const auto& have = actual[static_cast<size_t>(family)];
    const auto& want = expected[static_cast<size_t>(family)];
    for (const auto& [key, value] : want) {
      auto found = have.find(key);
      if (found == have.end())
        return fmt::format("{}: missing a key of {} bytes", FamilyName(family), key.size());
      if (found->second != value) {
        return fmt::format("{}: value '{}' instead of '{}'", FamilyName(family), found->second,
                           value);
      }
    }
    for (const auto& [key, value] : have) {
      if (!want.contains(key))
        return fmt::format("{}: unexpected key with value '{}'", FamilyName(family), value);
    }
  }
  return "";
}

// Reopens the store after the child died and checks that it holds exactly the state after one
// committed transaction; returns that transaction's number. Then proves the store is writable.
uint64_t ExpectOneCommittedState(const std::string& directory, int keys_per_txn) {
  auto store = OpenOrDie(directory);
  auto read = ValueOrDie(store->BeginRead());
  const std::optional<std::string> counter = GetOrDie(read, Family::kOffsets, "counter");
  const uint64_t last_txn = counter ? std::stoull(*counter) : 0;
  EXPECT_EQ(FirstDifference(ReadEverything(*store), ModelAfter(last_txn, keys_per_txn)), "")
      << "after transaction " << last_txn;

  // The dead child may have held LMDB's writer lock; the next writer must not be stuck on it.
  auto txn = ValueOrDie(store->BeginWrite());
  ExpectOk(WriteModelTransaction(txn, last_txn + 1, keys_per_txn));
  ExpectOk(txn.Commit());
  EXPECT_EQ(FirstDifference(ReadEverything(*store), ModelAfter(last_txn + 1, keys_per_txn)), "");
  return last_txn;
}

// The child side: never returns into GoogleTest.
[[noreturn]] void ChildFail(const Status& status) {
  std::fprintf(stderr, "crash-test child failed: %s\n", status.ToString().c_str());
  std::_Exit(3);
}

TEST(StoreCrash, SigkillBeforeCommitLeavesTheLastCommittedState) {
  TempDir dir;
  const std::string store_dir = dir.Sub("store");  // opened only in the child until it is reaped
  constexpr int kCommittedTxns = 25;
  constexpr int kKeysPerTxn = 40;
  constexpr int kKeysInKilledTxn = 20000;  // ~8 MiB across the families: far beyond one page

  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    StoreOptions options;
    options.directory = store_dir;
    Result<std::unique_ptr<Store>> store = Store::Open(options);
    if (!store.ok()) ChildFail(store.status());
    for (uint64_t t = 1; t <= kCommittedTxns; ++t) {
      Result<WriteTransaction> txn = (*store)->BeginWrite();
      if (!txn.ok()) ChildFail(txn.status());
      Status status = WriteModelTransaction(*txn, t, kKeysPerTxn);
      if (status.ok()) status = txn->Commit();
      if (!status.ok()) ChildFail(status);
    }
    Result<WriteTransaction> txn = (*store)->BeginWrite();
    if (!txn.ok()) ChildFail(txn.status());
    Status status = WriteModelTransaction(*txn, kCommittedTxns + 1, kKeysInKilledTxn);
    if (!status.ok()) ChildFail(status);
    ::raise(SIGKILL);
    std::_Exit(4);
  }
  int wait_status = 0;
  ASSERT_EQ(::waitpid(child, &wait_status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(wait_status)) << "the child exited with " << WEXITSTATUS(wait_status);
  ASSERT_EQ(WTERMSIG(wait_status), SIGKILL);

  EXPECT_EQ(ExpectOneCommittedState(store_dir, kKeysPerTxn), uint64_t{kCommittedTxns});
}

TEST(StoreCrash, SigkillAtARandomMomentLeavesOneCommittedState) {
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE(fmt::format("seed {}", seed));
  std::mt19937 random(seed);
  constexpr int kRounds = 4;
  constexpr uint64_t kMaxTxns = 1'000'000;  // the child runs until it is killed

  for (int round = 0; round < kRounds; ++round) {
    const int keys_per_txn = std::uniform_int_distribution<int>(1, 400)(random);
    const int commits_before_kill = std::uniform_int_distribution<int>(1, 60)(random);
    SCOPED_TRACE(fmt::format("round {}: {} keys per family per txn, kill after {} commits", round,
                             keys_per_txn, commits_before_kill));
    TempDir dir;
    const std::string store_dir = dir.Sub("store");
    int progress[2];
    ASSERT_EQ(::pipe(progress), 0);

    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      ::close(progress[0]);
      // Never block on a full pipe: the kill must land while the child works on the store.
      ::fcntl(progress[1], F_SETFL, O_NONBLOCK);
      StoreOptions options;
      options.directory = store_dir;
      Result<std::unique_ptr<Store>> store = Store::Open(options);
      if (!store.ok()) ChildFail(store.status());
      for (uint64_t t = 1; t <= kMaxTxns; ++t) {
        Result<WriteTransaction> txn = (*store)->BeginWrite();
        if (!txn.ok()) ChildFail(txn.status());
        Status status = WriteModelTransaction(*txn, t, keys_per_txn);
        if (status.ok()) status = txn->Commit();
        if (!status.ok()) ChildFail(status);
        if (::write(progress[1], "c", 1) < 0) {
        }
      }
      std::_Exit(0);
    }
    ::close(progress[1]);
    // Wait for a random number of reported commits (an order, not a time), then kill.
    int commits_seen = 0;
    char byte;
    while (commits_seen < commits_before_kill && ::read(progress[0], &byte, 1) == 1) {
      ++commits_seen;
    }
    ::kill(child, SIGKILL);
    int wait_status = 0;
    ASSERT_EQ(::waitpid(child, &wait_status, 0), child);
    ::close(progress[0]);
    ASSERT_TRUE(WIFSIGNALED(wait_status)) << "the child exited with " << WEXITSTATUS(wait_status);

    const uint64_t last_txn = ExpectOneCommittedState(store_dir, keys_per_txn);
    // Every commit the child reported had returned, so it is durable.
    EXPECT_GE(last_txn, static_cast<uint64_t>(commits_before_kill));
  }
}

// ----- WriterLease ----------------------------------------------------------------------------

TEST(WriterLease, SecondAcquireInTheSameProcessIsUnavailable) {
  TempDir dir;
  auto lease = ValueOrDie(WriterLease::Acquire(dir.path(), "rides"));
  EXPECT_EQ(lease.lock_path(), dir.path() + "/writer.lock");

  Result<WriterLease> second = WriterLease::Acquire(dir.path(), "rides");
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(second.status().message(), StartsWith("pipeline writer lease unavailable"));
  EXPECT_THAT(second.status().message(),
              HasSubstr(fmt::format("pid {} (this process)", ::getpid())));
  EXPECT_THAT(second.status().message(), HasSubstr(dir.path()));
  EXPECT_THAT(second.status().message(), HasSubstr("'rides'"));

  // A moved lease is still held; releasing it lets the next writer in.
  WriterLease moved = std::move(lease);
  EXPECT_FALSE(WriterLease::Acquire(dir.path(), "rides").ok());
  { WriterLease released = std::move(moved); }
  auto again = ValueOrDie(WriterLease::Acquire(dir.path(), "rides"));
  std::ifstream lock_file(dir.path() + "/writer.lock");
  std::string recorded_pid;
  lock_file >> recorded_pid;
  EXPECT_EQ(recorded_pid, std::to_string(::getpid()));
}

TEST(WriterLease, ChildHoldsTheLeaseUntilItIsKilled) {
  TempDir dir;
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(ready[0]);
    Result<WriterLease> lease = WriterLease::Acquire(dir.path(), "rides");
    if (!lease.ok()) ChildFail(lease.status());
    if (::write(ready[1], "r", 1) != 1) std::_Exit(5);
    while (true) ::pause();  // holds the lease until SIGKILL
  }
  ::close(ready[1]);
  char byte;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1) << "the child could not take the lease";
  ::close(ready[0]);

  Result<WriterLease> refused = WriterLease::Acquire(dir.path(), "rides");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(refused.status().message(), StartsWith("pipeline writer lease unavailable"));
  EXPECT_THAT(refused.status().message(), HasSubstr(fmt::format("pid {}", child)));
  EXPECT_THAT(refused.status().message(), HasSubstr(fmt::format("kill {}", child)));

  ASSERT_EQ(::kill(child, SIGKILL), 0);
  int wait_status = 0;
  ASSERT_EQ(::waitpid(child, &wait_status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(wait_status));

  auto lease = ValueOrDie(WriterLease::Acquire(dir.path(), "rides"));
  std::ifstream lock_file(lease.lock_path());
  std::string recorded_pid;
  lock_file >> recorded_pid;
  EXPECT_EQ(recorded_pid, std::to_string(::getpid()));
}

// flock() on a deleted file protects nothing: the next process would create a new writer.lock and
// lock that. The lease is the pipeline directory, so deleting or replacing the file changes nothing.
TEST(WriterLease, DeletingOrReplacingWriterLockDoesNotLetASecondWriterIn) {
  TempDir dir;
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(ready[0]);
    Result<WriterLease> lease = WriterLease::Acquire(dir.path(), "rides");
    if (!lease.ok()) ChildFail(lease.status());
    if (::write(ready[1], "r", 1) != 1) std::_Exit(5);
    while (true) ::pause();  // holds the lease until SIGKILL
  }
  // A failed assertion below returns early: the child must not outlive the test.
  struct KillOnExit {
    pid_t pid;
    ~KillOnExit() {
      if (pid > 0 && ::kill(pid, SIGKILL) == 0) ::waitpid(pid, nullptr, 0);
    }
  } holder{child};
  ::close(ready[1]);
  char byte;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1) << "the child could not take the lease";
  ::close(ready[0]);
  const std::string lock_path = dir.path() + "/writer.lock";

  ASSERT_EQ(::unlink(lock_path.c_str()), 0);
  Result<WriterLease> after_delete = WriterLease::Acquire(dir.path(), "rides");
  ASSERT_FALSE(after_delete.ok()) << "a second writer got in after writer.lock was deleted";
  EXPECT_EQ(after_delete.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(after_delete.status().message(), StartsWith("pipeline writer lease unavailable"));

  {
    std::ofstream replacement(dir.path() + "/writer.lock.new");
    replacement << "1\n";
  }
  ASSERT_EQ(::rename((dir.path() + "/writer.lock.new").c_str(), lock_path.c_str()), 0);
  Result<WriterLease> after_replace = WriterLease::Acquire(dir.path(), "rides");
  ASSERT_FALSE(after_replace.ok()) << "a second writer got in after writer.lock was replaced";
  EXPECT_EQ(after_replace.status().code(), StatusCode::kUnavailable);

  ASSERT_EQ(::kill(child, SIGKILL), 0);
  int wait_status = 0;
  ASSERT_EQ(::waitpid(child, &wait_status, 0), child);
  holder.pid = -1;
  auto lease = ValueOrDie(WriterLease::Acquire(dir.path(), "rides"));
  std::ifstream lock_file(lease.lock_path());
  std::string recorded_pid;
  lock_file >> recorded_pid;
  EXPECT_EQ(recorded_pid, std::to_string(::getpid()));
}

// A symbolic link in place of writer.lock is not followed (it could point at any file of the user).
TEST(WriterLease, SymlinkInPlaceOfWriterLockIsRefused) {
  TempDir dir;
  const std::string target = dir.path() + "/precious.txt";
  { std::ofstream(target) << "keep me\n"; }
  ASSERT_EQ(::mkdir((dir.path() + "/p").c_str(), 0700), 0);
  ASSERT_EQ(::symlink(target.c_str(), (dir.path() + "/p/writer.lock").c_str()), 0);
  Result<WriterLease> lease = WriterLease::Acquire(dir.path() + "/p", "rides");
  ASSERT_FALSE(lease.ok());
  EXPECT_EQ(lease.status().code(), StatusCode::kIOError);
  EXPECT_THAT(lease.status().message(), HasSubstr("not a symbolic link"));
  std::ifstream kept(target);
  std::string text;
  std::getline(kept, text);
  EXPECT_EQ(text, "keep me");
}

// ----- Key encoding ---------------------------------------------------------------------------

TEST(KeyBuilder, EncodesTheDocumentedBytes) {
  EXPECT_EQ(KeyBuilder().Text("ab").key(), std::string("ab\0\x01", 4));
  EXPECT_EQ(KeyBuilder().Text("").key(), std::string("\0\x01", 2));
  EXPECT_EQ(KeyBuilder().Text(std::string("a\0b", 3)).key(), std::string("a\0\xff"
                                                                         "b\0\x01",
                                                                         6));
  EXPECT_EQ(KeyBuilder().U64(0x0102030405060708).key(), "\x01\x02\x03\x04\x05\x06\x07\x08");
  EXPECT_EQ(KeyBuilder().Text("ns").U64(1).Bytes(std::string("r\0", 2)).key(),
            std::string("ns\0\x01\0\0\0\0\0\0\0\x01r\0", 14));
  // A cleared builder (one per chunk of rows) builds the next key as a new one would.
  KeyBuilder reused;
  reused.Text(std::string("a\0b", 3)).Bytes("raw");
  reused.Clear();
  EXPECT_EQ(reused.U64(7).Bytes("r").key(), KeyBuilder().U64(7).Bytes("r").key());
}

TEST(KeyBuilder, EncodedKeysSortLikeTheirComponentTuples) {
  const std::vector<std::string> texts = {"",
                                          std::string("\0", 1),
                                          std::string("\0\0", 2),
                                          std::string("\0\x01", 2),
                                          std::string("\0\xff", 2),
                                          "\x01",
                                          "a",
                                          std::string("a\0", 2),
                                          std::string("a\0b", 3),
                                          std::string("a\0\x01", 3),
                                          "a\x01",
                                          "a\xff",
                                          "ab",
                                          "b",
                                          "\xff",
                                          "\xff\xff"};
  const std::vector<uint64_t> numbers = {
      0, 1, 0xFF, 0x100, 0xFFFF, 0x10000, 0xFFFFFFFF, 0x100000000, 1ull << 63, ~0ull - 1, ~0ull};
  using TextNumber = std::tuple<std::string, uint64_t>;
  using TextText = std::tuple<std::string, std::string>;
  std::vector<std::pair<TextNumber, std::string>> text_numbers;
  std::vector<std::pair<TextText, std::string>> text_texts;
  for (const std::string& text : texts) {
    for (uint64_t number : numbers) {
      text_numbers.push_back({{text, number}, KeyBuilder().Text(text).U64(number).key()});
    }
    for (const std::string& second : texts) {
      text_texts.push_back({{text, second}, KeyBuilder().Text(text).Text(second).key()});
    }
  }
  // std::string compares bytes as unsigned char, like LMDB.
  auto expect_same_order = [](const auto& items) {
    for (const auto& [tuple_a, key_a] : items) {
      for (const auto& [tuple_b, key_b] : items) {
        ASSERT_EQ(tuple_a < tuple_b, key_a < key_b)
            << ::testing::PrintToString(tuple_a) << " vs " << ::testing::PrintToString(tuple_b);
        ASSERT_EQ(tuple_a == tuple_b, key_a == key_b);
      }
    }
  };
  expect_same_order(text_numbers);
  expect_same_order(text_texts);
  // Leading components are a Scan prefix of exactly the keys that start with them.
  EXPECT_TRUE(KeyBuilder().Text("a").U64(5).key().starts_with(KeyBuilder().Text("a").key()));
  EXPECT_FALSE(KeyBuilder().Text("ab").U64(5).key().starts_with(KeyBuilder().Text("a").key()));
  EXPECT_FALSE(
      KeyBuilder().Text(std::string("a\0b", 3)).key().starts_with(KeyBuilder().Text("a").key()));
}

TEST(KeyReader, RoundTripsEveryComponent) {
  const std::string tricky_text("\0a\0\0\xff\x01", 6);
  const std::string key = KeyBuilder()
                              .Text("pipeline")
                              .U64(0)
                              .Text(tricky_text)
                              .U64(~0ull)
                              .Text("")
                              .U64(0x100)
                              .Bytes(std::string("\0\x01raw", 5))
                              .key();
  KeyReader reader(key);
  EXPECT_EQ(ValueOrDie(reader.Text()), "pipeline");
  EXPECT_EQ(ValueOrDie(reader.U64()), 0u);
  EXPECT_EQ(ValueOrDie(reader.Text()), tricky_text);
  EXPECT_EQ(ValueOrDie(reader.U64()), ~0ull);
  EXPECT_EQ(ValueOrDie(reader.Text()), "");
  EXPECT_EQ(ValueOrDie(reader.U64()), 0x100u);
  EXPECT_FALSE(reader.at_end());
  EXPECT_EQ(reader.Bytes(), std::string("\0\x01raw", 5));
  EXPECT_TRUE(reader.at_end());
  ExpectOk(reader.ExpectEnd());
}

TEST(KeyReader, MalformedKeysAreCorruption) {
  auto text_status = [](std::string key) {
    KeyReader reader(key);
    return reader.Text().status();
  };
  // No terminator, a lone trailing 0x00, and 0x00 followed by neither 0x01 nor 0xFF.
  for (const std::string& bad : {std::string("abc"), std::string("abc\0", 4),
                                 std::string("ab\0\x02", 4), std::string("", 0)}) {
    Status status = text_status(bad);
    EXPECT_EQ(status.code(), StatusCode::kCorruption) << ::testing::PrintToString(bad);
    EXPECT_THAT(status.message(), StartsWith("malformed store key"));
  }
  Status bad_marker = text_status(std::string("ab\0\x02", 4));
  EXPECT_THAT(bad_marker.message(), HasSubstr("61620002"));  // the key, in hex
  EXPECT_THAT(bad_marker.message(), HasSubstr("at byte 2"));

  const std::string short_number("\0\0\0\x01", 4);
  KeyReader number_reader(short_number);
  Status number = number_reader.U64().status();
  EXPECT_EQ(number.code(), StatusCode::kCorruption);
  EXPECT_THAT(number.message(), HasSubstr("needs 8 bytes but 4 remain"));

  const std::string longer = KeyBuilder().Text("a").U64(1).key();
  KeyReader extra(longer);
  EXPECT_TRUE(extra.Text().ok());
  EXPECT_EQ(extra.ExpectEnd().code(), StatusCode::kCorruption);
}

}  // namespace
}  // namespace skippr::store
