// WAL segment encoding and decoding. The byte layout is docs/formats/wal.md; keep the two in step.
#include "wal/segment.hpp"

#include <fmt/format.h>
#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <charconv>
#include <cerrno>
#include <cstring>
#include <deque>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>

#include "core/check.hpp"
#include "wal/byte_planes.hpp"
#include "wal/frame_codec.hpp"

namespace skippr::wal {

static_assert(std::endian::native == std::endian::little,
              "the WAL format is little-endian and copies buffers as they are in memory");

namespace {

constexpr char kHeadMagic[8] = {'S', 'K', 'P', 'R', 'W', 'A', 'L', '\0'};
constexpr char kTailMagic[8] = {'S', 'K', 'P', 'R', 'T', 'A', 'I', 'L'};

constexpr uint64_t kTailBytes = 20;          // checksum, footer_bytes, trailing magic
constexpr uint64_t kFooterMinBytes = 4 + 8 + kTailBytes;  // slice_count, footer_offset, tail
constexpr uint64_t kVersionPrefixBytes = 16;  // magic, version, header_bytes

// A header with an empty pipeline and positions: version 2 adds the 16-byte instance id.
constexpr uint64_t HeaderFixedBytes(uint32_t version) { return version >= 2 ? 64 : 48; }
constexpr uint64_t FileMinBytes(uint32_t version) {
  return HeaderFixedBytes(version) + kFooterMinBytes;
}
constexpr uint64_t kHeaderFixedBytes = HeaderFixedBytes(kSegmentFormatVersion);
constexpr uint64_t kFileMinBytes = FileMinBytes(kSegmentFormatVersion);
constexpr uint64_t kIndexEntryFixedBytes = 41;  // an index entry with an empty namespace
constexpr uint64_t kSliceFixedBytes = 37;       // a slice header up to its namespace
// Verify reads a slice's header up to a namespace this much longer than its index entry's.
constexpr uint64_t kHeadSlackBytes = 4096;
// ReadSlice's first read of a version 3 slice: enough for the header of most slices.
constexpr uint64_t kSliceHeadReadBytes = 4096;
// The buffer an open file's checksum is streamed through.
constexpr uint64_t kVerifyBufferBytes = uint64_t{1} << 20;
constexpr uint64_t kFieldFixedBytes = 16;       // a field with an empty name and no children
constexpr uint64_t kColumnEntryBytes = 40;
constexpr int kMaxFieldDepth = 64;

constexpr uint8_t kKindAppend = 0;
constexpr uint8_t kKindCdc = 1;
constexpr uint8_t kFieldNullable = 0x01;

// ----- type codes: explicit, so reordering TypeId can never change the format -------------------

uint8_t TypeCode(TypeId id) {
  switch (id) {
    case TypeId::kBoolean: return 1;
    case TypeId::kInt: return 2;
    case TypeId::kLong: return 3;
    case TypeId::kFloat: return 4;
    case TypeId::kDouble: return 5;
    case TypeId::kDecimal: return 6;
    case TypeId::kDate: return 7;
    case TypeId::kTime: return 8;
    case TypeId::kTimestamp: return 9;
    case TypeId::kTimestampTz: return 10;
    case TypeId::kString: return 11;
    case TypeId::kBinary: return 12;
    case TypeId::kUuid: return 13;
    case TypeId::kStruct: return 14;
    case TypeId::kList: return 15;
    case TypeId::kMap: return 16;
  }
  SKIPPR_CHECK_MSG(false, "unknown TypeId");
}

std::optional<TypeId> TypeFromCode(uint8_t code) {
  static constexpr TypeId kByCode[] = {
      TypeId::kBoolean, TypeId::kInt,         TypeId::kLong,   TypeId::kFloat,  TypeId::kDouble,
      TypeId::kDecimal, TypeId::kDate,        TypeId::kTime,   TypeId::kTimestamp,
      TypeId::kTimestampTz, TypeId::kString,  TypeId::kBinary, TypeId::kUuid,   TypeId::kStruct,
      TypeId::kList,    TypeId::kMap};
  if (code < 1 || code > std::size(kByCode)) return std::nullopt;
  return kByCode[code - 1];
}

bool HasOffsets(PhysicalKind kind) {
  return kind == PhysicalKind::kBytes || kind == PhysicalKind::kList || kind == PhysicalKind::kMap;
}

// ----- little-endian byte writing and reading ---------------------------------------------------

template <typename Bytes>  // std::string or SegmentBytes
class BasicByteWriter {
 public:
  explicit BasicByteWriter(Bytes* out) : out_(out) {}
  void Raw(const void* data, size_t size) { out_->append(static_cast<const char*>(data), size); }
  void U8(uint8_t v) { out_->push_back(static_cast<char>(v)); }
  void U32(uint32_t v) { Raw(&v, 4); }
  void I32(int32_t v) { Raw(&v, 4); }
  void U64(uint64_t v) { Raw(&v, 8); }
  void I64(int64_t v) { Raw(&v, 8); }
  void Text(std::string_view text) {
    SKIPPR_CHECK_MSG(text.size() <= UINT32_MAX, "a name longer than 4 GiB");
    U32(static_cast<uint32_t>(text.size()));
    Raw(text.data(), text.size());
  }

 private:
  Bytes* out_;
};
using ByteWriter = BasicByteWriter<std::string>;
using SegmentWriter = BasicByteWriter<SegmentBytes>;

template <typename T, typename Bytes>
void PatchAt(Bytes& out, size_t position, T value) {
  std::memcpy(out.data() + position, &value, sizeof(T));
}

template <typename T>
T LoadAt(std::string_view bytes, size_t position) {
  T value;
  std::memcpy(&value, bytes.data() + position, sizeof(T));
  return value;
}

// Reads from a bounded window of the file; every read checks the bytes are there. `base` is the
// window's offset in the file, so failures can name absolute offsets.
class ByteReader {
 public:
  ByteReader(std::string_view window, uint64_t base) : window_(window), base_(base) {}
  uint64_t offset() const { return base_ + position_; }
  uint64_t remaining() const { return window_.size() - position_; }
  bool Raw(size_t size, std::string_view* out) {
    if (size > remaining()) return false;
    *out = window_.substr(position_, size);
    position_ += size;
    return true;
  }
  template <typename T>
  bool Load(T* value) {
    if (sizeof(T) > remaining()) return false;
    std::memcpy(value, window_.data() + position_, sizeof(T));
    position_ += sizeof(T);
    return true;
  }
  bool Text(std::string* out) {
    uint32_t size = 0;
    std::string_view view;
    if (!Load(&size) || !Raw(size, &view)) return false;
    out->assign(view);
    return true;
  }

