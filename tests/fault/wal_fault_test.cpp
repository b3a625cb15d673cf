// The WAL commit protocol (docs/formats/wal.md) under disk faults: a FaultInjectionEnv under the
// segment files, a real LMDB store. At every step — each file operation of Wal::Open and of the
// commits, each named crash point — a power cut, and at each I/O step the faults a disk has (fsync
// EIO, ENOSPC, short writes, failed reads). After each, a new Wal (a new process) must find every
// commit acknowledged before the fault exactly once, nothing the store did not commit, source
// positions that match the segments, and must commit again.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "fault/fault_test_support.hpp"
#include "store/store.hpp"
#include "support/fault_env.hpp"
#include "support/status_matchers.hpp"
#include "support/temp_dir.hpp"
#include "wal/wal.hpp"

namespace skippr::testing {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr int64_t kRowsPerCommit = 3000;  // about 30 KiB: several 4 KiB blocks and a tail
constexpr int kCommitsBeforeTheFault = 3;  // the first creates the spare files

// One pipeline's store and WAL in a temporary directory over a FaultInjectionEnv; Close and Open
// again are a new process. Commit k holds rows k*kRowsPerCommit.. and records "k + 1 commits
// read" as the source position in its transaction, as sync does.
class WalUnderFaults {
 public:
  WalUnderFaults() : env_(Env::Default(), dir_.Sub("trash")) {}

  FaultInjectionEnv& env() { return env_; }
  std::string wal_directory() const { return dir_.Sub("pipeline/wal"); }

  Status Open(wal::RecoveryReport* report = nullptr) {
    SKIPPR_ASSIGN_OR_RETURN(store_,
                            store::Store::Open({.directory = dir_.Sub("pipeline/store"), .env = &env_}));
    SKIPPR_ASSIGN_OR_RETURN(wal_, wal::Wal::Open(wal_directory(), "p", *store_, report,
                                                 {.env = &env_}));
    return Status::OK();
  }
  void Close() {
    wal_.reset();
    store_.reset();
  }

  Status CommitNext() {
    const int64_t commit = attempted_++;
    Result<wal::CommitInfo> committed = wal_->Commit(
        {RowsBatch("events", commit * kRowsPerCommit, kRowsPerCommit)}, "{}",
        [commit](store::WriteTransaction& write) {
          return write.Put(store::Family::kOffsets, PositionKey(), std::to_string(commit + 1));
        });
    if (committed.ok()) acknowledged_ = commit + 1;
    return committed.status();
  }

  // After recovery: the rows in the WAL are exactly those of the commits the source position
  // says were read — all acknowledged commits, perhaps the one in flight, nothing else.
  void ExpectExactlyTheCommittedRows(const std::string& context) {
    store::ReadTransaction read = ValueOrDie(store_->BeginRead());
    std::optional<std::string> position =
        ValueOrDie(read.Get(store::Family::kOffsets, PositionKey()));
    const int64_t commits = position ? std::stoll(*position) : 0;
    EXPECT_GE(commits, acknowledged_) << context << ": an acknowledged commit was lost";
    EXPECT_LE(commits, attempted_) << context;
    std::vector<int64_t> ids;
    for (const wal::SegmentEntry& entry : ValueOrDie(wal::LiveSegments(read))) {
      wal::SegmentReader reader = ValueOrDie(wal::OpenSegment(wal_directory(), entry, &env_));
      for (const wal::SliceInfo& slice : reader.slices()) {
        // The catalog sizes landings by it: it must be the footer's.
        EXPECT_EQ(entry.slices.at(slice.ordinal).uncompressed_bytes, slice.uncompressed_bytes);
        Batch batch = ValueOrDie(reader.ReadSlice(slice.ordinal));
        for (int64_t row = 0; row < batch.num_rows; ++row) {
          ids.push_back(batch.columns[0].Int64At(row));
        }
      }
    }
    std::sort(ids.begin(), ids.end());
    std::vector<int64_t> expected(static_cast<size_t>(commits * kRowsPerCommit));
    std::iota(expected.begin(), expected.end(), 0);
    EXPECT_EQ(ids, expected) << context << ": the WAL holds other rows than its position says";
    acknowledged_ = attempted_ = commits;  // the source resumes from the position
  }

  // The recovered WAL takes new commits.
  void ExpectItCommitsAgain(const std::string& context) {
    ExpectOk(CommitNext());
    ExpectExactlyTheCommittedRows(context + ", then one more commit");
  }

  std::vector<std::string> SegmentFiles() const {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(wal_directory())) {
      names.push_back(entry.path().filename().string());
    }
    return names;
  }

 private:
  static std::string PositionKey() { return store::KeyBuilder().Text("fault-test").key(); }

  TempDir dir_;
  FaultInjectionEnv env_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<wal::Wal> wal_;
  int64_t attempted_ = 0;
  int64_t acknowledged_ = 0;
};

