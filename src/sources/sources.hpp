// Sources: where records come from. Every source hands over records (dynamic Values) in batches,
// each with where it came from, and says how far it got, so that a reader can resume exactly after
// the last committed record. Built in: Sample (deterministic bike-hire rides) and File (JSON lines,
// JSON arrays, CSV, Parquet; gzip and zstd).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "core/status.hpp"
#include "core/value.hpp"
#include "schema/schema.hpp"
#include "store/store.hpp"

namespace skippr::sources {

// The first `file_bytes` bytes of a file, as a later pass can recognise them: by the XXH3-64 of
// their first and of their last `window_bytes` bytes (of all of them, when fewer). An append keeps
// both; rewriting what was read changes one unless the change lies entirely in the middle of a
// prefix longer than two windows (docs/config.md, "When files change").
struct FilePrefix {
  uint64_t file_bytes = 0;  // on disk: compressed bytes for a compressed file
  uint64_t head_hash = 0;
  uint64_t tail_hash = 0;
  uint64_t window_bytes = 0;
  friend bool operator==(const FilePrefix&, const FilePrefix&) = default;
};

// Where a reader may start a file again without re-reading what came before: the byte right after
// `prefix` on disk is the start of record `records` + 1, at line `line` and at offset `byte_offset`
// of the (decompressed) stream. For a plain text file it is where the position stopped; for a
// compressed file its start, or its end when it was last read to the end (a compressed file can
// only be resumed at a gzip member or zstd frame boundary); for a JSON array or Parquet file, which
// is read whole, the whole file (records are then skipped).
struct ResumePoint {
  FilePrefix prefix;
  uint64_t byte_offset = 0;
  uint64_t line = 1;
  uint64_t records = 0;
  friend bool operator==(const ResumePoint&, const ResumePoint&) = default;
};

// How far a source got in one of its partitions (a file; the sample's single stream). Kept in the
// offsets family of the Skippr Store (docs/formats/store.md).
struct PartitionPosition {
  uint64_t size_bytes = 0;        // the file's size when the pass opened it (it read no further)
  int64_t mtime_ns = 0;           // and its modification time
  uint64_t records_consumed = 0;  // records read through, deadletters included
  uint64_t byte_offset = 0;       // stream offset where the next record starts (text formats)
  uint64_t next_line = 1;         // the line number at byte_offset
  bool is_closed = false;         // read to size_bytes, nothing held back
  // Each time the bytes a position vouches for change (the file was rewritten in place, truncated
  // or replaced), the file is read again from its start as a new version (docs/config.md).
  uint64_t version = 1;
  std::string version_reason;  // why the current version is new; empty for version 1
  // Where a source that is not a file goes on, in its own terms (a PostgreSQL snapshot range:
  // the last ctid read). Empty for files.
  std::string cursor;
  ResumePoint resume;
  // XXH3-64 of the stream bytes [resume.byte_offset, byte_offset): the records a re-read skips
  // (compressed files) are proven unchanged by it before they are skipped.
  uint64_t skipped_bytes_hash = 0;
  bool ends_at_line_end = true;  // the bytes read so far end with a line end (or there are none)
  // The S3 object's ETag when it was read (S3 source): read to its end, an object is read again
  // only when its ETag (or size) changes. Empty for files.
  std::string object_etag;
  // Read from a position of format 1, which has no fingerprint to check the file against.
  bool is_unverified = false;
  friend bool operator==(const PartitionPosition&, const PartitionPosition&) = default;
};
using SourcePositions = std::map<std::string, PartitionPosition>;  // partition id → position

Result<SourcePositions> LoadPositions(const store::ReadTransaction& transaction);
Result<SourcePositions> LoadPositions(const store::WriteTransaction& transaction);
Status SavePositions(store::WriteTransaction& transaction, const SourcePositions& positions);

// A record and where it sits in its partition (the batch names the partition: one path copy per
// batch rather than per record).
struct SourceRecord {
  Value value;
  uint64_t line = 0;  // 1-based line in a text file; 0 where lines mean nothing
  uint64_t row = 0;   // 1-based record number in the partition
  std::optional<RowChange> change;  // CDC sources: the mutation and its order
};

// Records of one partition, read in order.
struct SourceBatch {
  std::string partition;  // e.g. the file's path
  std::vector<SourceRecord> records;
  // Or, from a source that decodes straight into typed columns, the rows as columns (after any
  // `records`; the PostgreSQL snapshot hands over only these).
  std::optional<ColumnRows> columns;
  std::vector<schema::Deadletter> deadletters;  // records that could not be read, in order
  // Applies to every record of the batch; what it points to lives as long as the source.
  schema::RecordContext context;
  PartitionPosition position;                   // the partition's position after this batch
  uint64_t bytes_read = 0;                      // input bytes consumed (as stored on disk)
  // A change stream has nothing more for now: what is buffered should be committed.
  bool is_caught_up = false;

