// Internal to sources/: the `Postgres` data source.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "sources/postgres_catalog.hpp"
#include "sources/postgres_replication.hpp"
#include "sources/postgres_spill.hpp"
#include "sources/postgres_connection.hpp"
#include "sources/sources.hpp"

namespace skippr::sources::postgres {

// Order tokens compare as bytes: the commit LSN, then the change's ordinal within its
// transaction, both 8 bytes big-endian. Snapshot rows carry the snapshot's LSN and ordinal 0.
std::string OrderToken(uint64_t lsn, uint64_t ordinal);
// "16/B374D848" ↔ the 64-bit LSN.
uint64_t ParseLsn(std::string_view text);
std::string FormatLsn(uint64_t lsn);
// A row's primary-key values as one string ("[7,\"eu\"]"): the entity a change applies to.
std::string BusinessKey(const ValueObject& row, const std::vector<size_t>& key_columns);

// What every batch of table `schema_name`.`table` says beyond its rows: its namespace, that its
// column types are declared and binding (a type change its namespace cannot hold stops the pass,
// naming the table and what to do), and that its records are built objects.
void SetTableContext(schema::RecordContext& context, const PostgresSettings& settings,
                     const std::string& schema_name, const std::string& table,
                     const std::string& namespace_name,
                     const std::map<std::string, LogicalType>& declared_types);

// Every configured table, read under one exported snapshot. Heap tables are split into ctid block
// ranges read by `snapshot_parallelism` connections, each range a partition whose position keeps
// the last ctid committed: a later pass goes on after it (under its own, newer snapshot) and
// skips the ranges that were finished. Rows carry a CDC sidecar: mutation snapshot, the
// snapshot's LSN as order token, the primary key as business key.
// A snapshot another connection exported and keeps valid (a replication slot's, at creation).
struct ExportedSnapshot {
  std::string name;
  uint64_t lsn = 0;
};

class SnapshotSource final : public Source {
 public:
  // Without `exported`, the source exports its own snapshot (at the server's current LSN).
  explicit SnapshotSource(PostgresSettings settings,
                          std::optional<ExportedSnapshot> exported = std::nullopt);
  ~SnapshotSource() override;

  Status Open(const SourcePositions& committed, const ReadOptions& options) override;
  Result<std::optional<SourceBatch>> Next() override;
  // Once Next has returned nullopt: ends the transaction that exported the snapshot, so the server
  // no longer keeps rows for it. Batches handed over stay valid.
  void CloseConnections() { control_.reset(); }

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
  // What every row of a range carries alike, made once per range.
  struct RowStamps {
    std::string order_token;      // the snapshot's LSN, ordinal 0
    std::string event_id_prefix;  // "snapshot <lsn> <relation oid> "
  };
  // Rows decoded straight into typed columns; a batch hands them over as ColumnRows.
  struct RowColumns;
  // The binary COPY file header at the start of the first message, which it removes.
  Status SkipBinaryHeader(const Range& range, std::string_view& message) const;
  // One binary COPY tuple: the ctid (heap relations), then the table's columns.
  Status AddRow(const TableReader& reader, const Range& range, const RowStamps& stamps,
                std::string_view tuple, RowColumns& rows, PartitionPosition& position) const;
  SourceBatch TakeBatch(const Range& range, RowColumns& rows,
                        const PartitionPosition& position) const;
  bool Hand(SourceBatch batch);  // false when the source is stopping
  void StopReaders();

  const PostgresSettings settings_;
  const std::optional<ExportedSnapshot> exported_;
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

struct StreamCursor;  // postgres_cdc.cpp

// cdc_mode snapshot_then_cdc / cdc_only: a pgoutput slot (created with an exported snapshot when
// absent), the snapshot read under it first (snapshot_then_cdc), then the change stream. Each
// change carries its mutation, the order token (commit LSN, ordinal) and the row's key; the
// stream's position is one partition whose cursor is the last change committed, so a change the
// server sends again after a crash is skipped. The slot is confirmed only to what the WAL holds
// (Acknowledge). A pass ends when it has caught up with the server's WAL position at its start,
// or, with cdc_idle_timeout_seconds, once no change arrived for that long.
class ChangeStreamSource final : public Source {
 public:
  explicit ChangeStreamSource(PostgresSettings settings);
  ~ChangeStreamSource() override;

  Status Open(const SourcePositions& committed, const ReadOptions& options) override;
  Result<std::optional<SourceBatch>> Next() override;
  void Acknowledge(const SourcePositions& committed) override;

 private:
  struct Relation;

