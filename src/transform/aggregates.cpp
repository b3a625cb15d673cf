// transform.aggregates: keyed running sums and counts over committed WAL slices, kept in the
// store's stream_state family in the same transaction as the processor's cursor
// (seeds/materialised-views.txt; the layout is docs/formats/aggregates.md).
//
// A chunk of rows (at most ProcessorOptions::rows_per_transaction) is applied in memory against
// state read from a store snapshot, then written in one short write transaction together with the
// cursor, so a crash anywhere replays from the cursor and never applies a row twice. Only this
// processor writes its prefixes, so the snapshot it read from is still the truth when it writes.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <limits>
#include <memory>
#include <memory_resource>
#include <set>
#include <thread>
#include <unordered_map>

#include "core/check.hpp"
#include "core/crash.hpp"
#include "transform/transform.hpp"

namespace skippr::transform {

namespace {

using Int128 = __int128;
static_assert(std::numeric_limits<Int128>::is_specialized, "the record decoders range-check it");

constexpr uint8_t kRecordVersion = 1;
// Group records are written compact (varints, absent parts left out), and version 1 ones are
// still read: a group is a store entry per key, and at one key per row its size is the store's.
constexpr uint8_t kGroupRecordVersion = 2;
// Test seams, read only by the processor before each commit: a delay, and a file whose existence
// holds the processor back (tests prove ingest does not wait for it).
constexpr const char* kDelayVariable = "SKIPPR_AGGREGATE_DELAY_MS";
constexpr const char* kHoldFileVariable = "SKIPPR_AGGREGATE_HOLD_FILE";

void WaitForTestSeams() {
  if (const char* delay = std::getenv(kDelayVariable); delay != nullptr) {
    std::this_thread::sleep_for(std::chrono::milliseconds(std::atoll(delay)));
  }
  const char* hold_file = std::getenv(kHoldFileVariable);
  while (hold_file != nullptr && std::filesystem::exists(hold_file)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// ---------------------------------------------------------------------------------------------
// Keys (docs/formats/aggregates.md)

store::KeyBuilder Prefix(const std::string& aggregate_id) {
  store::KeyBuilder key;
  key.Text("aggregate").Text(aggregate_id);
  return key;
}
std::string AllAggregatesPrefix() { return store::KeyBuilder().Text("aggregate").key(); }
std::string HashKey(const std::string& id) { return Prefix(id).Text("config_hash").key(); }
std::string CursorKey(const std::string& id) { return Prefix(id).Text("cursor").key(); }
// A group's store key is its prefix then the group key's bytes as they are, and an entity's the
// same (KeyBuilder's Bytes, the last component, appends them raw): Chunk::StoreKey.
std::string GroupPrefix(const std::string& id) { return Prefix(id).Text("group").key(); }
std::string EntityPrefix(const std::string& id) { return Prefix(id).Text("entity").key(); }
// Where format 2 recorded that a WAL segment was reclaimed; the WAL's catalog records it now
// (wal::HasReclaimedSegments), so that nothing sorts after an aggregate's keys: keys that only
// grow then append to the store's last page.
std::string Format2WalReclaimedKey() { return store::KeyBuilder().Text("wal_reclaimed").key(); }
// Set from the reset of a rebuild that starts from the landed tables until the baseline is in.
std::string BaselinePendingKey(const std::string& id) {
  return Prefix(id).Text("baseline_pending").key();
}
std::string BaselineSlicePrefix(const std::string& id) {
  return Prefix(id).Text("baseline_slice").key();
}
std::string BaselineSliceKey(const std::string& id, uint64_t segment_id, uint32_t ordinal) {
  return Prefix(id).Text("baseline_slice").U64(segment_id).U64(ordinal).key();
}

// ---------------------------------------------------------------------------------------------
// Little-endian record encoding, checked on read.

class Encoder {
 public:
  template <typename T>
  void Fixed(T value) {
    char bytes[sizeof(T)];
    std::memcpy(bytes, &value, sizeof(T));
    out_.append(bytes, sizeof(T));
  }
  void Text(std::string_view text) {
    Fixed(static_cast<uint32_t>(text.size()));
    out_.append(text);
  }
  // 7 bits a byte, least significant first; the high bit says another byte follows.
  void Varint(unsigned __int128 value) {
    while (value >= 0x80) {
      out_.push_back(static_cast<char>(static_cast<uint8_t>(value) | 0x80));
      value >>= 7;
    }
    out_.push_back(static_cast<char>(value));
  }
  // Zigzag: small magnitudes of either sign take few bytes.
  void Signed(Int128 value) {
    Varint((static_cast<unsigned __int128>(value) << 1) ^
           static_cast<unsigned __int128>(value >> 127));
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

class Decoder {
 public:
  Decoder(std::string_view bytes, std::string_view what) : bytes_(bytes), what_(what) {}
  template <typename T>
  Result<T> Fixed() {
    if (bytes_.size() - offset_ < sizeof(T)) return Truncated();
    T value;
    std::memcpy(&value, bytes_.data() + offset_, sizeof(T));
    offset_ += sizeof(T);
    return value;
  }
  Result<std::string> Text() {
    SKIPPR_ASSIGN_OR_RETURN(const uint32_t length, Fixed<uint32_t>());
    if (bytes_.size() - offset_ < length) return Truncated();
    std::string text(bytes_.substr(offset_, length));
    offset_ += length;
    return text;
  }
  Result<unsigned __int128> Varint() {
    unsigned __int128 value = 0;
    for (int shift = 0; shift < 128; shift += 7) {
      SKIPPR_ASSIGN_OR_RETURN(const uint8_t byte, Fixed<uint8_t>());
      const unsigned __int128 bits = byte & 0x7f;
      if (shift > 0 && (bits >> (128 - shift)) != 0) break;  // past 128 bits
      value |= bits << shift;
      if ((byte & 0x80) == 0) return value;
    }
    return Damaged("a number longer than 128 bits");
  }
  // A zigzag number that must fit T's range.
  template <typename T>
  Result<T> Signed() {
    SKIPPR_ASSIGN_OR_RETURN(const unsigned __int128 zigzag, Varint());
    const Int128 value = static_cast<Int128>(zigzag >> 1) ^ -static_cast<Int128>(zigzag & 1);
    if (value < std::numeric_limits<T>::min() || value > std::numeric_limits<T>::max()) {
      return Damaged("a number out of its field's range");
    }
    return static_cast<T>(value);
  }
  Status Damaged(std::string_view problem) const {
    return Status::Corruption(fmt::format(
        "{} holds {} at byte {}; stream_state is damaged: delete the aggregate's state (change "
        "its id) to rebuild it from the WAL",
        what_, problem, offset_));
  }
  Status ExpectEnd() const {
    if (offset_ == bytes_.size()) return Status::OK();
    return Status::Corruption(fmt::format(
        "{} has {} bytes left over; stream_state is damaged: delete the aggregate's state (change "
        "its id) to rebuild it from the WAL",
        what_, bytes_.size() - offset_));
  }

 private:
  Status Truncated() const {
    return Status::Corruption(fmt::format(
        "{} is truncated at byte {}; stream_state is damaged: delete the aggregate's state "
        "(change its id) to rebuild it from the WAL",
        what_, offset_));
  }
  std::string_view bytes_;
  std::string_view what_;
  size_t offset_ = 0;
};

Status CheckVersion(Decoder& decoder, std::string_view what) {
  SKIPPR_ASSIGN_OR_RETURN(const uint8_t version, decoder.Fixed<uint8_t>());
  if (version == kRecordVersion) return Status::OK();
  return Status::NotSupported(
      fmt::format("{} has record version {}; this skipprd reads version {}: run the newer skipprd",
                  what, version, kRecordVersion));
}

// ---------------------------------------------------------------------------------------------
// Measures

Int128 Pow10(int32_t exponent) {
  Int128 value = 1;
  for (int32_t i = 0; i < exponent; ++i) value *= 10;
  return value;
}

std::string Int128Text(Int128 value) {
  if (value == 0) return "0";
  const bool is_negative = value < 0;
  unsigned __int128 magnitude =
      is_negative ? static_cast<unsigned __int128>(-(value + 1)) + 1 : value;
  std::string digits;
  while (magnitude > 0) {
    digits.push_back(static_cast<char>('0' + static_cast<int>(magnitude % 10)));
    magnitude /= 10;
  }
  if (is_negative) digits.push_back('-');
  std::reverse(digits.begin(), digits.end());
  return digits;
}

// "1234" with scale 2 → "12.34"; "-5" → "-0.05" (DuckDB's text for DECIMAL values).
std::string DecimalText(Int128 unscaled, int32_t scale) {
  if (scale == 0) return Int128Text(unscaled);
  const bool is_negative = unscaled < 0;
  std::string digits = Int128Text(is_negative ? -unscaled : unscaled);
  if (digits.size() <= static_cast<size_t>(scale)) {
    digits.insert(0, static_cast<size_t>(scale) + 1 - digits.size(), '0');
  }
  digits.insert(digits.size() - static_cast<size_t>(scale), ".");
  return (is_negative ? "-" : "") + digits;
}

// One row's part in one measure: what a delete or update later takes back exactly.
struct Contribution {
  bool is_present = false;  // a non-null value (count "*": always)
  bool is_real = false;     // a double, summed inexactly
  Int128 unscaled = 0;      // integers (scale 0) and decimals
  int32_t scale = 0;
  double real = 0;
};

struct MeasureState {
  Int128 exact = 0;  // the sum of integer and decimal contributions, at `scale`
  int32_t scale = 0;
  double real = 0;  // the sum of double contributions
  bool has_real = false;
  int64_t non_null = 0;  // contributions present
};

struct GroupState {
  int64_t rows = 0;
  // A chunk's groups keep theirs in the chunk's arena (PendingStates): no allocation per group.
  std::pmr::vector<MeasureState> measures;
};

void Apply(GroupState& group, const std::vector<Contribution>& row, int64_t sign) {
  SKIPPR_CHECK(group.measures.size() == row.size());
  group.rows += sign;
  for (size_t i = 0; i < row.size(); ++i) {
    const Contribution& part = row[i];
    if (!part.is_present) continue;
    MeasureState& measure = group.measures[i];
    measure.non_null += sign;
    if (part.is_real) {
      measure.real += static_cast<double>(sign) * part.real;
      measure.has_real = true;
      continue;
    }
    if (part.scale > measure.scale) {
      measure.exact *= Pow10(part.scale - measure.scale);
      measure.scale = part.scale;
    }
    measure.exact += sign * part.unscaled * Pow10(measure.scale - part.scale);
  }
}

std::optional<std::string> MeasureText(const config::AggregateMeasure& config,
                                       const MeasureState& measure) {
  if (config.kind == config::MeasureKind::kCount) return std::to_string(measure.non_null);
  if (measure.non_null == 0) return std::nullopt;  // SQL: the sum of no values is NULL
  if (!measure.has_real) return DecimalText(measure.exact, measure.scale);
  const double total =
      static_cast<double>(measure.exact) / std::pow(10.0, measure.scale) + measure.real;
  return fmt::format("{}", total);
}

void EncodeContributions(const std::vector<Contribution>& row, Encoder& out) {
  out.Fixed(static_cast<uint32_t>(row.size()));
  for (const Contribution& part : row) {
    out.Fixed<uint8_t>(part.is_present);
    out.Fixed<uint8_t>(part.is_real);
    out.Fixed(part.unscaled);
    out.Fixed(part.scale);
    out.Fixed(part.real);
  }
}

Result<std::vector<Contribution>> DecodeContributions(Decoder& in) {
  SKIPPR_ASSIGN_OR_RETURN(const uint32_t count, in.Fixed<uint32_t>());
  std::vector<Contribution> row(count);
  for (Contribution& part : row) {
    SKIPPR_ASSIGN_OR_RETURN(const uint8_t is_present, in.Fixed<uint8_t>());
    SKIPPR_ASSIGN_OR_RETURN(const uint8_t is_real, in.Fixed<uint8_t>());
    part.is_present = is_present != 0;
    part.is_real = is_real != 0;
    SKIPPR_ASSIGN_OR_RETURN(part.unscaled, in.Fixed<Int128>());
    SKIPPR_ASSIGN_OR_RETURN(part.scale, in.Fixed<int32_t>());
    SKIPPR_ASSIGN_OR_RETURN(part.real, in.Fixed<double>());
  }
  return row;
}

// Group record version 2: which parts of a measure follow (the others are 0, or for non_null the
// group's rows).
enum MeasureParts : uint8_t {
  kHasExact = 1,
  kHasScale = 2,
  kHasReal = 4,
  kNonNullDiffersFromRows = 8,
  kAllMeasureParts = 15,
};

std::string EncodeGroup(const GroupState& group) {
  Encoder out;
  out.Fixed(kGroupRecordVersion);
  out.Signed(group.rows);
  out.Varint(group.measures.size());
  for (const MeasureState& measure : group.measures) {
    const uint8_t parts = (measure.exact != 0 ? kHasExact : 0) |
                          (measure.scale != 0 ? kHasScale : 0) |
                          (measure.has_real ? kHasReal : 0) |
                          (measure.non_null != group.rows ? kNonNullDiffersFromRows : 0);
    out.Fixed(parts);
    if ((parts & kHasExact) != 0) out.Signed(measure.exact);
    if ((parts & kHasScale) != 0) out.Signed(measure.scale);
    if ((parts & kHasReal) != 0) out.Fixed(measure.real);
    if ((parts & kNonNullDiffersFromRows) != 0) out.Signed(measure.non_null);
  }
  return out.Take();
}

Status DecodeMeasuresV1(Decoder& in, GroupState& group) {
  for (MeasureState& measure : group.measures) {
    SKIPPR_ASSIGN_OR_RETURN(measure.exact, in.Fixed<Int128>());
    SKIPPR_ASSIGN_OR_RETURN(measure.scale, in.Fixed<int32_t>());
    SKIPPR_ASSIGN_OR_RETURN(measure.real, in.Fixed<double>());
    SKIPPR_ASSIGN_OR_RETURN(const uint8_t has_real, in.Fixed<uint8_t>());
    measure.has_real = has_real != 0;
    SKIPPR_ASSIGN_OR_RETURN(measure.non_null, in.Fixed<int64_t>());
  }
  return Status::OK();
}

Status DecodeMeasuresV2(Decoder& in, GroupState& group) {
  for (MeasureState& measure : group.measures) {
    SKIPPR_ASSIGN_OR_RETURN(const uint8_t parts, in.Fixed<uint8_t>());
    if ((parts & ~kAllMeasureParts) != 0) return in.Damaged("unknown measure parts");
    if ((parts & kHasExact) != 0) {
      SKIPPR_ASSIGN_OR_RETURN(measure.exact, in.Signed<Int128>());
    }
    if ((parts & kHasScale) != 0) {
      SKIPPR_ASSIGN_OR_RETURN(measure.scale, in.Signed<int32_t>());
    }
    measure.has_real = (parts & kHasReal) != 0;
    if (measure.has_real) {
      SKIPPR_ASSIGN_OR_RETURN(measure.real, in.Fixed<double>());
    }
    measure.non_null = group.rows;
    if ((parts & kNonNullDiffersFromRows) != 0) {
      SKIPPR_ASSIGN_OR_RETURN(measure.non_null, in.Signed<int64_t>());
    }
  }
  return Status::OK();
}

Result<GroupState> DecodeGroup(
    std::string_view bytes, const config::AggregateConfig& aggregate,
    std::pmr::memory_resource* memory = std::pmr::get_default_resource()) {
  const std::string what = fmt::format("aggregate {}: a group record", aggregate.id);
  Decoder in(bytes, what);
  SKIPPR_ASSIGN_OR_RETURN(const uint8_t version, in.Fixed<uint8_t>());
  if (version != 1 && version != kGroupRecordVersion) {
    return Status::NotSupported(fmt::format(
        "{} has record version {}; this skipprd reads versions 1 to {}: run the newer skipprd",
        what, version, kGroupRecordVersion));
  }
  GroupState group{0, std::pmr::vector<MeasureState>(memory)};
  uint64_t count = 0;
  if (version == 1) {
    SKIPPR_ASSIGN_OR_RETURN(group.rows, in.Fixed<int64_t>());
    SKIPPR_ASSIGN_OR_RETURN(count, in.Fixed<uint32_t>());
  } else {
    SKIPPR_ASSIGN_OR_RETURN(group.rows, in.Signed<int64_t>());
    SKIPPR_ASSIGN_OR_RETURN(const unsigned __int128 measures, in.Varint());
    count = measures <= UINT32_MAX ? static_cast<uint64_t>(measures) : UINT64_MAX;
  }
  if (count != aggregate.measures.size()) {
    return Status::Corruption(
        fmt::format("{} holds {} measures, the config {}", what, count, aggregate.measures.size()));
  }
  group.measures.resize(count);
  SKIPPR_RETURN_IF_ERROR(version == 1 ? DecodeMeasuresV1(in, group) : DecodeMeasuresV2(in, group));
  SKIPPR_RETURN_IF_ERROR(in.ExpectEnd());
  return group;
}

// ---------------------------------------------------------------------------------------------
// Entities: the last-row image (group key + contributions), which is also the entity index
// (entity → group key), and the dedup key (the last applied order token).

struct EntityState {
  bool is_live = false;
  std::string order_token;
  std::string group_key;
  std::vector<Contribution> image;
};

std::string EncodeEntity(const EntityState& entity) {
  Encoder out;
  out.Fixed(kRecordVersion);
  out.Fixed<uint8_t>(entity.is_live);
  out.Text(entity.order_token);
  out.Text(entity.group_key);
  EncodeContributions(entity.image, out);
  return out.Take();
}

Result<EntityState> DecodeEntity(std::string_view bytes, const std::string& aggregate_id) {
  const std::string what = fmt::format("aggregate {}: an entity record", aggregate_id);
  Decoder in(bytes, what);
  SKIPPR_RETURN_IF_ERROR(CheckVersion(in, what));
  EntityState entity;
  SKIPPR_ASSIGN_OR_RETURN(const uint8_t is_live, in.Fixed<uint8_t>());
  entity.is_live = is_live != 0;
  SKIPPR_ASSIGN_OR_RETURN(entity.order_token, in.Text());
  SKIPPR_ASSIGN_OR_RETURN(entity.group_key, in.Text());
  SKIPPR_ASSIGN_OR_RETURN(entity.image, DecodeContributions(in));
  SKIPPR_RETURN_IF_ERROR(in.ExpectEnd());
  return entity;
}

// ---------------------------------------------------------------------------------------------
// Cursor

std::string EncodeCursor(const AggregateCursor& cursor) {
  Encoder out;
  out.Fixed(kRecordVersion);
  out.Fixed(cursor.sequence);
  out.Fixed(cursor.segment_id);
  out.Fixed(cursor.slice_ordinal);
  out.Fixed(cursor.row_index);
  return out.Take();
}

Result<AggregateCursor> DecodeCursor(std::string_view bytes, const std::string& aggregate_id) {
  const std::string what = fmt::format("aggregate {}: the cursor", aggregate_id);
  Decoder in(bytes, what);
  SKIPPR_RETURN_IF_ERROR(CheckVersion(in, what));
  AggregateCursor cursor;
  SKIPPR_ASSIGN_OR_RETURN(cursor.sequence, in.Fixed<uint64_t>());
  SKIPPR_ASSIGN_OR_RETURN(cursor.segment_id, in.Fixed<uint64_t>());
  SKIPPR_ASSIGN_OR_RETURN(cursor.slice_ordinal, in.Fixed<uint32_t>());
  SKIPPR_ASSIGN_OR_RETURN(cursor.row_index, in.Fixed<uint32_t>());
  SKIPPR_RETURN_IF_ERROR(in.ExpectEnd());
  return cursor;
}

template <typename Transaction>
Result<std::optional<AggregateCursor>> ReadCursorIn(const Transaction& transaction,
                                                    const std::string& aggregate_id) {
  SKIPPR_ASSIGN_OR_RETURN(std::optional<std::string> bytes,
                          transaction.Get(store::Family::kStreamState, CursorKey(aggregate_id)));
  if (!bytes) return std::optional<AggregateCursor>();
  SKIPPR_ASSIGN_OR_RETURN(AggregateCursor cursor, DecodeCursor(*bytes, aggregate_id));
  return std::optional<AggregateCursor>(cursor);
}

// ---------------------------------------------------------------------------------------------
// Group keys: per key field a type tag (0: NULL, else 1 + TypeId) then the value, in the
// store's order-preserving key encoding, so equal values always give equal bytes.

constexpr uint64_t kSignFlip = uint64_t{1} << 63;

void AppendKeyValue(store::KeyBuilder& key, const Column& column, int64_t row) {
  if (!column.IsValid(row)) {
    key.U64(0);
    return;
  }
  key.U64(1 + static_cast<uint64_t>(column.type.id()));
  switch (PhysicalKindOf(column.type.id())) {
    case PhysicalKind::kBool:
      key.U64(column.BoolAt(row) ? 1 : 0);
      return;
    case PhysicalKind::kInt64:
      key.U64(static_cast<uint64_t>(column.Int64At(row)) ^ kSignFlip);
      return;
    case PhysicalKind::kDouble: {
      double value = column.DoubleAt(row);
      if (value == 0) value = 0;  // -0.0 and 0.0 are one group, as in SQL
      uint64_t bits;
      std::memcpy(&bits, &value, sizeof(bits));
      key.U64(bits);
      return;
    }
    case PhysicalKind::kDecimal128: {
      const auto [low, high] = column.Decimal128At(row);
      key.U64(static_cast<uint64_t>(high) ^ kSignFlip).U64(low);
      key.U64(static_cast<uint64_t>(column.type.decimal_scale()));
      return;
    }
    case PhysicalKind::kBytes:
      key.Text(column.BytesAt(row));
      return;
    default:
      SKIPPR_CHECK_MSG(false, "nested key fields are refused when the slice is resolved");
  }
}

Result<std::vector<std::optional<std::string>>> DecodeGroupKey(std::string_view group_key,
                                                               size_t key_count) {
  store::KeyReader reader(group_key);
  std::vector<std::optional<std::string>> values;
  for (size_t i = 0; i < key_count; ++i) {
    SKIPPR_ASSIGN_OR_RETURN(const uint64_t tag, reader.U64());
    if (tag == 0) {
      values.emplace_back();
      continue;
    }
    const TypeId type = static_cast<TypeId>(tag - 1);
    switch (PhysicalKindOf(type)) {
      case PhysicalKind::kBool: {
        SKIPPR_ASSIGN_OR_RETURN(const uint64_t value, reader.U64());
        values.emplace_back(value != 0 ? "true" : "false");
        break;
      }
      case PhysicalKind::kInt64: {
        SKIPPR_ASSIGN_OR_RETURN(const uint64_t value, reader.U64());
        values.emplace_back(std::to_string(static_cast<int64_t>(value ^ kSignFlip)));
        break;
      }
      case PhysicalKind::kDouble: {
        SKIPPR_ASSIGN_OR_RETURN(const uint64_t bits, reader.U64());
        double value;
        std::memcpy(&value, &bits, sizeof(value));
        values.emplace_back(fmt::format("{}", value));
        break;
      }
      case PhysicalKind::kDecimal128: {
        SKIPPR_ASSIGN_OR_RETURN(const uint64_t high, reader.U64());
        SKIPPR_ASSIGN_OR_RETURN(const uint64_t low, reader.U64());
        SKIPPR_ASSIGN_OR_RETURN(const uint64_t scale, reader.U64());
        const Int128 unscaled =
            (static_cast<Int128>(static_cast<int64_t>(high ^ kSignFlip)) << 64) |
            static_cast<Int128>(low);
        values.emplace_back(DecimalText(unscaled, static_cast<int32_t>(scale)));
        break;
      }
      case PhysicalKind::kBytes: {
        SKIPPR_ASSIGN_OR_RETURN(std::string text, reader.Text());
        values.emplace_back(std::move(text));
        break;
      }
      default:
        return Status::Corruption(
            fmt::format("a group key names type tag {}, not a key type", tag));
    }
  }
  SKIPPR_RETURN_IF_ERROR(reader.ExpectEnd());
  return values;
}

// ---------------------------------------------------------------------------------------------
// Resolving an aggregate against one slice's fields.

struct ResolvedSlice {
  std::vector<const Column*> keys;
  std::vector<const Column*> measures;  // nullptr: the field is not in this slice (or count "*")
};

// nullopt when the slice lacks a key field: the aggregate is over the namespaces that have them.
// The fields Resolve looks up: slices are decoded with only these columns.
FieldSelection FieldsRead(const config::AggregateConfig& aggregate) {
  std::vector<std::string> names = aggregate.key_fields;
  for (const config::AggregateMeasure& measure : aggregate.measures) {
    if (measure.field != "*") names.push_back(measure.field);
  }
  return FieldSelection::Named(std::move(names));
}

Result<std::optional<ResolvedSlice>> Resolve(const config::AggregateConfig& aggregate,
                                             const Batch& batch) {
  const auto find = [&](const std::string& name) -> const Column* {
    for (size_t i = 0; i < batch.fields.size(); ++i) {
      if (batch.fields[i].name == name) return &batch.columns[i];
    }
    return nullptr;
  };
  ResolvedSlice resolved;
  for (const std::string& name : aggregate.key_fields) {
    const Column* column = find(name);
    if (column == nullptr) return std::optional<ResolvedSlice>();
    const PhysicalKind kind = PhysicalKindOf(column->type.id());
    if (kind == PhysicalKind::kStruct || kind == PhysicalKind::kList ||
        kind == PhysicalKind::kMap) {
      return Status::InvalidConfig(fmt::format(
          "transform.aggregates {}: key field '{}' of namespace '{}' is {}; keys must be scalar "
          "top-level fields: name a scalar field (flatten_events flattens structs)",
          aggregate.id, name, batch.namespace_name, column->type.ToString()));
    }
    resolved.keys.push_back(column);
  }
  for (const config::AggregateMeasure& measure : aggregate.measures) {
    const Column* column = measure.field == "*" ? nullptr : find(measure.field);
    if (column != nullptr && measure.kind == config::MeasureKind::kSum) {
      const PhysicalKind kind = PhysicalKindOf(column->type.id());
      if (kind != PhysicalKind::kInt64 && kind != PhysicalKind::kDouble &&
          kind != PhysicalKind::kDecimal128) {
        return Status::InvalidConfig(fmt::format(
            "transform.aggregates {}: measure {} sums '{}' of namespace '{}', which is {}; sum "
            "needs an integer, decimal or floating-point field",
            aggregate.id, measure.name, measure.field, batch.namespace_name,
            column->type.ToString()));
      }
    }
    resolved.measures.push_back(column);
  }
  return std::optional<ResolvedSlice>(std::move(resolved));
}

// Fills `parts` (reused across rows: no allocation per row on the hot path).
void RowContributions(const config::AggregateConfig& aggregate, const ResolvedSlice& slice,
                      int64_t row, std::vector<Contribution>& parts) {
  parts.assign(aggregate.measures.size(), Contribution{});
  for (size_t i = 0; i < parts.size(); ++i) {
    const config::AggregateMeasure& measure = aggregate.measures[i];
    const Column* column = slice.measures[i];
    Contribution& part = parts[i];
    if (measure.field == "*") {
      part.is_present = true;
      continue;
    }
    if (column == nullptr || !column->IsValid(row)) continue;
    part.is_present = true;
    if (measure.kind == config::MeasureKind::kCount) continue;
    switch (PhysicalKindOf(column->type.id())) {
      case PhysicalKind::kDouble:
        part.is_real = true;
        part.real = column->DoubleAt(row);
        break;
      case PhysicalKind::kDecimal128: {
        const auto [low, high] = column->Decimal128At(row);
        part.unscaled = (static_cast<Int128>(high) << 64) | static_cast<Int128>(low);
        part.scale = column->type.decimal_scale();
        break;
      }
      default:
        part.unscaled = column->Int64At(row);
        break;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// A chunk: the groups and entities its rows touched, loaded from one snapshot, written in one
// transaction with the cursor.

// The memory a chunk's pending states take (their keys, measures, containers), handed out by
// bumping a pointer and taken back all at once when the chunk commits. A chunk's states then lie
// side by side in the order they arrived, where one heap allocation each scattered them, and the
// blocks serve the round's next chunk (std::pmr::monotonic_buffer_resource would hand its blocks
// back on release, to be allocated again for every chunk).
class ChunkArena final : public std::pmr::memory_resource {
 public:
  ChunkArena() = default;
  ChunkArena(const ChunkArena&) = delete;
  ChunkArena& operator=(const ChunkArena&) = delete;

  // Everything handed out is free again; the caller has destroyed what it held.
  void Rewind() {
    block_ = 0;
    used_bytes_ = 0;
  }

 private:
  static constexpr size_t kBlockBytes = size_t{1} << 20;

  struct Block {
    std::unique_ptr<std::byte[]> bytes;
    size_t size_bytes = 0;
  };

  void* do_allocate(size_t bytes, size_t alignment) override {
    if (void* memory = TakeFromBlock(bytes, alignment)) return memory;
    // The next block that fits (blocks kept from an earlier chunk may be too small), or a new one.
    for (++block_; block_ < blocks_.size(); ++block_) {
      used_bytes_ = 0;
      if (void* memory = TakeFromBlock(bytes, alignment)) return memory;
    }
    const size_t size_bytes = std::max(kBlockBytes, bytes + alignment);
    blocks_.push_back(Block{std::make_unique_for_overwrite<std::byte[]>(size_bytes), size_bytes});
    block_ = blocks_.size() - 1;
    used_bytes_ = 0;
    void* memory = TakeFromBlock(bytes, alignment);
    SKIPPR_CHECK(memory != nullptr);
    return memory;
  }

  void* TakeFromBlock(size_t bytes, size_t alignment) {
    if (block_ >= blocks_.size()) return nullptr;
    const Block& block = blocks_[block_];
    void* memory = block.bytes.get() + used_bytes_;
    size_t room_bytes = block.size_bytes - used_bytes_;
    if (std::align(alignment, bytes, memory, room_bytes) == nullptr) return nullptr;
    used_bytes_ = block.size_bytes - room_bytes + bytes;
    return memory;
  }

  void do_deallocate(void*, size_t, size_t) override {}  // taken back by Rewind
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
    return this == &other;
  }

  std::vector<Block> blocks_;
  size_t block_ = 0;       // the block being filled
  size_t used_bytes_ = 0;  // of blocks_[block_]
};

// The states a chunk changed, by key (a group or entity key, without the store key's prefix), in
// the order they arrived. While keys only grow (ids, times) a key is found without an index — it
// is the last one or none — and the states are written without a sort; the first key that does
// not grow builds the hash index, which then serves every lookup. States and keys live in the
// chunk's arena, given back by Clear.
template <typename State>
class PendingStates {
 public:
  explicit PendingStates(size_t expected_keys) : expected_keys_(expected_keys) { Clear(); }

  // Where a state's own containers take their memory (GroupState's measures).
  std::pmr::memory_resource* memory() { return &arena_; }

  size_t size() const { return items_->size(); }

  State* Find(std::string_view key) {
    if (items_->empty()) return nullptr;
    if (!index_) {
      const std::string_view last = items_->back().key;
      if (key > last) return nullptr;
      if (key == last) return &items_->back().state;
      BuildIndex();
    }
    const auto found = index_->find(key);
    return found != index_->end() ? found->second : nullptr;
  }

  // `key` is not held: Find said so.
  State* Add(std::string_view key, State state) {
    SKIPPR_CHECK(index_ || items_->empty() || key > items_->back().key);
    char* const key_bytes = static_cast<char*>(arena_.allocate(key.size(), 1));
    std::memcpy(key_bytes, key.data(), key.size());
    Item& item = items_->emplace_back(Item{{key_bytes, key.size()}, std::move(state)});
    if (index_) {
      const bool is_new = index_->emplace(item.key, &item.state).second;
      SKIPPR_CHECK(is_new);
    }
    return &item.state;
  }

  // Calls visit(key, state) for each state in key order: LMDB then writes each B-tree page while
  // it is at hand, where hash order (many distinct keys) touches pages at random.
  template <typename Visit>
  Status ForEachInKeyOrder(const Visit& visit) const {
    if (!index_) {  // they arrived in key order
      for (const Item& item : *items_) SKIPPR_RETURN_IF_ERROR(visit(item.key, item.state));
      return Status::OK();
    }
    std::vector<const Item*> ordered;
    ordered.reserve(items_->size());
    for (const Item& item : *items_) ordered.push_back(&item);
    std::sort(ordered.begin(), ordered.end(),
              [](const Item* a, const Item* b) { return a->key < b->key; });
    for (const Item* item : ordered) SKIPPR_RETURN_IF_ERROR(visit(item->key, item->state));
    return Status::OK();
  }

  void Clear() {
    index_.reset();
    items_.reset();
    arena_.Rewind();
    items_.emplace(&arena_);
  }

 private:
  struct Item {
    std::string_view key;  // in arena_
    State state;
  };

  void BuildIndex() {
    index_.emplace(&arena_);
    // Room made up front, so that a chunk of many keys never rehashes.
    index_->reserve(std::max(expected_keys_, items_->size()));
    for (Item& item : *items_) index_->emplace(item.key, &item.state);
  }

  size_t expected_keys_;
  ChunkArena arena_;  // first: the containers below hand their memory back to it
  std::optional<std::pmr::deque<Item>> items_;  // stable addresses: the index holds their keys
  std::optional<std::pmr::unordered_map<std::string_view, State*>> index_;
};

class Chunk {
 public:
  // `expected_groups`: room made up front, so that a chunk of many keys never rehashes.
  Chunk(store::Store& store, const config::AggregateConfig& aggregate, size_t expected_groups)
      : store_(store),
        aggregate_(aggregate),
        groups_(expected_groups),
        entities_(expected_groups),
        group_prefix_(GroupPrefix(aggregate.id)),
        entity_prefix_(EntityPrefix(aggregate.id)) {}

  int64_t rows() const { return rows_; }
  void CountRows(int64_t rows) { rows_ += rows; }
  // Full at the row limit, or when it holds as many groups and entities as the key limit allows
  // (many distinct keys: bounded memory; few: many rows share each store read and write).
  bool IsFull(const ProcessorOptions& options) const {
    return rows_ >= options.rows_per_transaction ||
           groups_.size() + entities_.size() >= options.keys_per_transaction;
  }

  Status ApplyRow(const Batch& batch, const ResolvedSlice& slice, int64_t row) {
    const Mutation mutation = batch.cdc ? batch.cdc->mutations[row] : Mutation::kInsert;
    if (mutation == Mutation::kTruncate) {
      return Status::NotSupported(fmt::format(
          "aggregate '{}': namespace '{}' was truncated at its source, which materialised views "
          "cannot apply yet (the groups would keep the rows it removed)",
          aggregate_.id, batch.namespace_name));
    }
    const std::string_view entity_key =
        batch.cdc ? batch.cdc->business_keys[row] : std::string_view();
    if (entity_key.empty()) {
      // No entity: every row is an insert; a delete has no last row to take back.
      if (mutation == Mutation::kDelete) return Status::OK();
      SKIPPR_ASSIGN_OR_RETURN(GroupState * group, Group(GroupKeyOf(slice, row)));
      RowContributions(aggregate_, slice, row, scratch_);
      Apply(*group, scratch_, +1);
      return Status::OK();
    }
    SKIPPR_ASSIGN_OR_RETURN(EntityState * entity, Entity(entity_key));
    const std::string_view order_token = batch.cdc->order_tokens[row];
    // Dedup: an event at or before the last one applied to this entity was applied already (a
    // source that re-delivers after a crash commits it again in a later segment).
    if (!order_token.empty() && !entity->order_token.empty() &&
        order_token <= entity->order_token) {
      return Status::OK();
    }
    if (entity->is_live) {
      SKIPPR_ASSIGN_OR_RETURN(GroupState * old_group, Group(entity->group_key));
      Apply(*old_group, entity->image, -1);
      entity->is_live = false;
      entity->image.clear();
      entity->group_key.clear();
    }
    // insert, update and snapshot rows are the entity's new image: update = new − last row.
    if (mutation != Mutation::kDelete) {
      entity->group_key = GroupKeyOf(slice, row);
      RowContributions(aggregate_, slice, row, entity->image);
      SKIPPR_ASSIGN_OR_RETURN(GroupState * group, Group(entity->group_key));
      Apply(*group, entity->image, +1);
      entity->is_live = true;
    }
    if (!order_token.empty()) entity->order_token = order_token;
    return Status::OK();
  }

  // Writes the chunk and `cursor` in one transaction, then starts an empty chunk.
  Status Commit(const AggregateCursor& cursor) {
    WaitForTestSeams();
    SKIPPR_ASSIGN_OR_RETURN(store::WriteTransaction write, store_.BeginWrite());
    SKIPPR_RETURN_IF_ERROR(WriteState(write));
    SKIPPR_RETURN_IF_ERROR(
        write.Put(store::Family::kStreamState, CursorKey(aggregate_.id), EncodeCursor(cursor)));
    CrashPoint("aggregates.before_commit");
    SKIPPR_RETURN_IF_ERROR(write.Commit());
    CrashPoint("aggregates.after_commit");
    Clear();
    return Status::OK();
  }

  // Writes the chunk as a part of a rebuild's baseline, then starts an empty chunk. The pending
  // mark stays: a crash before the last part makes the next open reset the aggregate and start
  // the baseline again.
  Status CommitBaselinePart() {
    SKIPPR_ASSIGN_OR_RETURN(store::WriteTransaction write, store_.BeginWrite());
    SKIPPR_RETURN_IF_ERROR(WriteState(write));
    CrashPoint("aggregates.before_baseline_part_commit");
    SKIPPR_RETURN_IF_ERROR(write.Commit());
    Clear();
    return Status::OK();
  }

  // Writes the chunk (the landed tables' last rows) as the end of the baseline of a rebuild, with
  // the live slices those rows already hold, and clears the pending mark: no cursor yet, the WAL
  // replays from its first live segment.
  Status CommitBaseline(const std::set<std::pair<uint64_t, uint32_t>>& landed_slices) {
    SKIPPR_ASSIGN_OR_RETURN(store::WriteTransaction write, store_.BeginWrite());
    SKIPPR_RETURN_IF_ERROR(WriteState(write));
    for (const auto& [segment_id, ordinal] : landed_slices) {
      SKIPPR_RETURN_IF_ERROR(write.Put(store::Family::kStreamState,
                                       BaselineSliceKey(aggregate_.id, segment_id, ordinal), ""));
    }
    SKIPPR_RETURN_IF_ERROR(
        write.Delete(store::Family::kStreamState, BaselinePendingKey(aggregate_.id)));
    CrashPoint("aggregates.before_baseline_commit");
    SKIPPR_RETURN_IF_ERROR(write.Commit());
    Clear();
    return Status::OK();
  }

 private:
  Status WriteState(store::WriteTransaction& write) {
    const store::Family family = store::Family::kStreamState;
    SKIPPR_RETURN_IF_ERROR(groups_.ForEachInKeyOrder(
        [&](std::string_view key, const GroupState& group) -> Status {
          const std::string& store_key = StoreKey(group_prefix_, key);
          if (group.rows == 0) {
            for (const MeasureState& measure : group.measures) {
              SKIPPR_CHECK_MSG(measure.non_null == 0, "an empty group kept a measure value");
            }
            return write.Delete(family, store_key);
          }
          SKIPPR_CHECK(group.rows > 0);
          return write.Put(family, store_key, EncodeGroup(group));
        }));
    return entities_.ForEachInKeyOrder(
        [&](std::string_view key, const EntityState& entity) -> Status {
          const std::string& store_key = StoreKey(entity_prefix_, key);
          if (!entity.is_live && entity.order_token.empty()) return write.Delete(family, store_key);
          return write.Put(family, store_key, EncodeEntity(entity));
        });
  }

  void Clear() {
    groups_.Clear();
    entities_.Clear();
    snapshot_.reset();
    rows_ = 0;
  }

  // The row's group key, in a buffer the next call reuses.
  const std::string& GroupKeyOf(const ResolvedSlice& slice, int64_t row) {
    group_key_.Clear();
    for (const Column* column : slice.keys) AppendKeyValue(group_key_, *column, row);
    return group_key_.key();
  }

  // The store as of the chunk's first read, with the greatest group and entity keys it holds
  // (without their store key prefix, as PendingStates keys them).
  struct Snapshot {
    store::ReadTransaction read;
    std::optional<std::string> last_group_key;
    std::optional<std::string> last_entity_key;

    // Whether `key` may be stored: not when it sorts after every stored key of its kind, which
    // spares keys that only grow (ids, times) a read that would find nothing.
    static bool MayHold(const std::optional<std::string>& last_key, std::string_view key) {
      return last_key && key <= *last_key;
    }
  };

  Result<const Snapshot*> TakeSnapshot() {
    if (!snapshot_) {
      SKIPPR_ASSIGN_OR_RETURN(store::ReadTransaction read, store_.BeginRead());
      const store::Family family = store::Family::kStreamState;
      SKIPPR_ASSIGN_OR_RETURN(std::optional<std::string> last_group,
                              read.LastKey(family, group_prefix_));
      SKIPPR_ASSIGN_OR_RETURN(std::optional<std::string> last_entity,
                              read.LastKey(family, entity_prefix_));
      const auto without_prefix = [](std::optional<std::string>& key, const std::string& prefix) {
        if (!key) return;
        SKIPPR_CHECK(key->starts_with(prefix));
        key->erase(0, prefix.size());
      };
      without_prefix(last_group, group_prefix_);
      without_prefix(last_entity, entity_prefix_);
      snapshot_.emplace(Snapshot{std::move(read), std::move(last_group), std::move(last_entity)});
    }
    return &*snapshot_;
  }

  // The stored value of the group or entity `key` (`prefix`: which), or nullopt, reading only
  // when the snapshot may hold it.
  Result<std::optional<std::string>> ReadStored(const std::string& prefix, std::string_view key,
                                                std::optional<std::string> Snapshot::*last_key) {
    SKIPPR_ASSIGN_OR_RETURN(const Snapshot* snapshot, TakeSnapshot());
    if (!Snapshot::MayHold(snapshot->*last_key, key)) return std::optional<std::string>();
    return snapshot->read.Get(store::Family::kStreamState, StoreKey(prefix, key));
  }

  // The store key of a group or an entity (GroupPrefix), made in a buffer each call reuses.
  const std::string& StoreKey(const std::string& prefix, std::string_view key) {
    store_key_.assign(prefix).append(key);
    return store_key_;
  }

  Result<GroupState*> Group(std::string_view key) {
    if (GroupState* pending = groups_.Find(key)) return pending;
    SKIPPR_ASSIGN_OR_RETURN(std::optional<std::string> bytes,
                            ReadStored(group_prefix_, key, &Snapshot::last_group_key));
    if (bytes) {
      SKIPPR_ASSIGN_OR_RETURN(GroupState group, DecodeGroup(*bytes, aggregate_, groups_.memory()));
      return groups_.Add(key, std::move(group));
    }
    GroupState group{0, std::pmr::vector<MeasureState>(groups_.memory())};
    group.measures.resize(aggregate_.measures.size());
    return groups_.Add(key, std::move(group));
  }

  Result<EntityState*> Entity(std::string_view key) {
    if (EntityState* pending = entities_.Find(key)) return pending;
    SKIPPR_ASSIGN_OR_RETURN(std::optional<std::string> bytes,
                            ReadStored(entity_prefix_, key, &Snapshot::last_entity_key));
    EntityState entity;
    if (bytes) {
      SKIPPR_ASSIGN_OR_RETURN(entity, DecodeEntity(*bytes, aggregate_.id));
    }
    return entities_.Add(key, std::move(entity));
  }

  store::Store& store_;
  const config::AggregateConfig& aggregate_;
  std::optional<Snapshot> snapshot_;
  PendingStates<GroupState> groups_;
  PendingStates<EntityState> entities_;
  std::vector<Contribution> scratch_;
  const std::string group_prefix_;
  const std::string entity_prefix_;
  std::string store_key_;  // StoreKey's buffer
  store::KeyBuilder group_key_;  // GroupKeyOf's buffer
  int64_t rows_ = 0;
};

Result<std::set<std::pair<uint64_t, uint32_t>>> ReadBaselineSlices(
    const store::ReadTransaction& read, const std::string& aggregate_id) {
  std::set<std::pair<uint64_t, uint32_t>> slices;
  Status failure;
  SKIPPR_RETURN_IF_ERROR(read.Scan(
      store::Family::kStreamState, BaselineSlicePrefix(aggregate_id),
      [&](std::string_view key, std::string_view) {
        store::KeyReader reader(key);
        (void)reader.Text();  // "aggregate"
        (void)reader.Text();  // the id
        (void)reader.Text();  // "baseline_slice"
        Result<uint64_t> segment_id = reader.U64();
        Result<uint64_t> ordinal = reader.U64();
        if (!segment_id.ok() || !ordinal.ok() || !reader.ExpectEnd().ok()) {
          failure = Status::Corruption(fmt::format(
              "aggregate {}: a baseline slice key in stream_state is malformed", aggregate_id));
          return false;
        }
        slices.insert({*segment_id, static_cast<uint32_t>(*ordinal)});
        return true;
      }));
  SKIPPR_RETURN_IF_ERROR(failure);
  return slices;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Public functions

bool HasPassed(const std::optional<AggregateCursor>& cursor, const wal::SegmentEntry& segment) {
  if (!cursor) return false;
  if (cursor->segment_id != segment.segment_id) return cursor->segment_id > segment.segment_id;
  return cursor->slice_ordinal >= segment.slices.size();
}

Result<std::optional<AggregateCursor>> ReadCursor(const store::ReadTransaction& read,
                                                  const std::string& aggregate_id) {
  return ReadCursorIn(read, aggregate_id);
}

Result<std::optional<AggregateCursor>> ReadCursor(const store::WriteTransaction& write,
                                                  const std::string& aggregate_id) {
  return ReadCursorIn(write, aggregate_id);
}

Result<bool> AggregatesHavePassed(const store::WriteTransaction& write,
                                  const std::vector<config::AggregateConfig>& aggregates,
                                  const wal::SegmentEntry& segment) {
  for (const config::AggregateConfig& aggregate : aggregates) {
    SKIPPR_ASSIGN_OR_RETURN(std::optional<AggregateCursor> cursor, ReadCursor(write, aggregate.id));
    // A cursor of an older config does not count: the rebuild starts again from the WAL's start.
    SKIPPR_ASSIGN_OR_RETURN(std::optional<std::string> hash,
                            write.Get(store::Family::kStreamState, HashKey(aggregate.id)));
    if (!hash || *hash != aggregate.ConfigHash() || !HasPassed(cursor, segment)) return false;
  }
  return true;
}

Result<AggregateLag> ReadLag(const store::ReadTransaction& read,
                             const config::AggregateConfig& aggregate) {
  AggregateLag lag;
  lag.aggregate_id = aggregate.id;
  SKIPPR_ASSIGN_OR_RETURN(std::vector<wal::SegmentEntry> live, wal::LiveSegments(read));
  SKIPPR_ASSIGN_OR_RETURN(std::optional<AggregateCursor> cursor, ReadCursor(read, aggregate.id));
  for (const wal::SegmentEntry& segment : live) {
    if (HasPassed(cursor, segment)) continue;
    ++lag.segments;
    lag.bytes += segment.file_bytes;
    const bool is_current = cursor && cursor->segment_id == segment.segment_id;
    for (const wal::SliceSummary& slice : segment.slices) {
      if (is_current && slice.ordinal < cursor->slice_ordinal) continue;
      if (slice.namespace_name == schema::kDeadlettersNamespace) continue;
      lag.rows += slice.rows;
      if (is_current && slice.ordinal == cursor->slice_ordinal) lag.rows -= cursor->row_index;
    }
  }
  return lag;
}

namespace {

// Whether a WAL segment was ever reclaimed; a format 2 record of it moves to the WAL's catalog.
Result<bool> WalWasReclaimed(store::WriteTransaction& write, bool* moved_format2_record) {
  SKIPPR_ASSIGN_OR_RETURN(std::optional<std::string> format2,
                          write.Get(store::Family::kStreamState, Format2WalReclaimedKey()));
  *moved_format2_record = format2.has_value();
  if (format2) {
    SKIPPR_RETURN_IF_ERROR(wal::RecordReclaimedSegments(write));
    SKIPPR_RETURN_IF_ERROR(write.Delete(store::Family::kStreamState, Format2WalReclaimedKey()));
  }
  return wal::HasReclaimedSegments(write);
}

// One stored group as AggregateGroup: keys and measures as text.
Result<AggregateGroup> DecodeStoredGroup(std::string_view key_suffix, std::string_view value,
                                         const config::AggregateConfig& aggregate) {
  SKIPPR_ASSIGN_OR_RETURN(std::vector<std::optional<std::string>> keys,
                          DecodeGroupKey(key_suffix, aggregate.key_fields.size()));
  SKIPPR_ASSIGN_OR_RETURN(GroupState group, DecodeGroup(value, aggregate));
  AggregateGroup row;
  row.keys = std::move(keys);
  row.rows = group.rows;
  for (size_t i = 0; i < aggregate.measures.size(); ++i) {
    row.measures.push_back(MeasureText(aggregate.measures[i], group.measures[i]));
  }
  return row;
}

}  // namespace

Result<AggregateSnapshot> ReadAggregate(const store::ReadTransaction& read,
                                        const config::AggregateConfig& aggregate) {
  AggregateSnapshot snapshot;
  snapshot.aggregate_id = aggregate.id;
  SKIPPR_ASSIGN_OR_RETURN(std::optional<std::string> hash,
                          read.Get(store::Family::kStreamState, HashKey(aggregate.id)));
  snapshot.is_current = hash && *hash == aggregate.ConfigHash();
  SKIPPR_ASSIGN_OR_RETURN(snapshot.cursor, ReadCursor(read, aggregate.id));
  if (!snapshot.is_current) return snapshot;  // state of another config: not this aggregate's
  const std::string prefix = GroupPrefix(aggregate.id);
  Status failure;
  SKIPPR_RETURN_IF_ERROR(read.Scan(
      store::Family::kStreamState, prefix, [&](std::string_view key, std::string_view value) {
        Result<AggregateGroup> group =
            DecodeStoredGroup(key.substr(prefix.size()), value, aggregate);
        if (!group.ok()) {
          failure = group.status();
          return false;
        }
        snapshot.groups.push_back(std::move(group).value());
        return true;
      }));
  SKIPPR_RETURN_IF_ERROR(failure);
  return snapshot;
}

Result<AggregateGroupChunks> AggregateGroupChunks::Open(const store::ReadTransaction& read,
                                                        const config::AggregateConfig& aggregate,
                                                        int64_t groups_per_chunk) {
  SKIPPR_CHECK(groups_per_chunk > 0);
  AggregateGroupChunks chunks(read, aggregate);
  SKIPPR_ASSIGN_OR_RETURN(std::optional<std::string> hash,
                          read.Get(store::Family::kStreamState, HashKey(aggregate.id)));
  chunks.is_current_ = hash && *hash == aggregate.ConfigHash();
  if (!chunks.is_current_) return chunks;  // state of another config: no groups of this one
  chunks.prefix_ = GroupPrefix(aggregate.id);
  SKIPPR_RETURN_IF_ERROR(read.Scan(store::Family::kStreamState, chunks.prefix_,
                                   [&](std::string_view key, std::string_view) {
                                     if (chunks.group_count_ % groups_per_chunk == 0) {
                                       chunks.chunk_starts_.emplace_back(key);
                                       chunks.chunk_sizes_.push_back(0);
                                     }
                                     ++chunks.chunk_sizes_.back();
                                     ++chunks.group_count_;
                                     return true;
                                   }));
  return chunks;
}

Result<std::vector<AggregateGroup>> AggregateGroupChunks::Read(size_t index) const {
  SKIPPR_CHECK(index < chunk_starts_.size());
  std::vector<AggregateGroup> groups;
  const int64_t wanted = chunk_sizes_[index];
  Status failure;
  SKIPPR_RETURN_IF_ERROR(read_->ScanFrom(store::Family::kStreamState, prefix_, chunk_starts_[index],
                                         [&](std::string_view key, std::string_view value) {
                                           Result<AggregateGroup> group = DecodeStoredGroup(
                                               key.substr(prefix_.size()), value, *aggregate_);
                                           if (!group.ok()) {
                                             failure = group.status();
                                             return false;
                                           }
                                           groups.push_back(std::move(group).value());
                                           return static_cast<int64_t>(groups.size()) < wanted;
                                         }));
  SKIPPR_RETURN_IF_ERROR(failure);
  // The snapshot is pinned: the keys counted at Open are all still there.
  SKIPPR_CHECK_MSG(static_cast<int64_t>(groups.size()) == wanted,
                   "an aggregate's groups changed under a pinned snapshot");
  return groups;
}

Result<std::unique_ptr<AggregateProcessor>> AggregateProcessor::Open(
    store::Store& store, std::string wal_directory, std::vector<config::AggregateConfig> aggregates,
    ProcessorOptions options, LandedBaselineProvider landed_baseline) {
  SKIPPR_CHECK(options.rows_per_transaction > 0 && options.keys_per_transaction > 0);
  std::unique_ptr<AggregateProcessor> processor(
      new AggregateProcessor(store, std::move(wal_directory), std::move(aggregates), options));
  processor->landed_baseline_ = std::move(landed_baseline);
  SKIPPR_RETURN_IF_ERROR(processor->ResetChangedAggregates());
  SKIPPR_RETURN_IF_ERROR(processor->LoadPendingBaselines());
  return processor;
}

Status AggregateProcessor::LoadPendingBaselines() {
  std::vector<const config::AggregateConfig*> pending;
  {
    SKIPPR_ASSIGN_OR_RETURN(store::ReadTransaction read, store_.BeginRead());
    for (const config::AggregateConfig& aggregate : aggregates_) {
      SKIPPR_ASSIGN_OR_RETURN(std::optional<std::string> mark,
                              read.Get(store::Family::kStreamState, BaselinePendingKey(aggregate.id)));
      if (mark) pending.push_back(&aggregate);
    }
  }
  if (pending.empty()) return Status::OK();
  // Read after the reset committed: with no cursor the aggregate passes no segment, so nothing it
  // needs can be reclaimed between this snapshot and the baseline's commit.
  SKIPPR_ASSIGN_OR_RETURN(const LandedBaseline baseline, landed_baseline_());
  // One pass over the landed tables for every pending aggregate, each committing its chunk
  // whenever it is full, as the WAL's rows are applied.
  std::vector<std::unique_ptr<Chunk>> chunks;
  for (const config::AggregateConfig* aggregate : pending) {
    chunks.push_back(std::make_unique<Chunk>(store_, *aggregate, options_.keys_per_transaction));
  }
  int64_t rows = 0;
  SKIPPR_RETURN_IF_ERROR(baseline.for_each_batch([&](const Batch& batch) -> Status {
    rows += batch.num_rows;
    for (size_t i = 0; i < pending.size(); ++i) {
      SKIPPR_ASSIGN_OR_RETURN(std::optional<ResolvedSlice> resolved, Resolve(*pending[i], batch));
      if (!resolved) continue;
      Chunk& chunk = *chunks[i];
      for (int64_t row = 0; row < batch.num_rows; ++row) {
        SKIPPR_RETURN_IF_ERROR(chunk.ApplyRow(batch, *resolved, row));
      }
      chunk.CountRows(batch.num_rows);
      if (chunk.IsFull(options_)) SKIPPR_RETURN_IF_ERROR(chunk.CommitBaselinePart());
    }
    return Status::OK();
  }));
  for (size_t i = 0; i < pending.size(); ++i) {
    spdlog::info("aggregate {}: started from {} landed row(s); {} live slice(s) already landed",
                 pending[i]->id, rows, baseline.landed_slices.size());
    SKIPPR_RETURN_IF_ERROR(chunks[i]->CommitBaseline(baseline.landed_slices));
  }
  return Status::OK();
}

Status AggregateProcessor::ResetChangedAggregates() {
  SKIPPR_ASSIGN_OR_RETURN(store::WriteTransaction write, store_.BeginWrite());
  bool changed = false;
  SKIPPR_ASSIGN_OR_RETURN(const bool reclaimed, WalWasReclaimed(write, &changed));
  for (const config::AggregateConfig& aggregate : aggregates_) {
    const std::string hash = aggregate.ConfigHash();
    SKIPPR_ASSIGN_OR_RETURN(std::optional<std::string> stored,
                            write.Get(store::Family::kStreamState, HashKey(aggregate.id)));
    SKIPPR_ASSIGN_OR_RETURN(std::optional<std::string> pending,
                            write.Get(store::Family::kStreamState, BaselinePendingKey(aggregate.id)));
    if (stored == hash && !pending) continue;
    if (reclaimed && !landed_baseline_) {
      return Status::NotSupported(fmt::format(
          "transform.aggregates {}: the aggregate is new or its id, keys or measures changed, and "
          "this pipeline's WAL was already reclaimed after landing, so it must be rebuilt from "
          "the landed tables, which needs the pipeline's sink: run it through `skipprd sync`",
          aggregate.id));
    }
    spdlog::info("aggregate {}: {}; rebuilding it from {}", aggregate.id,
                 pending ? "a rebuild was interrupted" : stored ? "its config changed" : "new",
                 reclaimed ? "the landed tables and the live WAL" : "the start of the WAL");
    SKIPPR_RETURN_IF_ERROR(
        write.DeletePrefix(store::Family::kStreamState, Prefix(aggregate.id).key()));
    SKIPPR_RETURN_IF_ERROR(write.Put(store::Family::kStreamState, HashKey(aggregate.id), hash));
    if (reclaimed) {
      SKIPPR_RETURN_IF_ERROR(
          write.Put(store::Family::kStreamState, BaselinePendingKey(aggregate.id), ""));
    }
    changed = true;
  }
  // State of aggregates no longer configured: left behind, it would hold a stale cursor if the
  // aggregate came back after its segments were reclaimed.
  std::vector<std::string> unconfigured;
  SKIPPR_RETURN_IF_ERROR(write.Scan(
      store::Family::kStreamState, AllAggregatesPrefix(),
      [&](std::string_view key, std::string_view) {
        store::KeyReader reader(key);
        (void)reader.Text();
        Result<std::string> id = reader.Text();
        if (!id.ok()) return true;
        const bool is_configured = std::any_of(aggregates_.begin(), aggregates_.end(),
                                               [&](const auto& a) { return a.id == *id; });
        if (!is_configured && (unconfigured.empty() || unconfigured.back() != *id)) {
          unconfigured.push_back(*id);
        }
        return true;
      }));
  for (const std::string& id : unconfigured) {
    spdlog::info("aggregate {}: no longer configured; deleting its state", id);
    SKIPPR_RETURN_IF_ERROR(write.DeletePrefix(store::Family::kStreamState, Prefix(id).key()));
    changed = true;
  }
  if (!changed) return Status::OK();
  CrashPoint("aggregates.before_reset_commit");
  return write.Commit();
}

Result<int64_t> AggregateProcessor::ProcessCommitted() {
  int64_t applied = 0;
  for (const config::AggregateConfig& aggregate : aggregates_) {
    SKIPPR_ASSIGN_OR_RETURN(const int64_t rows, ProcessAggregate(aggregate));
    applied += rows;
  }
  return applied;
}

Result<int64_t> AggregateProcessor::ProcessAggregate(const config::AggregateConfig& aggregate) {
  std::vector<wal::SegmentEntry> live;
  std::optional<AggregateCursor> cursor;
  std::set<std::pair<uint64_t, uint32_t>> in_baseline;  // live slices a rebuild's baseline holds
  {
    SKIPPR_ASSIGN_OR_RETURN(store::ReadTransaction read, store_.BeginRead());
    SKIPPR_ASSIGN_OR_RETURN(live, wal::LiveSegments(read));
    SKIPPR_ASSIGN_OR_RETURN(cursor, ReadCursor(read, aggregate.id));
    SKIPPR_ASSIGN_OR_RETURN(in_baseline, ReadBaselineSlices(read, aggregate.id));
  }
  Chunk chunk(store_, aggregate, options_.keys_per_transaction);
  const FieldSelection fields = FieldsRead(aggregate);
  int64_t applied = 0;
  std::optional<AggregateCursor> passed;  // the last segment read, wholly
  for (const wal::SegmentEntry& segment : live) {
    if (HasPassed(cursor, segment)) continue;
    const bool resumes = cursor && cursor->segment_id == segment.segment_id;
    // Only the key and measure columns are read, and each frame read is checked: the landing,
    // which reads every byte, verifies the whole file.
    SKIPPR_ASSIGN_OR_RETURN(wal::SegmentReader reader,
                            wal::OpenSegment(wal_directory_, segment, options_.wal_env,
                                             wal::SegmentVerification::kEachRead));
    SKIPPR_CHECK(reader.slices().size() == segment.slices.size());
    const uint32_t slice_count = static_cast<uint32_t>(segment.slices.size());
    for (uint32_t ordinal = resumes ? cursor->slice_ordinal : 0; ordinal < slice_count; ++ordinal) {
      // Deadletters are records that never reached a namespace: no aggregate covers them, even
      // one whose key fields share their column names.
      if (segment.slices[ordinal].namespace_name == schema::kDeadlettersNamespace) continue;
      SKIPPR_ASSIGN_OR_RETURN(Batch batch, reader.ReadSlice(ordinal, fields));
      SKIPPR_CHECK(batch.num_rows == segment.slices[ordinal].rows);
      SKIPPR_CHECK(!batch.cdc ||
                   batch.cdc->business_keys.size() == static_cast<size_t>(batch.num_rows));
      SKIPPR_ASSIGN_OR_RETURN(std::optional<ResolvedSlice> resolved, Resolve(aggregate, batch));
      int64_t row = resumes && ordinal == cursor->slice_ordinal ? cursor->row_index : 0;
      // Not this aggregate's namespace, or rows the landed baseline already holds: a later
      // commit passes the slice.
      if (!resolved || in_baseline.contains({segment.segment_id, ordinal})) continue;
      for (; row < batch.num_rows; ++applied) {
        SKIPPR_RETURN_IF_ERROR(chunk.ApplyRow(batch, *resolved, row));
        ++row;
        chunk.CountRows(1);
        if (!chunk.IsFull(options_)) continue;
        const AggregateCursor position =
            row < batch.num_rows
                ? AggregateCursor{segment.sequence, segment.segment_id, ordinal,
                                  static_cast<uint32_t>(row)}
                : AggregateCursor{segment.sequence, segment.segment_id, ordinal + 1, 0};
        SKIPPR_RETURN_IF_ERROR(chunk.Commit(position));
      }
    }
    // A chunk spans segments: a group many segments touch is read and written once a chunk,
    // not once a segment. The round's last commit passes every segment it read.
    passed = AggregateCursor{segment.sequence, segment.segment_id, slice_count, 0};
  }
  if (passed) SKIPPR_RETURN_IF_ERROR(chunk.Commit(*passed));
  return applied;
}

}  // namespace skippr::transform
