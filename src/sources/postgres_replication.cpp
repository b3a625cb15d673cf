#include "sources/postgres_replication.hpp"

#include <fmt/format.h>
#include <libpq-fe.h>
#include <poll.h>

#include "sources/postgres_source.hpp"

namespace skippr::sources::postgres {

namespace {

// Big-endian fields of a protocol message; any read past the end makes ok() false.
class ByteReader {
 public:
  explicit ByteReader(std::string_view bytes) : bytes_(bytes) {}
  bool ok() const { return ok_; }
  size_t offset() const { return at_; }
  bool done() const { return at_ == bytes_.size(); }

  uint64_t Unsigned(size_t width) {
    if (bytes_.size() - at_ < width) {
      ok_ = false;
      at_ = bytes_.size();
      return 0;
    }
    uint64_t value = 0;
    for (size_t i = 0; i < width; ++i) value = value << 8 | static_cast<uint8_t>(bytes_[at_ + i]);
    at_ += width;
    return value;
  }
  uint8_t Byte() { return static_cast<uint8_t>(Unsigned(1)); }
  uint16_t Int16() { return static_cast<uint16_t>(Unsigned(2)); }
  uint32_t Int32() { return static_cast<uint32_t>(Unsigned(4)); }
  uint64_t Int64() { return Unsigned(8); }
  std::string String() {  // NUL-terminated
    const size_t end = bytes_.find('\0', at_);
    if (end == std::string_view::npos) {
      ok_ = false;
      at_ = bytes_.size();
      return {};
    }
    std::string text(bytes_.substr(at_, end - at_));
    at_ = end + 1;
    return text;
  }
  std::string Bytes(size_t count) {
    if (bytes_.size() - at_ < count) {
      ok_ = false;
      at_ = bytes_.size();
      return {};
    }
    std::string text(bytes_.substr(at_, count));
    at_ += count;
    return text;
  }