  Status CheckIdentities(const std::vector<PgTable>& tables) const;
  Status EnsurePublication(const std::vector<PgTable>& tables);
  Status EnsureSlot(std::optional<ExportedSnapshot>* exported);
  Result<SlotState> ReadSlotOnceReleased(const std::string& slot_name);
  Status StartStream();
  Status ReadStream();
  Status SendStatusWhenDue(std::chrono::steady_clock::time_point now, bool reply_requested,
                           bool was_idle);
  Status Receive(std::string_view payload);
  Status EmitHeartbeatWhenDue(std::chrono::steady_clock::time_point now);
  Status ReplayNext();
  bool ShouldFinish(std::chrono::steady_clock::time_point now) const;
  Status Apply(const PgOutputMessage& message);
  Status AddRelation(const RelationMessage& message);
  Status ApplyRowChange(const PgOutputMessage& message);
  // Whether change `ordinal` of the transaction committing at `commit_lsn` is in the WAL already.
  bool IsCommitted(uint64_t commit_lsn, uint64_t ordinal) const;
  // The row of `tuple`; with `unchanged`, the columns whose large value it left out are listed
  // there (and read NULL until FillUnchangedValues).
  Result<Value> DecodeTuple(const Relation& relation, const Tuple& tuple, const Tuple* old_tuple,
                            std::vector<size_t>* unchanged) const;
  // `tuple`, with `unchanged`: the new tuple of an UPDATE that left those columns out.
  Status AppendChange(const Relation& relation, Value row, Mutation mutation, uint64_t ordinal,
                      const Tuple* tuple = nullptr, std::vector<size_t> unchanged = {});
  Status NoteUnchangedValues(const Relation& relation, const Tuple& tuple,
                             std::vector<size_t> columns);
  Status FillUnchangedValues();
  struct UnchangedValues;
  Status FillUnchangedValues(const Relation& relation, const std::vector<size_t>& columns,
                             const std::vector<const UnchangedValues*>& fills);
  void SetStreamCursor(const StreamCursor& cursor);
  Status ReleasePending();
  void NoteHandedOut(const SourceBatch& batch);
  uint64_t ConfirmableLsn() const;

  const PostgresSettings settings_;
  ReadOptions options_;
  std::unique_ptr<PgConnection> control_;
  std::unique_ptr<PgConnection> replication_;  // until the stream takes it
  std::unique_ptr<SnapshotSource> snapshot_;   // while the snapshot is read
  std::unique_ptr<ReplicationStream> stream_;
  // Transactions streamed while in progress, until their commit; the one being applied; the
  // transaction whose stream block is being read.
  std::unique_ptr<SpilledTransactions> spilled_;
  std::unique_ptr<SpilledTransaction> replay_;
  CommitMessage replay_commit_;
  std::optional<uint32_t> stream_block_xid_;
  // The tables read, (schema, table) → primary key.
  std::map<std::pair<std::string, std::string>, std::vector<std::string>> read_tables_;
  std::map<uint32_t, std::unique_ptr<Relation>> relations_;
  std::vector<std::unique_ptr<Relation>> retired_relations_;

  // The committed cursor (from the store): changes it covers are skipped.
  bool has_committed_cursor_ = false;
  uint64_t committed_commit_lsn_ = 0;
  uint64_t committed_next_ordinal_ = 0;
  uint64_t committed_end_lsn_ = 0;

  PartitionPosition stream_position_;
  bool in_transaction_ = false;
  uint64_t transaction_lsn_ = 0;
  uint64_t transaction_ordinal_ = 0;
  // A record of `pending_` whose UPDATE left large values out, to be read before it goes.
  struct UnchangedValues {
    const Relation* relation = nullptr;
    size_t record = 0;
    std::vector<size_t> columns;
    std::vector<std::string> key;  // the key columns' text, as the change has them
  };
  std::optional<SourceBatch> pending_;  // being filled
  std::vector<UnchangedValues> pending_unchanged_;
  std::optional<SourceBatch> ready_;    // to hand over
  bool is_finished_ = false;
  bool is_sampling_ = false;  // discover: the snapshot only
  bool is_snapshot_done_ = false;
  bool has_unflushed_snapshot_ = false;
  bool has_read_commit_ = false;  // the last message read was a transaction's commit  // snapshot rows handed over and no caught-up batch since

  uint64_t target_lsn_ = 0;    // the server's WAL position when the stream started
  uint64_t sent_lsn_ = 0;      // how far the server has sent (keepalives)
  uint64_t received_lsn_ = 0;  // the end of the last data received
  uint64_t last_end_lsn_ = 0;  // where the last transaction received ends
  uint64_t handed_end_lsn_ = 0;
  std::atomic<uint64_t> acked_end_lsn_{0};
  std::chrono::steady_clock::time_point last_data_;
  std::chrono::steady_clock::time_point last_status_;
  std::chrono::steady_clock::time_point last_heartbeat_;
};

// doctor's checks of a Postgres source (sources::CheckSource).
std::vector<SourceCheck> CheckPostgres(const config::ConnectorConfig& connector,
                                       const std::string& source_name);

// The replication slot of a CDC source (sources::ReadServerState).
Result<std::optional<ServerState>> ReadSlotState(const config::ConnectorConfig& connector,
                                                 const std::string& source_name);

Result<std::unique_ptr<Source>> MakePostgresSource(const config::ConnectorConfig& connector,
                                                   const std::string& source_name);

}  // namespace skippr::sources::postgres
