// Internal to sources/: PostgreSQL's logical replication protocol as the Postgres source speaks
// it — a replication slot, the streaming (CopyBoth) connection with its keepalives and standby
// status updates, and the pgoutput messages (protocol versions 1 and 2) decoded into plain structs.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/status.hpp"
#include "sources/postgres_connection.hpp"

namespace skippr::sources::postgres {

// A replication slot as pg_replication_slots shows it.
struct SlotState {
  bool exists = false;
  bool is_logical_pgoutput = false;
  bool is_active = false;
  std::string wal_status;  // reserved, extended, unreserved, lost
  uint64_t confirmed_flush_lsn = 0;
  std::string database;
};
Result<SlotState> ReadSlot(PgConnection& connection, const std::string& slot_name);

// ----- pgoutput messages ----------------------------------------------------------------------

struct TupleValue {
  enum class Kind : uint8_t { kNull, kUnchangedToast, kText };
  Kind kind = Kind::kNull;
  std::string text;
};
using Tuple = std::vector<TupleValue>;

struct BeginMessage {
  uint64_t final_lsn = 0;  // the commit record's LSN: every change of the transaction knows it
  uint32_t xid = 0;
};
struct CommitMessage {
  uint64_t commit_lsn = 0;
  uint64_t end_lsn = 0;  // where the next transaction starts: the slot may be confirmed to here
};
struct RelationColumn {
  bool is_key = false;
  std::string name;
  uint32_t type_oid = 0;
  int32_t modifier = -1;
};
struct RelationMessage {
  uint32_t relation_id = 0;
  std::string schema;
  std::string name;
  char replica_identity = 'd';
  std::vector<RelationColumn> columns;
};
struct InsertMessage {
  uint32_t relation_id = 0;
  Tuple new_tuple;
};
struct UpdateMessage {
  uint32_t relation_id = 0;
  std::optional<Tuple> old_tuple;  // 'K' (key columns) or 'O' (replica identity full)
  bool old_is_key_only = false;
  Tuple new_tuple;
};
struct DeleteMessage {
  uint32_t relation_id = 0;
  Tuple old_tuple;
  bool old_is_key_only = false;
};
struct TruncateMessage {
  std::vector<uint32_t> relation_ids;
};
struct OtherMessage {  // Type, Origin, Message: nothing the source needs
  char tag = 0;
};
// Protocol version 2 streams a large transaction while it is still in progress: in blocks between
// Stream Start and Stream Stop, each change prefixed with its (sub)transaction id, then a Stream
// Commit or a Stream Abort (of the whole transaction, or of one subtransaction).
struct StreamStartMessage {
  uint32_t xid = 0;
  bool is_first_segment = false;
};
struct StreamStopMessage {};
struct StreamCommitMessage {
  uint32_t xid = 0;
  uint64_t commit_lsn = 0;
  uint64_t end_lsn = 0;
};
struct StreamAbortMessage {
  uint32_t xid = 0;
  uint32_t subxid = 0;  // == xid: the whole transaction
};
using PgOutputMessage =
    std::variant<BeginMessage, CommitMessage, RelationMessage, InsertMessage, UpdateMessage,
                 DeleteMessage, TruncateMessage, OtherMessage, StreamStartMessage,
                 StreamStopMessage, StreamCommitMessage, StreamAbortMessage>;

// One pgoutput message; Corruption naming the tag and offset when the bytes do not parse.
Result<PgOutputMessage> ParsePgOutput(std::string_view bytes);

// A message inside a stream block: the (sub)transaction id it belongs to, and the message as it
// would be outside a stream (the id cut out), for ParsePgOutput.
struct StreamedChange {
  uint32_t xid = 0;
  std::string message;
};
Result<StreamedChange> SplitStreamedChange(std::string_view bytes);

// ----- the stream ---------------------------------------------------------------------------

// What the server sent on a streaming connection.
struct XLogData {
  uint64_t start_lsn = 0;
  uint64_t wal_end = 0;
  std::string payload;
};
struct Keepalive {
  uint64_t wal_end = 0;  // how far the server has sent (decoded) the WAL
  bool reply_requested = false;
};
struct StreamEnded {};
using StreamEvent = std::variant<XLogData, Keepalive, StreamEnded>;

class ReplicationStream {
 public:
  // Starts streaming `slot` from `start_lsn` (0: the slot's confirmed position) on a replication
  // connection, pgoutput over `publication`: with `may_stream_in_progress`, protocol version 2
  // with large in-progress transactions streamed where the server has it (PostgreSQL 14 and
  // later); version 1 otherwise.
  static Result<std::unique_ptr<ReplicationStream>> Start(std::unique_ptr<PgConnection> connection,
                                                          const std::string& slot,
                                                          const std::string& publication,
                                                          uint64_t start_lsn,
                                                          bool may_stream_in_progress);
  // Whether in-progress transactions arrive as Stream* blocks (protocol version 2).
  bool streams_in_progress() const { return streams_in_progress_; }
  ~ReplicationStream();

  // The next event, or nullopt when nothing arrived within `wait`.
  Result<std::optional<StreamEvent>> Read(std::chrono::milliseconds wait);
  // A standby status update: received through `written`, durable through `flushed` (the server
  // moves the slot's confirmed_flush_lsn there and may recycle the WAL before it).
  Status SendStatus(uint64_t written, uint64_t flushed, bool reply_requested);
  // Ends the COPY so that the connection closes cleanly.
  void Finish();

 private:
  ReplicationStream(std::unique_ptr<PgConnection> connection, bool streams_in_progress)
      : connection_(std::move(connection)), streams_in_progress_(streams_in_progress) {}
  std::unique_ptr<PgConnection> connection_;
  bool streams_in_progress_ = false;
  bool finished_ = false;
};

// Creates a logical pgoutput slot on a replication connection. With `export_snapshot`, the
// returned snapshot stays valid until the next command on `connection`.
struct CreatedSlot {
  uint64_t consistent_lsn = 0;
  std::string snapshot_name;  // empty without export_snapshot
};
Result<CreatedSlot> CreateSlot(PgConnection& replication_connection, const std::string& slot,
                               bool export_snapshot);

}  // namespace skippr::sources::postgres