 private:
  std::string_view window_;
  uint64_t base_;
  size_t position_ = 0;
};

// ----- encoding ---------------------------------------------------------------------------------

// A buffer a frame concatenates; values of `value_width` bytes are stored as byte planes when the
// width asks for it (IsSplitIntoPlanes).
struct Piece {
  const void* data;
  size_t size;
  size_t value_width;
};

// One frame of a slice before compression: the buffers it concatenates.
struct FramePlan {
  std::vector<Piece> pieces;
  uint64_t uncompressed_bytes = 0;
};

// One slice before compression: its header bytes (compressed sizes, frame checksums and the header
// checksum still to be patched) and its frames: one per top-level column, then the CDC sidecar's.
struct SlicePlan {
  std::string head;
  std::vector<FramePlan> frames;
  uint64_t uncompressed_bytes = 0;
  size_t frame_directory_offset = 0;  // in `head`
};

constexpr size_t kHeadSlotBytes = 0;              // u32 slice_header_bytes
constexpr size_t kHeadSlotUncompressed = 17;      // u64 uncompressed_bytes
constexpr size_t kHeadSlotCompressed = 25;        // u64 compressed_bytes
constexpr size_t kFrameEntryBytes = 24;           // compressed_bytes, uncompressed_bytes, checksum
constexpr size_t kHeaderChecksumBytes = 8;        // the last field of a version 3 slice header

void WriteField(ByteWriter& writer, const Field& field) {
  writer.I32(field.id);
  writer.U8(TypeCode(field.type.id()));
  writer.U8(field.nullable ? kFieldNullable : 0);
  const bool is_decimal = field.type.id() == TypeId::kDecimal;
  writer.U8(is_decimal ? static_cast<uint8_t>(field.type.decimal_precision()) : 0);
  writer.U8(is_decimal ? static_cast<uint8_t>(field.type.decimal_scale()) : 0);
  writer.Text(field.name);
  const std::vector<Field>& children = field.type.children();
  writer.U32(static_cast<uint32_t>(children.size()));
  for (const Field& child : children) WriteField(writer, child);
}

void AddPiece(FramePlan& frame, const void* data, size_t size, size_t value_width = 1) {
  if (size == 0) return;
  frame.pieces.push_back({data, size, value_width});
  frame.uncompressed_bytes += size;
}

void DescribeColumn(const Column& column, ByteWriter& directory, FramePlan& frame) {
  SKIPPR_CHECK(column.children.size() == column.type.children().size());
  directory.I64(column.length);
  directory.U64(column.validity.size());
  directory.U64(column.fixed.size());
  directory.U64(column.offsets.size());
  directory.U64(column.bytes.size());
  AddPiece(frame, column.validity.data(), column.validity.size());
  AddPiece(frame, column.fixed.data(), column.fixed.size(),
           FixedWidthBytes(PhysicalKindOf(column.type.id())));
  AddPiece(frame, column.offsets.data(), column.offsets.size() * sizeof(int64_t), sizeof(int64_t));
  AddPiece(frame, column.bytes.data(), column.bytes.size());
  for (const Column& child : column.children) DescribeColumn(child, directory, frame);
}

// Packed strings are stored as they are held: their offsets, then their bytes.
void DescribeStrings(const PackedStrings& strings, ByteWriter& directory, FramePlan& frame) {
  directory.U64(strings.size());
  directory.U64(strings.text().size());
  AddPiece(frame, strings.offsets().data(), strings.offsets().size() * sizeof(int64_t),
           sizeof(int64_t));
  AddPiece(frame, strings.text().data(), strings.text().size());
}

void PlanSlice(const Batch& batch, SlicePlan& plan) {
  std::string reason;
  SKIPPR_CHECK_MSG(batch.Validate(&reason), reason.c_str());
  SKIPPR_CHECK_MSG(batch.fields.size() < UINT32_MAX, "more than 2^32 fields");
  ByteWriter writer(&plan.head);
  writer.U32(0);  // slice_header_bytes, patched below
  writer.U8(batch.cdc ? kKindCdc : kKindAppend);
  writer.I32(batch.schema_id);
  writer.I64(batch.num_rows);
  writer.U64(0);  // uncompressed_bytes, patched below
  writer.U64(0);  // compressed_bytes, patched when compressed
  writer.Text(batch.namespace_name);
  SKIPPR_DCHECK(plan.head.size() == kSliceFixedBytes + batch.namespace_name.size());
  writer.U32(static_cast<uint32_t>(batch.fields.size()));
  for (const Field& field : batch.fields) WriteField(writer, field);
  plan.frames.resize(batch.columns.size() + (batch.cdc ? 1 : 0));
  for (size_t i = 0; i < batch.columns.size(); ++i) {
    SKIPPR_CHECK_MSG(batch.columns[i].type == batch.fields[i].type,
                     "a column's type differs from its field's type");
    DescribeColumn(batch.columns[i], writer, plan.frames[i]);
  }
  if (batch.cdc) {
    const CdcSidecar& cdc = *batch.cdc;
    FramePlan& frame = plan.frames.back();
    writer.U64(cdc.mutations.size());
    AddPiece(frame, cdc.mutations.data(), cdc.mutations.size());
    DescribeStrings(cdc.event_ids, writer, frame);
    DescribeStrings(cdc.order_tokens, writer, frame);
    DescribeStrings(cdc.business_keys, writer, frame);
  }
  plan.frame_directory_offset = plan.head.size();
  for (const FramePlan& frame : plan.frames) {
    writer.U64(0);  // compressed_bytes, patched when compressed
    writer.U64(frame.uncompressed_bytes);
    writer.U64(0);  // checksum, patched when compressed
    plan.uncompressed_bytes += frame.uncompressed_bytes;
  }
  writer.U64(0);  // the header checksum, patched last
  SKIPPR_CHECK_MSG(plan.head.size() <= UINT32_MAX, "a slice header longer than 4 GiB");
  PatchAt<uint32_t>(plan.head, kHeadSlotBytes, static_cast<uint32_t>(plan.head.size()));
  PatchAt<uint64_t>(plan.head, kHeadSlotUncompressed, plan.uncompressed_bytes);
}

// Compresses a slice's frames straight into the file image, one LZ4 frame at a time: no staging
// copy of the payload. Pieces smaller than kCoalesceBytes (CDC strings, small columns) are gathered
// first, so LZ4 sees few calls and blocks large enough to find matches in.
class PayloadCompressor {
 public:
  explicit PayloadCompressor(SegmentBytes* out) : out_(out) {}

  void BeginFrame(uint64_t uncompressed_bytes) { frame_.Begin(out_, uncompressed_bytes); }

  // A piece's bytes, as byte planes when its values are split into them: a block at a time, each
  // split in a buffer LZ4 reads.
  void Add(const Piece& piece) {
    if (!IsSplitIntoPlanes(piece.value_width)) return Add(piece.data, piece.size);
    const auto* values = static_cast<const uint8_t*>(piece.data);
    for (size_t at = 0; at < piece.size; at += kBytePlaneBlockBytes) {
      const size_t block_bytes = std::min(kBytePlaneBlockBytes, piece.size - at);
      SplitIntoPlanes(values + at, block_bytes, piece.value_width, planes_.get());
      Add(planes_.get(), block_bytes);
    }
  }

  void Add(const void* data, size_t size) {
    if (size < kCoalesceBytes) {
      if (small_used_ + size > kCoalesceBytes) FlushSmall();
      std::memcpy(small_.get() + small_used_, data, size);
      small_used_ += size;
      return;
    }
    FlushSmall();
    frame_.Write(data, size);
  }

  // Ends the frame; returns its length in bytes.
  uint64_t EndFrame() {
    FlushSmall();
    return frame_.End();
  }

 private:
  static constexpr size_t kCoalesceBytes = 64 * 1024;

  void FlushSmall() {
    if (small_used_ == 0) return;
    frame_.Write(small_.get(), small_used_);
    small_used_ = 0;
  }

