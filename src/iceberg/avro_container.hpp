// Internal to iceberg/: the Avro object container file format (Avro 1.11 specification, "Object
// Container Files") around records encoded and decoded by Avro C.
//
// The framing is written here rather than by avro_file_writer because Avro C drops schema
// attributes it does not know — Iceberg's field-id, element-id, key-id, value-id — from the schema
// it stores in the header, and Iceberg readers resolve columns by those ids. The schema JSON goes
// into the header byte for byte; Avro C parses it only to encode and decode the records.
#pragma once

#include <avro.h>

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.hpp"
#include "iceberg/manifest.hpp"

namespace skippr::iceberg::internal {

inline constexpr size_t kSyncMarkerBytes = 16;
using SyncMarker = std::array<uint8_t, kSyncMarkerBytes>;

// An Avro C schema and the generic value class built from it, shared by the values made from it.
class AvroSchema {
 public:
  // `what` names the schema in errors ("the Avro schema in the header of 'x.avro'").
  static Result<AvroSchema> FromJson(std::string_view json, std::string_view what);

  avro_schema_t schema() const { return schema_.get(); }
  avro_value_iface_t* value_class() const { return value_class_.get(); }

 private:
  std::shared_ptr<avro_obj_t> schema_;
  std::shared_ptr<avro_value_iface_t> value_class_;
};

// An owned generic value of one AvroSchema.
class AvroValue {
 public:
  static Result<AvroValue> New(const AvroSchema& schema);
  AvroValue(AvroValue&& other) noexcept : schema_(std::move(other.schema_)), value_(other.value_) {
    other.value_ = {nullptr, nullptr};
  }
  AvroValue& operator=(AvroValue&&) = delete;
  AvroValue(const AvroValue&) = delete;
  ~AvroValue();

  avro_value_t* get() { return &value_; }

 private:
  AvroValue(AvroSchema schema, avro_value_t value) : schema_(std::move(schema)), value_(value) {}
  AvroSchema schema_;  // keeps the value class alive for as long as the value
  avro_value_t value_;
};

// "Avro C: <avro_strerror()>" for an Avro C call that failed with `rc`.
std::string AvroError(int rc);

// Builds one container file in memory: Append() each record, then Finish().
class ContainerWriter {
 public:
  // `metadata` is written in the given order after `avro.schema` (= `schema_json`, verbatim) and
  // `avro.codec`.
  static Result<std::unique_ptr<ContainerWriter>> Create(
      std::string schema_json, const std::vector<std::pair<std::string, std::string>>& metadata,
      const AvroWriteOptions& options);
  ~ContainerWriter();

  // The record to fill before the next Append(); reset (arrays emptied) after each.
  avro_value_t* record() { return record_.get(); }
  // Encodes record() with Avro C; a full block is compressed and framed.
  Status Append();
  // The file: header, blocks, each followed by the sync marker.
  Result<std::string> Finish();

 private:
  ContainerWriter(AvroSchema schema, AvroValue record, avro_writer_t memory_writer,
                  AvroWriteOptions options);
  Status FlushBlock();

  AvroSchema schema_;
  AvroValue record_;
  avro_writer_t memory_writer_;  // Avro C's writer, pointed at the end of pending_records_
  AvroWriteOptions options_;
  SyncMarker sync_marker_{};
  std::string file_bytes_;       // the header and every block flushed so far
  std::string pending_records_;  // encoded records of the block being filled
  int64_t pending_record_count_ = 0;
};

// Where a record sits in its file, for error messages.
struct RecordPosition {
  uint64_t block_offset = 0;  // byte offset of the block's record count
  int64_t block_index = 0;
  int64_t record_index = 0;  // within the file
};

// Reads one container file from memory. Every error is Corruption (NotSupported for an unknown
// codec) and names the file and, past the header, the block's byte offset.
class ContainerReader {
 public:
  // Parses and checks the header. `bytes` must outlive the reader.
  static Result<std::unique_ptr<ContainerReader>> Open(std::string_view bytes,
                                                       std::string file_label);

  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::string& file_label() const { return file_label_; }

  // Checks every block (framing, sync marker, codec, the records' encoding) and decodes its records
  // with Avro C, in file order, handing each to `visit`. A failure from `visit` is returned with
  // the file, block offset and record index prefixed to its message.
  Status ForEachRecord(
      const std::function<Status(avro_value_t record, const RecordPosition& position)>& visit);

 private:
  ContainerReader(std::string_view bytes, std::string file_label, AvroSchema schema,
                  std::map<std::string, std::string> metadata, AvroCodec codec,
                  SyncMarker sync_marker, size_t first_block_offset);

  std::string_view bytes_;
  std::string file_label_;
  AvroSchema schema_;
  std::map<std::string, std::string> metadata_;
  AvroCodec codec_;
  SyncMarker sync_marker_;
  size_t first_block_offset_;
};

// The whole file; NotFound when it does not exist, IOError otherwise. `what` describes the file.
Result<std::string> ReadFileBytes(Env& env, const std::string& path, std::string_view what);

// Writes `bytes` to a temporary file beside `path`, fsyncs it, renames it over `path` and fsyncs
// the directory.
Status WriteFileAtomically(Env& env, const std::string& path, std::string_view bytes,
                           std::string_view what);

}  // namespace skippr::iceberg::internal
