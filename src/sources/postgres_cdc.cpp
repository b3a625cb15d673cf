// The PostgreSQL source's change data capture (cdc_mode snapshot_then_cdc and cdc_only): a
// pgoutput replication slot, its snapshot read first, then the change stream, each change
// committed to the WAL exactly once (docs/config.md, "The PostgreSQL source").
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <thread>

#include "core/crash.hpp"
#include "sources/postgres_catalog.hpp"
#include "sources/postgres_replication.hpp"
#include "sources/postgres_source.hpp"
#include "sources/postgres_spill.hpp"

namespace skippr::sources::postgres {

namespace {
constexpr auto kPollInterval = std::chrono::milliseconds(100);
constexpr auto kStatusInterval = std::chrono::seconds(1);
// Keys per query that reads the large values updates left unchanged.
constexpr size_t kUnchangedKeysPerQuery = 500;

std::string StreamPartitionId(const std::string& slot) { return "postgres cdc " + slot; }
}  // namespace

// Where the stream stands, kept as the stream partition's cursor: the transaction being read (its
// commit LSN, and the ordinal of its next change), or the last one finished (and where the next
// starts, which the slot may be confirmed to).
struct StreamCursor {
  uint64_t commit_lsn = 0;
  uint64_t next_ordinal = 0;  // changes of commit_lsn's transaction before it are committed
  uint64_t end_lsn = 0;       // set once the transaction is complete
  bool complete() const { return end_lsn != 0; }

