// The PostgreSQL source's snapshot: every table read under one exported snapshot, a heap table in
// ctid block ranges by `snapshot_parallelism` connections, each range a partition of the source's
// positions so that an interrupted snapshot resumes after the last row committed
// (docs/config.md, "The PostgreSQL source", "Snapshot").
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <condition_variable>
#include <deque>
#include <iterator>
#include <limits>
#include <mutex>
#include <thread>

#include "core/check.hpp"
#include "core/crash.hpp"
#include "sources/postgres_catalog.hpp"
#include "sources/postgres_source.hpp"

namespace skippr::sources::postgres {

namespace {

constexpr uint64_t kOpenEnd = std::numeric_limits<uint64_t>::max();
// Rows of one batch are also bounded by their bytes on the wire: wide rows make smaller batches.
constexpr size_t kMaxBatchCopyBytes = 8 << 20;
// COPY's binary format begins with this signature, a 32-bit flags field and the 32-bit length of
// a header extension (PostgreSQL's COPY documentation, "Binary Format").
constexpr std::string_view kBinaryCopySignature("PGCOPY\n\377\r\n\0", 11);
// A range holds at most this many 8 KiB blocks (1 GiB), and at least 128 unless the table is
// smaller: enough ranges for every connection to stay busy, few enough that each COPY is long.
constexpr uint64_t kMaxRangeBlocks = 131'072;
constexpr uint64_t kMinRangeBlocks = 128;

uint16_t LoadBigEndian16(const char* at) {
  return static_cast<uint16_t>(static_cast<uint8_t>(at[0]) << 8 | static_cast<uint8_t>(at[1]));
}

uint32_t LoadBigEndian32(const char* at) {
  return static_cast<uint32_t>(LoadBigEndian16(at)) << 16 | LoadBigEndian16(at + 2);
}

// "(block,offset)", as PostgreSQL writes a ctid.
void FormatCtid(uint32_t block, uint16_t offset, std::string& out) {
  char text[24];
  char* end = text;
  *end++ = '(';
  end = std::to_chars(end, text + sizeof(text), block).ptr;
  *end++ = ',';
  end = std::to_chars(end, text + sizeof(text), offset).ptr;
  *end++ = ')';
  out.assign(text, end);
}

struct Ctid {
  uint64_t block = 0;
  uint64_t offset = 0;
};

std::optional<Ctid> ParseCtid(std::string_view text) {
  Ctid ctid;
  if (text.size() < 5 || text.front() != '(' || text.back() != ')') return std::nullopt;
  const size_t comma = text.find(',');
  if (comma == std::string_view::npos) return std::nullopt;
  const auto block = std::from_chars(text.data() + 1, text.data() + comma, ctid.block);
  const auto offset =
      std::from_chars(text.data() + comma + 1, text.data() + text.size() - 1, ctid.offset);
  if (block.ec != std::errc() || offset.ec != std::errc()) return std::nullopt;
  return ctid;
}

// One ctid block range of one storage relation: [first_block, end_block), end_block kOpenEnd for
// the last (rows the table gains beyond its size at planning are in it), or the whole relation.
struct RangeBounds {
  uint64_t first_block = 0;
  uint64_t end_block = kOpenEnd;
};

std::string RangePartition(const PgStorage& storage, const RangeBounds& bounds) {
  if (!storage.is_heap) return fmt::format("postgres snapshot {} all", storage.qualified_name);
  return fmt::format("postgres snapshot {} blocks {}-{}", storage.qualified_name,
                     bounds.first_block,
                     bounds.end_block == kOpenEnd ? std::string() : std::to_string(bounds.end_block));
}

// The bounds a partition id names, when it is a range of `storage`.
std::optional<RangeBounds> ParseRangePartition(const PgStorage& storage,
                                               std::string_view partition) {
  const std::string prefix = fmt::format("postgres snapshot {} ", storage.qualified_name);
  if (partition.substr(0, prefix.size()) != prefix) return std::nullopt;
  std::string_view rest = partition.substr(prefix.size());
  if (rest == "all") return RangeBounds{};
  constexpr std::string_view kBlocks = "blocks ";
  if (rest.substr(0, kBlocks.size()) != kBlocks) return std::nullopt;
  rest.remove_prefix(kBlocks.size());
  const size_t dash = rest.find('-');
  if (dash == std::string_view::npos) return std::nullopt;
  RangeBounds bounds;
  if (std::from_chars(rest.data(), rest.data() + dash, bounds.first_block).ec != std::errc()) {
    return std::nullopt;
  }
  if (dash + 1 < rest.size() &&
      std::from_chars(rest.data() + dash + 1, rest.data() + rest.size(), bounds.end_block).ec !=
          std::errc()) {
    return std::nullopt;
  }
  return bounds;
}

}  // namespace

// "16/B374D848" → the 64-bit LSN.
uint64_t ParseLsn(std::string_view text) {
  const size_t slash = text.find('/');
  uint64_t high = 0;
  uint64_t low = 0;
  if (slash != std::string_view::npos) {
    std::from_chars(text.data(), text.data() + slash, high, 16);
    std::from_chars(text.data() + slash + 1, text.data() + text.size(), low, 16);
  }
  return high << 32 | low;
}

std::string FormatLsn(uint64_t lsn) { return fmt::format("{:X}/{:X}", lsn >> 32, lsn & 0xffffffff); }

namespace {

// [first, end) split into ranges of about `range_blocks`; the last one open-ended when `open`.
std::vector<RangeBounds> SplitBlocks(uint64_t first, uint64_t end, uint64_t range_blocks,
                                     bool open) {
  std::vector<RangeBounds> ranges;
  for (uint64_t start = first; start < end || (ranges.empty() && open); start += range_blocks) {
    ranges.push_back({start, std::min(end, start + range_blocks)});
    if (start + range_blocks >= end) break;
  }
  if (open) {
    if (ranges.empty()) ranges.push_back({first, kOpenEnd});
    ranges.back().end_block = kOpenEnd;
  }
  return ranges;
}

}  // namespace

std::string OrderToken(uint64_t lsn, uint64_t ordinal) {
  std::string token(16, '\0');
  for (int i = 0; i < 8; ++i) {
    token[static_cast<size_t>(i)] = static_cast<char>(lsn >> (56 - 8 * i));
    token[static_cast<size_t>(8 + i)] = static_cast<char>(ordinal >> (56 - 8 * i));
  }
  return token;
}

std::string BusinessKey(const ValueObject& row, const std::vector<size_t>& key_columns) {
  if (key_columns.empty()) return {};
  return BusinessKeyOf(key_columns.size(),
                       [&](size_t i) -> const Value& { return row[key_columns[i]].second; });
}

void SetTableContext(schema::RecordContext& context, const PostgresSettings& settings,
                     const std::string& schema_name, const std::string& table,
                     const std::string& namespace_name,
                     const std::map<std::string, LogicalType>& declared_types) {
  context.infer_epoch_timestamps = false;
  context.keys_may_repeat = false;
  // Rows are built from a table's columns: unique names, single values and one-dimensional arrays
  // of one element type (a deeper array is its text), so no typing rule can fail.
  context.records_are_flat = true;
  context.declared_types = &declared_types;
  context.source_namespace = namespace_name;
  context.declared_types_are_binding = true;
  context.source_object = fmt::format("PostgreSQL table {}.{}", schema_name, table);
  // The changes from the type change on stay in the slot (the snapshot's rows in the table) until
  // the table is read again from the start or left out.
  context.on_type_change = fmt::format(
      "To go on without the table, remove it from data_sources.{0}.tables; to load it again with "
      "its new type, drop the pipeline's state (DATA_DIR/<pipeline>){1} and sync again, which "
      "reads it from a new snapshot.",
      settings.source_name,
      settings.cdc_mode == CdcMode::kSnapshot
          ? ""
          : fmt::format(" and the replication slot {}", settings.replication_slot_name));
}

// ---------------------------------------------------------------------------------------------

struct SnapshotSource::Range {
  const TableReader* table = nullptr;
  const PgStorage* storage = nullptr;
  RangeBounds bounds;
  std::string partition;
  PartitionPosition start;  // committed so far (records, the last ctid in `cursor`)
};

// A table's columns as the records need them: decoders, declared types, the key's columns.
struct SnapshotSource::TableReader {
  PgTable table;
  std::vector<PgColumnDecoder> decoders;
  std::map<std::string, LogicalType> declared_types;
  std::vector<size_t> key_columns;  // indices into table.columns
  std::string select_list;          // "a", "b"::text, ... (::text: not read in binary)
};

SnapshotSource::SnapshotSource(PostgresSettings settings, std::optional<ExportedSnapshot> exported)
    : settings_(std::move(settings)), exported_(std::move(exported)) {}

SnapshotSource::~SnapshotSource() { StopReaders(); }

void SnapshotSource::StopReaders() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  for (std::thread& reader : readers_) {
    if (reader.joinable()) reader.join();
  }
  readers_.clear();
}