  schema::RecordOrigin OriginOf(const SourceRecord& record) const {
    return {partition, record.line, record.row};
  }
  uint64_t record_count() const {
    return records.size() + (columns ? static_cast<uint64_t>(columns->num_rows) : 0);
  }
};

// The layout (schema::RecordLayout) a source may decode records straight into, for the records
// that name no namespace of their own (a file's): published by the thread that shapes them (sync,
// after each sealed commit changes the schema), read by the source's thread as it starts a batch.
// Records that do not fit it still arrive as Values, so a stale layout costs speed, never rows.
class LayoutBoard {
 public:
  void Publish(std::shared_ptr<const schema::RecordLayout> layout);
  std::shared_ptr<const schema::RecordLayout> Current() const;

 private:
  mutable std::mutex mutex_;
  std::shared_ptr<const schema::RecordLayout> layout_;
};

struct ReadOptions {
  uint64_t max_records_per_batch = 100'000;
  uint64_t max_bytes_per_batch = 10 << 20;
  // A batch of rows decoded into columns (SourceBatch::columns) holds about its input's size in
  // memory rather than a Value's several times that, so it may be larger.
  uint64_t max_typed_records_per_batch = 1'000'000;
  uint64_t max_typed_bytes_per_batch = 64 << 20;
  uint64_t max_records_per_partition = 0;  // 0: no limit (discover samples with a limit)
  // A change stream follows its source rather than ending when caught up (SyncOptions).
  bool follows_changes = false;
  // Set from another thread: a change stream ends at its next transaction boundary, as if idle
  // (SyncOptions::stop_requested).
  const std::atomic<bool>* stop_requested = nullptr;
  // A directory of the pipeline's own where a source may hold on disk what it cannot commit yet
  // (a PostgreSQL transaction streamed while in progress); it may empty it at Open. Empty: the
  // source asks its server not to stream such transactions.
  std::string scratch_directory;
  // Where the shaper publishes the layout records may be decoded into; null: every record is
  // handed over as a Value (discover, which has no schema yet).
  const LayoutBoard* layouts = nullptr;
};

class Source {
 public:
  virtual ~Source() = default;
  // Starts reading after `committed` (empty: from the beginning). Closed partitions whose size and
  // modification time are unchanged are skipped; one that grew by an append is read on from where
  // it stopped; one whose bytes already read changed is read again from its start as a new version
  // (docs/config.md, "When files change").
  virtual Status Open(const SourcePositions& committed, const ReadOptions& options) = 0;
  // The next batch, or nullopt when there is nothing more to read now.
  virtual Result<std::optional<SourceBatch>> Next() = 0;
  // Called (from another thread than Next) after the WAL commit that holds positions the source
  // handed over: a change stream may now let its server forget them (confirm a replication slot).
  virtual void Acknowledge(const SourcePositions& committed) {}
};

// What a source's server keeps for the pipeline, for `status`: a replication slot's state, the WAL
// it retains and how far the pipeline is behind. Facts are (name, value) in a fixed order.
struct ServerState {
  std::string what;  // "replication slot skippr_slot"
  std::vector<std::pair<std::string, std::string>> facts;
};
// Nullopt for sources that keep nothing on a server (files, the sample, a Postgres snapshot).
Result<std::optional<ServerState>> ReadServerState(const config::ConnectorConfig& connector,
                                                   const std::string& source_name);

// What `doctor` checks of a source that has a server: it can be reached (with its TLS settings),
// the tables exist and can be read, and what change data capture needs. Empty for the others.
struct SourceCheck {
  bool ok = false;
  std::string message;  // what holds, or what fails and what to do
};
std::vector<SourceCheck> CheckSource(const config::ConnectorConfig& connector,
                                     const std::string& source_name);

// `source_name` (the data_sources entry) names the source in its messages.
Result<std::unique_ptr<Source>> MakeSource(const config::ConnectorConfig& connector,
                                           const std::string& source_name = "source");

// `inner`, read on a thread of its own up to `max_batches_ahead` batches ahead of the caller, so
// reading and parsing overlap what the caller does with each batch (sync: shaping, encoding,
// committing). Batches arrive in the inner source's order; its error arrives after the batches
// read before it. Destroying the source stops the thread (batches read ahead are dropped: the
// caller commits positions only for batches it took).
std::unique_ptr<Source> ReadAhead(std::unique_ptr<Source> inner, size_t max_batches_ahead);

// The sample generator's own figures, to check what lands against (tests, the demo).
struct SampleFigures {
  uint64_t rows = 0;
  int64_t amount_cents_sum = 0;  // sum of amount (decimal(10,2)) in cents
  int64_t duration_seconds_sum = 0;
  uint64_t member_rides = 0;  // rider_type = 'member'
};
SampleFigures ComputeSampleFigures(uint64_t rows, uint64_t seed);
// One sample ride, a pure function of (seed, ride index); ride_id = index + 1.
Value SampleRide(uint64_t seed, uint64_t index);

}  // namespace skippr::sources