  SegmentBytes* out_;
  Lz4FrameWriter frame_;
  std::unique_ptr<char[]> small_{new char[kCoalesceBytes]};
  size_t small_used_ = 0;
  std::unique_ptr<uint8_t[]> planes_{new uint8_t[kBytePlaneBlockBytes]};
};

// Appends the slice record to `out` and returns its length: the header, then each frame, whose
// compressed length and checksum are patched into the frame directory; the header checksum last.
uint64_t EmitSlice(const SlicePlan& plan, SegmentBytes& out, PayloadCompressor& compressor) {
  const size_t record_start = out.size();
  out += plan.head;
  uint64_t compressed_bytes = 0;
  for (size_t i = 0; i < plan.frames.size(); ++i) {
    const size_t frame_start = out.size();
    compressor.BeginFrame(plan.frames[i].uncompressed_bytes);
    for (const Piece& piece : plan.frames[i].pieces) compressor.Add(piece);
    const uint64_t frame_bytes = compressor.EndFrame();
    const size_t entry = record_start + plan.frame_directory_offset + i * kFrameEntryBytes;
    PatchAt<uint64_t>(out, entry, frame_bytes);
    PatchAt<uint64_t>(out, entry + 16, XXH3_64bits(out.data() + frame_start, frame_bytes));
    compressed_bytes += frame_bytes;
  }
  PatchAt<uint64_t>(out, record_start + kHeadSlotCompressed, compressed_bytes);
  const size_t checksum_at = plan.head.size() - kHeaderChecksumBytes;
  PatchAt<uint64_t>(out, record_start + checksum_at,
                    XXH3_64bits(out.data() + record_start, checksum_at));
  return out.size() - record_start;
}

// The instance id's 32 hex digits as its 16 bytes (a segment without one is a bug upstream: every
// store has an instance id).
std::string InstanceIdBytes(std::string_view hex) {
  SKIPPR_CHECK_MSG(hex.size() == 2 * kInstanceIdBytes, "a segment needs its store's instance id");
  std::string bytes(kInstanceIdBytes, '\0');
  for (size_t i = 0; i < kInstanceIdBytes; ++i) {
    const auto [end, error] = std::from_chars(hex.data() + 2 * i, hex.data() + 2 * i + 2,
                                              reinterpret_cast<uint8_t&>(bytes[i]), 16);
    SKIPPR_CHECK_MSG(error == std::errc() && end == hex.data() + 2 * i + 2,
                     "the instance id is not hex");
  }
  return bytes;
}

std::string InstanceIdHex(std::string_view bytes) {
  std::string hex;
  hex.reserve(2 * bytes.size());
  for (unsigned char byte : bytes) hex += fmt::format("{:02x}", byte);
  return hex;
}

}  // namespace

SegmentBytes EncodeSegment(const SegmentHeader& header, const std::vector<Batch>& batches) {
  SKIPPR_CHECK_MSG(batches.size() <= UINT32_MAX, "more than 2^32 slices");
  std::vector<SlicePlan> plans(batches.size());
  uint64_t reserve_bytes = kFileMinBytes + header.pipeline.size() + header.source_positions.size();
  for (size_t i = 0; i < batches.size(); ++i) {
    PlanSlice(batches[i], plans[i]);
    // LZ4 compresses column data about 3x (2.9x on bench/lake's rides): reserving half spares the
    // usual segment a regrowth (a copy of all of it); the string grows if it compresses worse.
    reserve_bytes += plans[i].head.size() + plans[i].uncompressed_bytes / 2 +
                     kIndexEntryFixedBytes + batches[i].namespace_name.size();
  }
  SegmentBytes out;
  out.reserve(reserve_bytes);
  SegmentWriter writer(&out);

  const uint64_t header_bytes =
      kHeaderFixedBytes + header.pipeline.size() + header.source_positions.size();
  SKIPPR_CHECK_MSG(header_bytes <= UINT32_MAX, "a segment header longer than 4 GiB");
  writer.Raw(kHeadMagic, 8);
  writer.U32(kSegmentFormatVersion);
  writer.U32(static_cast<uint32_t>(header_bytes));
  writer.U64(header.segment_id);
  writer.U64(header.sequence);
  writer.I64(header.created_unix_micros);
  const std::string instance_id = InstanceIdBytes(header.instance_id);
  writer.Raw(instance_id.data(), instance_id.size());
  writer.Text(header.pipeline);
  writer.Text(header.source_positions);
  SKIPPR_CHECK(out.size() == header_bytes);

  std::vector<uint64_t> record_offsets(batches.size());
  std::vector<uint64_t> record_bytes(batches.size());
  PayloadCompressor compressor(&out);
  for (size_t i = 0; i < batches.size(); ++i) {
    record_offsets[i] = out.size();
    record_bytes[i] = EmitSlice(plans[i], out, compressor);
  }

  const uint64_t footer_offset = out.size();
  writer.U32(static_cast<uint32_t>(batches.size()));
  for (size_t i = 0; i < batches.size(); ++i) {
    writer.U64(record_offsets[i]);
    writer.U64(record_bytes[i]);
    writer.U64(plans[i].uncompressed_bytes);
    writer.I64(batches[i].num_rows);
    writer.I32(batches[i].schema_id);
    writer.U8(batches[i].cdc ? kKindCdc : kKindAppend);
    writer.Text(batches[i].namespace_name);
  }
  writer.U64(footer_offset);
  const uint64_t checksum = XXH3_64bits(out.data(), out.size());
  writer.U64(checksum);
  const uint64_t footer_bytes = out.size() + 4 + 8 - footer_offset;
  SKIPPR_CHECK_MSG(footer_bytes <= UINT32_MAX, "a segment footer longer than 4 GiB");
  writer.U32(static_cast<uint32_t>(footer_bytes));
  writer.Raw(kTailMagic, 8);
  SKIPPR_CHECK(out.size() - footer_offset == footer_bytes);
  return out;
}

// ----- reading ----------------------------------------------------------------------------------

namespace {

constexpr std::string_view kCommittedAdvice =
    "a WAL segment holds committed data, so this is data damage: restore DATA_DIR from a backup, "
    "or re-read the source with a new pipeline";

Status Damaged(std::string_view name, std::string_view what) {
  return Status::Corruption(fmt::format("WAL segment {} is damaged: {}; {}", name, what,
                                        kCommittedAdvice));
}

std::string Printable(std::string_view bytes) {
  std::string text;
  for (unsigned char c : bytes) {
    text += (c >= 0x20 && c < 0x7f && c != '\\') ? std::string(1, static_cast<char>(c))
                                                 : fmt::format("\\x{:02x}", c);
  }
  return text;
}

// Magic and version: the only checks made before the checksum, because a newer version may place
// the checksum elsewhere. Returns the version.
Result<uint32_t> CheckStart(std::string_view name, std::string_view start, uint64_t file_bytes) {
  if (file_bytes < 16) {
    return Damaged(name, fmt::format("the file has {} bytes, fewer than the 16 that start a "
                                     "segment (truncated)", file_bytes));
  }
  if (std::memcmp(start.data(), kHeadMagic, 8) != 0) {
    return Damaged(name, fmt::format("bytes 0..8 are '{}', not the segment magic 'SKPRWAL\\x00' "
                                     "(not a WAL segment, or its start was overwritten)",
                                     Printable(start.substr(0, 8))));
  }
  const uint32_t version = LoadAt<uint32_t>(start, 8);
  if (version == 0) return Damaged(name, "format version at byte 8 is 0, which no writer uses");
  if (version > kSegmentFormatVersion) {
    return Status::NotSupported(fmt::format(
        "WAL segment {} has format version {}; this skipprd reads versions up to {}: run a newer "
        "skipprd on this DATA_DIR (if no newer skipprd ever wrote it, the file is damaged: restore "
        "DATA_DIR from a backup)",
        name, version, kSegmentFormatVersion));
  }
  return version;
}

// Trailing magic and footer length, given the last 28 bytes of the file (footer_offset included).
Status CheckEnd(std::string_view name, std::string_view last28, uint64_t file_bytes,
                uint32_t version, uint64_t* footer_offset) {
  if (file_bytes < FileMinBytes(version)) {
    return Damaged(name, fmt::format("the file has {} bytes, fewer than the {} of an empty segment "
                                     "(truncated)", file_bytes, FileMinBytes(version)));
  }
  if (std::memcmp(last28.data() + 20, kTailMagic, 8) != 0) {
    return Damaged(name, fmt::format("the last 8 bytes (at offset {}) are '{}', not the trailing "
                                     "magic 'SKPRTAIL' (truncated, or its end was overwritten)",
                                     file_bytes - 8, Printable(last28.substr(20, 8))));
  }
  const uint32_t footer_bytes = LoadAt<uint32_t>(last28, 16);
  if (footer_bytes < kFooterMinBytes || footer_bytes > file_bytes - HeaderFixedBytes(version)) {
    return Damaged(name, fmt::format("footer length {} at offset {} does not fit a {}-byte file",
                                     footer_bytes, file_bytes - 12, file_bytes));
  }
  const uint64_t stored_footer_offset = LoadAt<uint64_t>(last28, 0);
  if (stored_footer_offset != file_bytes - footer_bytes) {
    return Damaged(name, fmt::format("footer length {} puts the footer at offset {}, but the footer "
                                     "records offset {} (at offset {})",
                                     footer_bytes, file_bytes - footer_bytes, stored_footer_offset,
                                     file_bytes - 28));
  }
  *footer_offset = stored_footer_offset;
  return Status::OK();
}

// The header's fields after magic, version and header_bytes: `header` holds exactly header_bytes
// bytes of a segment of `version`.
bool ParseHeaderFields(std::string_view header, uint32_t version, SegmentHeader* out) {
  ByteReader head(header, 0);
  std::string_view skipped;
  std::string_view instance_id;
  out->format_version = version;
  if (!head.Raw(kVersionPrefixBytes, &skipped) || !head.Load(&out->segment_id) ||
      !head.Load(&out->sequence) || !head.Load(&out->created_unix_micros)) {
    return false;
  }
  if (version >= 2) {
    if (!head.Raw(kInstanceIdBytes, &instance_id)) return false;
    out->instance_id = InstanceIdHex(instance_id);
  }
  return head.Text(&out->pipeline) && head.Text(&out->source_positions) && head.remaining() == 0;
}

// The fixed part of a slice header, as found both in the record and (as a copy) in the index.
struct SliceHead {
  uint32_t slice_header_bytes = 0;
  uint8_t kind = 0;
  int32_t schema_id = 0;
  int64_t row_count = 0;
  uint64_t uncompressed_bytes = 0;
  uint64_t compressed_bytes = 0;
  std::string namespace_name;
};

bool ReadSliceHead(ByteReader& reader, SliceHead* head) {
  return reader.Load(&head->slice_header_bytes) && reader.Load(&head->kind) &&
         reader.Load(&head->schema_id) && reader.Load(&head->row_count) &&
         reader.Load(&head->uncompressed_bytes) && reader.Load(&head->compressed_bytes) &&
         reader.Text(&head->namespace_name);
}

// Bytes a slice record has after its compressed payload: version 1 and 2 end with the record's
// checksum; version 3 keeps its checksums in the header.
constexpr uint64_t RecordTrailerBytes(uint32_t version) { return version >= 3 ? 0 : 8; }

// Compares a slice record's header with its index entry: the index must describe the slice exactly.
std::optional<std::string> SliceHeadMismatch(const SliceHead& head, const SliceInfo& info,
                                             uint32_t version) {
  if (head.namespace_name != info.namespace_name) {
    return fmt::format("namespace '{}' differs from the index's '{}'", Printable(head.namespace_name),
                       Printable(info.namespace_name));
  }
  if (head.schema_id != info.schema_id) {
    return fmt::format("schema id {} differs from the index's {}", head.schema_id, info.schema_id);
  }
  if (head.row_count != info.row_count) {
    return fmt::format("row count {} differs from the index's {}", head.row_count, info.row_count);
  }
  if ((head.kind == kKindCdc) != info.is_cdc || head.kind > kKindCdc) {
    return fmt::format("kind {} differs from the index's {}", head.kind, info.is_cdc ? 1 : 0);
  }
  if (head.uncompressed_bytes != info.uncompressed_bytes) {
    return fmt::format("uncompressed size {} differs from the index's {}", head.uncompressed_bytes,
                       info.uncompressed_bytes);
  }
  // slice_header_bytes + compressed_bytes + trailer == record length, without overflow.
  const uint64_t trailer = RecordTrailerBytes(version);
  if (head.slice_header_bytes > info.payload_bytes - trailer ||
      head.compressed_bytes != info.payload_bytes - trailer - head.slice_header_bytes ||
      head.slice_header_bytes < kSliceFixedBytes + head.namespace_name.size() + 8 - trailer) {
    return fmt::format("header length {} and compressed length {} do not add up to the record's "
                       "{} bytes",
                       head.slice_header_bytes, head.compressed_bytes, info.payload_bytes);
  }
  return std::nullopt;
}

}  // namespace

Result<SegmentReader> SegmentReader::FromBytes(std::string bytes, std::string display_name) {
  SegmentReader reader;
  reader.bytes_ = std::move(bytes);
  reader.display_name_ = std::move(display_name);
  SKIPPR_RETURN_IF_ERROR(reader.Verify(reader.bytes_));
  return reader;
}

Result<SegmentReader> SegmentReader::VerifyBytes(std::string_view bytes,
                                                 std::string display_name) {
  SegmentReader reader;
  reader.display_name_ = std::move(display_name);
  SKIPPR_RETURN_IF_ERROR(reader.Verify(bytes));
  return reader;
}

Status SegmentReader::Verify(std::string_view bytes) {
  const std::string_view name = display_name_;
  const uint64_t file_bytes = bytes.size();
  file_bytes_ = file_bytes;
  SKIPPR_ASSIGN_OR_RETURN(const uint32_t version, CheckStart(name, bytes, file_bytes));
  uint64_t footer_offset = 0;
  SKIPPR_RETURN_IF_ERROR(
      CheckEnd(name, file_bytes >= 28 ? bytes.substr(file_bytes - 28) : bytes, file_bytes, version,
               &footer_offset));
  const uint64_t checksum_offset = file_bytes - kTailBytes;
  SKIPPR_RETURN_IF_ERROR(CheckChecksum(LoadAt<uint64_t>(bytes, checksum_offset),
                                       XXH3_64bits(bytes.data(), checksum_offset)));
  return ParseLayout(
      [bytes](uint64_t offset, uint64_t length) -> Result<std::string> {
        return std::string(bytes.substr(offset, length));
      },
      version, footer_offset);
}

Status SegmentReader::CheckChecksum(uint64_t stored, uint64_t computed) {
  const uint64_t checksum_offset = file_bytes_ - kTailBytes;
  if (stored != computed) {
    return Status::Corruption(fmt::format(
        "WAL segment {} fails its checksum (stored {:016x} at offset {}, computed {:016x} over "
        "bytes 0..{}); {}",
        display_name_, stored, checksum_offset, computed, checksum_offset, kCommittedAdvice));
  }
  checksum_ = stored;
  return Status::OK();
}

// After the checksum held: the bytes are as the writer wrote them, and the checks below catch a
// broken writer. `read` returns bytes [offset, offset + length) of the file (in range: every
// offset is checked against the file's size first).
Status SegmentReader::ParseLayout(const ReadRange& read, uint32_t version, uint64_t footer_offset) {
  const std::string_view name = display_name_;
  const uint64_t checksum_offset = file_bytes_ - kTailBytes;
  SKIPPR_ASSIGN_OR_RETURN(const std::string header_length, read(12, 4));
  const uint32_t header_bytes = LoadAt<uint32_t>(header_length, 0);
  if (header_bytes < HeaderFixedBytes(version) || header_bytes > footer_offset) {
    return Damaged(name, fmt::format("header length {} at offset 12 is outside {}..{}",
                                     header_bytes, HeaderFixedBytes(version), footer_offset));
  }
  SKIPPR_ASSIGN_OR_RETURN(const std::string header, read(0, header_bytes));
  if (!ParseHeaderFields(header, version, &header_)) {
    return Damaged(name, fmt::format("the header's fields do not fill its {} bytes exactly",
                                     header_bytes));
  }

  SKIPPR_ASSIGN_OR_RETURN(const std::string index_bytes,
                          read(footer_offset, checksum_offset - 8 - footer_offset));
  ByteReader index(index_bytes, footer_offset);
  uint32_t slice_count = 0;
  if (!index.Load(&slice_count) || slice_count > index.remaining() / kIndexEntryFixedBytes) {
    return Damaged(name, fmt::format("slice count {} at offset {} does not fit the footer",
                                     slice_count, footer_offset));
  }
  slices_.resize(slice_count);
  uint64_t expected_offset = header_bytes;
  for (uint32_t ordinal = 0; ordinal < slice_count; ++ordinal) {
    SliceInfo& info = slices_[ordinal];
    info.ordinal = ordinal;
    const uint64_t entry_offset = index.offset();
    uint8_t kind = 0;
    if (!index.Load(&info.payload_offset) || !index.Load(&info.payload_bytes) ||
        !index.Load(&info.uncompressed_bytes) || !index.Load(&info.row_count) ||
        !index.Load(&info.schema_id) || !index.Load(&kind) || !index.Text(&info.namespace_name)) {
      return Damaged(name, fmt::format("index entry {} at offset {} runs past the footer", ordinal,
                                       entry_offset));
    }
    if (kind > kKindCdc || info.row_count < 0) {
      return Damaged(name, fmt::format("index entry {} at offset {} has kind {} and row count {}",
                                       ordinal, entry_offset, kind, info.row_count));
    }
    info.is_cdc = kind == kKindCdc;
    if (info.payload_offset != expected_offset || info.payload_bytes < kSliceFixedBytes + 8 ||
        info.payload_bytes > footer_offset - expected_offset) {
      return Damaged(name, fmt::format("index entry {} places slice {} at offset {} ({} bytes), but "
                                       "slices must tile bytes {}..{} in order",
                                       ordinal, ordinal, info.payload_offset, info.payload_bytes,
                                       header_bytes, footer_offset));
    }
    // The slice's header, up to a namespace somewhat longer than the index's (a longer one is a
    // mismatch reported below, not a short read).
    const uint64_t head_bytes = std::min<uint64_t>(
        info.payload_bytes - 8, kSliceFixedBytes + info.namespace_name.size() + kHeadSlackBytes);
    SKIPPR_ASSIGN_OR_RETURN(const std::string head_record, read(info.payload_offset, head_bytes));
    ByteReader record(head_record, info.payload_offset);
    SliceHead slice_head;
    if (!ReadSliceHead(record, &slice_head)) {
      return Damaged(name, fmt::format("slice {} at offset {} is shorter than its header", ordinal,
                                       info.payload_offset));
    }
    if (auto mismatch = SliceHeadMismatch(slice_head, info, version)) {
      return Damaged(name, fmt::format("slice {} at offset {}: {}", ordinal, info.payload_offset,
                                       *mismatch));
    }
    expected_offset += info.payload_bytes;
  }
  if (expected_offset != footer_offset || index.remaining() != 0) {
    return Damaged(name, fmt::format("the {} slices end at offset {} and the index at offset {}, "
                                     "but the footer starts at {} and its index ends at {}",
                                     slice_count, expected_offset, index.offset(), footer_offset,
                                     checksum_offset - 8));
  }
  return Status::OK();
}

namespace {

// A segment that cannot be read is committed data that cannot be served: never skipped.
Status SegmentReadFailed(const Status& failure) {
  return Status(failure.code(),
                fmt::format("cannot read WAL segment file: {}; check the disk, then run again",
                            failure.message()));
}

Result<std::unique_ptr<RandomAccessFile>> OpenSegmentFile(Env& env, const std::string& path) {
  Result<std::unique_ptr<RandomAccessFile>> file = env.OpenRandomAccess(path);
  if (file.ok()) return file;
  if (file.status().code() == StatusCode::kNotFound) {
    return Status::NotFound(fmt::format("WAL segment file '{}' does not exist", path));
  }
  return SegmentReadFailed(file.status());
}

Result<uint64_t> SegmentFileSize(const RandomAccessFile& file) {
  Result<uint64_t> size = file.Size();
  if (!size.ok()) return SegmentReadFailed(size.status());
  return size;
}

Status ReadFully(const RandomAccessFile& file, const std::string& path, uint64_t offset, char* out,
                 uint64_t size) {
  while (size > 0) {
    Result<size_t> got = file.ReadAt(offset, out, size);
    if (!got.ok()) return SegmentReadFailed(got.status());
    if (*got == 0) {
      return Status::IOError(fmt::format("WAL segment file '{}' shrank while being read (at offset "
                                         "{}): is another process writing it?", path, offset));
    }
    out += *got;
    offset += *got;
    size -= *got;
  }
  return Status::OK();
}

// Magic and version of an open file (CheckStart on its first 16 bytes).
Result<uint32_t> ReadVersion(const RandomAccessFile& file, const std::string& path,
                             uint64_t file_bytes) {
  char start[kVersionPrefixBytes] = {};
  if (file_bytes >= sizeof(start)) SKIPPR_RETURN_IF_ERROR(ReadFully(file, path, 0, start, sizeof(start)));
  return CheckStart(path, std::string_view(start, sizeof(start)), file_bytes);
}

}  // namespace

Result<SegmentReader> SegmentReader::Open(const std::string& path, Env* env,
                                          SegmentVerification verification) {
  SKIPPR_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file, OpenSegmentFile(*env, path));
  SegmentReader reader;
  reader.display_name_ = path;
  reader.file_ = std::move(file);
  SKIPPR_RETURN_IF_ERROR(reader.VerifyFile(verification));
  return reader;
}