Status SnapshotSource::Open(const SourcePositions& committed, const ReadOptions& options) {
  max_records_per_partition_ = options.max_records_per_partition;
  SKIPPR_ASSIGN_OR_RETURN(control_, PgConnection::Connect(settings_));
  SKIPPR_ASSIGN_OR_RETURN(std::vector<PgTable> tables, ListTables(*control_, settings_));
  for (PgTable& table : tables) tables_.push_back(MakeTableReader(std::move(table)));
  PlanRanges(committed);
  if (pending_.empty()) return Status::OK();
  if (exported_) {
    snapshot_name_ = exported_->name;
    snapshot_lsn_ = exported_->lsn;
  } else {
    // One snapshot for every table: exported by the control connection, whose transaction stays
    // open until the readers have taken it.
    SKIPPR_RETURN_IF_ERROR(control_->Execute(
        "starting the snapshot", "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"));
    SKIPPR_ASSIGN_OR_RETURN(
        PgResult exported,
        control_->Query("exporting the snapshot",
                        "SELECT pg_export_snapshot(), CASE WHEN pg_is_in_recovery() THEN "
                        "pg_last_wal_replay_lsn() ELSE pg_current_wal_lsn() END"));
    snapshot_name_ = std::string(exported.Text(0, 0));
    snapshot_lsn_ = ParseLsn(exported.Text(0, 1));
  }
  spdlog::info("postgres {}: snapshot {} at LSN {}: {} range(s) of {} table(s) to read",
               settings_.Describe(), snapshot_name_, FormatLsn(snapshot_lsn_), pending_.size(),
               tables_.size());
  const size_t readers =
      std::clamp<size_t>(static_cast<size_t>(settings_.snapshot_parallelism), 1, pending_.size());
  max_batches_ready_ = readers * 2;
  running_readers_ = readers;
  for (size_t i = 0; i < readers; ++i) readers_.emplace_back([this] { ReadRanges(); });
  return Status::OK();
}

