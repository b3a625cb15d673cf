// The Avro object container framing (docs/formats/iceberg-manifests.md, "Container"): header,
// blocks, sync markers, the deflate codec, and a check of every block's record encoding before Avro
// C decodes it.
#include "iceberg/avro_container.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>

#include "core/check.hpp"
#include "core/file.hpp"

namespace skippr::iceberg::internal {

namespace {

constexpr std::string_view kMagic{"Obj\x01", 4};
constexpr int kMaxSchemaDepth = 64;
// Far above any block skipprd or Iceberg writes (about 64 KiB); a larger one is damage, and the cap
// keeps a damaged deflate stream from inflating without bound.
constexpr size_t kMaxBlockBytes = size_t{256} << 20;
// Arrays and maps whose items encode to zero bytes (nulls, empty records) cannot be bounded by the
// bytes left, so their length is capped instead.
constexpr int64_t kMaxZeroWidthItems = int64_t{1} << 20;

// ----- Avro binary primitives used by the framing ------------------------------------------------

void AppendLong(std::string& out, int64_t value) {
  uint64_t zigzag = (static_cast<uint64_t>(value) << 1) ^ static_cast<uint64_t>(value >> 63);
  while (zigzag >= 0x80) {
    out.push_back(static_cast<char>(zigzag | 0x80));
    zigzag >>= 7;
  }
  out.push_back(static_cast<char>(zigzag));
}

void AppendBytes(std::string& out, std::string_view bytes) {
  AppendLong(out, static_cast<int64_t>(bytes.size()));
  out.append(bytes);
}

// Reads Avro's variable-length zigzag longs and raw bytes; every read says whether it fit.
class ByteCursor {
 public:
  ByteCursor(std::string_view bytes, size_t offset) : bytes_(bytes), offset_(offset) {}

  bool ReadLong(int64_t* value) {
    uint64_t zigzag = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (offset_ >= bytes_.size()) return false;
      const uint8_t byte = static_cast<uint8_t>(bytes_[offset_++]);
      zigzag |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) {
        *value = static_cast<int64_t>(zigzag >> 1) ^ -static_cast<int64_t>(zigzag & 1);
        return true;
      }
    }
    return false;  // more than 10 bytes: not a long
  }

  bool ReadBytes(uint64_t length, std::string_view* out) {
    if (length > remaining()) return false;
    *out = bytes_.substr(offset_, length);
    offset_ += length;
    return true;
  }

  bool Skip(uint64_t length) {
    std::string_view ignored;
    return ReadBytes(length, &ignored);
  }

  size_t offset() const { return offset_; }
  size_t remaining() const { return bytes_.size() - offset_; }

 private:
  std::string_view bytes_;
  size_t offset_;
};

// ----- deflate (RFC 1951, raw: no zlib header or checksum, as Avro specifies) --------------------

Result<std::string> Deflate(std::string_view input) {
  z_stream stream{};
  if (deflateInit2(&stream, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) !=
      Z_OK) {
    return Status::Internal("zlib: deflateInit2 failed");
  }
  std::string output(deflateBound(&stream, input.size()), '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(input.data()));
  stream.avail_in = static_cast<uInt>(input.size());
  stream.next_out = reinterpret_cast<Bytef*>(output.data());
  stream.avail_out = static_cast<uInt>(output.size());
  const int rc = deflate(&stream, Z_FINISH);
  output.resize(stream.total_out);
  deflateEnd(&stream);
  if (rc != Z_STREAM_END) return Status::Internal(fmt::format("zlib: deflate failed ({})", rc));
  return output;
}

// Empty on success, else the problem. Bytes after the end of the deflate stream are ignored, as
// Java's and Python's Avro readers ignore them: python3-avro's writer leaves three bytes of zlib's
// checksum there.
std::string Inflate(std::string_view input, std::string* output) {
  z_stream stream{};
  if (inflateInit2(&stream, -15) != Z_OK) return "zlib: inflateInit2 failed";
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(input.data()));
  stream.avail_in = static_cast<uInt>(input.size());
  output->clear();
  int rc = Z_OK;
  while (rc == Z_OK) {
    if (output->size() >= kMaxBlockBytes) break;
    const size_t used = output->size();
    output->resize(std::min(kMaxBlockBytes, std::max<size_t>(used * 2, 4096)));
    stream.next_out = reinterpret_cast<Bytef*>(output->data() + used);
    stream.avail_out = static_cast<uInt>(output->size() - used);
    rc = inflate(&stream, Z_NO_FLUSH);
    output->resize(stream.total_out);
    if (rc == Z_BUF_ERROR && stream.avail_in > 0) rc = Z_OK;  // only needed more room
  }
  inflateEnd(&stream);
  if (rc == Z_STREAM_END) return {};
  if (rc == Z_OK) return fmt::format("inflates past {} bytes", kMaxBlockBytes);
  if (rc == Z_BUF_ERROR) return "ends inside its deflate stream";
  return fmt::format("is not a valid deflate stream (zlib error {})", rc);
}

