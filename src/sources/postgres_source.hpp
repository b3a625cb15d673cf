// Internal to sources/: the `Postgres` data source.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "sources/postgres_catalog.hpp"
#include "sources/postgres_connection.hpp"
#include "sources/sources.hpp"

namespace skippr::sources::postgres {

// Order tokens compare as bytes: the commit LSN, then the change's ordinal within its
// transaction, both 8 bytes big-endian. Snapshot rows carry the snapshot's LSN and ordinal 0.
std::string OrderToken(uint64_t lsn, uint64_t ordinal);
// A row's primary-key values as one string ("[7,\"eu\"]"): the entity a change applies to.
std::string BusinessKey(const ValueObject& row, const std::vector<size_t>& key_columns);

// Every configured table, read under one exported snapshot. Heap tables are split into ctid block
// ranges read by `snapshot_parallelism` connections, each range a partition whose position keeps
// the last ctid committed: a later pass goes on after it (under its own, newer snapshot) and
// skips the ranges that were finished. Rows carry a CDC sidecar: mutation snapshot, the
// snapshot's LSN as order token, the primary key as business key.
class SnapshotSource final : public Source {
 public:
  explicit SnapshotSource(PostgresSettings settings);
  ~SnapshotSource() override;

  Status Open(const SourcePositions& committed, const ReadOptions& options) override;
  Result<std::optional<SourceBatch>> Next() override;

 private:
  struct TableReader;
  struct Range;

  std::unique_ptr<TableReader> MakeTableReader(PgTable table);
  void PlanRanges(const SourcePositions& committed);
  void PlanStorageRanges(const TableReader& reader, const PgStorage& storage,
                         const SourcePositions& committed);
  uint64_t RelationBlocks(const PgStorage& storage);

  // Reader threads: each takes ranges off `pending_` until none is left.
  void ReadRanges();
  Status ReadRangesOnOwnConnection();
  Status TakeSnapshot(PgConnection& connection) const;
  // True when the range's COPY was stopped before its end (a sampling limit, the source stopping).
  Result<bool> ReadRange(PgConnection& connection, const Range& range);
  SourceBatch NewBatch(const Range& range) const;
  Status AddRow(const TableReader& reader, const Range& range, std::string_view line,
                SourceBatch& batch, PartitionPosition& position) const;
  bool Hand(SourceBatch batch);  // false when the source is stopping
  void StopReaders();

  const PostgresSettings settings_;
  uint64_t max_records_per_partition_ = 0;
  std::unique_ptr<PgConnection> control_;  // exports the snapshot; its transaction stays open
  std::vector<std::unique_ptr<TableReader>> tables_;
  std::vector<Range> pending_;
  std::string snapshot_name_;
  uint64_t snapshot_lsn_ = 0;

  std::mutex mutex_;
  std::condition_variable changed_;
  size_t next_range_ = 0;
  std::deque<SourceBatch> ready_;
  size_t max_batches_ready_ = 2;
  size_t running_readers_ = 0;
  Status failure_;
  bool stopping_ = false;
  std::vector<std::thread> readers_;
};

Result<std::unique_ptr<Source>> MakePostgresSource(const config::ConnectorConfig& connector,
                                                   const std::string& source_name);

}  // namespace skippr::sources::postgres