std::unique_ptr<SnapshotSource::TableReader> SnapshotSource::MakeTableReader(PgTable table) {
  auto reader = std::make_unique<TableReader>();
  for (size_t i = 0; i < table.columns.size(); ++i) {
    const PgColumn& column = table.columns[i];
    reader->decoders.emplace_back(column.type);
    reader->declared_types.emplace(column.name, reader->decoders.back().logical_type());
    if (i > 0) reader->select_list += ", ";
    reader->select_list += control_->QuoteIdentifier(column.name);
    if (!reader->decoders.back().reads_binary()) reader->select_list += "::text";
    if (std::find(table.primary_key.begin(), table.primary_key.end(), column.name) !=
        table.primary_key.end()) {
      reader->key_columns.push_back(i);
    }
  }
  // In key order, not column order.
  std::sort(reader->key_columns.begin(), reader->key_columns.end(), [&](size_t a, size_t b) {
    const auto position = [&](size_t column) {
      return std::find(table.primary_key.begin(), table.primary_key.end(),
                       table.columns[column].name) -
             table.primary_key.begin();
    };
    return position(a) < position(b);
  });
  reader->table = std::move(table);
  return reader;
}

void SnapshotSource::PlanRanges(const SourcePositions& committed) {
  for (const std::unique_ptr<TableReader>& reader : tables_) {
    for (const PgStorage& storage : reader->table.storage) {
      PlanStorageRanges(*reader, storage, committed);
    }
  }
}