// ----- checking records' encoding ----------------------------------------------------------------

// The fewest bytes a value of `schema` encodes to.
uint64_t MinEncodedBytes(avro_schema_t schema, int depth) {
  if (depth > kMaxSchemaDepth) return 0;
  switch (avro_typeof(schema)) {
    case AVRO_NULL:
      return 0;
    case AVRO_FLOAT:
      return 4;
    case AVRO_DOUBLE:
      return 8;
    case AVRO_FIXED:
      return static_cast<uint64_t>(avro_schema_fixed_size(schema));
    case AVRO_RECORD: {
      uint64_t total = 0;
      for (size_t i = 0; i < avro_schema_record_size(schema); ++i) {
        total += MinEncodedBytes(avro_schema_record_field_get_by_index(schema, static_cast<int>(i)),
                                 depth + 1);
      }
      return total;
    }
    case AVRO_LINK:
      return 0;  // a recursive type: only reachable through a union or array anyway
    default:
      return 1;  // a varint, a length or a boolean byte comes first
  }
}

// Walks encoded records without decoding them, checking that every length, count, union branch and
// enum index lies within the bytes. Avro C's decoder trusts them (a negative string length makes
// it write before its buffer), so no block reaches it unchecked.
class EncodingChecker {
 public:
  explicit EncodingChecker(std::string_view bytes) : cursor_(bytes, 0) {}

  // Empty on success; otherwise what is wrong, with the byte offset inside the block.
  std::string CheckRecords(avro_schema_t schema, int64_t count) {
    for (int64_t i = 0; i < count; ++i) {
      const size_t start = cursor_.offset();
      if (!Value(schema, 0)) {
        return fmt::format("record {} of the block (at byte {} of its records): {} at byte {}", i,
                           start, problem_, cursor_.offset());
      }
    }
    if (cursor_.remaining() != 0) {
      return fmt::format("its {} records end at byte {} but the block has {} more bytes", count,
                         cursor_.offset(), cursor_.remaining());
    }
    return {};
  }

 private:
  bool Fail(std::string problem) {
    problem_ = std::move(problem);
    return false;
  }

  bool Long(int64_t* value) { return cursor_.ReadLong(value) || Fail("a number is cut short"); }

  bool Length(std::string_view what) {
    int64_t length = 0;
    if (!Long(&length)) return false;
    if (length < 0 || static_cast<uint64_t>(length) > cursor_.remaining()) {
      return Fail(fmt::format("{} length {} is outside the {} bytes left", what, length,
                              cursor_.remaining()));
    }
    return cursor_.Skip(static_cast<uint64_t>(length));
  }

  bool Index(int64_t size, std::string_view what) {
    int64_t index = 0;
    if (!Long(&index)) return false;
    if (index < 0 || index >= size) {
      return Fail(fmt::format("{} {} is not below {}", what, index, size));
    }
    last_index_ = index;
    return true;
  }

  bool Boolean() {
    std::string_view byte;
    if (!cursor_.ReadBytes(1, &byte)) return Fail("a boolean is cut short");
    return static_cast<uint8_t>(byte[0]) <= 1 ||
           Fail(fmt::format("boolean byte {:#04x} is neither 0 nor 1",
                            static_cast<uint8_t>(byte[0])));
  }