// Open, then the commits; the run a fault interrupts.
Status OpenAndCommit(WalUnderFaults& wal) {
  SKIPPR_RETURN_IF_ERROR(wal.Open());
  for (int i = 0; i < kCommitsBeforeTheFault; ++i) SKIPPR_RETURN_IF_ERROR(wal.CommitNext());
  return Status::OK();
}

// The power came back: a new process recovers the WAL, which then holds exactly what was committed.
void RecoverAfterPowerCut(WalUnderFaults& wal, const std::string& context) {
  wal.Close();
  ExpectOk(wal.env().DropUnsyncedData());
  ExpectOk(wal.Open());
  wal.ExpectExactlyTheCommittedRows(context);
  wal.ExpectItCommitsAgain(context);
}

// ----- power cuts ----------------------------------------------------------------------------------

TEST(WalPowerCut, AtEveryFileOperationOfOpenAndCommitNothingCommittedIsLost) {
  std::vector<std::string> operations;
  {
    WalUnderFaults dry_run;
    ExpectOk(OpenAndCommit(dry_run));
    operations = dry_run.env().operations();
  }
  ASSERT_GE(operations.size(), 14u) << "mkdirs, spare files, directory fsync, 3 writes and syncs";
  for (size_t index = 0; index < operations.size(); ++index) {
    const std::string context = "power cut before operation " + std::to_string(index) + " (" +
                                operations[index] + ")";
    SCOPED_TRACE(context);
    WalUnderFaults wal;
    wal.env().CrashAtOperation(index, ThrowCrash);
    EXPECT_THROW((void)OpenAndCommit(wal), SimulatedCrash);
    RecoverAfterPowerCut(wal, context);
    RecordProperty("operation_" + std::to_string(index), operations[index]);
  }
}

TEST(WalPowerCut, AtEveryCommitCrashPointNothingCommittedIsLost) {
  std::vector<std::string> reached;
  {
    WalUnderFaults dry_run;
    CrashPointCrasher counter(dry_run.env(), std::nullopt);
    ExpectOk(OpenAndCommit(dry_run));
    reached = counter.reached();
  }
  for (const char* point : {"wal.after_directory_fsync", "wal.after_segment_write",
                            "wal.after_fdatasync", "wal.before_store_commit",
                            "wal.after_store_commit", "recovery.after_scan"}) {
    EXPECT_THAT(reached, ::testing::Contains(point));
  }
  for (size_t occurrence = 0; occurrence < reached.size(); ++occurrence) {
    const std::string context = "power cut at " + reached[occurrence] + " (crash point " +
                                std::to_string(occurrence) + ")";
    SCOPED_TRACE(context);
    WalUnderFaults wal;
    {
      CrashPointCrasher crasher(wal.env(), occurrence);
      EXPECT_THROW((void)OpenAndCommit(wal), SimulatedCrash);
    }
    RecoverAfterPowerCut(wal, context);
  }
}

TEST(WalPowerCut, AtEveryRecoveryCrashPointTheOrphanGoesAndNothingCommittedIsLost) {
  for (const char* point : {"recovery.before_orphan_delete", "recovery.after_orphan_delete",
                            "recovery.after_scan"}) {
    SCOPED_TRACE(point);
    WalUnderFaults wal;
    ExpectOk(wal.Open());
    ExpectOk(wal.CommitNext());
    ExpectOk(wal.CommitNext());
    {
      // The third commit dies once its segment is durable: an orphan for recovery to delete.
      CrashPointCrasher crasher(wal.env(), std::string("wal.after_fdatasync"));
      EXPECT_THROW((void)wal.CommitNext(), SimulatedCrash);
    }
    wal.Close();
    ExpectOk(wal.env().DropUnsyncedData());
    EXPECT_THAT(wal.SegmentFiles(), ::testing::Contains("00000000000000000003.seg"));
    {
      CrashPointCrasher crasher(wal.env(), std::string(point));
      EXPECT_THROW((void)wal.Open(), SimulatedCrash) << point << " was not reached";
    }
    RecoverAfterPowerCut(wal, std::string("power cut at ") + point);
  }
}

// ----- faults ----------------------------------------------------------------------------------

struct WalFault {
  std::string name;
  FaultRule rule;
  bool is_in_the_first_commit;  // the fault is in creating the spare files: the first commit's
  StatusCode code;
  std::vector<std::string> message_parts;  // {wal}: the WAL directory; {segment}: the failing one
};

