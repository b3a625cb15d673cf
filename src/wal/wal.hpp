// The write-ahead log (DESIGN.md §5, docs/formats/wal.md): every batch is committed here before
// anything else happens. A commit writes one segment file, makes it durable (fdatasync, then fsync
// of the directory), then records it in the store's catalog family in ONE transaction together with
// whatever the caller adds (source positions, schema changes) — that transaction is the commit
// point. Recovery deletes segment files the catalog does not know (orphans of a crash before the
// commit point) and fails loudly when a committed segment is missing or damaged.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/batch.hpp"
#include "core/env.hpp"
#include "core/status.hpp"
#include "store/store.hpp"
#include "wal/segment.hpp"

namespace skippr::wal {

// What the catalog family records for a committed segment.
struct SliceSummary {
  uint32_t ordinal = 0;
  std::string namespace_name;
  int32_t schema_id = 0;
  int64_t rows = 0;
  uint64_t bytes = 0;  // compressed payload bytes
  // Its column data's bytes before compression: what the slice weighs decoded. 0 in entries
  // written before skipprd recorded it.
  uint64_t uncompressed_bytes = 0;
};

struct SegmentEntry {
  uint64_t segment_id = 0;
  uint64_t sequence = 0;
  std::string file_name;  // relative to the WAL directory
  uint64_t file_bytes = 0;
  uint64_t checksum = 0;  // the segment footer's checksum
  int64_t created_unix_micros = 0;
  std::vector<SliceSummary> slices;

  int64_t rows() const;
};

struct CommitInfo {
  uint64_t segment_id = 0;  // 0 when the commit wrote no segment (positions only)
  uint64_t sequence = 0;
  int64_t rows = 0;
  uint64_t file_bytes = 0;
};

struct RecoveryReport {
  size_t live_segments = 0;
  size_t orphans_deleted = 0;
};

// The ids the next commit takes (catalog key ("wal_state")).
struct NextIds {
  uint64_t segment_id = 1;
  uint64_t sequence = 1;
};

// A segment encoded and checked, not yet written: encoding (columns → LZ4 slices) is CPU work,
// appending is I/O, and a caller may keep them apart.
struct PreparedSegment {
  SegmentEntry entry;
  SegmentBytes bytes;
};

struct WalOptions {
  Env* env = Env::Default();  // the segment files' I/O (tests inject faults here)
};

// Adds the caller's writes to the commit transaction (source positions, schema changes).
using SameTransaction = std::function<Status(store::WriteTransaction&)>;

class Wal {
 public:
  // Opens the WAL in `directory` (created 0700) for the pipeline, recovering as described above.
  static Result<std::unique_ptr<Wal>> Open(const std::string& directory,
                                           const std::string& pipeline, store::Store& store,
                                           RecoveryReport* report = nullptr,
                                           const WalOptions& options = {});
  ~Wal();
  Wal(const Wal&) = delete;
  Wal& operator=(const Wal&) = delete;

  // Commits `batches` as one segment (none: no file, only the transaction) together with
  // `same_transaction`'s writes. On success everything is durable and visible.
  Result<CommitInfo> Commit(const std::vector<Batch>& batches, const std::string& source_positions,
                            const SameTransaction& same_transaction);
  // The two halves of Commit: Prepare encodes `batches` (at least one) as the next segment and
  // takes its ids; Append writes it durably and commits it with `same_transaction`'s writes.
  // Prepared segments are appended in the order they were prepared (ids only grow; one that is
  // never appended leaves a gap).
  Result<PreparedSegment> Prepare(const std::vector<Batch>& batches,
                                  const std::string& source_positions);
  Result<CommitInfo> Append(const PreparedSegment& segment,
                            const SameTransaction& same_transaction);

  const std::string& directory() const { return directory_; }

 private:
  Wal(std::string directory, std::string pipeline, store::Store& store, Env& env)
      : directory_(std::move(directory)), pipeline_(std::move(pipeline)), store_(store), env_(env) {}
  Status Recover(RecoveryReport* report);
  Status WriteDurably(uint64_t segment_id, std::string_view bytes);
  // Creates the empty files of segments first_segment_id, first_segment_id + 1, ..., then fsyncs
  // the directory once.
  Status CreateSpareFiles(uint64_t first_segment_id);
  // The commit point: writes the segment (if any), then one store transaction with its catalog
  // entry, the next ids and the caller's writes.
  Result<CommitInfo> CommitTransaction(const PreparedSegment* segment, uint64_t sequence,
                                       const SameTransaction& same_transaction);

  std::string directory_;
  std::string pipeline_;
  store::Store& store_;
  Env& env_;
  NextIds next_ids_;  // loaded at recovery; this process holds the writer lease
  std::set<uint64_t> spare_segment_ids_;  // empty files created ahead, deleted when the WAL closes

};

// The live segments a read snapshot sees, oldest first.
Result<std::vector<SegmentEntry>> LiveSegments(const store::ReadTransaction& transaction);
// Opens a live segment's file and checks it is the one the catalog committed (its footer
// checksum and segment id), verifying as `verification` says.
Result<SegmentReader> OpenSegment(
    const std::string& directory, const SegmentEntry& entry, Env* env = Env::Default(),
    SegmentVerification verification = SegmentVerification::kWholeFile);

// Reclaim (DESIGN.md §6), in two steps: the catalog entry goes in the caller's transaction (after
// its commit no reader's new snapshot sees the segment), then the file. A crash between the two
// leaves an orphan file, which recovery deletes. The entry's deletion also records that a segment
// was reclaimed (RecordReclaimedSegments).
Status DeleteSegmentEntry(store::WriteTransaction& transaction, uint64_t segment_id);
// Whether a segment was ever reclaimed: the WAL then no longer holds every row committed since the
// pipeline's first commit (an aggregate rebuilt from the start needs the landed tables too).
Result<bool> HasReclaimedSegments(const store::WriteTransaction& transaction);
Status RecordReclaimedSegments(store::WriteTransaction& transaction);
Status DeleteSegmentFile(const std::string& directory, const SegmentEntry& entry,
                         Env* env = Env::Default());

}  // namespace skippr::wal