  bool Value(avro_schema_t schema, int depth) {
    if (depth > kMaxSchemaDepth) return Fail("values nest deeper than 64 levels");
    int64_t ignored = 0;
    switch (avro_typeof(schema)) {
      case AVRO_NULL:
        return true;
      case AVRO_BOOLEAN:
        return Boolean();
      case AVRO_INT32:
        if (!Long(&ignored)) return false;
        return (ignored >= std::numeric_limits<int32_t>::min() &&
                ignored <= std::numeric_limits<int32_t>::max()) ||
               Fail(fmt::format("int {} does not fit 32 bits", ignored));
      case AVRO_INT64:
        return Long(&ignored);
      case AVRO_FLOAT:
        return cursor_.Skip(4) || Fail("a float is cut short");
      case AVRO_DOUBLE:
        return cursor_.Skip(8) || Fail("a double is cut short");
      case AVRO_STRING:
        return Length("string");
      case AVRO_BYTES:
        return Length("bytes");
      case AVRO_FIXED:
        return cursor_.Skip(static_cast<uint64_t>(avro_schema_fixed_size(schema))) ||
               Fail("a fixed value is cut short");
      case AVRO_ENUM:
        return Index(avro_schema_enum_number_of_symbols(schema), "enum index");
      case AVRO_UNION:
        if (!Index(static_cast<int64_t>(avro_schema_union_size(schema)), "union branch")) {
          return false;
        }
        return Value(avro_schema_union_branch(schema, static_cast<int>(last_index_)), depth + 1);
      case AVRO_RECORD:
        for (size_t i = 0; i < avro_schema_record_size(schema); ++i) {
          if (!Value(avro_schema_record_field_get_by_index(schema, static_cast<int>(i)),
                     depth + 1)) {
            return false;
          }
        }
        return true;
      case AVRO_ARRAY:
        return Items(avro_schema_array_items(schema), /*has_keys=*/false, depth);
      case AVRO_MAP:
        return Items(avro_schema_map_values(schema), /*has_keys=*/true, depth);
      case AVRO_LINK:
        return Value(avro_schema_link_target(schema), depth + 1);
    }
    return Fail("unknown Avro type");
  }

  // Array and map blocks: a count (negative: followed by the block's byte size), items, until 0.
  bool Items(avro_schema_t item_schema, bool has_keys, int depth) {
    const uint64_t min_item_bytes = MinEncodedBytes(item_schema, depth + 1) + (has_keys ? 1 : 0);
    int64_t zero_width_items = 0;
    for (;;) {
      int64_t count = 0;
      if (!Long(&count)) return false;
      if (count == 0) return true;
      if (count < 0) {
        if (count == std::numeric_limits<int64_t>::min()) {
          return Fail("array block count overflows");
        }
        count = -count;
        int64_t block_bytes = 0;
        if (!Long(&block_bytes)) return false;
        if (block_bytes < 0 || static_cast<uint64_t>(block_bytes) > cursor_.remaining()) {
          return Fail(fmt::format("array block size {} is outside the {} bytes left", block_bytes,
                                  cursor_.remaining()));
        }
      }
      const bool fits = min_item_bytes == 0
                            ? (zero_width_items += count) <= kMaxZeroWidthItems
                            : static_cast<uint64_t>(count) <= cursor_.remaining() / min_item_bytes;
      if (!fits) return Fail(fmt::format("{} array items cannot fit the bytes left", count));
      for (int64_t i = 0; i < count; ++i) {
        if (has_keys && !Length("map key")) return false;
        if (!Value(item_schema, depth + 1)) return false;
      }
    }
  }

  ByteCursor cursor_;
  std::string problem_;
  int64_t last_index_ = 0;
};

// ----- header ------------------------------------------------------------------------------------

std::string EncodeHeader(const std::vector<std::pair<std::string, std::string>>& metadata,
                         const SyncMarker& sync_marker) {
  std::string out(kMagic);
  AppendLong(out, static_cast<int64_t>(metadata.size()));
  for (const auto& [key, value] : metadata) {
    AppendBytes(out, key);
    AppendBytes(out, value);
  }
  AppendLong(out, 0);
  out.append(reinterpret_cast<const char*>(sync_marker.data()), sync_marker.size());
  return out;
}