std::vector<WalFault> CommitFaults() {
  return {
      {"fdatasync EIO on the segment",
       {.kind = FaultKind::kSyncFails, .path_pattern = "*.seg"},
       false,
       StatusCode::kIOError,
       {"fdatasync of '{wal}/{segment}' failed: Input/output error",
        "nothing was committed and the run stops"}},
      {"ENOSPC in the middle of the segment",
       {.kind = FaultKind::kNoSpaceAfterBytes, .path_pattern = "*.seg", .after = 2 * 4096 + 100},
       false,
       StatusCode::kNoSpace,
       {"disk full writing WAL segment '{wal}/{segment}'", "free space under DATA_DIR and run again"}},
      {"fsync EIO on the WAL directory (new spare files)",
       {.kind = FaultKind::kSyncFails, .path_pattern = "*/wal"},
       true,
       StatusCode::kIOError,
       {"fsync of directory '{wal}' failed: Input/output error", "the run stops (check the disk)"}},
      {"ENOSPC creating a segment file",
       {.kind = FaultKind::kNoSpaceOnCreate, .path_pattern = "*.seg"},
       true,
       StatusCode::kNoSpace,
       {"cannot create WAL segment: cannot create '{wal}/{segment}': No space left on device"}},
  };
}

std::string Fill(std::string text, const std::string& wal_directory, const std::string& segment) {
  for (const auto& [name, value] : {std::pair<std::string, std::string>{"{wal}", wal_directory},
                                    {"{segment}", segment}}) {
    for (size_t at; (at = text.find(name)) != std::string::npos;) text.replace(at, name.size(), value);
  }
  return text;
}

TEST(WalFaults, EachFaultFailsTheCommitClearlyAndTheNextRunRecovers) {
  for (const WalFault& fault : CommitFaults()) {
    for (const bool power_cut : {false, true}) {
      const std::string context = fault.name + (power_cut ? ", then a power cut" : ", then a restart");
      SCOPED_TRACE(context);
      WalUnderFaults wal;
      ExpectOk(wal.Open());
      const int commits_before = fault.is_in_the_first_commit ? 0 : kCommitsBeforeTheFault;
      for (int i = 0; i < commits_before; ++i) ExpectOk(wal.CommitNext());
      wal.env().AddRule(fault.rule);
      Status failed = wal.CommitNext();
      EXPECT_EQ(failed.code(), fault.code) << failed.ToString();
      const std::string segment = fmt::format("{:020}.seg", commits_before + 1);
      for (const std::string& part : fault.message_parts) {
        EXPECT_THAT(failed.message(), HasSubstr(Fill(part, wal.wal_directory(), segment)));
      }
      // The run fails; the next one (after a restart, or a power cut) recovers.
      wal.Close();
      wal.env().ClearRules();
      if (power_cut) ExpectOk(wal.env().DropUnsyncedData());
      ExpectOk(wal.Open());
      wal.ExpectExactlyTheCommittedRows(context);
      wal.ExpectItCommitsAgain(context);
    }
  }
}

TEST(WalFaults, ShortWritesEverywhereStillCommitEveryByte) {
  WalUnderFaults wal;
  wal.env().AddRule({.kind = FaultKind::kShortWrites});
  ExpectOk(OpenAndCommit(wal));
  wal.Close();
  ExpectOk(wal.env().DropUnsyncedData());  // and every byte was synced, not just handed over
  ExpectOk(wal.Open());
  wal.ExpectExactlyTheCommittedRows("short writes");
  wal.ExpectItCommitsAgain("short writes");
}

TEST(WalFaults, AReadErrorAtRecoveryFailsTheOpenNamingTheSegment) {
  WalUnderFaults wal;
  ExpectOk(OpenAndCommit(wal));
  wal.Close();
  wal.env().AddRule({.kind = FaultKind::kReadFails, .path_pattern = "*.seg"});
  Status failed = wal.Open();
  EXPECT_EQ(failed.code(), StatusCode::kIOError);
  EXPECT_THAT(failed.message(),
              HasSubstr("cannot read WAL segment file: cannot read '" + wal.wal_directory() +
                        "/00000000000000000001.seg': Input/output error; check the disk"));
  wal.Close();
  wal.env().ClearRules();
  ExpectOk(wal.Open());
  wal.ExpectExactlyTheCommittedRows("after the read error");
}

// fsyncgate: the segment whose fdatasync failed is never synced again; the run stops, and the
// next run deletes it as an orphan.
TEST(WalFaults, ASegmentWhoseSyncFailedIsAnOrphanTheNextRunDeletes) {
  WalUnderFaults wal;
  ExpectOk(wal.Open());
  ExpectOk(wal.CommitNext());
  wal.env().AddRule({.kind = FaultKind::kSyncFails, .path_pattern = "*.seg"});
  EXPECT_FALSE(wal.CommitNext().ok());
  size_t syncs = 0;
  for (const std::string& operation : wal.env().operations()) {
    syncs += operation == "fdatasync " + wal.wal_directory() + "/00000000000000000002.seg";
  }
  EXPECT_EQ(syncs, 1u) << "a failed fdatasync was retried";
  wal.Close();
  wal.env().ClearRules();
  wal::RecoveryReport report;
  ExpectOk(wal.Open(&report));
  EXPECT_EQ(report.live_segments, 1u);
  EXPECT_THAT(wal.SegmentFiles(), ::testing::Not(::testing::Contains("00000000000000000002.seg")));
  wal.ExpectExactlyTheCommittedRows("after the failed sync");
}

}  // namespace
}  // namespace skippr::testing