  std::string Format() const {
    if (complete()) return fmt::format("commit={} end={}", FormatLsn(commit_lsn), FormatLsn(end_lsn));
    return fmt::format("commit={} next={}", FormatLsn(commit_lsn), next_ordinal);
  }
  static std::optional<StreamCursor> Parse(std::string_view text) {
    StreamCursor cursor;
    const auto field = [&](std::string_view name) -> std::optional<std::string_view> {
      const size_t at = text.find(name);
      if (at == std::string_view::npos) return std::nullopt;
      std::string_view value = text.substr(at + name.size());
      return value.substr(0, value.find(' '));
    };
    const std::optional<std::string_view> commit = field("commit=");
    if (!commit) return std::nullopt;
    cursor.commit_lsn = ParseLsn(*commit);
    if (const auto end = field("end=")) {
      cursor.end_lsn = ParseLsn(*end);
    } else if (const auto next = field("next=")) {
      std::from_chars(next->data(), next->data() + next->size(), cursor.next_ordinal);
    } else {
      return std::nullopt;
    }
    return cursor;
  }
  // Whether the change `ordinal` of the transaction committing at `commit_lsn` is committed.
  bool Covers(uint64_t commit, uint64_t ordinal) const {
    if (commit != commit_lsn) return commit < commit_lsn;
    return complete() || ordinal < next_ordinal;
  }
};

// ---------------------------------------------------------------------------------------------

struct ChangeStreamSource::Relation {
  std::string schema;
  std::string name;
  std::string namespace_name;
  std::vector<std::string> column_names;
  std::vector<PgColumnDecoder> decoders;
  std::map<std::string, LogicalType> declared_types;
  std::vector<size_t> key_columns;
  std::vector<std::string> key_names;
  char replica_identity = 'd';
  bool is_read = false;  // one of the tables the source reads
};

ChangeStreamSource::ChangeStreamSource(PostgresSettings settings)
    : settings_(std::move(settings)) {}

ChangeStreamSource::~ChangeStreamSource() {
  if (stream_) {
    // The last word: everything the WAL holds is confirmed, so the slot keeps no more than needed.
    const Status sent = stream_->SendStatus(received_lsn_, ConfirmableLsn(), false);
    if (!sent.ok()) spdlog::warn("{}", sent.message());
  }
}

Status ChangeStreamSource::Open(const SourcePositions& committed, const ReadOptions& options) {
  options_ = options;
  SKIPPR_ASSIGN_OR_RETURN(control_, PgConnection::Connect(settings_));
  SKIPPR_ASSIGN_OR_RETURN(std::vector<PgTable> tables, ListTables(*control_, settings_));
  SKIPPR_RETURN_IF_ERROR(CheckIdentities(tables));
  for (const PgTable& table : tables) read_tables_[{table.schema, table.name}] = table.primary_key;
  if (auto position = committed.find(StreamPartitionId(settings_.replication_slot_name));
      position != committed.end()) {
    stream_position_ = position->second;
    if (std::optional<StreamCursor> cursor = StreamCursor::Parse(position->second.cursor)) {
      committed_commit_lsn_ = cursor->commit_lsn;
      committed_next_ordinal_ = cursor->next_ordinal;
      committed_end_lsn_ = cursor->end_lsn;
      has_committed_cursor_ = true;
      acked_end_lsn_ = cursor->end_lsn;
    }
  }
  if (options.max_records_per_partition > 0) {
    // Sampling (discover): the tables' rows under a snapshot of their own; nothing on the server
    // changes — no publication, no slot, no stream.
    is_sampling_ = true;
    snapshot_ = std::make_unique<SnapshotSource>(settings_);
    return snapshot_->Open(committed, options);
  }
  SKIPPR_RETURN_IF_ERROR(EnsurePublication(tables));
  std::optional<ExportedSnapshot> exported;
  SKIPPR_RETURN_IF_ERROR(EnsureSlot(&exported));
  if (settings_.cdc_mode == CdcMode::kSnapshotThenCdc) {
    snapshot_ = std::make_unique<SnapshotSource>(settings_, exported);
    SKIPPR_RETURN_IF_ERROR(snapshot_->Open(committed, options));
  }
  return Status::OK();
}

Status ChangeStreamSource::CheckIdentities(const std::vector<PgTable>& tables) const {
  for (const PgTable& table : tables) {
    if (table.kind != 'r' && table.kind != 'p') {
      return Status::InvalidConfig(fmt::format(
          "data_sources.{}: {}.{} is not a table (a view?): change data capture reads tables; "
          "remove it from tables or use cdc_mode: snapshot",
          settings_.source_name, table.schema, table.name));
    }
    if (table.primary_key.empty() && table.replica_identity != 'f') {
      return Status::InvalidConfig(fmt::format(
          "data_sources.{}: table {}.{} has no primary key and no REPLICA IDENTITY FULL, so its "
          "updates and deletes cannot be told apart; add a primary key or run ALTER TABLE {}.{} "
          "REPLICA IDENTITY FULL",
          settings_.source_name, table.schema, table.name, table.schema, table.name));
    }
  }
  return Status::OK();
}

Status ChangeStreamSource::EnsurePublication(const std::vector<PgTable>& tables) {
  const std::string& publication = settings_.publication_name;
  SKIPPR_ASSIGN_OR_RETURN(PgResult existing,
                          control_->Query("reading the publication",
                                          "SELECT 1 FROM pg_publication WHERE pubname = $1",
                                          {publication}));
  if (existing.rows() == 0) {
    std::string list;
    for (const PgTable& table : tables) {
      if (!list.empty()) list += ", ";
      list += control_->QuoteIdentifier(table.schema) + "." + control_->QuoteIdentifier(table.name);
    }
    if (list.empty()) {
      return Status::InvalidConfig(fmt::format(
          "data_sources.{}: no tables to capture changes of in database {}: create a table or "
          "name tables",
          settings_.source_name, control_->description()));
    }
    const Status created = control_->Execute(
        fmt::format("creating Postgres publication {}", publication),
        fmt::format("CREATE PUBLICATION {} FOR TABLE {} WITH (publish_via_partition_root = true)",
                    control_->QuoteIdentifier(publication), list));
    if (!created.ok()) {
      return Status::InvalidConfig(created.message() +
                                   "; the user needs to own the tables (or be superuser), or "
                                   "create the publication beforehand");
    }
    spdlog::info("postgres {}: created publication {} for {}", settings_.Describe(), publication,
                 list);
    return Status::OK();
  }
  for (const PgTable& table : tables) {
    SKIPPR_ASSIGN_OR_RETURN(
        PgResult member,
        control_->Query("reading the publication's tables",
                        "SELECT 1 FROM pg_publication_tables WHERE pubname = $1 AND schemaname = "
                        "$2 AND tablename = $3",
                        {publication, table.schema, table.name}));
    if (member.rows() == 0) {
      return Status::InvalidConfig(fmt::format(
          "data_sources.{}: publication {} does not include table {}.{}; run ALTER PUBLICATION "
          "{} ADD TABLE {}.{}",
          settings_.source_name, publication, table.schema, table.name, publication, table.schema,
          table.name));
    }
  }
  return Status::OK();
}

// A reader that just died (a crash, kill -9) holds its slot until the server notices its
// connection is gone, which under load takes a moment: the next run waits this long for the slot
// before it calls it another process's.
constexpr auto kSlotReleaseWait = std::chrono::seconds(30);
constexpr auto kSlotPollInterval = std::chrono::milliseconds(100);

Result<SlotState> ChangeStreamSource::ReadSlotOnceReleased(const std::string& slot_name) {
  const auto deadline = std::chrono::steady_clock::now() + kSlotReleaseWait;
  bool has_said_it_waits = false;
  while (true) {
    SKIPPR_ASSIGN_OR_RETURN(SlotState slot, ReadSlot(*control_, slot_name));
    if (!slot.is_active || std::chrono::steady_clock::now() >= deadline) return slot;
    if (!has_said_it_waits) {
      spdlog::info("postgres {}: replication slot {} is active; waiting up to {} s for its reader "
                   "to let go (a reader that just stopped holds it until the server notices)",
                   settings_.Describe(), slot_name, kSlotReleaseWait.count());
      has_said_it_waits = true;
    }
    std::this_thread::sleep_for(kSlotPollInterval);
  }
}

Status ChangeStreamSource::EnsureSlot(std::optional<ExportedSnapshot>* exported) {
  const std::string& slot_name = settings_.replication_slot_name;
  SKIPPR_ASSIGN_OR_RETURN(const SlotState slot, ReadSlotOnceReleased(slot_name));
  if (slot.exists) {
    if (!slot.is_logical_pgoutput) {
      return Status::InvalidConfig(fmt::format(
          "data_sources.{}.replication_slot_name: slot {} is not a logical pgoutput slot; name "
          "another slot",
          settings_.source_name, slot_name));
    }
    if (slot.wal_status == "lost") {
      return Status::Corruption(fmt::format(
          "data_sources.{}: replication slot {} was invalidated (wal_status lost: the server "
          "removed WAL it still needed), so changes since LSN {} are gone; drop the slot and the "
          "pipeline's state (DATA_DIR/<pipeline>) to read the tables again from a new snapshot",
          settings_.source_name, slot_name, FormatLsn(slot.confirmed_flush_lsn)));
    }
    if (slot.is_active) {
      return Status::Unavailable(fmt::format(
          "replication slot \"{}\" is active: another process has held it for {} s; "
          "stop it, or give this pipeline its own replication_slot_name",
          slot_name, kSlotReleaseWait.count()));
    }
    return Status::OK();
  }
  if (has_committed_cursor_) {
    return Status::Corruption(fmt::format(
        "data_sources.{}: replication slot {} is gone but this pipeline read changes from it up "
        "to LSN {}; the changes since are lost. Drop the pipeline's state (DATA_DIR/<pipeline>) "
        "to read the tables again from a new snapshot",
        settings_.source_name, slot_name, FormatLsn(committed_commit_lsn_)));
  }
  SKIPPR_ASSIGN_OR_RETURN(replication_, PgConnection::Connect(settings_,
                                                              PgConnection::Kind::kReplication));
  const bool export_snapshot = settings_.cdc_mode == CdcMode::kSnapshotThenCdc;
  Result<CreatedSlot> created = CreateSlot(*replication_, slot_name, export_snapshot);
  if (!created.ok()) {
    return Status::InvalidConfig(fmt::format(
        "creating Postgres logical replication slot {} failed: {}; the server needs wal_level = "
        "logical and the user the REPLICATION attribute",
        slot_name, created.status().message()));
  }
  spdlog::info("postgres {}: created replication slot {} at LSN {}", settings_.Describe(),
               slot_name, FormatLsn(created->consistent_lsn));
  if (export_snapshot) *exported = ExportedSnapshot{created->snapshot_name, created->consistent_lsn};
  return Status::OK();
}

// ----- reading --------------------------------------------------------------------------------

Result<std::optional<SourceBatch>> ChangeStreamSource::Next() {
  if (snapshot_ && !is_snapshot_done_) {
    SKIPPR_ASSIGN_OR_RETURN(std::optional<SourceBatch> batch, snapshot_->Next());
    if (batch) return batch;
    // Its readers are done: the snapshot it exported may go. The source itself stays, since the
    // batches it handed over point into it.
    is_snapshot_done_ = true;
    has_unflushed_snapshot_ = true;
    snapshot_->CloseConnections();
    if (is_sampling_) return std::optional<SourceBatch>();
  }
  if (is_sampling_) return std::optional<SourceBatch>();
  if (!stream_) SKIPPR_RETURN_IF_ERROR(StartStream());
  while (true) {
    if (ready_) {
      std::optional<SourceBatch> batch = std::move(ready_);
      ready_.reset();
      NoteHandedOut(*batch);
      return batch;
    }
    if (is_finished_) return std::optional<SourceBatch>();
    SKIPPR_RETURN_IF_ERROR(ReadStream());
  }
}

Status ChangeStreamSource::StartStream() {
  if (!replication_) {
    SKIPPR_ASSIGN_OR_RETURN(replication_,
                            PgConnection::Connect(settings_, PgConnection::Kind::kReplication));
  }
  SKIPPR_ASSIGN_OR_RETURN(PgResult lsn, control_->Query("reading the server's WAL position",
                                                        "SELECT pg_current_wal_lsn()"));
  target_lsn_ = ParseLsn(lsn.Text(0, 0));
  // Large transactions in progress are streamed to spill files (a pass without a scratch
  // directory has the server decode them after their commit instead).
  if (!options_.scratch_directory.empty()) {
    spilled_ = std::make_unique<SpilledTransactions>(options_.scratch_directory);
    SKIPPR_RETURN_IF_ERROR(spilled_->Reset());
  }
  SKIPPR_ASSIGN_OR_RETURN(stream_, ReplicationStream::Start(std::move(replication_),
                                                            settings_.replication_slot_name,
                                                            settings_.publication_name, 0,
                                                            spilled_ != nullptr));
  last_data_ = std::chrono::steady_clock::now();
  last_status_ = last_data_;
  spdlog::info("postgres {}: streaming changes from slot {} (caught up at LSN {}; pgoutput "
               "protocol {})",
               settings_.Describe(), settings_.replication_slot_name, FormatLsn(target_lsn_),
               stream_->streams_in_progress() ? 2 : 1);
  return Status::OK();
}

// Reads what the server sent within one poll interval; moves a batch to `ready_` when one is due,
// and marks the pass finished when it has caught up.
Status ChangeStreamSource::ReadStream() {
  // A streamed transaction being applied is read from its spill file first.
  if (replay_) {
    SKIPPR_RETURN_IF_ERROR(ReplayNext());
    return SendStatusWhenDue(std::chrono::steady_clock::now(), false, false);
  }
  // Right after a transaction's commit, only what has already arrived is read: when nothing has,
  // the source has caught up, and what it holds is committed now (a stream under steady load would
  // otherwise wait for the buffer threshold).
  const bool is_quick_check = has_read_commit_;
  has_read_commit_ = false;
  SKIPPR_ASSIGN_OR_RETURN(std::optional<StreamEvent> event,
                          stream_->Read(is_quick_check ? std::chrono::milliseconds(0)
                                                       : kPollInterval));
  const auto now = std::chrono::steady_clock::now();
  bool reply_requested = false;
  if (event) {
    if (std::holds_alternative<StreamEnded>(*event)) {
      return Status::IOError(fmt::format("PostgreSQL {}: the server ended the replication stream",
                                         settings_.Describe()));
    }
    if (const auto* keepalive = std::get_if<Keepalive>(&*event)) {
      sent_lsn_ = std::max(sent_lsn_, keepalive->wal_end);
      reply_requested = keepalive->reply_requested;
    } else {
      const auto& data = std::get<XLogData>(*event);
      received_lsn_ = std::max(received_lsn_, data.wal_end);
      last_data_ = now;
      SKIPPR_RETURN_IF_ERROR(Receive(data.payload));
      CrashPoint("postgres.cdc.after_receive");
    }
  } else if (!in_transaction_) {
    // Idle: hand over what is pending, to be committed now, and ask the server how far it has sent.
    SKIPPR_RETURN_IF_ERROR(ReleasePending());
    if (!ready_ && has_unflushed_snapshot_) {
      // Only the snapshot's rows are buffered: a batch with no rows asks for their commit.
      ready_.emplace();
      ready_->partition = StreamPartitionId(settings_.replication_slot_name);
      ready_->position = stream_position_;
    }
    if (ready_) {
      ready_->is_caught_up = true;
      has_unflushed_snapshot_ = false;
    }
    reply_requested = false;
    if (ShouldFinish(now)) {
      is_finished_ = true;
      return Status::OK();
    }
    SKIPPR_RETURN_IF_ERROR(EmitHeartbeatWhenDue(now));
  }
  // A whole poll interval without data: ask the server how far it has sent.
  const bool was_idle = !event && !is_quick_check;
  return SendStatusWhenDue(now, reply_requested, was_idle);
}

Status ChangeStreamSource::SendStatusWhenDue(std::chrono::steady_clock::time_point now,
                                             bool reply_requested, bool was_idle) {
  if (reply_requested || now - last_status_ >= kStatusInterval || was_idle) {
    SKIPPR_RETURN_IF_ERROR(stream_->SendStatus(received_lsn_, ConfirmableLsn(), was_idle));
    last_status_ = now;
  }
  return Status::OK();
}

// With heartbeat_interval_seconds: while the tables read are idle, a message written to the
// server's WAL from time to time. The server decodes it (pgoutput does not send it on) and reports
// its position, to which the slot is then confirmed: the slot's progress rests on a record of its
// own database, not only on the server's keepalives.
Status ChangeStreamSource::EmitHeartbeatWhenDue(std::chrono::steady_clock::time_point now) {
  if (!settings_.heartbeat_interval_seconds) return Status::OK();
  if (now - last_heartbeat_ < std::chrono::seconds(*settings_.heartbeat_interval_seconds)) {
    return Status::OK();
  }
  last_heartbeat_ = now;
  const Status emitted = control_->Execute(
      "writing a heartbeat (heartbeat_interval_seconds)",
      fmt::format("SELECT pg_logical_emit_message(false, 'skippr_heartbeat', {})",
                  control_->QuoteLiteral(settings_.replication_slot_name)));
  if (!emitted.ok()) {
    return Status::InvalidConfig(emitted.message() +
                                 "; the user needs the REPLICATION attribute (or remove "
                                 "heartbeat_interval_seconds)");
  }
  return Status::OK();
}

// One pgoutput message off the wire. Inside a stream block it belongs to a transaction still in
// progress and goes to that transaction's spill file; a Stream Commit starts applying the file.
Status ChangeStreamSource::Receive(std::string_view payload) {
  const bool is_stream_stop = !payload.empty() && payload[0] == 'E';
  if (stream_block_xid_ && !is_stream_stop) {
    SKIPPR_ASSIGN_OR_RETURN(StreamedChange change, SplitStreamedChange(payload));
    return spilled_->Append(*stream_block_xid_, change.xid, change.message);
  }
  SKIPPR_ASSIGN_OR_RETURN(PgOutputMessage message, ParsePgOutput(payload));
  if (const auto* start = std::get_if<StreamStartMessage>(&message)) {
    if (!spilled_) {
      return Status::Corruption(fmt::format(
          "PostgreSQL {} streamed an in-progress transaction, which this pass did not ask for",
          settings_.Describe()));
    }
    stream_block_xid_ = start->xid;
    return spilled_->Start(start->xid, start->is_first_segment);
  }
  if (std::holds_alternative<StreamStopMessage>(message)) {
    stream_block_xid_.reset();
    return Status::OK();
  }
  if (const auto* abort = std::get_if<StreamAbortMessage>(&message)) {
    return spilled_ ? spilled_->Abort(abort->xid, abort->subxid) : Status::OK();
  }
  if (const auto* commit = std::get_if<StreamCommitMessage>(&message)) {
    if (!spilled_) return Status::Corruption("a Stream Commit without a stream");
    SKIPPR_ASSIGN_OR_RETURN(replay_, spilled_->Commit(commit->xid));
    replay_commit_ = CommitMessage{commit->commit_lsn, commit->end_lsn};
    return Apply(BeginMessage{commit->commit_lsn, commit->xid});
  }
  SKIPPR_RETURN_IF_ERROR(Apply(message));
  has_read_commit_ = std::holds_alternative<CommitMessage>(message);
  return Status::OK();
}

// The next change of the streamed transaction being applied, or its commit after the last one.
Status ChangeStreamSource::ReplayNext() {
  SKIPPR_ASSIGN_OR_RETURN(std::optional<std::string> change, replay_->Next());
  if (!change) {
    replay_.reset();
    has_read_commit_ = true;
    return Apply(replay_commit_);
  }
  SKIPPR_ASSIGN_OR_RETURN(PgOutputMessage message, ParsePgOutput(*change));
  if (std::holds_alternative<StreamStartMessage>(message) ||
      std::holds_alternative<StreamStopMessage>(message) ||
      std::holds_alternative<StreamCommitMessage>(message) ||
      std::holds_alternative<StreamAbortMessage>(message) ||
      std::holds_alternative<BeginMessage>(message) ||
      std::holds_alternative<CommitMessage>(message)) {
    return Status::Corruption(fmt::format(
        "PostgreSQL {}: a streamed transaction holds a transaction-control message",
        settings_.Describe()));
  }
  return Apply(message);
}

bool ChangeStreamSource::ShouldFinish(std::chrono::steady_clock::time_point now) const {
  if (in_transaction_ || ready_ || (pending_ && !pending_->records.empty())) return false;
  if (options_.stop_requested && options_.stop_requested->load(std::memory_order_relaxed)) {
    return true;
  }
  if (settings_.cdc_idle_timeout_seconds && *settings_.cdc_idle_timeout_seconds > 0) {
    return now - last_data_ >= std::chrono::seconds(*settings_.cdc_idle_timeout_seconds);
  }
  if (options_.follows_changes) return false;  // until stopped
  return sent_lsn_ >= target_lsn_ || last_end_lsn_ >= target_lsn_;
}

Status ChangeStreamSource::Apply(const PgOutputMessage& message) {
  if (const auto* begin = std::get_if<BeginMessage>(&message)) {
    in_transaction_ = true;
    transaction_lsn_ = begin->final_lsn;
    transaction_ordinal_ = 0;
    return Status::OK();
  }
  if (const auto* commit = std::get_if<CommitMessage>(&message)) {
    in_transaction_ = false;
    last_end_lsn_ = commit->end_lsn;
    // Replayed: an earlier pass committed the whole transaction. One it committed part of ends
    // here, and its cursor becomes complete.
    if (IsCommitted(commit->commit_lsn, UINT64_MAX)) return Status::OK();
    StreamCursor cursor{commit->commit_lsn, 0, commit->end_lsn};
    SetStreamCursor(cursor);
    return Status::OK();
  }
  if (const auto* relation = std::get_if<RelationMessage>(&message)) return AddRelation(*relation);
  if (std::holds_alternative<OtherMessage>(message)) return Status::OK();
  if (const auto* truncate = std::get_if<TruncateMessage>(&message)) {
    // One row per table, carrying only its order: the table's rows before it are gone.
    for (uint32_t id : truncate->relation_ids) {
      const uint64_t ordinal = transaction_ordinal_++ * 2 + 1;
      auto relation = relations_.find(id);
      if (relation == relations_.end() || !relation->second->is_read ||
          IsCommitted(transaction_lsn_, ordinal)) {
        continue;
      }
      SKIPPR_RETURN_IF_ERROR(
          AppendChange(*relation->second, Value::Object({}), Mutation::kTruncate, ordinal));
    }
    return Status::OK();
  }
  return ApplyRowChange(message);
}

Status ChangeStreamSource::AddRelation(const RelationMessage& message) {
  Relation relation;
  relation.schema = message.schema;
  relation.name = message.name;
  relation.namespace_name = NamespaceOfTable(message.schema, message.name);
  relation.replica_identity = message.replica_identity;
  const auto read = read_tables_.find({message.schema, message.name});
  relation.is_read = read != read_tables_.end();
  // The table's primary key; without one (REPLICA IDENTITY FULL) every column, as pgoutput flags.
  const std::vector<std::string> primary_key =
      relation.is_read ? read->second : std::vector<std::string>();
  for (size_t i = 0; i < message.columns.size(); ++i) {
    const RelationColumn& column = message.columns[i];
    SKIPPR_ASSIGN_OR_RETURN(PgType type,
                            ResolveType(*control_, column.type_oid, column.modifier));
    relation.column_names.push_back(column.name);
    relation.decoders.emplace_back(type);
    relation.declared_types.emplace(column.name, relation.decoders.back().logical_type());
    if (primary_key.empty() && column.is_key) {
      relation.key_columns.push_back(i);
      relation.key_names.push_back(column.name);
    }
  }
  for (const std::string& key : primary_key) {
    const auto column = std::find(relation.column_names.begin(), relation.column_names.end(), key);
    if (column == relation.column_names.end()) continue;
    relation.key_columns.push_back(static_cast<size_t>(column - relation.column_names.begin()));
    relation.key_names.push_back(key);
  }
  // A relation message before a batch of another shape ends that batch: its context points here.
  SKIPPR_RETURN_IF_ERROR(ReleasePending());
  // Batches handed over point at a relation's declared types and key: one a newer message
  // replaces is kept until the source goes.
  std::unique_ptr<Relation>& current = relations_[message.relation_id];
  if (current) retired_relations_.push_back(std::move(current));
  current = std::make_unique<Relation>(std::move(relation));
  return Status::OK();
}

Status ChangeStreamSource::ApplyRowChange(const PgOutputMessage& message) {
  uint32_t relation_id = 0;
  const Tuple* new_tuple = nullptr;
  const Tuple* old_tuple = nullptr;
  Mutation mutation = Mutation::kInsert;
  if (const auto* insert = std::get_if<InsertMessage>(&message)) {
    relation_id = insert->relation_id;
    new_tuple = &insert->new_tuple;
  } else if (const auto* update = std::get_if<UpdateMessage>(&message)) {
    relation_id = update->relation_id;
    new_tuple = &update->new_tuple;
    old_tuple = update->old_tuple ? &*update->old_tuple : nullptr;
    mutation = Mutation::kUpdate;
  } else if (const auto* remove = std::get_if<DeleteMessage>(&message)) {
    relation_id = remove->relation_id;
    old_tuple = &remove->old_tuple;
    mutation = Mutation::kDelete;
  }
  // Two ordinals per change: a key change is a delete (even) then an insert (odd).
  const uint64_t ordinal = transaction_ordinal_++ * 2;
  auto found = relations_.find(relation_id);
  if (found == relations_.end()) {
    return Status::Corruption(fmt::format(
        "PostgreSQL {}: a change of relation {} arrived before its Relation message",
        settings_.Describe(), relation_id));
  }
  const Relation& relation = *found->second;
  if (!relation.is_read || IsCommitted(transaction_lsn_, ordinal + 1)) return Status::OK();

  if (mutation == Mutation::kDelete) {
    SKIPPR_ASSIGN_OR_RETURN(Value row, DecodeTuple(relation, *old_tuple, nullptr, nullptr));
    return AppendChange(relation, std::move(row), Mutation::kDelete, ordinal + 1);
  }
  std::vector<size_t> unchanged;  // large values the change left out
  SKIPPR_ASSIGN_OR_RETURN(Value row, DecodeTuple(relation, *new_tuple, old_tuple, &unchanged));
  if (mutation == Mutation::kUpdate && old_tuple != nullptr) {
    // A changed primary key: the old key is deleted, the new one inserted.
    SKIPPR_ASSIGN_OR_RETURN(Value old_row, DecodeTuple(relation, *old_tuple, nullptr, nullptr));
    if (BusinessKey(old_row.as_object(), relation.key_columns) !=
        BusinessKey(row.as_object(), relation.key_columns)) {
      if (!IsCommitted(transaction_lsn_, ordinal)) {
        SKIPPR_RETURN_IF_ERROR(
            AppendChange(relation, std::move(old_row), Mutation::kDelete, ordinal));
      }
      mutation = Mutation::kInsert;
    }
  }
  return AppendChange(relation, std::move(row), mutation, ordinal + 1, new_tuple,
                      std::move(unchanged));
}

bool ChangeStreamSource::IsCommitted(uint64_t commit_lsn, uint64_t ordinal) const {
  if (!has_committed_cursor_) return false;
  StreamCursor committed{committed_commit_lsn_, committed_next_ordinal_, committed_end_lsn_};
  return committed.Covers(commit_lsn, ordinal);
}

Result<Value> ChangeStreamSource::DecodeTuple(const Relation& relation, const Tuple& tuple,
                                              const Tuple* old_tuple,
                                              std::vector<size_t>* unchanged) const {
  if (tuple.size() > relation.decoders.size()) {
    return Status::Corruption(fmt::format(
        "PostgreSQL {}: a change of {}.{} has {} columns, its relation {}", settings_.Describe(),
        relation.schema, relation.name, tuple.size(), relation.decoders.size()));
  }
  ValueObject row;
  row.reserve(tuple.size());
  for (size_t i = 0; i < tuple.size(); ++i) {
    const TupleValue* value = &tuple[i];
    if (value->kind == TupleValue::Kind::kUnchangedToast && old_tuple != nullptr &&
        i < old_tuple->size() && (*old_tuple)[i].kind == TupleValue::Kind::kText) {
      value = &(*old_tuple)[i];  // REPLICA IDENTITY FULL: the old row holds it
    }
    switch (value->kind) {
      case TupleValue::Kind::kNull:
        row.emplace_back(relation.column_names[i], Value::Null());
        break;
      case TupleValue::Kind::kText:
        row.emplace_back(relation.column_names[i], relation.decoders[i].Decode(value->text));
        break;
      case TupleValue::Kind::kUnchangedToast:
        if (unchanged != nullptr) unchanged->push_back(i);
        row.emplace_back(relation.column_names[i], Value::Null());
        break;
    }
  }
  return Value::Object(std::move(row));
}

// An UPDATE that left a large (TOASTed) value unchanged does not carry it (unless the table has
// REPLICA IDENTITY FULL): the change is noted, and the value is read from the table by the row's
// key before the batch is handed over, for all such changes of the batch in a few queries. It is
// the value then: this change's, or, when a later change set it again, that later one's — which
// the later change brings anyway, so the table converges to the source. A row deleted since reads
// NULL until its delete, which follows.
Status ChangeStreamSource::NoteUnchangedValues(const Relation& relation, const Tuple& tuple,
                                               std::vector<size_t> columns) {
  UnchangedValues fill;
  fill.relation = &relation;
  fill.record = pending_->records.size() - 1;
  fill.columns = std::move(columns);
  for (size_t key : relation.key_columns) {
    if (key >= tuple.size() || tuple[key].kind != TupleValue::Kind::kText) {
      return Status::NotSupported(fmt::format(
          "data_sources.{}: an UPDATE of {}.{} at LSN {} left a large (TOASTed) value unchanged "
          "and its key is not in the change; run ALTER TABLE {}.{} REPLICA IDENTITY FULL",
          settings_.source_name, relation.schema, relation.name, FormatLsn(transaction_lsn_),
          relation.schema, relation.name));
    }
    fill.key.push_back(tuple[key].text);
  }
  pending_unchanged_.push_back(std::move(fill));
  return Status::OK();
}

// Reads the values every noted change left out, one query per kUnchangedKeysPerQuery keys of a
// table and set of columns, into the pending batch's records.
Status ChangeStreamSource::FillUnchangedValues() {
  std::map<std::pair<const Relation*, std::vector<size_t>>, std::vector<const UnchangedValues*>>
      groups;
  for (const UnchangedValues& fill : pending_unchanged_) {
    groups[{fill.relation, fill.columns}].push_back(&fill);
  }
  for (const auto& [group, fills] : groups) {
    for (size_t first = 0; first < fills.size(); first += kUnchangedKeysPerQuery) {
      const size_t last = std::min(fills.size(), first + kUnchangedKeysPerQuery);
      SKIPPR_RETURN_IF_ERROR(FillUnchangedValues(*group.first, group.second,
                                                 {fills.begin() + first, fills.begin() + last}));
    }
  }
  pending_unchanged_.clear();
  return Status::OK();
}

Status ChangeStreamSource::FillUnchangedValues(const Relation& relation,
                                               const std::vector<size_t>& columns,
                                               const std::vector<const UnchangedValues*>& fills) {
  // SELECT <key columns>, <columns> FROM t WHERE (<key columns>) IN (($1, $2), ...): the key's
  // text as the server writes it for both, so each row finds its change.
  std::string key_list;
  for (size_t key : relation.key_columns) {
    key_list += (key_list.empty() ? "" : ", ") + control_->QuoteIdentifier(relation.column_names[key]);
  }
  std::string select = key_list;
  for (size_t column : columns) select += ", " + control_->QuoteIdentifier(relation.column_names[column]);
  std::string tuples;
  std::vector<std::string> parameters;
  for (const UnchangedValues* fill : fills) {
    std::string tuple;
    for (const std::string& value : fill->key) {
      parameters.push_back(value);
      tuple += fmt::format("{}${}", tuple.empty() ? "" : ", ", parameters.size());
    }
    tuples += (tuples.empty() ? "(" : ", (") + tuple + ")";
  }
  SKIPPR_ASSIGN_OR_RETURN(
      PgResult current,
      control_->Query(fmt::format("reading the unchanged large values of {}.{}", relation.schema,
                                  relation.name),
                      fmt::format("SELECT {} FROM {}.{} WHERE ({}) IN ({})", select,
                                  control_->QuoteIdentifier(relation.schema),
                                  control_->QuoteIdentifier(relation.name), key_list, tuples),
                      parameters));
  const size_t key_count = relation.key_columns.size();
  std::map<std::vector<std::string_view>, int> row_of_key;
  for (int row = 0; row < current.rows(); ++row) {
    std::vector<std::string_view> key;
    for (size_t k = 0; k < key_count; ++k) key.push_back(current.Text(row, static_cast<int>(k)));
    row_of_key.emplace(std::move(key), row);
  }
  for (const UnchangedValues* fill : fills) {
    const auto found = row_of_key.find({fill->key.begin(), fill->key.end()});
    if (found == row_of_key.end()) continue;  // deleted since: its delete follows
    ValueObject& row = pending_->records[fill->record].value.mutable_object();
    for (size_t i = 0; i < columns.size(); ++i) {
      const int field = static_cast<int>(key_count + i);
      if (current.IsNull(found->second, field)) continue;
      row[columns[i]].second =
          relation.decoders[columns[i]].Decode(current.Text(found->second, field));
    }
  }
  return Status::OK();
}

Status ChangeStreamSource::AppendChange(const Relation& relation, Value row, Mutation mutation,
                                        uint64_t ordinal, const Tuple* tuple,
                                        std::vector<size_t> unchanged) {
  if (pending_ && pending_->context.source_namespace != relation.namespace_name) {
    SKIPPR_RETURN_IF_ERROR(ReleasePending());
  }
  if (!pending_) {
    pending_.emplace();
    pending_->partition = StreamPartitionId(settings_.replication_slot_name);
    SetTableContext(pending_->context, settings_, relation.schema, relation.name,
                    relation.namespace_name, relation.declared_types);
    if (!relation.key_names.empty()) pending_->context.key_fields = &relation.key_names;
  }
  SourceRecord record;
  RowChange change;
  change.mutation = mutation;
  change.order_token = OrderToken(transaction_lsn_, ordinal);
  change.event_id = fmt::format("{} {}", FormatLsn(transaction_lsn_), ordinal);
  if (mutation != Mutation::kTruncate) {
    change.business_key = BusinessKey(row.as_object(), relation.key_columns);
  }
  record.change = std::move(change);
  record.value = std::move(row);
  stream_position_.records_consumed += 1;
  record.row = stream_position_.records_consumed;
  pending_->records.push_back(std::move(record));
  if (!unchanged.empty()) SKIPPR_RETURN_IF_ERROR(NoteUnchangedValues(relation, *tuple, std::move(unchanged)));
  SetStreamCursor({transaction_lsn_, ordinal + 1, 0});
  if (pending_->records.size() >= settings_.batch_size_rows) return ReleasePending();
  return Status::OK();
}

void ChangeStreamSource::SetStreamCursor(const StreamCursor& cursor) {
  stream_position_.cursor = cursor.Format();
  stream_position_.is_closed = false;
  if (!pending_) {
    // A position with no rows (a commit, changes of tables not read): it still has to reach the
    // store so that the slot can be confirmed past it.
    pending_.emplace();
    pending_->partition = StreamPartitionId(settings_.replication_slot_name);
  }
  pending_->position = stream_position_;
}

Status ChangeStreamSource::ReleasePending() {
  if (!pending_ || ready_) return Status::OK();
  SKIPPR_RETURN_IF_ERROR(FillUnchangedValues());
  ready_ = std::move(pending_);
  pending_.reset();
  return Status::OK();
}

void ChangeStreamSource::NoteHandedOut(const SourceBatch& batch) {
  if (std::optional<StreamCursor> cursor = StreamCursor::Parse(batch.position.cursor)) {
    if (cursor->complete()) handed_end_lsn_ = std::max(handed_end_lsn_, cursor->end_lsn);
  }
}

void ChangeStreamSource::Acknowledge(const SourcePositions& committed) {
  auto position = committed.find(StreamPartitionId(settings_.replication_slot_name));
  if (position == committed.end()) return;
  if (std::optional<StreamCursor> cursor = StreamCursor::Parse(position->second.cursor)) {
    uint64_t acked = acked_end_lsn_.load();
    while (cursor->end_lsn > acked && !acked_end_lsn_.compare_exchange_weak(acked, cursor->end_lsn)) {
    }
  }
}

uint64_t ChangeStreamSource::ConfirmableLsn() const {
  const uint64_t acked = acked_end_lsn_.load();
  // Nothing handed over is waiting for its commit, and nothing is held: the server's position
  // (transactions with no change to the tables read, or none at all) may be confirmed too.
  if (acked >= handed_end_lsn_ && !in_transaction_ && !ready_ && !pending_) {
    return std::max(acked, sent_lsn_);
  }
  return acked;
}

Result<std::optional<ServerState>> ReadSlotState(const config::ConnectorConfig& connector,
                                                 const std::string& source_name) {
  SKIPPR_ASSIGN_OR_RETURN(PostgresSettings settings, PostgresSettings::FromConnector(connector));
  settings.source_name = source_name;
  if (settings.cdc_mode == CdcMode::kSnapshot) return std::optional<ServerState>();
  SKIPPR_ASSIGN_OR_RETURN(std::unique_ptr<PgConnection> connection,
                          PgConnection::Connect(settings));
  SKIPPR_ASSIGN_OR_RETURN(
      PgResult slot,
      connection->Query(
          "reading the replication slot",
          "SELECT active, COALESCE(wal_status, ''), COALESCE(pg_wal_lsn_diff(pg_current_wal_lsn(), "
          "restart_lsn), 0)::bigint, COALESCE(pg_wal_lsn_diff(pg_current_wal_lsn(), "
          "confirmed_flush_lsn), 0)::bigint, COALESCE(confirmed_flush_lsn::text, '') FROM "
          "pg_replication_slots WHERE slot_name = $1",
          {settings.replication_slot_name}));
  ServerState state;
  state.what = "replication slot " + settings.replication_slot_name;
  if (slot.rows() == 0) {
    state.facts.push_back({"exists", "false"});
    return std::optional<ServerState>(std::move(state));
  }
  state.facts = {{"exists", "true"},
                 {"active", slot.Text(0, 0) == "t" ? "true" : "false"},
                 {"wal_status", std::string(slot.Text(0, 1))},
                 {"retained_wal_bytes", std::string(slot.Text(0, 2))},
                 {"behind_server_bytes", std::string(slot.Text(0, 3))},
                 {"confirmed_flush_lsn", std::string(slot.Text(0, 4))}};
  return std::optional<ServerState>(std::move(state));
}

namespace {

// The server: wal_level and the role's REPLICATION attribute (what CDC needs).
std::vector<SourceCheck> CheckReplicationSetup(PgConnection& connection,
                                               const PostgresSettings& settings) {
  std::vector<SourceCheck> checks;
  Result<PgResult> server = connection.Query(
      "reading the server's settings",
      "SELECT current_setting('wal_level'), rolreplication OR rolsuper FROM pg_roles WHERE "
      "rolname = current_user");
  if (!server.ok() || server->rows() != 1) {
    checks.push_back({false, fmt::format("data source '{}': {}", settings.source_name,
                                         server.ok() ? "cannot read the role" : server.status().message())});
    return checks;
  }
  const std::string wal_level(server->Text(0, 0));
  checks.push_back({wal_level == "logical",
                    wal_level == "logical"
                        ? fmt::format("data source '{}': wal_level = logical", settings.source_name)
                        : fmt::format("data source '{}': wal_level is {}, change data capture needs "
                                      "logical: set wal_level = logical in postgresql.conf and "
                                      "restart the server",
                                      settings.source_name, wal_level)});
  const bool can_replicate = server->Text(0, 1) == "t";
  checks.push_back(
      {can_replicate,
       can_replicate
           ? fmt::format("data source '{}': user {} may replicate", settings.source_name,
                         settings.user)
           : fmt::format("data source '{}': user {} lacks the REPLICATION attribute: ALTER ROLE {} "
                         "REPLICATION (on RDS: GRANT rds_replication TO {})",
                         settings.source_name, settings.user, settings.user, settings.user)});
  return checks;
}

// Each table: readable, and (CDC) with a key or full replica identity.
void CheckTables(PgConnection& connection, const PostgresSettings& settings,
                 const std::vector<PgTable>& tables, std::vector<SourceCheck>& checks) {
  const bool captures_changes = settings.cdc_mode != CdcMode::kSnapshot;
  for (const PgTable& table : tables) {
    Result<PgResult> readable = connection.Query(
        "checking a table's privileges", "SELECT has_table_privilege($1::oid, 'SELECT')",
        {std::to_string(table.oid)});
    const bool can_read = readable.ok() && readable->rows() == 1 && readable->Text(0, 0) == "t";
    std::string problem;
    if (!can_read) {
      problem = fmt::format("user {} may not read it: GRANT SELECT ON {}.{} TO {}", settings.user,
                            table.schema, table.name, settings.user);
    } else if (captures_changes && table.primary_key.empty() && table.replica_identity != 'f') {
      problem = fmt::format("no primary key and no REPLICA IDENTITY FULL: ALTER TABLE {}.{} "
                            "REPLICA IDENTITY FULL",
                            table.schema, table.name);
    }
    checks.push_back(
        {problem.empty(),
         problem.empty()
             ? fmt::format("data source '{}': table {}.{} → namespace {}{}", settings.source_name,
                           table.schema, table.name, table.namespace_name,
                           table.primary_key.empty()
                               ? ""
                               : fmt::format(", key ({})", fmt::join(table.primary_key, ", ")))
             : fmt::format("data source '{}': table {}.{}: {}", settings.source_name, table.schema,
                           table.name, problem)});
  }
}

}  // namespace

std::vector<SourceCheck> CheckPostgres(const config::ConnectorConfig& connector,
                                       const std::string& source_name) {
  Result<PostgresSettings> parsed = PostgresSettings::FromConnector(connector);
  if (!parsed.ok()) return {{false, parsed.status().message()}};
  PostgresSettings settings = std::move(*parsed);
  settings.source_name = source_name;
  Result<std::unique_ptr<PgConnection>> connection = PgConnection::Connect(settings);
  if (!connection.ok()) return {{false, connection.status().message()}};
  std::vector<SourceCheck> checks;
  Result<PgResult> server = (*connection)->Query(
      "reading the server version",
      "SELECT current_setting('server_version'), COALESCE((SELECT ssl FROM pg_stat_ssl WHERE pid "
      "= pg_backend_pid()), false)");
  const bool uses_tls = server.ok() && server->Text(0, 1) == "t";
  checks.push_back({true, fmt::format("data source '{}': connected to PostgreSQL {} at {} ({})",
                                      source_name, server.ok() ? server->Text(0, 0) : "?",
                                      settings.Describe(),
                                      uses_tls ? "TLS" : "no TLS")});
  if (settings.cdc_mode != CdcMode::kSnapshot) {
    for (SourceCheck& check : CheckReplicationSetup(**connection, settings)) {
      checks.push_back(std::move(check));
    }
  }
  Result<std::vector<PgTable>> tables = ListTables(**connection, settings);
  if (!tables.ok()) {
    checks.push_back({false, tables.status().message()});
    return checks;
  }
  if (tables->empty()) {
    checks.push_back({false, fmt::format("data source '{}': no tables to read (none in schema "
                                         "public): create one or name tables",
                                         source_name)});
  }
  CheckTables(**connection, settings, *tables, checks);
  return checks;
}

}  // namespace skippr::sources::postgres