// Verify for an open file: the checksum streamed through a small buffer (kWholeFile), then the
// layout read piece by piece.
Status SegmentReader::VerifyFile(SegmentVerification verification) {
  const RandomAccessFile& file = *file_;
  const std::string& path = display_name_;
  SKIPPR_ASSIGN_OR_RETURN(file_bytes_, SegmentFileSize(file));
  SKIPPR_ASSIGN_OR_RETURN(const uint32_t version, ReadVersion(file, path, file_bytes_));
  if (file_bytes_ < FileMinBytes(version)) {
    return Damaged(path, fmt::format("the file has {} bytes, fewer than the {} of an empty segment "
                                     "(truncated)", file_bytes_, FileMinBytes(version)));
  }
  char last28[28];
  SKIPPR_RETURN_IF_ERROR(ReadFully(file, path, file_bytes_ - 28, last28, sizeof(last28)));
  uint64_t footer_offset = 0;
  SKIPPR_RETURN_IF_ERROR(
      CheckEnd(path, std::string_view(last28, sizeof(last28)), file_bytes_, version, &footer_offset));

  const uint64_t stored_checksum = LoadAt<uint64_t>(std::string_view(last28, sizeof(last28)), 8);
  if (verification == SegmentVerification::kEachRead) {
    checksum_ = stored_checksum;
  } else {
    const uint64_t checksum_offset = file_bytes_ - kTailBytes;
    std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> state(XXH3_createState(),
                                                                   &XXH3_freeState);
    SKIPPR_CHECK(state != nullptr && XXH3_64bits_reset(state.get()) == XXH_OK);
    std::string buffer(std::min<uint64_t>(kVerifyBufferBytes, checksum_offset), '\0');
    for (uint64_t offset = 0; offset < checksum_offset;) {
      const uint64_t length = std::min<uint64_t>(buffer.size(), checksum_offset - offset);
      SKIPPR_RETURN_IF_ERROR(ReadFully(file, path, offset, buffer.data(), length));
      SKIPPR_CHECK(XXH3_64bits_update(state.get(), buffer.data(), length) == XXH_OK);
      offset += length;
    }
    SKIPPR_RETURN_IF_ERROR(CheckChecksum(stored_checksum, XXH3_64bits_digest(state.get())));
  }
  return ParseLayout(
      [&file, &path](uint64_t offset, uint64_t length) -> Result<std::string> {
        std::string bytes(length, '\0');
        SKIPPR_RETURN_IF_ERROR(ReadFully(file, path, offset, bytes.data(), length));
        return bytes;
      },
      version, footer_offset);
}