// The header's metadata map: blocks of (key, value) pairs, like any Avro map<bytes>. Empty on
// success, else the problem.
std::string ReadMetadataMap(ByteCursor& cursor, std::map<std::string, std::string>* metadata) {
  for (;;) {
    int64_t count = 0;
    if (!cursor.ReadLong(&count)) return "its metadata map is cut short";
    if (count == 0) return {};
    if (count < 0) {
      int64_t block_bytes = 0;
      if (count == std::numeric_limits<int64_t>::min() || !cursor.ReadLong(&block_bytes)) {
        return "its metadata map has a damaged block count";
      }
      count = -count;
    }
    if (static_cast<uint64_t>(count) > cursor.remaining() / 2) {
      return fmt::format("its metadata map claims {} entries, more than the file holds", count);
    }
    for (int64_t i = 0; i < count; ++i) {
      std::string_view key;
      std::string_view value;
      int64_t key_bytes = -1;
      int64_t value_bytes = -1;
      if (!cursor.ReadLong(&key_bytes) || key_bytes < 0 || !cursor.ReadBytes(key_bytes, &key) ||
          !cursor.ReadLong(&value_bytes) || value_bytes < 0 ||
          !cursor.ReadBytes(value_bytes, &value)) {
        return "its metadata map is cut short";
      }
      if (!metadata->emplace(key, value).second) {
        return fmt::format("its metadata has the key '{}' twice", key);
      }
    }
  }
}

SyncMarker RandomSyncMarker() {
  std::random_device random;
  SyncMarker marker;
  for (size_t i = 0; i < marker.size(); i += 4) {
    const uint32_t word = random();
    std::memcpy(marker.data() + i, &word, 4);
  }
  return marker;
}

// ----- files -------------------------------------------------------------------------------------

}  // namespace

// ----- AvroSchema, AvroValue ---------------------------------------------------------------------

std::string AvroError(int rc) {
  const char* message = avro_strerror();
  return fmt::format("Avro C: {}",
                     message != nullptr && message[0] != '\0' ? message : std::strerror(rc));
}

Result<AvroSchema> AvroSchema::FromJson(std::string_view json, std::string_view what) {
  avro_schema_t schema = nullptr;
  const int rc = avro_schema_from_json_length(json.data(), json.size(), &schema);
  if (rc != 0 || schema == nullptr) {
    return Status::InvalidArgument(fmt::format("{} does not parse: {}", what, AvroError(rc)));
  }
  AvroSchema result;
  result.schema_.reset(schema, [](avro_obj_t* s) { avro_schema_decref(s); });
  avro_value_iface_t* value_class = avro_generic_class_from_schema(schema);
  if (value_class == nullptr) {
    return Status::InvalidArgument(
        fmt::format("{} has no Avro C value class: {}", what, AvroError(0)));
  }
  result.value_class_.reset(value_class, [](avro_value_iface_t* c) { avro_value_iface_decref(c); });
  return result;
}

Result<AvroValue> AvroValue::New(const AvroSchema& schema) {
  avro_value_t value{nullptr, nullptr};
  const int rc = avro_generic_value_new(schema.value_class(), &value);
  if (rc != 0) return Status::Internal("cannot create an Avro value: " + AvroError(rc));
  return AvroValue(schema, value);
}

AvroValue::~AvroValue() {
  if (value_.self != nullptr) avro_value_decref(&value_);
}

// ----- ContainerWriter ---------------------------------------------------------------------------

ContainerWriter::ContainerWriter(AvroSchema schema, AvroValue record, avro_writer_t memory_writer,
                                 AvroWriteOptions options)
    : schema_(std::move(schema)),
      record_(std::move(record)),
      memory_writer_(memory_writer),
      options_(options),
      sync_marker_(RandomSyncMarker()) {}

ContainerWriter::~ContainerWriter() { avro_writer_free(memory_writer_); }

Result<std::unique_ptr<ContainerWriter>> ContainerWriter::Create(
    std::string schema_json, const std::vector<std::pair<std::string, std::string>>& metadata,
    const AvroWriteOptions& options) {
  auto schema = AvroSchema::FromJson(schema_json, "the Avro schema being written");
  if (!schema.ok()) return Status::Internal(schema.status().message());  // our own schema: a bug
  SKIPPR_ASSIGN_OR_RETURN(AvroValue record, AvroValue::New(*schema));
  avro_writer_t memory_writer = avro_writer_memory(nullptr, 0);
  if (memory_writer == nullptr) return Status::Internal("cannot create an Avro C memory writer");
  std::unique_ptr<ContainerWriter> writer(
      new ContainerWriter(std::move(schema).value(), std::move(record), memory_writer, options));

  std::vector<std::pair<std::string, std::string>> header = {
      {"avro.schema", std::move(schema_json)},
      {"avro.codec", options.codec == AvroCodec::kDeflate ? "deflate" : "null"}};
  header.insert(header.end(), metadata.begin(), metadata.end());
  writer->file_bytes_ = EncodeHeader(header, writer->sync_marker_);
  return writer;
}