void SnapshotSource::PlanStorageRanges(const TableReader& reader, const PgStorage& storage,
                                       const SourcePositions& committed) {
  // Ranges an earlier pass planned and committed rows of: go on with the unfinished ones, and
  // plan the blocks none of them covers (it may have stopped before starting every range).
  std::vector<RangeBounds> known;
  for (const auto& [partition, position] : committed) {
    const std::optional<RangeBounds> bounds = ParseRangePartition(storage, partition);
    if (!bounds) continue;
    known.push_back(*bounds);
    if (!position.is_closed) {
      pending_.push_back({&reader, &storage, *bounds, partition, position});
    }
  }
  if (!storage.is_heap) {
    if (known.empty()) pending_.push_back({&reader, &storage, {}, RangePartition(storage, {}), {}});
    return;
  }
  std::sort(known.begin(), known.end(),
            [](const RangeBounds& a, const RangeBounds& b) { return a.first_block < b.first_block; });
  const uint64_t blocks = RelationBlocks(storage);
  // One connection reads a relation as one open range, which it scans sequentially (ReadRange).
  const uint64_t range_blocks =
      settings_.snapshot_parallelism == 1
          ? std::max<uint64_t>(blocks, 1)
          : std::clamp<uint64_t>(
                blocks / (static_cast<uint64_t>(settings_.snapshot_parallelism) * 4),
                kMinRangeBlocks, kMaxRangeBlocks);
  std::vector<RangeBounds> planned;
  uint64_t next = 0;
  for (const RangeBounds& range : known) {
    if (range.first_block > next) {
      for (const RangeBounds& gap : SplitBlocks(next, range.first_block, range_blocks, false)) {
        planned.push_back(gap);
      }
    }
    next = std::max(next, range.end_block);
  }
  if (next != kOpenEnd) {
    for (const RangeBounds& tail : SplitBlocks(next, std::max(next, blocks), range_blocks, true)) {
      planned.push_back(tail);
    }
  }
  for (const RangeBounds& bounds : planned) {
    pending_.push_back({&reader, &storage, bounds, RangePartition(storage, bounds), {}});
  }
}

uint64_t SnapshotSource::RelationBlocks(const PgStorage& storage) {
  Result<PgResult> result = control_->Query(
      "reading a table's size",
      "SELECT pg_relation_size($1::oid) / current_setting('block_size')::bigint",
      {std::to_string(storage.oid)});
  // Only a plan: a size we cannot read makes one open range, read whole.
  if (!result.ok() || result->rows() != 1) return 0;
  return static_cast<uint64_t>(result->Integer(0, 0));
}

// ----- reader threads ------------------------------------------------------------------------

void SnapshotSource::ReadRanges() {
  Status status = ReadRangesOnOwnConnection();
  std::lock_guard lock(mutex_);
  if (!status.ok() && failure_.ok()) failure_ = std::move(status);
  --running_readers_;
  changed_.notify_all();
}

Status SnapshotSource::ReadRangesOnOwnConnection() {
  SKIPPR_ASSIGN_OR_RETURN(std::unique_ptr<PgConnection> connection,
                          PgConnection::Connect(settings_));
  SKIPPR_RETURN_IF_ERROR(TakeSnapshot(*connection));
  while (true) {
    Range range;
    {
      std::lock_guard lock(mutex_);
      if (stopping_ || next_range_ >= pending_.size() || !failure_.ok()) return Status::OK();
      range = pending_[next_range_++];
    }
    SKIPPR_ASSIGN_OR_RETURN(const bool stopped_early, ReadRange(*connection, range));
    if (stopped_early) {
      // The COPY was cancelled, which aborted the transaction: take the snapshot again (the
      // control connection still holds it).
      SKIPPR_RETURN_IF_ERROR(connection->Execute("ending a cancelled read", "ROLLBACK"));
      SKIPPR_RETURN_IF_ERROR(TakeSnapshot(*connection));
    }
  }
}

Status SnapshotSource::TakeSnapshot(PgConnection& connection) const {
  SKIPPR_RETURN_IF_ERROR(connection.Execute("starting a snapshot reader",
                                            "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"));
  return connection.Execute("taking the exported snapshot",
                            "SET TRANSACTION SNAPSHOT " + connection.QuoteLiteral(snapshot_name_));
}