Status SegmentReader::CheckTail(const std::string& path, Env* env) {
  SKIPPR_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file, OpenSegmentFile(*env, path));
  SKIPPR_ASSIGN_OR_RETURN(const uint64_t file_bytes, SegmentFileSize(*file));
  SKIPPR_ASSIGN_OR_RETURN(const uint32_t version, ReadVersion(*file, path, file_bytes));
  if (file_bytes < FileMinBytes(version)) {
    return Damaged(path, fmt::format("the file has {} bytes, fewer than the {} of an empty segment "
                                     "(truncated)", file_bytes, FileMinBytes(version)));
  }
  char last28[28];
  SKIPPR_RETURN_IF_ERROR(ReadFully(*file, path, file_bytes - 28, last28, 28));
  uint64_t footer_offset = 0;
  return CheckEnd(path, std::string_view(last28, 28), file_bytes, version, &footer_offset);
}

Result<SegmentHeader> SegmentReader::ReadHeader(const std::string& path, Env* env) {
  SKIPPR_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file, OpenSegmentFile(*env, path));
  SKIPPR_ASSIGN_OR_RETURN(const uint64_t file_bytes, SegmentFileSize(*file));
  SKIPPR_ASSIGN_OR_RETURN(const uint32_t version, ReadVersion(*file, path, file_bytes));
  char length[4];
  SKIPPR_RETURN_IF_ERROR(ReadFully(*file, path, 12, length, sizeof(length)));
  const uint32_t header_bytes = LoadAt<uint32_t>(std::string_view(length, sizeof(length)), 0);
  if (header_bytes < HeaderFixedBytes(version) || header_bytes > file_bytes) {
    return Damaged(path, fmt::format("header length {} at offset 12 is outside {}..{} (the file "
                                     "size)", header_bytes, HeaderFixedBytes(version), file_bytes));
  }
  std::string header(header_bytes, '\0');
  SKIPPR_RETURN_IF_ERROR(ReadFully(*file, path, 0, header.data(), header_bytes));
  SegmentHeader parsed;
  if (!ParseHeaderFields(header, version, &parsed)) {
    return Damaged(path, fmt::format("the header's fields do not fill its {} bytes exactly",
                                     header_bytes));
  }
  return parsed;
}

// ----- slice decoding ---------------------------------------------------------------------------

namespace {

// Decompresses a slice's frame straight into the column buffers, in directory order, without a
// staging copy of the whole payload; values stored as byte planes are joined a block at a time.
class PayloadDecompressor {
 public:
  // `has_planes`: the frame stores values of 8 and 16 bytes as byte planes (version 5 on).
  PayloadDecompressor(FrameReader& frame, bool has_planes)
      : frame_(frame), has_planes_(has_planes) {}

  // Fills exactly `size` bytes of values `value_width` bytes wide; false as Read.
  bool ReadValues(void* out, size_t size, size_t value_width) {
    if (!has_planes_ || !IsSplitIntoPlanes(value_width)) return Read(out, size);
    uint8_t* planes = PlanesBlock();
    for (size_t at = 0; at < size; at += kBytePlaneBlockBytes) {
      const size_t block_bytes = std::min(kBytePlaneBlockBytes, size - at);
      if (!Read(planes, block_bytes)) return false;
      JoinPlanes(planes, block_bytes, value_width, static_cast<uint8_t*>(out) + at);
    }
    return true;
  }

  // Fills exactly `size` bytes; false when the frame is damaged or ends first.
  bool Read(void* out, size_t size) { return frame_.Read(out, size); }

  // True when the frame ended exactly after the last byte read and no input is left over.
  bool Finish() { return frame_.Finish(); }

  const std::string& error() const { return frame_.error(); }

 private:
  static uint8_t* PlanesBlock() {
    thread_local std::unique_ptr<uint8_t[]> block(new uint8_t[kBytePlaneBlockBytes]);
    return block.get();
  }

  FrameReader& frame_;
  const bool has_planes_;
};

// The bytes of one slice record, fetched as the decoder asks for them: views into a segment held
// in memory, or reads from the open file into buffers this object keeps while it lives (a range
// inside one already read is served from it: a version 1 or 2 record is read once, whole).
class RecordBytes {
 public:
  explicit RecordBytes(std::string_view in_memory) : memory_(in_memory), size_(in_memory.size()) {}
  RecordBytes(const RandomAccessFile& file, const std::string& path, uint64_t record_offset,
              uint64_t record_bytes)
      : file_(&file), path_(&path), record_offset_(record_offset), size_(record_bytes) {}