Status ContainerWriter::Append() {
  size_t record_bytes = 0;
  int rc = avro_value_sizeof(record_.get(), &record_bytes);
  if (rc != 0) return Status::Internal("cannot size an Avro record: " + AvroError(rc));
  const size_t start = pending_records_.size();
  pending_records_.resize(start + record_bytes);
  avro_writer_memory_set_dest(memory_writer_, pending_records_.data() + start,
                              static_cast<int64_t>(record_bytes));
  rc = avro_value_write(memory_writer_, record_.get());
  if (rc != 0) return Status::Internal("cannot encode an Avro record: " + AvroError(rc));
  SKIPPR_CHECK(static_cast<size_t>(avro_writer_tell(memory_writer_)) == record_bytes);
  ++pending_record_count_;
  rc = avro_value_reset(record_.get());
  if (rc != 0) return Status::Internal("cannot reset an Avro record: " + AvroError(rc));
  // Never past half the reader's limit, so every block written here can be read back.
  if (pending_records_.size() >= std::min(options_.block_target_bytes, kMaxBlockBytes / 2)) {
    return FlushBlock();
  }
  return Status::OK();
}

Status ContainerWriter::FlushBlock() {
  if (pending_record_count_ == 0) return Status::OK();
  std::string compressed;
  if (options_.codec == AvroCodec::kDeflate) {
    SKIPPR_ASSIGN_OR_RETURN(compressed, Deflate(pending_records_));
  }
  const std::string& payload =
      options_.codec == AvroCodec::kDeflate ? compressed : pending_records_;
  AppendLong(file_bytes_, pending_record_count_);
  AppendLong(file_bytes_, static_cast<int64_t>(payload.size()));
  file_bytes_.append(payload);
  file_bytes_.append(reinterpret_cast<const char*>(sync_marker_.data()), sync_marker_.size());
  pending_records_.clear();
  pending_record_count_ = 0;
  return Status::OK();
}

Result<std::string> ContainerWriter::Finish() {
  SKIPPR_RETURN_IF_ERROR(FlushBlock());
  return std::move(file_bytes_);
}

// ----- ContainerReader ---------------------------------------------------------------------------

ContainerReader::ContainerReader(std::string_view bytes, std::string file_label, AvroSchema schema,
                                 std::map<std::string, std::string> metadata, AvroCodec codec,
                                 SyncMarker sync_marker, size_t first_block_offset)
    : bytes_(bytes),
      file_label_(std::move(file_label)),
      schema_(std::move(schema)),
      metadata_(std::move(metadata)),
      codec_(codec),
      sync_marker_(sync_marker),
      first_block_offset_(first_block_offset) {}

Result<std::unique_ptr<ContainerReader>> ContainerReader::Open(std::string_view bytes,
                                                               std::string file_label) {
  const auto corrupt = [&](std::string_view problem) {
    return Status::Corruption(fmt::format(
        "'{}' is not a readable Avro file: {} (the file is damaged, cut short or not an Avro "
        "object container file)",
        file_label, problem));
  };
  if (bytes.substr(0, kMagic.size()) != kMagic) return corrupt("it does not start with 'Obj' 0x01");
  ByteCursor cursor(bytes, kMagic.size());
  std::map<std::string, std::string> metadata;
  if (std::string problem = ReadMetadataMap(cursor, &metadata); !problem.empty()) {
    return corrupt(problem);
  }
  std::string_view marker_bytes;
  if (!cursor.ReadBytes(kSyncMarkerBytes, &marker_bytes)) {
    return corrupt("its sync marker is cut short");
  }
  SyncMarker sync_marker;
  std::memcpy(sync_marker.data(), marker_bytes.data(), kSyncMarkerBytes);

  const auto schema_json = metadata.find("avro.schema");
  if (schema_json == metadata.end()) return corrupt("its header has no 'avro.schema'");
  auto schema = AvroSchema::FromJson(schema_json->second, "its 'avro.schema'");
  if (!schema.ok()) return corrupt(schema.status().message());

  AvroCodec codec = AvroCodec::kNull;
  if (const auto it = metadata.find("avro.codec"); it != metadata.end() && it->second != "null") {
    if (it->second != "deflate") {
      return Status::NotSupported(
          fmt::format("'{}' uses the Avro codec '{}'; skipprd reads 'null' and 'deflate'",
                      file_label, it->second));
    }
    codec = AvroCodec::kDeflate;
  }
  return std::unique_ptr<ContainerReader>(
      new ContainerReader(bytes, std::move(file_label), std::move(schema).value(),
                          std::move(metadata), codec, sync_marker, cursor.offset()));
}