// One batch's rows as they are decoded, a column per table column, each with a column of text
// for the values its type cannot hold, made when the first one comes (ColumnRows).
struct SnapshotSource::RowColumns {
  std::vector<Column> typed;
  std::vector<std::optional<Column>> overflow;
  CdcSidecar cdc;
  int64_t rows = 0;
  uint64_t first_row = 1;
  size_t copy_bytes = 0;

  RowColumns(const TableReader& reader, uint64_t first, uint64_t reserved_rows) : first_row(first) {
    typed.reserve(reader.decoders.size());
    for (const PgColumnDecoder& decoder : reader.decoders) {
      typed.emplace_back(decoder.logical_type());
      typed.back().fixed.reserve(reserved_rows *
                                 FixedWidthBytes(PhysicalKindOf(decoder.logical_type().id())));
    }
    overflow.resize(reader.decoders.size());
    cdc.mutations.reserve(reserved_rows);
  }

  // The text column of table column `column`, nulls up to the row being read.
  Column& Overflow(size_t column) {
    if (!overflow[column]) overflow[column].emplace(LogicalType::String());
    overflow[column]->PadNullsTo(rows);
    return *overflow[column];
  }

  // Table column `column`'s value in the row being read, as JSON (the row's business key).
  void AppendKeyJson(size_t column, std::string& out) const {
    const Column& values = typed[column];
    const int64_t row = values.length - 1;
    if (values.IsValid(row) && PhysicalKindOf(values.type.id()) == PhysicalKind::kInt64 &&
        (values.type.id() == TypeId::kInt || values.type.id() == TypeId::kLong)) {
      char digits[24];
      out.append(digits, std::to_chars(digits, digits + sizeof(digits), values.Int64At(row)).ptr);
      return;
    }
    const std::optional<Column>& text = overflow[column];
    if (!values.IsValid(row) && text && text->length == row + 1 && text->IsValid(row)) {
      out += text->ValueAt(row).ToJson();
      return;
    }
    out += values.ValueAt(row).ToJson();
  }

  ColumnRows Take(const TableReader& reader) {
    ColumnRows taken;
    taken.num_rows = rows;
    taken.first_row = first_row;
    for (size_t i = 0; i < typed.size(); ++i) {
      taken.names.push_back(reader.table.columns[i].name);
      taken.columns.push_back(std::move(typed[i]));
      if (overflow[i]) {
        overflow[i]->PadNullsTo(rows);
        taken.names.push_back(reader.table.columns[i].name);
        taken.columns.push_back(std::move(*overflow[i]));
      }
    }
    taken.cdc = std::move(cdc);
    return taken;
  }
};