  // Bytes [offset, offset + length) of the record; the range lies inside it.
  Result<std::string_view> Get(uint64_t offset, uint64_t length) {
    SKIPPR_CHECK(offset <= size_ && length <= size_ - offset);
    if (file_ == nullptr) return memory_.substr(offset, length);
    for (const auto& [start, buffer] : buffers_) {
      if (offset >= start && offset - start + length <= buffer.size()) {
        return std::string_view(buffer).substr(offset - start, length);
      }
    }
    auto& [start, buffer] = buffers_.emplace_back(offset, std::string(length, '\0'));
    SKIPPR_RETURN_IF_ERROR(ReadFully(*file_, *path_, record_offset_ + offset, buffer.data(), length));
    return std::string_view(buffer);
  }

 private:
  std::string_view memory_;
  const RandomAccessFile* file_ = nullptr;
  const std::string* path_ = nullptr;
  uint64_t record_offset_ = 0;
  uint64_t size_ = 0;
  std::deque<std::pair<uint64_t, std::string>> buffers_;  // (offset in the record, bytes)
};

// One compressed frame of a slice record: where it lies in the record and what it must hold.
struct Frame {
  uint64_t offset = 0;  // from the record's start
  uint64_t compressed_bytes = 0;
  uint64_t uncompressed_bytes = 0;
  std::optional<uint64_t> checksum;  // version 3: XXH3-64 of the compressed bytes
};

// Decodes one slice record from its header (checksum verified by the caller: the whole record's
// in version 1 and 2, the header's own in version 3), reading the frames it needs through
// RecordBytes. Every failure is a Corruption message fragment (the caller adds the segment).
class SliceDecoder {
 public:
  // `header`: the record's header bytes without a trailing checksum (version 1 and 2: every byte
  // before the compressed payload; version 3: before the header checksum).
  SliceDecoder(std::string_view header, uint64_t record_offset, const SliceInfo& info,
               uint32_t version, const FieldSelection& selection)
      : record_offset_(record_offset), info_(info), version_(version), selection_(selection),
        reader_(header, record_offset) {}

  Result<Batch> Decode(RecordBytes& record) {
    SKIPPR_ASSIGN_OR_RETURN(SliceLayout layout, ReadLayout());
    SKIPPR_RETURN_IF_ERROR(version_ >= 3 ? FillFrames(record, layout) : FillOneFrame(record, layout));
    Batch& batch = layout.batch;
    KeepSelected(batch);
    std::string reason;
    if (!batch.Validate(&reason)) return Fail("the decoded batch is inconsistent: " + reason);
    SKIPPR_CHECK(batch.num_rows == info_.row_count);
    return std::move(batch);
  }

 private:
  // What the slice header describes: the batch with its fields and its columns sized (those to be
  // filled), and the frames that hold them.
  struct SliceLayout {
    Batch batch;
    std::vector<bool> fills;  // per column: read from its frame
    std::vector<Frame> frames;
    std::vector<uint64_t> cdc_counts;
  };

  Result<SliceLayout> ReadLayout() {
    SliceHead head;
    if (!ReadSliceHead(reader_, &head)) return Fail("the slice header is cut short");
    if (auto mismatch = SliceHeadMismatch(head, info_, version_)) return Fail(*mismatch);
    payload_left_ = head.uncompressed_bytes;

    SliceLayout layout;
    Batch& batch = layout.batch;
    batch.namespace_name = std::move(head.namespace_name);
    batch.schema_id = head.schema_id;
    batch.num_rows = head.row_count;
    uint32_t field_count = 0;
    if (!reader_.Load(&field_count) || field_count > reader_.remaining() / kFieldFixedBytes) {
      return Fail("the field count does not fit the slice header");
    }
    batch.fields.reserve(field_count);
    for (uint32_t i = 0; i < field_count; ++i) {
      SKIPPR_ASSIGN_OR_RETURN(Field field, ReadField(0));
      batch.fields.push_back(std::move(field));
    }
    // One frame holds every column before version 3, so every column is filled and the selection
    // applied after.
    layout.fills.assign(field_count, true);
    if (version_ >= 3) {
      for (uint32_t i = 0; i < field_count; ++i) {
        layout.fills[i] = selection_.Includes(batch.fields[i]);
      }
    }
    std::vector<uint64_t> frame_contents;  // per column, then the CDC sidecar: the bytes it claims
    batch.columns.reserve(field_count);
    for (uint32_t i = 0; i < field_count; ++i) {
      batch.columns.emplace_back(batch.fields[i].type);
      const uint64_t left_before = payload_left_;
      SKIPPR_RETURN_IF_ERROR(ReadColumnShape(batch.columns.back(), layout.fills[i]));
      frame_contents.push_back(left_before - payload_left_);
    }
    if (head.kind == kKindCdc) {
      batch.cdc.emplace();
      const uint64_t left_before = payload_left_;
      SKIPPR_RETURN_IF_ERROR(ReadCdcShape(head.row_count, *batch.cdc, layout.cdc_counts));
      frame_contents.push_back(left_before - payload_left_);
    }
    if (payload_left_ != 0) {
      return Fail(fmt::format("the column directory accounts for {} of the {} uncompressed bytes",
                              head.uncompressed_bytes - payload_left_, head.uncompressed_bytes));
    }
    if (version_ >= 3) {
      SKIPPR_ASSIGN_OR_RETURN(layout.frames, ReadFrameDirectory(head, frame_contents));
    } else {
      layout.frames.push_back(
          {head.slice_header_bytes, head.compressed_bytes, head.uncompressed_bytes, {}});
    }
    const uint64_t header_end = record_offset_ + head.slice_header_bytes -
                                (version_ >= 3 ? kHeaderChecksumBytes : 0);
    if (reader_.offset() != header_end) {
      return Fail(fmt::format("the slice header ends at offset {}, not at offset {} as recorded",
                              reader_.offset(), header_end));
    }
    return layout;
  }

  // Version 3: the frames of the selected columns, then the CDC sidecar's.
  Status FillFrames(RecordBytes& record, SliceLayout& layout) {
    Batch& batch = layout.batch;
    for (size_t i = 0; i < batch.columns.size(); ++i) {
      if (!layout.fills[i]) continue;
      const Frame& frame = layout.frames[i];
      SKIPPR_RETURN_IF_ERROR(FillFrame(record, frame, [&](PayloadDecompressor& payload) {
        return FillColumn(payload, batch.columns[i]) ? Status::OK() : PayloadFailed(payload, frame);
      }));
    }
    if (!batch.cdc) return Status::OK();
    return FillFrame(record, layout.frames.back(), [&](PayloadDecompressor& payload) {
      return FillCdc(payload, layout.frames.back(), *batch.cdc, layout.cdc_counts);
    });
  }

  // Versions 1 and 2: every column, then the CDC sidecar, from the one frame.
  Status FillOneFrame(RecordBytes& record, SliceLayout& layout) {
    const Frame& frame = layout.frames[0];
    Batch& batch = layout.batch;
    return FillFrame(record, frame, [&](PayloadDecompressor& payload) {
      for (Column& column : batch.columns) {
        if (!FillColumn(payload, column)) return PayloadFailed(payload, frame);
      }
      return batch.cdc ? FillCdc(payload, frame, *batch.cdc, layout.cdc_counts) : Status::OK();
    });
  }

  Status Fail(std::string_view what) const {
    return Status::Corruption(fmt::format("slice {} at offset {}: {}", info_.ordinal,
                                          record_offset_, what));
  }

  // Version 3: one entry per frame, each holding exactly the bytes its column's (or the CDC
  // sidecar's) directory entries claim; the frames tile the payload after the header.
  Result<std::vector<Frame>> ReadFrameDirectory(const SliceHead& head,
                                                const std::vector<uint64_t>& frame_contents) {
    std::vector<Frame> frames(frame_contents.size());
    uint64_t next_offset = head.slice_header_bytes;
    uint64_t compressed_left = head.compressed_bytes;
    for (size_t i = 0; i < frames.size(); ++i) {
      const uint64_t entry_offset = reader_.offset();
      uint64_t checksum = 0;
      if (!reader_.Load(&frames[i].compressed_bytes) ||
          !reader_.Load(&frames[i].uncompressed_bytes) || !reader_.Load(&checksum)) {
        return Fail(fmt::format("the frame directory entry at offset {} is cut short",
                                entry_offset));
      }
      frames[i].checksum = checksum;
      if (frames[i].uncompressed_bytes != frame_contents[i]) {
        return Fail(fmt::format("frame {} (entry at offset {}) holds {} bytes where its directory "
                                "entries describe {}",
                                i, entry_offset, frames[i].uncompressed_bytes, frame_contents[i]));
      }
      if (frames[i].compressed_bytes > compressed_left) {
        return Fail(fmt::format("frame {} (entry at offset {}) of {} bytes runs past the {}-byte "
                                "payload", i, entry_offset, frames[i].compressed_bytes,
                                head.compressed_bytes));
      }
      frames[i].offset = next_offset;
      next_offset += frames[i].compressed_bytes;
      compressed_left -= frames[i].compressed_bytes;
    }
    if (compressed_left != 0) {
      return Fail(fmt::format("the frames add up to {} of the {} compressed bytes",
                              head.compressed_bytes - compressed_left, head.compressed_bytes));
    }
    return frames;
  }