Status ContainerReader::ForEachRecord(
    const std::function<Status(avro_value_t record, const RecordPosition& position)>& visit) {
  SKIPPR_ASSIGN_OR_RETURN(AvroValue value, AvroValue::New(schema_));
  std::unique_ptr<std::remove_pointer_t<avro_reader_t>, void (*)(avro_reader_t)> reader(
      avro_reader_memory(nullptr, 0), avro_reader_free);
  if (reader == nullptr) return Status::Internal("cannot create an Avro C memory reader");

  RecordPosition position;
  std::string inflated;
  for (size_t offset = first_block_offset_; offset < bytes_.size();) {
    position.block_offset = offset;
    const auto corrupt = [&](std::string_view problem) {
      return Status::Corruption(
          fmt::format("'{}': block {} at byte offset {} {}; the file is damaged or was cut short",
                      file_label_, position.block_index, offset, problem));
    };
    ByteCursor cursor(bytes_, offset);
    int64_t record_count = 0;
    int64_t block_bytes = 0;
    if (!cursor.ReadLong(&record_count) || !cursor.ReadLong(&block_bytes)) {
      return corrupt("has a header that is cut short");
    }
    if (record_count < 0 || block_bytes < 0 ||
        static_cast<uint64_t>(block_bytes) > kMaxBlockBytes) {
      return corrupt(fmt::format("claims {} records in {} bytes", record_count, block_bytes));
    }
    std::string_view block;
    std::string_view marker;
    if (!cursor.ReadBytes(block_bytes, &block) || !cursor.ReadBytes(kSyncMarkerBytes, &marker)) {
      return corrupt(fmt::format("needs {} bytes and its sync marker, but only {} bytes are left",
                                 block_bytes, cursor.remaining()));
    }
    if (std::memcmp(marker.data(), sync_marker_.data(), kSyncMarkerBytes) != 0) {
      return corrupt("ends with a sync marker that differs from the header's");
    }
    if (codec_ == AvroCodec::kDeflate) {
      if (std::string problem = Inflate(block, &inflated); !problem.empty()) {
        return corrupt(problem);
      }
      block = inflated;
    }
    if (std::string problem = EncodingChecker(block).CheckRecords(schema_.schema(), record_count);
        !problem.empty()) {
      return corrupt("does not hold valid records: " + problem);
    }
    avro_reader_memory_set_source(reader.get(), block.data(), static_cast<int64_t>(block.size()));
    for (int64_t i = 0; i < record_count; ++i, ++position.record_index) {
      const int rc = avro_value_read(reader.get(), value.get());
      if (rc != 0) return corrupt(fmt::format("record {}: {}", i, AvroError(rc)));
      Status status = visit(*value.get(), position);
      if (!status.ok()) {
        return Status(status.code(), fmt::format("'{}': block {} at byte offset {}, record {}: {}",
                                                 file_label_, position.block_index, offset,
                                                 position.record_index, status.message()));
      }
    }
    offset = cursor.offset();
    ++position.block_index;
  }
  return Status::OK();
}

// ----- files -------------------------------------------------------------------------------------

Result<std::string> ReadFileBytes(Env& env, const std::string& path, std::string_view what) {
  Result<std::string> bytes = ReadWholeFile(env, path);
  if (!bytes.ok()) {
    return Status(bytes.status().code(), fmt::format("{}: {}", what, bytes.status().message()));
  }
  return bytes;
}

Status WriteFileAtomically(Env& env, const std::string& path, std::string_view bytes,
                           std::string_view what) {
  Status status = skippr::WriteFileAtomically(env, path, bytes);
  if (status.ok()) return status;
  return Status(status.code(),
                fmt::format("writing {} '{}' failed: {}; the table is unchanged (check the disk, "
                            "then retry)",
                            what, path, status.message()));
}

}  // namespace skippr::iceberg::internal