Result<bool> SnapshotSource::ReadRange(PgConnection& connection, const Range& range) {
  const TableReader& reader = *range.table;
  std::string where;
  std::string columns = reader.select_list;
  if (range.storage->is_heap) {
    columns = columns.empty() ? "ctid" : "ctid, " + columns;
    const std::optional<Ctid> after = ParseCtid(range.start.cursor);
    const bool is_whole_relation =
        !after && range.bounds.first_block == 0 && range.bounds.end_block == kOpenEnd;
    // A whole relation is read by a sequential scan, in ctid order (kPostgresSessionOptions turn
    // off synchronized and parallel scans) through the server's small bulk-read buffer ring. A
    // ctid qualification makes a TID range scan, which reads through shared buffers: on a table
    // larger than a quarter of them it costs the server half as much again and evicts its cache.
    if (!is_whole_relation) {
      where = after ? fmt::format(" WHERE ctid > '({},{})'::tid", after->block, after->offset)
                    : fmt::format(" WHERE ctid >= '({},0)'::tid", range.bounds.first_block);
      if (range.bounds.end_block != kOpenEnd) {
        where += fmt::format(" AND ctid < '({},0)'::tid", range.bounds.end_block);
      }
    }
  }
  // Binary: numbers and times cost the server no formatting and us no parsing.
  const std::string sql = fmt::format("COPY (SELECT {} FROM {}{}) TO STDOUT (FORMAT binary)",
                                      columns, range.storage->qualified_name, where);
  PartitionPosition position = range.start;
  const RowStamps stamps{OrderToken(snapshot_lsn_, 0),
                         fmt::format("snapshot {:X} {} ", snapshot_lsn_, range.storage->oid)};
  // Each batch reserves what the one before it held: the text budget, not batch_size_rows, may be
  // what ends a batch of wide rows.
  uint64_t reserved_rows = 0;
  auto rows = std::make_unique<RowColumns>(reader, position.records_consumed + 1, reserved_rows);
  bool stopping_now = false;  // the source is being destroyed
  Status failure;
  bool is_header_read = false;
  const Status copied = connection.CopyOut(
      fmt::format("reading {}", range.partition), sql, [&](std::string_view message) {
        rows->copy_bytes += message.size();
        if (!is_header_read) {
          if (Status header = SkipBinaryHeader(range, message); !header.ok()) {
            failure = std::move(header);
            return false;
          }
          is_header_read = true;
        }
        if (message.empty() || message == std::string_view("\xff\xff", 2)) {
          return true;  // the header alone, or the end of the data
        }
        if (Status row = AddRow(reader, range, stamps, message, *rows, position); !row.ok()) {
          failure = std::move(row);
          return false;
        }
        if (static_cast<uint64_t>(rows->rows) >= settings_.batch_size_rows ||
            rows->copy_bytes >= kMaxBatchCopyBytes) {
          if (!Hand(TakeBatch(range, *rows, position))) {
            stopping_now = true;
            return false;
          }
          CrashPoint("postgres.snapshot.mid_range");
          reserved_rows = static_cast<uint64_t>(rows->rows);
          rows = std::make_unique<RowColumns>(reader, position.records_consumed + 1, reserved_rows);
        }
        return max_records_per_partition_ == 0 ||
               position.records_consumed < max_records_per_partition_;
      });
  SKIPPR_RETURN_IF_ERROR(failure);
  SKIPPR_RETURN_IF_ERROR(copied);
  if (stopping_now) return true;
  position.is_closed = max_records_per_partition_ == 0 ||
                       position.records_consumed < max_records_per_partition_;
  if (!Hand(TakeBatch(range, *rows, position))) return true;
  return !position.is_closed;
}

SourceBatch SnapshotSource::TakeBatch(const Range& range, RowColumns& rows,
                                      const PartitionPosition& position) const {
  SourceBatch batch;
  batch.partition = range.partition;
  SetTableContext(batch.context, settings_, range.table->table.schema, range.table->table.name,
                  range.table->table.namespace_name, range.table->declared_types);
  if (!range.table->table.primary_key.empty()) {
    batch.context.key_fields = &range.table->table.primary_key;
  }
  batch.position = position;
  batch.bytes_read = rows.copy_bytes;
  if (rows.rows > 0) batch.columns = rows.Take(*range.table);
  return batch;
}

Status SnapshotSource::SkipBinaryHeader(const Range& range, std::string_view& message) const {
  constexpr size_t kFixedBytes = 11 + 4 + 4;
  if (message.size() < kFixedBytes || message.substr(0, 11) != kBinaryCopySignature) {
    return Status::Corruption(fmt::format(
        "{}: the server's binary COPY data does not start with its signature", range.partition));
  }
  const uint32_t extension_bytes = LoadBigEndian32(message.data() + 15);
  if (message.size() - kFixedBytes < extension_bytes) {
    return Status::Corruption(fmt::format(
        "{}: the binary COPY header's extension runs past its message", range.partition));
  }
  message.remove_prefix(kFixedBytes + extension_bytes);
  return Status::OK();
}