  // Reads one frame, checks its checksum (version 3) and declared size, and lets `fill` take its
  // bytes; the frame must end exactly where `fill` stops.
  template <typename Fill>
  Status FillFrame(RecordBytes& record, const Frame& frame, Fill fill) {
    const uint64_t at = record_offset_ + frame.offset;
    SKIPPR_ASSIGN_OR_RETURN(const std::string_view compressed,
                            record.Get(frame.offset, frame.compressed_bytes));
    if (frame.checksum) {
      const uint64_t computed = XXH3_64bits(compressed.data(), compressed.size());
      if (computed != *frame.checksum) {
        return Fail(fmt::format("the frame at offset {} ({} bytes) fails its checksum (stored "
                                "{:016x}, computed {:016x})",
                                at, frame.compressed_bytes, *frame.checksum, computed));
      }
    }
    const FrameCodec codec = FrameCodecOf(version_);
    const std::unique_ptr<FrameReader> reader = NewFrameReader(codec, compressed);
    const std::optional<uint64_t> content_bytes = reader->Open();
    if (!content_bytes) {
      return Fail(fmt::format("the {} frame at offset {} ({} bytes) is damaged: {}",
                              FrameCodecName(codec), at, frame.compressed_bytes, reader->error()));
    }
    if (*content_bytes != frame.uncompressed_bytes) {
      return Fail(fmt::format("the {} frame at offset {} declares {} bytes, its directory {}",
                              FrameCodecName(codec), at, *content_bytes, frame.uncompressed_bytes));
    }
    PayloadDecompressor payload(*reader, version_ >= 5);
    SKIPPR_RETURN_IF_ERROR(fill(payload));
    if (!payload.Finish()) return PayloadFailed(payload, frame);
    return Status::OK();
  }

  // Drops the columns the selection leaves out (filled or not), keeping the order.
  void KeepSelected(Batch& batch) const {
    if (selection_.all()) return;
    size_t kept = 0;
    for (size_t i = 0; i < batch.fields.size(); ++i) {
      if (!selection_.Includes(batch.fields[i])) continue;
      if (kept != i) {
        batch.fields[kept] = std::move(batch.fields[i]);
        batch.columns[kept] = std::move(batch.columns[i]);
      }
      ++kept;
    }
    batch.fields.erase(batch.fields.begin() + static_cast<std::ptrdiff_t>(kept), batch.fields.end());
    batch.columns.erase(batch.columns.begin() + static_cast<std::ptrdiff_t>(kept), batch.columns.end());
  }

  Result<Field> ReadField(int depth) {
    if (depth > kMaxFieldDepth) {
      return Fail(fmt::format("fields nest deeper than {} levels", kMaxFieldDepth));
    }
    const uint64_t field_offset = reader_.offset();
    Field field;
    uint8_t code = 0, flags = 0, precision = 0, scale = 0;
    uint32_t child_count = 0;
    if (!reader_.Load(&field.id) || !reader_.Load(&code) || !reader_.Load(&flags) ||
        !reader_.Load(&precision) || !reader_.Load(&scale) || !reader_.Text(&field.name) ||
        !reader_.Load(&child_count)) {
      return Fail(fmt::format("the field at offset {} is cut short", field_offset));
    }
    const std::optional<TypeId> type_id = TypeFromCode(code);
    if (!type_id) return Fail(fmt::format("field at offset {} has unknown type code {}", field_offset, code));
    if ((flags & ~kFieldNullable) != 0) {
      return Fail(fmt::format("field at offset {} has unknown flags {:#04x}", field_offset, flags));
    }
    field.nullable = (flags & kFieldNullable) != 0;
    bool counts_fit = child_count == 0;
    switch (*type_id) {
      case TypeId::kStruct: counts_fit = child_count <= reader_.remaining() / kFieldFixedBytes; break;
      case TypeId::kList: counts_fit = child_count == 1; break;
      case TypeId::kMap: counts_fit = child_count == 2; break;
      default: break;
    }
    if (!counts_fit) {
      return Fail(fmt::format("field at offset {} (type code {}) has {} children", field_offset,
                              code, child_count));
    }
    if (*type_id != TypeId::kDecimal && (precision != 0 || scale != 0)) {
      return Fail(fmt::format("field at offset {} is not a decimal but has precision {} and scale {}",
                              field_offset, precision, scale));
    }
    std::vector<Field> children;
    children.reserve(child_count);
    for (uint32_t i = 0; i < child_count; ++i) {
      SKIPPR_ASSIGN_OR_RETURN(Field child, ReadField(depth + 1));
      children.push_back(std::move(child));
    }
    switch (*type_id) {
      case TypeId::kBoolean: field.type = LogicalType::Boolean(); break;
      case TypeId::kInt: field.type = LogicalType::Int(); break;
      case TypeId::kLong: field.type = LogicalType::Long(); break;
      case TypeId::kFloat: field.type = LogicalType::Float(); break;
      case TypeId::kDouble: field.type = LogicalType::Double(); break;
      case TypeId::kDecimal: {
        Result<LogicalType> decimal = LogicalType::Decimal(precision, scale);
        if (!decimal.ok()) {
          return Fail(fmt::format("field at offset {} has decimal({}, {})", field_offset, precision,
                                  scale));
        }
        field.type = *decimal;
        break;
      }
      case TypeId::kDate: field.type = LogicalType::Date(); break;
      case TypeId::kTime: field.type = LogicalType::Time(); break;
      case TypeId::kTimestamp: field.type = LogicalType::Timestamp(); break;
      case TypeId::kTimestampTz: field.type = LogicalType::TimestampTz(); break;
      case TypeId::kString: field.type = LogicalType::String(); break;
      case TypeId::kBinary: field.type = LogicalType::Binary(); break;
      case TypeId::kUuid: field.type = LogicalType::Uuid(); break;
      case TypeId::kStruct: field.type = LogicalType::Struct(std::move(children)); break;
      case TypeId::kList: field.type = LogicalType::List(std::move(children[0])); break;
      case TypeId::kMap: {
        const bool key_nullable = children[0].nullable;
        field.type = LogicalType::Map(std::move(children[0]), std::move(children[1]));
        field.type.mutable_children()[0].nullable = key_nullable;  // as written, not as Map() sets it
        break;
      }
    }
    return field;
  }

  // Takes `size` bytes from the payload budget; false when the directory claims more than there is.
  bool Claim(uint64_t size) {
    if (size > payload_left_) return false;
    payload_left_ -= size;
    return true;
  }

  // Reads a column's directory entry (and its children's), checks the sizes against the column's
  // type, and sizes its buffers when it is to be filled (FillColumn copies the bytes in after
  // decompression).
  Status ReadColumnShape(Column& column, bool allocates) {
    const uint64_t entry_offset = reader_.offset();
    int64_t length = 0;
    uint64_t validity_bytes = 0, fixed_bytes = 0, offsets_count = 0, bytes_bytes = 0;
    if (!reader_.Load(&length) || !reader_.Load(&validity_bytes) || !reader_.Load(&fixed_bytes) ||
        !reader_.Load(&offsets_count) || !reader_.Load(&bytes_bytes)) {
      return Fail(fmt::format("the column directory entry at offset {} is cut short", entry_offset));
    }
    const PhysicalKind kind = PhysicalKindOf(column.type.id());
    const uint64_t width = FixedWidthBytes(kind);
    const auto rows = static_cast<uint64_t>(length);
    const bool sizes_match =
        length >= 0 && validity_bytes == rows / 8 + (rows % 8 != 0) &&
        (width == 0 ? fixed_bytes == 0 : fixed_bytes % width == 0 && fixed_bytes / width == rows) &&
        offsets_count == (HasOffsets(kind) ? rows + 1 : 0) &&
        (kind == PhysicalKind::kBytes || bytes_bytes == 0) &&
        offsets_count <= UINT64_MAX / 8;
    if (!sizes_match) {
      return Fail(fmt::format("the {} column entry at offset {} has {} rows with {} validity, {} "
                              "fixed, {} offsets and {} data bytes, which do not fit its type",
                              column.type.ToString(), entry_offset, length, validity_bytes,
                              fixed_bytes, offsets_count, bytes_bytes));
    }
    if (!Claim(validity_bytes) || !Claim(fixed_bytes) || !Claim(offsets_count * 8) ||
        !Claim(bytes_bytes)) {
      return Fail(fmt::format("the column entry at offset {} claims more bytes than the payload "
                              "holds", entry_offset));
    }
    column.length = length;
    if (allocates) {
      column.validity.resize(validity_bytes);
      column.fixed.resize(fixed_bytes);
      column.offsets.resize(offsets_count);
      column.bytes.resize(bytes_bytes);
    }
    for (Column& child : column.children) SKIPPR_RETURN_IF_ERROR(ReadColumnShape(child, allocates));
    return Status::OK();
  }