 private:
  std::string_view bytes_;
  size_t at_ = 0;
  bool ok_ = true;
};

Tuple ReadTuple(ByteReader& reader) {
  const uint16_t count = reader.Int16();
  Tuple tuple;
  tuple.reserve(count);
  for (uint16_t i = 0; i < count && reader.ok(); ++i) {
    TupleValue value;
    switch (reader.Byte()) {
      case 'n': value.kind = TupleValue::Kind::kNull; break;
      case 'u': value.kind = TupleValue::Kind::kUnchangedToast; break;
      case 't':
      case 'b':  // binary only when asked for; read as bytes all the same
        value.kind = TupleValue::Kind::kText;
        value.text = reader.Bytes(reader.Int32());
        break;
      default:
        reader.Bytes(SIZE_MAX);  // unknown kind: make the message fail
    }
    tuple.push_back(std::move(value));
  }
  return tuple;
}

// A Commit's and a Stream Commit's fields after the transaction id: flags, the commit's LSN, the
// transaction's end, the commit time.
template <typename Commit>
void ReadCommitFields(ByteReader& reader, Commit& commit) {
  reader.Byte();  // flags
  commit.commit_lsn = reader.Int64();
  commit.end_lsn = reader.Int64();
  reader.Int64();  // commit time
}

// Microseconds since 2000-01-01, the protocol's clock.
int64_t PostgresNowMicros() {
  constexpr int64_t kUnixToPostgresEpochSeconds = 946'684'800;
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
             .count() -
         kUnixToPostgresEpochSeconds * 1'000'000;
}

void PutInt64(std::string& out, uint64_t value) {
  for (int shift = 56; shift >= 0; shift -= 8) out.push_back(static_cast<char>(value >> shift));
}

}  // namespace

Result<PgOutputMessage> ParsePgOutput(std::string_view bytes) {
  ByteReader reader(bytes);
  const char tag = static_cast<char>(reader.Byte());
  PgOutputMessage message;
  switch (tag) {
    case 'B': {
      BeginMessage begin;
      begin.final_lsn = reader.Int64();
      reader.Int64();  // commit time
      begin.xid = reader.Int32();
      message = begin;
      break;
    }
    case 'C': {
      CommitMessage commit;
      ReadCommitFields(reader, commit);
      message = commit;
      break;
    }
    case 'R': {
      RelationMessage relation;
      relation.relation_id = reader.Int32();
      relation.schema = reader.String();
      relation.name = reader.String();
      relation.replica_identity = static_cast<char>(reader.Byte());
      const uint16_t count = reader.Int16();
      for (uint16_t i = 0; i < count && reader.ok(); ++i) {
        RelationColumn column;
        column.is_key = (reader.Byte() & 1) != 0;
        column.name = reader.String();
        column.type_oid = reader.Int32();
        column.modifier = static_cast<int32_t>(reader.Int32());
        relation.columns.push_back(std::move(column));
      }
      message = std::move(relation);
      break;
    }
    case 'I': {
      InsertMessage insert;
      insert.relation_id = reader.Int32();
      if (reader.Byte() != 'N') return Status::Corruption("pgoutput Insert without a new tuple");
      insert.new_tuple = ReadTuple(reader);
      message = std::move(insert);
      break;
    }
    case 'U': {
      UpdateMessage update;
      update.relation_id = reader.Int32();
      char kind = static_cast<char>(reader.Byte());
      if (kind == 'K' || kind == 'O') {
        update.old_is_key_only = kind == 'K';
        update.old_tuple = ReadTuple(reader);
        kind = static_cast<char>(reader.Byte());
      }
      if (kind != 'N') return Status::Corruption("pgoutput Update without a new tuple");
      update.new_tuple = ReadTuple(reader);
      message = std::move(update);
      break;
    }
    case 'D': {
      DeleteMessage remove;
      remove.relation_id = reader.Int32();
      const char kind = static_cast<char>(reader.Byte());
      if (kind != 'K' && kind != 'O') return Status::Corruption("pgoutput Delete without a tuple");
      remove.old_is_key_only = kind == 'K';
      remove.old_tuple = ReadTuple(reader);
      message = std::move(remove);
      break;
    }
    case 'T': {
      TruncateMessage truncate;
      const uint32_t count = reader.Int32();
      reader.Byte();  // options (cascade, restart identity)
      for (uint32_t i = 0; i < count && reader.ok(); ++i) {
        truncate.relation_ids.push_back(reader.Int32());
      }
      message = std::move(truncate);
      break;
    }
    case 'S': {
      StreamStartMessage start;
      start.xid = reader.Int32();
      start.is_first_segment = reader.Byte() == 1;
      message = start;
      break;
    }
    case 'E':
      message = StreamStopMessage{};
      break;
    case 'c': {
      StreamCommitMessage commit;
      commit.xid = reader.Int32();
      ReadCommitFields(reader, commit);
      message = commit;
      break;
    }
    case 'A': {
      StreamAbortMessage abort;
      abort.xid = reader.Int32();
      abort.subxid = reader.Int32();
      message = abort;  // version 4 adds the abort's LSN and time: not asked for
      break;
    }
    case 'Y':
    case 'O':
    case 'M':
      return PgOutputMessage(OtherMessage{tag});
    default:
      return Status::Corruption(fmt::format(
          "pgoutput message with tag '{}' (0x{:02x}): not one protocol version 1 or 2 sends", tag,
          static_cast<uint8_t>(tag)));
  }
  if (!reader.ok()) {
    return Status::Corruption(fmt::format("pgoutput '{}' message of {} bytes is cut short", tag,
                                          bytes.size()));
  }
  return message;
}

Result<StreamedChange> SplitStreamedChange(std::string_view bytes) {
  constexpr size_t kTagAndXidBytes = 5;
  if (bytes.size() < kTagAndXidBytes) {
    return Status::Corruption(fmt::format(
        "a streamed pgoutput message of {} bytes is too short to name its transaction",
        bytes.size()));
  }
  ByteReader reader(bytes.substr(1, 4));
  StreamedChange change;
  change.xid = reader.Int32();
  change.message.reserve(bytes.size() - 4);
  change.message.push_back(bytes[0]);
  change.message.append(bytes.substr(kTagAndXidBytes));
  return change;
}

Result<SlotState> ReadSlot(PgConnection& connection, const std::string& slot_name) {
  SKIPPR_ASSIGN_OR_RETURN(
      PgResult result,
      connection.Query("reading the replication slot",
                       "SELECT plugin = 'pgoutput' AND slot_type = 'logical', active, "
                       "COALESCE(wal_status, ''), COALESCE(confirmed_flush_lsn::text, '0/0'), "
                       "COALESCE(database, '') FROM pg_replication_slots WHERE slot_name = $1",
                       {slot_name}));
  SlotState slot;
  if (result.rows() == 0) return slot;
  slot.exists = true;
  slot.is_logical_pgoutput = result.Text(0, 0) == "t";
  slot.is_active = result.Text(0, 1) == "t";
  slot.wal_status = std::string(result.Text(0, 2));
  slot.confirmed_flush_lsn = ParseLsn(result.Text(0, 3));
  slot.database = std::string(result.Text(0, 4));
  return slot;
}

Result<CreatedSlot> CreateSlot(PgConnection& replication_connection, const std::string& slot,
                               bool export_snapshot) {
  SKIPPR_ASSIGN_OR_RETURN(
      PgResult result,
      replication_connection.Query(
          fmt::format("creating logical replication slot {}", slot),
          fmt::format("CREATE_REPLICATION_SLOT {} LOGICAL pgoutput (SNAPSHOT '{}')",
                      replication_connection.QuoteIdentifier(slot),
                      export_snapshot ? "export" : "nothing")));
  CreatedSlot created;
  created.consistent_lsn = ParseLsn(result.Text(0, 1));
  if (export_snapshot) created.snapshot_name = std::string(result.Text(0, 2));
  return created;
}

Result<std::unique_ptr<ReplicationStream>> ReplicationStream::Start(
    std::unique_ptr<PgConnection> connection, const std::string& slot,
    const std::string& publication, uint64_t start_lsn, bool may_stream_in_progress) {
  // Streaming in-progress transactions came with protocol version 2 in PostgreSQL 14.
  constexpr int kFirstServerWithStreaming = 140000;
  const bool streams_in_progress =
      may_stream_in_progress && PQserverVersion(connection->raw()) >= kFirstServerWithStreaming;
  const std::string sql = fmt::format(
      "START_REPLICATION SLOT {} LOGICAL {} (proto_version '{}', publication_names {}{})",
      connection->QuoteIdentifier(slot), FormatLsn(start_lsn), streams_in_progress ? 2 : 1,
      connection->QuoteLiteral(connection->QuoteIdentifier(publication)),
      streams_in_progress ? ", streaming 'on'" : "");
  pg_result* raw = PQexec(connection->raw(), sql.c_str());
  PgResult owned(raw);
  if (raw == nullptr || PQresultStatus(raw) != PGRES_COPY_BOTH) {
    std::string message = raw != nullptr ? PQresultErrorMessage(raw) : "";
    if (message.empty()) message = PQerrorMessage(connection->raw());
    while (!message.empty() && message.back() == '\n') message.pop_back();
    return Status::IOError(fmt::format("PostgreSQL {}: starting replication from slot {} failed: {}",
                                       connection->description(), slot, message));
  }
  return std::unique_ptr<ReplicationStream>(
      new ReplicationStream(std::move(connection), streams_in_progress));
}

ReplicationStream::~ReplicationStream() { Finish(); }

void ReplicationStream::Finish() {
  if (finished_) return;
  finished_ = true;
  PQputCopyEnd(connection_->raw(), nullptr);
  PQflush(connection_->raw());
}

Result<std::optional<StreamEvent>> ReplicationStream::Read(std::chrono::milliseconds wait) {
  pg_conn* connection = connection_->raw();
  for (int attempt = 0; attempt < 2; ++attempt) {
    char* buffer = nullptr;
    const int length = PQgetCopyData(connection, &buffer, 1);
    if (length > 0) {
      std::string_view bytes(buffer, static_cast<size_t>(length));
      ByteReader reader(bytes);
      const char kind = static_cast<char>(reader.Byte());
      std::optional<StreamEvent> event;
      if (kind == 'w') {
        XLogData data;
        data.start_lsn = reader.Int64();
        data.wal_end = reader.Int64();
        reader.Int64();  // send time
        data.payload = std::string(bytes.substr(reader.offset()));
        event = std::move(data);
      } else if (kind == 'k') {
        Keepalive keepalive;
        keepalive.wal_end = reader.Int64();
        reader.Int64();  // send time
        keepalive.reply_requested = reader.Byte() != 0;
        event = keepalive;
      }
      PQfreemem(buffer);
      if (!reader.ok() || !event) {
        return Status::Corruption(fmt::format(
            "PostgreSQL {}: a replication message of kind '{}' and {} bytes does not parse",
            connection_->description(), kind, length));
      }
      return event;
    }
    if (length == -1) return std::optional<StreamEvent>(StreamEnded{});
    if (length == -2) {
      return Status::IOError(fmt::format("PostgreSQL {}: the replication stream failed: {}",
                                         connection_->description(),
                                         PQerrorMessage(connection)));
    }
    if (attempt == 1) break;
    // Nothing buffered: wait for the socket, then let libpq read.
    pollfd socket{PQsocket(connection), POLLIN, 0};
    const int ready = poll(&socket, 1, static_cast<int>(wait.count()));
    if (ready <= 0) return std::optional<StreamEvent>();
    if (PQconsumeInput(connection) == 0) {
      return Status::IOError(fmt::format("PostgreSQL {}: reading the replication stream failed: {}",
                                         connection_->description(),
                                         PQerrorMessage(connection)));
    }
  }
  return std::optional<StreamEvent>();
}

Status ReplicationStream::SendStatus(uint64_t written, uint64_t flushed, bool reply_requested) {
  std::string message = "r";
  PutInt64(message, written);
  PutInt64(message, flushed);
  PutInt64(message, flushed);  // applied
  PutInt64(message, static_cast<uint64_t>(PostgresNowMicros()));
  message.push_back(reply_requested ? 1 : 0);
  if (PQputCopyData(connection_->raw(), message.data(), static_cast<int>(message.size())) != 1 ||
      PQflush(connection_->raw()) != 0) {
    return Status::IOError(fmt::format("PostgreSQL {}: sending the replication status failed: {}",
                                       connection_->description(),
                                       PQerrorMessage(connection_->raw())));
  }
  return Status::OK();
}

}  // namespace skippr::sources::postgres