Status SnapshotSource::AddRow(const TableReader& reader, const Range& range,
                              const RowStamps& stamps, std::string_view tuple, RowColumns& rows,
                              PartitionPosition& position) const {
  const size_t first_column = range.storage->is_heap ? 1 : 0;
  const size_t fields = reader.decoders.size() + first_column;
  const auto broken = [&](std::string_view what) {
    return Status::Corruption(fmt::format("{}: the binary COPY row after row {} {}",
                                          range.partition, position.records_consumed, what));
  };
  if (tuple.size() < 2 || LoadBigEndian16(tuple.data()) != fields) {
    return broken(fmt::format("does not have the {} fields expected", fields));
  }
  size_t at = 2;
  std::string ctid_text;  // heap relations: the first field, as "(block,offset)"
  std::string text;
  for (size_t field = 0; field < fields; ++field) {
    if (tuple.size() - at < 4) return broken("ends inside a field's length");
    const auto length = static_cast<int32_t>(LoadBigEndian32(tuple.data() + at));
    at += 4;
    if (length < -1 || (length > 0 && tuple.size() - at < static_cast<size_t>(length))) {
      return broken(fmt::format("has a field of length {} past its end", length));
    }
    const std::string_view bytes =
        length <= 0 ? std::string_view() : tuple.substr(at, static_cast<size_t>(length));
    at += length > 0 ? static_cast<size_t>(length) : 0;
    if (field < first_column) {
      if (bytes.size() != 6) return broken("has a ctid that is not 6 bytes");
      FormatCtid(LoadBigEndian32(bytes.data()), LoadBigEndian16(bytes.data() + 4), ctid_text);
      continue;
    }
    const size_t column = field - first_column;
    Column& values = rows.typed[column];
    if (length == -1) {
      values.AppendNull();
      continue;
    }
    const PgColumnDecoder& decoder = reader.decoders[column];
    bool appended = false;
    if (decoder.reads_binary()) {
      SKIPPR_ASSIGN_OR_RETURN(appended, decoder.AppendBinaryTo(bytes, values, &text));
    } else {
      appended = decoder.AppendTo(bytes, values);  // selected as ::text
      if (!appended) text = bytes;
    }
    if (!appended) {
      // Kept whole as text, for the sibling column (PgColumnDecoder::Decode).
      rows.Overflow(column).AppendBytes(text);
      values.AppendNull();
    }
  }
  if (at != tuple.size()) return broken("has bytes after its last field");
  if (range.storage->is_heap) position.cursor = ctid_text;
  position.records_consumed += 1;
  rows.rows += 1;
  CdcSidecar& cdc = rows.cdc;
  cdc.mutations.push_back(Mutation::kSnapshot);
  cdc.order_tokens.push_back(stamps.order_token);
  cdc.event_ids.bytes() += stamps.event_id_prefix;
  if (range.storage->is_heap) {
    cdc.event_ids.bytes() += ctid_text;
  } else {
    fmt::format_to(std::back_inserter(cdc.event_ids.bytes()), "{}", position.records_consumed);
  }
  cdc.event_ids.EndString();
  // As BusinessKeyOf writes it for change rows ("[<key value JSON>,...]", empty without a key),
  // without a Value per integer key.
  if (!reader.key_columns.empty()) {
    std::string& key = cdc.business_keys.bytes();
    key += '[';
    for (size_t i = 0; i < reader.key_columns.size(); ++i) {
      if (i > 0) key += ',';
      rows.AppendKeyJson(reader.key_columns[i], key);
    }
    key += ']';
  }
  cdc.business_keys.EndString();
  return Status::OK();
}

bool SnapshotSource::Hand(SourceBatch batch) {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [this] { return ready_.size() < max_batches_ready_ || stopping_; });
  if (stopping_) return false;
  ready_.push_back(std::move(batch));
  lock.unlock();
  changed_.notify_all();
  return true;
}

Result<std::optional<SourceBatch>> SnapshotSource::Next() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [this] { return !ready_.empty() || running_readers_ == 0 || !failure_.ok(); });
  if (!failure_.ok()) return failure_;
  if (ready_.empty()) return std::optional<SourceBatch>();
  SourceBatch batch = std::move(ready_.front());
  ready_.pop_front();
  lock.unlock();
  changed_.notify_all();
  return std::optional<SourceBatch>(std::move(batch));
}

Result<std::unique_ptr<Source>> MakePostgresSource(const config::ConnectorConfig& connector,
                                                   const std::string& source_name) {
  SKIPPR_ASSIGN_OR_RETURN(PostgresSettings settings, PostgresSettings::FromConnector(connector));
  settings.source_name = source_name;
  if (settings.cdc_mode != CdcMode::kSnapshot) {
    return std::unique_ptr<Source>(std::make_unique<ChangeStreamSource>(std::move(settings)));
  }
  return std::unique_ptr<Source>(std::make_unique<SnapshotSource>(std::move(settings)));
}

}  // namespace skippr::sources::postgres