  Status ReadCdcShape(int64_t row_count, CdcSidecar& cdc, std::vector<uint64_t>& counts) {
    const uint64_t entry_offset = reader_.offset();
    uint64_t mutations = 0;
    if (!reader_.Load(&mutations) || mutations != static_cast<uint64_t>(row_count) ||
        !Claim(mutations)) {
      return Fail(fmt::format("the CDC directory at offset {} has {} mutations for {} rows",
                              entry_offset, mutations, row_count));
    }
    cdc.mutations.resize(mutations);
    for (int i = 0; i < 3; ++i) {
      uint64_t count = 0, bytes = 0;
      if (!reader_.Load(&count) || !reader_.Load(&bytes) || count >= payload_left_ / 8 ||
          !Claim((count + 1) * 8) || !Claim(bytes)) {
        return Fail(fmt::format("the CDC directory at offset {} claims more bytes than the payload "
                                "holds", entry_offset));
      }
      counts.push_back(count);
      counts.push_back(bytes);
    }
    return Status::OK();
  }

  Status PayloadFailed(const PayloadDecompressor& payload, const Frame& frame) const {
    return Fail(fmt::format("the {} frame at offset {} ({} bytes) does not decompress to the "
                            "{} bytes its directory describes: {}",
                            FrameCodecName(FrameCodecOf(version_)), record_offset_ + frame.offset,
                            frame.compressed_bytes,
                            frame.uncompressed_bytes, payload.error()));
  }

  static bool FillColumn(PayloadDecompressor& payload, Column& column) {
    if (!payload.Read(column.validity.data(), column.validity.size()) ||
        !payload.ReadValues(column.fixed.data(), column.fixed.size(),
                            FixedWidthBytes(PhysicalKindOf(column.type.id()))) ||
        !payload.ReadValues(column.offsets.data(), column.offsets.size() * sizeof(int64_t),
                            sizeof(int64_t)) ||
        !payload.Read(column.bytes.data(), column.bytes.size())) {
      return false;
    }
    for (Column& child : column.children) {
      if (!FillColumn(payload, child)) return false;
    }
    return true;
  }

  Status FillCdc(PayloadDecompressor& payload, const Frame& frame, CdcSidecar& cdc,
                 const std::vector<uint64_t>& counts) {
    if (!payload.Read(cdc.mutations.data(), cdc.mutations.size())) return PayloadFailed(payload, frame);
    // Version 4 adds truncate.
    const Mutation last_code = version_ >= 4 ? Mutation::kTruncate : Mutation::kDelete;
    for (size_t row = 0; row < cdc.mutations.size(); ++row) {
      if (static_cast<uint8_t>(cdc.mutations[row]) > static_cast<uint8_t>(last_code)) {
        return Fail(fmt::format("row {} has mutation code {}", row,
                                static_cast<uint8_t>(cdc.mutations[row])));
      }
    }
    PackedStrings* targets[3] = {&cdc.event_ids, &cdc.order_tokens, &cdc.business_keys};
    static constexpr const char* kNames[3] = {"event ids", "order tokens", "business keys"};
    for (int i = 0; i < 3; ++i) {
      const uint64_t count = counts[2 * i];
      const uint64_t bytes = counts[2 * i + 1];
      std::vector<int64_t>& offsets = targets[i]->mutable_offsets();
      std::string& text = targets[i]->mutable_text();
      offsets.assign(count + 1, 0);
      text.assign(bytes, '\0');
      if (!payload.ReadValues(offsets.data(), offsets.size() * sizeof(int64_t), sizeof(int64_t)) ||
          !payload.Read(text.data(), text.size())) {
        return PayloadFailed(payload, frame);
      }
      if (offsets[0] != 0 || static_cast<uint64_t>(offsets[count]) != bytes) {
        return Fail(fmt::format("the CDC {} offsets do not span their {} bytes", kNames[i], bytes));
      }
      for (uint64_t j = 0; j < count; ++j) {
        if (offsets[j] > offsets[j + 1]) {
          return Fail(fmt::format("the CDC {} offsets decrease at entry {}", kNames[i], j));
        }
      }
    }
    return Status::OK();
  }

  uint64_t record_offset_;
  const SliceInfo& info_;
  uint32_t version_;
  const FieldSelection& selection_;
  ByteReader reader_;
  uint64_t payload_left_ = 0;
};

// The header of slice `ordinal` with its checksum verified, without the checksum: version 3 reads
// the header alone (its length is its first field); earlier versions read the whole record, whose
// checksum follows the payload.
Result<std::string_view> VerifiedSliceHeader(RecordBytes& record, const SliceInfo& info,
                                             uint32_t version, std::string_view display_name) {
  const uint32_t ordinal = info.ordinal;
  const auto checksum_failed = [&](uint64_t stored, uint64_t computed, uint64_t end) {
    return Status::Corruption(fmt::format(
        "WAL segment {}: slice {} fails its checksum (stored {:016x} at offset {}, computed {:016x} "
        "over bytes {}..{}); {}",
        display_name, ordinal, stored, info.payload_offset + end, computed, info.payload_offset,
        info.payload_offset + end, kCommittedAdvice));
  };
  if (version < 3) {
    SKIPPR_ASSIGN_OR_RETURN(const std::string_view whole, record.Get(0, info.payload_bytes));
    const uint64_t end = whole.size() - 8;
    const uint64_t stored = LoadAt<uint64_t>(whole, end);
    const uint64_t computed = XXH3_64bits(whole.data(), end);
    if (stored != computed) return checksum_failed(stored, computed, end);
    return whole.substr(0, end);
  }
  SKIPPR_ASSIGN_OR_RETURN(std::string_view prefix,
                          record.Get(0, std::min<uint64_t>(info.payload_bytes, kSliceHeadReadBytes)));
  const uint32_t header_bytes = LoadAt<uint32_t>(prefix, 0);
  if (header_bytes < kSliceFixedBytes + kHeaderChecksumBytes || header_bytes > info.payload_bytes) {
    return Status::Corruption(fmt::format(
        "WAL segment {}: slice {} at offset {} has a header length of {}, which does not fit its "
        "{}-byte record; {}",
        display_name, ordinal, info.payload_offset, header_bytes, info.payload_bytes,
        kCommittedAdvice));
  }
  std::string_view header = prefix.substr(0, header_bytes);
  if (header_bytes > prefix.size()) {
    SKIPPR_ASSIGN_OR_RETURN(header, record.Get(0, header_bytes));
  }
  const uint64_t end = header_bytes - kHeaderChecksumBytes;
  const uint64_t stored = LoadAt<uint64_t>(header, end);
  const uint64_t computed = XXH3_64bits(header.data(), end);
  if (stored != computed) return checksum_failed(stored, computed, end);
  return header.substr(0, end);
}

}  // namespace

Result<Batch> SegmentReader::ReadSlice(uint32_t ordinal, const FieldSelection& selection) const {
  if (ordinal >= slices_.size()) {
    return Status::InvalidArgument(fmt::format("WAL segment {} has {} slices; there is no slice {}",
                                               display_name_, slices_.size(), ordinal));
  }
  SKIPPR_CHECK_MSG(file_ != nullptr || bytes_.size() == file_bytes_,
                   "a reader from VerifyBytes has no slices to read");
  const SliceInfo& info = slices_[ordinal];
  RecordBytes record =
      file_ != nullptr
          ? RecordBytes(*file_, display_name_, info.payload_offset, info.payload_bytes)
          : RecordBytes(std::string_view(bytes_).substr(info.payload_offset, info.payload_bytes));
  const uint32_t version = header_.format_version;
  Result<std::string_view> header = VerifiedSliceHeader(record, info, version, display_name_);
  if (!header.ok()) return header.status();
  Result<Batch> batch =
      SliceDecoder(*header, info.payload_offset, info, version, selection).Decode(record);
  if (!batch.ok()) {
    return Status(batch.status().code(), fmt::format("WAL segment {}: {}; {}", display_name_,
                                                     batch.status().message(), kCommittedAdvice));
  }
  return batch;
}

}  // namespace skippr::wal
