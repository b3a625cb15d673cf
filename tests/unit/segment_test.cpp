// wal/segment: the WAL segment file format (docs/formats/wal.md) — round trips of every type, CDC
// sidecars and empty segments; the documented byte positions; every single-byte flip and every
// truncation detected; files on disk; a 100,000-row batch; the WAL writing them (direct I/O).
#include "wal/segment.hpp"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <lmdb.h>
#include <lz4frame.h>
#include <xxhash.h>
#include <zstd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <string>
#include <vector>

#include "core/batch.hpp"
#include "core/types.hpp"
#include "core/value.hpp"
#include "store/store.hpp"
#include "support/byte_fields.hpp"
#include "support/status_matchers.hpp"
#include "support/temp_dir.hpp"
#include "wal/byte_planes.hpp"
#include "wal/frame_codec.hpp"
#include "wal/wal.hpp"

namespace skippr {

// gtest prints these when an expectation fails (found by ADL, so outside the anonymous namespace).
void PrintTo(const Value& value, std::ostream* out) { *out << value.ToJson(); }
void PrintTo(const LogicalType& type, std::ostream* out) { *out << type.ToString(); }

namespace wal {
namespace {

using ::testing::HasSubstr;

// ----- building batches -------------------------------------------------------------------------

Field MakeField(int32_t id, std::string name, LogicalType type, bool nullable = true) {
  return Field{id, std::move(name), std::move(type), nullable};
}

LogicalType Decimal(int precision, int scale) {
  return LogicalType::Decimal(precision, scale).value();
}

Batch MakeBatch(std::string namespace_name, int32_t schema_id, std::vector<Field> fields,
                const std::vector<Value>& rows) {
  Batch batch;
  batch.namespace_name = std::move(namespace_name);
  batch.schema_id = schema_id;
  batch.fields = std::move(fields);
  for (const Field& field : batch.fields) batch.columns.emplace_back(field.type);
  for (const Value& row : rows) {
    for (size_t i = 0; i < batch.fields.size(); ++i) {
      const Value* value = row.Find(batch.fields[i].name);
      batch.columns[i].Append(value ? *value : Value::Null());
    }
  }
  batch.num_rows = static_cast<int64_t>(rows.size());
  std::string reason;
  EXPECT_TRUE(batch.Validate(&reason)) << reason;
  return batch;
}

Value Obj(ValueObject fields) { return Value::Object(std::move(fields)); }
Value Lst(ValueList items) { return Value::List(std::move(items)); }
Value Str(std::string text) { return Value::String(std::move(text)); }

// Every logical type, nested ones two levels deep, with nulls at every level.
std::vector<Field> AllTypeFields() {
  return {
      MakeField(1, "flag", LogicalType::Boolean()),
      MakeField(2, "small", LogicalType::Int(), false),
      MakeField(3, "big", LogicalType::Long()),
      MakeField(4, "ratio", LogicalType::Float()),
      MakeField(5, "amount", LogicalType::Double()),
      MakeField(6, "price", Decimal(10, 2)),
      MakeField(7, "total", Decimal(38, 4)),
      MakeField(8, "day", LogicalType::Date()),
      MakeField(9, "clock", LogicalType::Time()),
      MakeField(10, "at", LogicalType::Timestamp()),
      MakeField(11, "at_utc", LogicalType::TimestampTz()),
      MakeField(12, "name", LogicalType::String()),
      MakeField(13, "blob", LogicalType::Binary()),
      MakeField(14, "uid", LogicalType::Uuid()),
      MakeField(15, "station",
                LogicalType::Struct({MakeField(16, "id", LogicalType::Int()),
                                     MakeField(17, "label", LogicalType::String(), false)})),
      MakeField(18, "stops",
                LogicalType::List(MakeField(
                    19, "element",
                    LogicalType::Struct({MakeField(20, "seq", LogicalType::Long()),
                                         MakeField(21, "note", LogicalType::String())})))),
      MakeField(22, "tags",
                LogicalType::Map(MakeField(23, "key", LogicalType::String()),
                                 MakeField(24, "value", LogicalType::Long()))),
      MakeField(
          25, "trip",
          LogicalType::Struct(
              {MakeField(26, "leg",
                         LogicalType::Struct(
                             {MakeField(27, "speeds",
                                        LogicalType::List(
                                            MakeField(28, "element", LogicalType::Double()))),
                              MakeField(29, "mode", LogicalType::String())})),
               MakeField(30, "legs", LogicalType::Long())})),
  };
}

std::string UuidBytes(int row) {
  std::string bytes(16, '\0');
  for (int i = 0; i < 16; ++i) bytes[i] = static_cast<char>(row * 31 + i * 7);
  return bytes;
}

Value AllTypesRow(int row) {
  const bool is_null = row % 5 == 4;  // every nullable field is null in these rows
  const auto maybe = [&](Value value) { return is_null ? Value::Null() : std::move(value); };
  ValueList stops;
  for (int s = 0; s < row % 4; ++s) {
    stops.push_back(s == 2 ? Value::Null()
                           : Obj({{"seq", Value::Int(row * 10 + s)},
                                  {"note", s == 1 ? Value::Null() : Str("stop " + std::to_string(s))}}));
  }
  ValueObject tags;
  for (int t = 0; t < row % 3; ++t) {
    tags.emplace_back("tag" + std::to_string(t), t == 1 ? Value::Null() : Value::Int(row * t));
  }
  ValueList speeds;
  for (int s = 0; s < row % 3; ++s) speeds.push_back(Value::Double(row * 0.5 + s));
  return Obj({
      {"flag", maybe(Value::Bool(row % 2 == 0))},
      {"small", Value::Int(row - 20)},
      {"big", maybe(Value::Int(int64_t{1} << 40 | row))},
      {"ratio", maybe(Value::Double(row / 8.0))},
      {"amount", maybe(Value::Double(-1.25 * row))},
      {"price", maybe(Value::Decimal(12345 + row, 10, 2))},
      {"total", maybe(Value::Decimal(-987654321012 - row, 38, 4))},
      {"day", maybe(Value::Date(19000 + row))},
      {"clock", maybe(Value::Int(int64_t{3600} * 1'000'000 + row))},
      {"at", maybe(Value::Timestamp(1'704'067'200'000'000 + row))},
      {"at_utc", maybe(Value::TimestampTz(1'704'067'200'000'000 - row))},
      {"name", maybe(Str(std::string(row % 7, 'a' + row % 26) + "é"))},
      {"blob", maybe(Value::Binary(std::string("\0\x01\xff", 3) + std::to_string(row)))},
      {"uid", maybe(Value::Binary(UuidBytes(row)))},
      {"station", row % 3 == 0 ? Value::Null()
                               : Obj({{"id", row % 6 == 1 ? Value::Null() : Value::Int(100 + row)},
                                      {"label", Str("station " + std::to_string(row))}})},
      {"stops", maybe(Lst(std::move(stops)))},
      {"tags", maybe(Obj(std::move(tags)))},
      {"trip", maybe(Obj({{"leg", row % 4 == 1 ? Value::Null()
                                               : Obj({{"speeds", Lst(std::move(speeds))},
                                                      {"mode", Str(row % 2 ? "bike" : "foot")}})},
                          {"legs", Value::Int(row % 4)}}))},
  });
}

Batch AllTypesBatch(std::string namespace_name, int32_t schema_id, int rows) {
  std::vector<Value> values;
  for (int row = 0; row < rows; ++row) values.push_back(AllTypesRow(row));
  Batch batch = MakeBatch(std::move(namespace_name), schema_id, AllTypeFields(), values);
  // decimal(38, 4) holds 128-bit values; Value only reaches 64 bits, so set a high half directly.
  Column& total = batch.columns[6];
  const int64_t high = 0x0123456789abcdefLL;
  std::memcpy(total.fixed.data() + 1 * 16 + 8, &high, 8);
  return batch;
}

Batch UsersBatch(int rows) {
  std::vector<Value> values;
  for (int row = 0; row < rows; ++row) {
    values.push_back(Obj({{"user_id", Value::Int(row)}, {"email", Str("u" + std::to_string(row))}}));
  }
  return MakeBatch("users", 1,
                   {MakeField(1, "user_id", LogicalType::Long(), false),
                    MakeField(2, "email", LogicalType::String())},
                   values);
}

Batch CdcBatch(int rows) {
  std::vector<Value> values;
  for (int row = 0; row < rows; ++row) {
    values.push_back(Obj({{"order_id", Value::Int(1000 + row)},
                          {"status", row % 4 == 3 ? Value::Null() : Str("paid")}}));
  }
  Batch batch = MakeBatch("orders", 7,
                          {MakeField(1, "order_id", LogicalType::Long(), false),
                           MakeField(2, "status", LogicalType::String())},
                          values);
  CdcSidecar cdc;
  for (int row = 0; row < rows; ++row) {
    cdc.mutations.push_back(static_cast<Mutation>(row % 4));
    cdc.event_ids.push_back("lsn/" + std::to_string(row));
    cdc.order_tokens.push_back(std::string("\0\0\x01", 3) + static_cast<char>(row));
    cdc.business_keys.push_back(row % 4 == 0 ? std::string() : "order:" + std::to_string(1000 + row));
  }
  batch.cdc = std::move(cdc);
  std::string reason;
  EXPECT_TRUE(batch.Validate(&reason)) << reason;
  return batch;
}

constexpr const char* kInstanceId = "00112233445566778899aabbccddeeff";

SegmentHeader MakeHeader() {
  SegmentHeader header;
  header.instance_id = kInstanceId;
  header.pipeline = "rides-eu";
  header.segment_id = 42;
  header.sequence = 0x0102030405060708ULL;
  header.created_unix_micros = -17;  // before the epoch: signed on the wire
  header.source_positions = R"({"partitions":[{"id":"/data/a.jsonl","byte_offset":1234}]})";
  return header;
}

// ----- comparing --------------------------------------------------------------------------------

void ExpectSameFields(const std::vector<Field>& got, const std::vector<Field>& want,
                      const std::string& path) {
  ASSERT_EQ(got.size(), want.size()) << path;
  for (size_t i = 0; i < want.size(); ++i) {
    const std::string where = path + "/" + want[i].name;
    EXPECT_EQ(got[i].id, want[i].id) << where;
    EXPECT_EQ(got[i].name, want[i].name) << where;
    EXPECT_EQ(got[i].nullable, want[i].nullable) << where;
    EXPECT_EQ(got[i].type.id(), want[i].type.id()) << where;
    EXPECT_EQ(got[i].type.decimal_precision(), want[i].type.decimal_precision()) << where;
    EXPECT_EQ(got[i].type.decimal_scale(), want[i].type.decimal_scale()) << where;
    ExpectSameFields(got[i].type.children(), want[i].type.children(), where);
  }
  EXPECT_EQ(got, want) << path;
}

void ExpectSameBuffers(const Column& got, const Column& want, const std::string& path) {
  EXPECT_EQ(got.type, want.type) << path;
  EXPECT_EQ(got.length, want.length) << path;
  EXPECT_EQ(got.validity, want.validity) << path;
  EXPECT_EQ(got.fixed, want.fixed) << path;
  EXPECT_EQ(got.offsets, want.offsets) << path;
  EXPECT_EQ(got.bytes, want.bytes) << path;
  ASSERT_EQ(got.children.size(), want.children.size()) << path;
  for (size_t i = 0; i < want.children.size(); ++i) {
    ExpectSameBuffers(got.children[i], want.children[i], path + "/" + std::to_string(i));
  }
}

void ExpectSameBatch(const Batch& got, const Batch& want) {
  EXPECT_EQ(got.namespace_name, want.namespace_name);
  EXPECT_EQ(got.schema_id, want.schema_id);
  ASSERT_EQ(got.num_rows, want.num_rows);
  ExpectSameFields(got.fields, want.fields, want.namespace_name);
  ASSERT_EQ(got.columns.size(), want.columns.size());
  for (size_t i = 0; i < want.columns.size(); ++i) {
    ExpectSameBuffers(got.columns[i], want.columns[i], want.fields[i].name);
  }
  for (int64_t row = 0; row < want.num_rows; ++row) {
    EXPECT_EQ(got.RowAt(row), want.RowAt(row)) << want.namespace_name << " row " << row;
  }
  ASSERT_EQ(got.cdc.has_value(), want.cdc.has_value());
  if (want.cdc) {
    EXPECT_EQ(got.cdc->mutations, want.cdc->mutations);
    EXPECT_EQ(got.cdc->event_ids, want.cdc->event_ids);
    EXPECT_EQ(got.cdc->order_tokens, want.cdc->order_tokens);
    EXPECT_EQ(got.cdc->business_keys, want.cdc->business_keys);
  }
}

// The segment bytes as a plain string, for tests that damage copies of them.
std::string Encode(const SegmentHeader& header, const std::vector<Batch>& batches) {
  const SegmentBytes bytes = EncodeSegment(header, batches);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(bytes.data()) % kDirectIoAlignmentBytes, 0u)
      << "the WAL writes segment bytes with O_DIRECT straight from their buffer";
  return std::string(bytes.begin(), bytes.end());
}

SegmentReader ReaderOrDie(std::string bytes) {
  Result<SegmentReader> reader = SegmentReader::FromBytes(std::move(bytes), "test.seg");
  EXPECT_TRUE(reader.ok()) << reader.status().ToString();
  return std::move(reader).value();
}

using ::skippr::testing::LoadAt;
using ::skippr::testing::StoreAt;

// Recomputes the footer checksum (as the writer would have), so damage gets past Open and reaches
// the slice checks.
void ResealFooter(std::string& bytes) {
  StoreAt<uint64_t>(bytes, bytes.size() - 20, XXH3_64bits(bytes.data(), bytes.size() - 20));
}

// The zstd frames of a version 3 slice: one per top-level column, then the CDC sidecar's.
size_t FrameCount(const Batch& batch) { return batch.fields.size() + (batch.cdc ? 1 : 0); }

// Recomputes every checksum a version 3 slice holds (each frame's, then the header's) and the
// footer's, as the writer would have over damaged bytes, so the damage reaches the decoder's
// structural checks. `frame_counts[i]`: slice i's frames. Lengths the damage made impossible are
// left as they are (the decoder refuses them).
void ResealSlices(std::string& bytes, const std::vector<SliceInfo>& slices,
                  const std::vector<size_t>& frame_counts) {
  for (size_t i = 0; i < slices.size(); ++i) {
    const size_t at = slices[i].payload_offset;
    const uint64_t header_bytes = LoadAt<uint32_t>(bytes, at);
    const uint64_t directory_bytes = 24 * frame_counts[i] + 8;
    if (header_bytes < directory_bytes || header_bytes > slices[i].payload_bytes) continue;
    const size_t directory = at + header_bytes - directory_bytes;
    uint64_t frame_at = at + header_bytes;
    for (size_t frame = 0; frame < frame_counts[i]; ++frame) {
      const uint64_t frame_bytes = LoadAt<uint64_t>(bytes, directory + 24 * frame);
      if (frame_bytes > at + slices[i].payload_bytes - frame_at) break;
      StoreAt<uint64_t>(bytes, directory + 24 * frame + 16,
                        XXH3_64bits(bytes.data() + frame_at, frame_bytes));
      frame_at += frame_bytes;
    }
    StoreAt<uint64_t>(bytes, at + header_bytes - 8, XXH3_64bits(bytes.data() + at, header_bytes - 8));
  }
  ResealFooter(bytes);
}

// The content of the compressed frame `frame` (in `codec`'s format), or why it does not decode.
std::string FrameContent(FrameCodec codec, std::string_view frame) {
  const std::unique_ptr<FrameReader> reader = NewFrameReader(codec, frame);
  const std::optional<uint64_t> content_bytes = reader->Open();
  if (!content_bytes) return "undecodable: " + reader->error();
  std::string content(*content_bytes, '\0');
  if (!reader->Read(content.data(), content.size()) || !reader->Finish()) {
    return "undecodable: " + reader->error();
  }
  return content;
}

// A one-slice segment of the current version with each of its `frame_count` frames replaced by
// `rewrite` of the frame's content, and every length and checksum the replacement changes
// resealed: the file a writer of such frames would have written.
template <typename Rewrite>
std::string WithFramesRewritten(const std::string& bytes, size_t frame_count, Rewrite rewrite) {
  const SegmentReader reader = ReaderOrDie(bytes);
  EXPECT_EQ(reader.slices().size(), 1u);
  const SliceInfo slice = reader.slices()[0];
  const uint64_t at = slice.payload_offset;
  const uint64_t header_bytes = LoadAt<uint32_t>(bytes, at);
  const size_t directory = header_bytes - 8 - 24 * frame_count;  // in the record
  std::string record = bytes.substr(at, header_bytes);
  uint64_t frame_at = at + header_bytes;
  for (size_t frame = 0; frame < frame_count; ++frame) {
    const uint64_t frame_bytes = LoadAt<uint64_t>(bytes, at + directory + 24 * frame);
    const std::string replacement = rewrite(
        FrameContent(FrameCodec::kLz4, std::string_view(bytes).substr(frame_at, frame_bytes)));
    StoreAt<uint64_t>(record, directory + 24 * frame, replacement.size());
    record += replacement;
    frame_at += frame_bytes;
  }
  StoreAt<uint64_t>(record, 25, record.size() - header_bytes);       // compressed_bytes
  std::string footer = bytes.substr(at + slice.payload_bytes);
  StoreAt<uint64_t>(footer, 4 + 8, record.size());                    // the index entry's length
  StoreAt<uint64_t>(footer, footer.size() - 28, at + record.size());  // footer_offset
  std::string rewritten = bytes.substr(0, at) + record + footer;
  SliceInfo resized = slice;
  resized.payload_bytes = record.size();
  ResealSlices(rewritten, {resized}, {frame_count});
  return rewritten;
}

std::string ZstdFrame(const std::string& content) {
  std::string frame(ZSTD_compressBound(content.size()), '\0');
  frame.resize(ZSTD_compress(frame.data(), frame.size(), content.data(), content.size(), 1));
  return frame;
}

// A one-slice segment of the current version relabelled as `version` (at most 5), its frames
// recompressed as the zstd frames versions 1 to 5 hold. The content stays as written (byte planes
// included), so this builds files for the checks that depend on the version, not a faithful old
// file.
std::string AsZstdVersion(const std::string& bytes, uint32_t version, size_t frame_count) {
  std::string old = WithFramesRewritten(bytes, frame_count, ZstdFrame);
  StoreAt<uint32_t>(old, 8, version);
  ResealFooter(old);
  return old;
}

using skippr::testing::TempDir;

void WriteFile(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

// ----- round trips ------------------------------------------------------------------------------

TEST(SegmentRoundTrip, EveryTypeSeveralNamespacesAndCdcDecodeToTheOriginalBatches) {
  std::vector<Batch> batches;
  batches.push_back(AllTypesBatch("rides", 3, 40));
  batches.push_back(UsersBatch(5));
  batches.push_back(CdcBatch(9));
  batches.push_back(AllTypesBatch("rides", 4, 13));
  batches.push_back(UsersBatch(0));  // a slice with fields but no rows
  const SegmentHeader header = MakeHeader();
  const std::string bytes = Encode(header, batches);

  SegmentReader reader = ReaderOrDie(bytes);
  EXPECT_EQ(reader.header().format_version, kSegmentFormatVersion);
  EXPECT_EQ(reader.header().instance_id, kInstanceId);
  EXPECT_EQ(reader.header().pipeline, header.pipeline);
  EXPECT_EQ(reader.header().segment_id, header.segment_id);
  EXPECT_EQ(reader.header().sequence, header.sequence);
  EXPECT_EQ(reader.header().created_unix_micros, header.created_unix_micros);
  EXPECT_EQ(reader.header().source_positions, header.source_positions);
  EXPECT_EQ(reader.file_bytes(), bytes.size());
  EXPECT_EQ(reader.checksum(), XXH3_64bits(bytes.data(), bytes.size() - 20));

  ASSERT_EQ(reader.slices().size(), batches.size());
  uint64_t expected_offset = 64 + header.pipeline.size() + header.source_positions.size();
  for (uint32_t ordinal = 0; ordinal < batches.size(); ++ordinal) {
    SCOPED_TRACE("slice " + std::to_string(ordinal));
    const SliceInfo& info = reader.slices()[ordinal];
    const Batch& want = batches[ordinal];
    EXPECT_EQ(info.ordinal, ordinal);
    EXPECT_EQ(info.namespace_name, want.namespace_name);
    EXPECT_EQ(info.schema_id, want.schema_id);
    EXPECT_EQ(info.row_count, want.num_rows);
    EXPECT_EQ(info.is_cdc, want.cdc.has_value());
    EXPECT_EQ(info.payload_offset, expected_offset);
    EXPECT_GT(info.payload_bytes, 0u);
    expected_offset += info.payload_bytes;

    Result<Batch> got = reader.ReadSlice(ordinal);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ExpectSameBatch(*got, want);
  }
  // The 128-bit decimal's high half survived (Value cannot show it).
  Result<Batch> rides = reader.ReadSlice(0);
  ASSERT_TRUE(rides.ok());
  EXPECT_EQ(rides->columns[6].Decimal128At(1).second, 0x0123456789abcdefLL);
  EXPECT_EQ(rides->columns[6].Decimal128At(2).second, -1);  // a negative 64-bit value, sign-extended

  EXPECT_EQ(reader.ReadSlice(static_cast<uint32_t>(batches.size())).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(SegmentRoundTrip, UncompressedSizesAreTheColumnBuffers) {
  const Batch users = UsersBatch(3);
  // user_id: validity 1 + fixed 24; email: validity 1 + offsets 32 + bytes "u0u1u2" 6.
  SegmentReader reader = ReaderOrDie(Encode(MakeHeader(), {users}));
  ASSERT_EQ(reader.slices().size(), 1u);
  EXPECT_EQ(reader.slices()[0].uncompressed_bytes, 1u + 24u + 1u + 32u + 6u);
}

TEST(SegmentRoundTrip, ZeroSlicesRoundTrip) {
  const SegmentHeader header = MakeHeader();
  const std::string bytes = Encode(header, {});
  EXPECT_EQ(bytes.size(), 64 + header.pipeline.size() + header.source_positions.size() + 32);
  SegmentReader reader = ReaderOrDie(bytes);
  EXPECT_TRUE(reader.slices().empty());
  EXPECT_EQ(reader.header().segment_id, 42u);
  EXPECT_EQ(reader.header().source_positions, header.source_positions);
  EXPECT_EQ(reader.ReadSlice(0).status().code(), StatusCode::kInvalidArgument);

  SegmentHeader smallest;
  smallest.instance_id = kInstanceId;
  const std::string minimal = Encode(smallest, {});
  EXPECT_EQ(minimal.size(), 96u);
  EXPECT_TRUE(SegmentReader::FromBytes(minimal, "minimal").ok());
}

TEST(SegmentRoundTrip, ABatchWithoutFieldsOrRows) {
  Batch empty;
  empty.namespace_name = "";
  SegmentReader reader = ReaderOrDie(Encode(MakeHeader(), {empty}));
  Result<Batch> got = reader.ReadSlice(0);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->num_rows, 0);
  EXPECT_TRUE(got->fields.empty());
  EXPECT_EQ(reader.slices()[0].uncompressed_bytes, 0u);
}

TEST(SegmentRoundTrip, HundredThousandRows) {
  constexpr int kRows = 100'000;
  Batch batch;
  batch.namespace_name = "events";
  batch.schema_id = 2;
  batch.fields = {MakeField(1, "id", LogicalType::Long(), false),
                  MakeField(2, "payload", LogicalType::String()),
                  MakeField(3, "score", LogicalType::Double())};
  for (const Field& field : batch.fields) batch.columns.emplace_back(field.type);
  for (int row = 0; row < kRows; ++row) {
    batch.columns[0].Append(Value::Int(int64_t{row} * 7919 % 1'000'003));
    batch.columns[1].Append(row % 97 == 0 ? Value::Null()
                                          : Str("event-" + std::to_string(row * 13) +
                                                std::string(row % 50, 'x')));
    batch.columns[2].Append(Value::Double(row * 0.001));
  }
  batch.num_rows = kRows;
  std::string reason;
  ASSERT_TRUE(batch.Validate(&reason)) << reason;

  SegmentReader reader = ReaderOrDie(Encode(MakeHeader(), {batch}));
  ASSERT_EQ(reader.slices().size(), 1u);
  EXPECT_EQ(reader.slices()[0].row_count, kRows);
  Result<Batch> got = reader.ReadSlice(0);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->num_rows, kRows);
  const auto column_checksum = [](const Column& column) {
    uint64_t hash = XXH3_64bits(column.bytes.data(), column.bytes.size());
    hash ^= XXH3_64bits(column.offsets.data(), column.offsets.size() * 8) * 31;
    return hash ^ XXH3_64bits(column.validity.data(), column.validity.size()) * 17;
  };
  EXPECT_EQ(column_checksum(got->columns[1]), column_checksum(batch.columns[1]));
  int64_t id_sum = 0, want_sum = 0;
  for (int64_t row = 0; row < kRows; ++row) {
    id_sum += got->columns[0].Int64At(row);
    want_sum += batch.columns[0].Int64At(row);
  }
  EXPECT_EQ(id_sum, want_sum);
  EXPECT_EQ(got->RowAt(kRows - 1), batch.RowAt(kRows - 1));
}

// ----- the documented bytes ---------------------------------------------------------------------

TEST(SegmentFormat, HeaderAndTailSitWhereTheDocumentSays) {
  const SegmentHeader header = MakeHeader();
  const std::string bytes = Encode(header, {UsersBatch(2), CdcBatch(3)});
  const size_t pipeline_bytes = header.pipeline.size();
  const size_t positions_bytes = header.source_positions.size();
  EXPECT_EQ(bytes.substr(0, 8), std::string("SKPRWAL\0", 8));
  EXPECT_EQ(LoadAt<uint32_t>(bytes, 8), kSegmentFormatVersion);
  EXPECT_EQ(LoadAt<uint32_t>(bytes, 12), 64 + pipeline_bytes + positions_bytes);
  EXPECT_EQ(LoadAt<uint64_t>(bytes, 16), header.segment_id);
  EXPECT_EQ(LoadAt<uint64_t>(bytes, 24), header.sequence);
  EXPECT_EQ(LoadAt<int64_t>(bytes, 32), header.created_unix_micros);
  EXPECT_EQ(bytes.substr(40, 16), std::string("\x00\x11\x22\x33\x44\x55\x66\x77\x88\x99\xaa\xbb"
                                              "\xcc\xdd\xee\xff", 16));  // the instance id
  EXPECT_EQ(LoadAt<uint32_t>(bytes, 56), pipeline_bytes);
  EXPECT_EQ(bytes.substr(60, pipeline_bytes), header.pipeline);
  EXPECT_EQ(LoadAt<uint32_t>(bytes, 60 + pipeline_bytes), positions_bytes);
  EXPECT_EQ(bytes.substr(64 + pipeline_bytes, positions_bytes), header.source_positions);

  const size_t size = bytes.size();
  EXPECT_EQ(bytes.substr(size - 8), "SKPRTAIL");
  const uint32_t footer_bytes = LoadAt<uint32_t>(bytes, size - 12);
  EXPECT_EQ(LoadAt<uint64_t>(bytes, size - 20), XXH3_64bits(bytes.data(), size - 20));
  const uint64_t footer_offset = LoadAt<uint64_t>(bytes, size - 28);
  EXPECT_EQ(footer_offset, size - footer_bytes);
  EXPECT_EQ(LoadAt<uint32_t>(bytes, footer_offset), 2u);  // slice_count

  // The first slice record: its header (ending in the frame directory and the header's checksum),
  // then one zstd frame per column.
  SegmentReader reader = ReaderOrDie(bytes);
  const SliceInfo& users = reader.slices()[0];
  const size_t at = users.payload_offset;
  EXPECT_EQ(LoadAt<uint64_t>(bytes, footer_offset + 4), at);  // index entry 0: record offset
  EXPECT_EQ(LoadAt<uint64_t>(bytes, footer_offset + 12), users.payload_bytes);
  EXPECT_EQ(bytes[at + 4], 0);                      // kind: append
  EXPECT_EQ(LoadAt<int32_t>(bytes, at + 5), 1);       // schema id
  EXPECT_EQ(LoadAt<int64_t>(bytes, at + 9), 2);       // rows
  EXPECT_EQ(LoadAt<uint64_t>(bytes, at + 17), users.uncompressed_bytes);
  const uint32_t slice_header_bytes = LoadAt<uint32_t>(bytes, at);
  EXPECT_EQ(LoadAt<uint64_t>(bytes, at + 25), users.payload_bytes - slice_header_bytes);
  EXPECT_EQ(LoadAt<uint32_t>(bytes, at + 33), 5u);
  EXPECT_EQ(bytes.substr(at + 37, 5), "users");
  EXPECT_EQ(LoadAt<uint32_t>(bytes, at + 42), 2u);    // field count
  EXPECT_EQ(LoadAt<int32_t>(bytes, at + 46), 1);      // field id
  EXPECT_EQ(bytes[at + 50], 3);                     // type code: long
  EXPECT_EQ(bytes[at + 51], 0);                     // flags: not nullable
  EXPECT_EQ(LoadAt<uint64_t>(bytes, at + slice_header_bytes - 8),
            XXH3_64bits(bytes.data() + at, slice_header_bytes - 8));  // the header checksum
  // The frame directory, two entries (user_id, email): compressed bytes, uncompressed bytes, and
  // the checksum of the compressed bytes. Each frame starts with the LZ4 frame magic 04 22 4d 18.
  const size_t directory = at + slice_header_bytes - 8 - 2 * 24;
  const uint64_t first_frame = LoadAt<uint64_t>(bytes, directory);
  const uint64_t second_frame = LoadAt<uint64_t>(bytes, directory + 24);
  EXPECT_EQ(LoadAt<uint64_t>(bytes, directory + 8), 1u + 2 * 8);  // validity, two longs
  EXPECT_EQ(LoadAt<uint64_t>(bytes, directory + 8) + LoadAt<uint64_t>(bytes, directory + 32),
            users.uncompressed_bytes);
  EXPECT_EQ(slice_header_bytes + first_frame + second_frame, users.payload_bytes);
  EXPECT_EQ(LoadAt<uint32_t>(bytes, at + slice_header_bytes), 0x184d2204u);
  EXPECT_EQ(LoadAt<uint64_t>(bytes, directory + 16),
            XXH3_64bits(bytes.data() + at + slice_header_bytes, first_frame));
  EXPECT_EQ(LoadAt<uint32_t>(bytes, at + slice_header_bytes + first_frame), 0x184d2204u);
  EXPECT_EQ(LoadAt<uint64_t>(bytes, directory + 40),
            XXH3_64bits(bytes.data() + at + slice_header_bytes + first_frame, second_frame));
  EXPECT_EQ(bytes[reader.slices()[1].payload_offset + 4], 1);  // kind: cdc
}

TEST(SegmentFormat, TheDocumentsExampleIsByteExact) {
  SegmentHeader header;
  header.instance_id = kInstanceId;
  header.pipeline = "p";
  header.segment_id = 1;
  header.sequence = 1;
  header.created_unix_micros = 0;
  header.source_positions = "{}";
  const unsigned char expected[] = {  // docs/formats/wal.md, "Example"
      0x53, 0x4b, 0x50, 0x52, 0x57, 0x41, 0x4c, 0x00, 0x06, 0x00, 0x00, 0x00, 0x43, 0x00, 0x00, 0x00,
      0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77,
      0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff, 0x01, 0x00, 0x00, 0x00, 0x70, 0x02, 0x00, 0x00,
      0x00, 0x7b, 0x7d, 0x00, 0x00, 0x00, 0x00, 0x43, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x48,
      0x86, 0xe3, 0x10, 0x7d, 0x93, 0xac, 0x93, 0x20, 0x00, 0x00, 0x00, 0x53, 0x4b, 0x50, 0x52, 0x54,
      0x41, 0x49, 0x4c};
  EXPECT_EQ(Encode(header, {}),
            std::string(reinterpret_cast<const char*>(expected), sizeof(expected)));
}

// The version 1 example (docs/formats/wal.md, "Changes"): segments written before instance ids
// stay readable, with no instance id.
const unsigned char kVersion1Example[] = {
    0x53, 0x4b, 0x50, 0x52, 0x57, 0x41, 0x4c, 0x00, 0x01, 0x00, 0x00, 0x00, 0x33, 0x00, 0x00, 0x00,
    0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x70, 0x02, 0x00, 0x00,
    0x00, 0x7b, 0x7d, 0x00, 0x00, 0x00, 0x00, 0x33, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x60,
    0x77, 0xf1, 0x2f, 0x3c, 0x78, 0x1e, 0xed, 0x20, 0x00, 0x00, 0x00, 0x53, 0x4b, 0x50, 0x52, 0x54,
    0x41, 0x49, 0x4c};

TEST(SegmentFormat, Version1SegmentsStayReadable) {
  const std::string bytes(reinterpret_cast<const char*>(kVersion1Example), sizeof(kVersion1Example));
  SegmentReader reader = ReaderOrDie(bytes);
  EXPECT_EQ(reader.header().format_version, 1u);
  EXPECT_EQ(reader.header().instance_id, "");
  EXPECT_EQ(reader.header().pipeline, "p");
  EXPECT_EQ(reader.header().segment_id, 1u);
  EXPECT_EQ(reader.header().source_positions, "{}");
  TempDir dir;
  const std::string path = dir.Sub("00000000000000000001.seg");
  WriteFile(path, bytes);
  EXPECT_TRUE(SegmentReader::CheckTail(path).ok());
  Result<SegmentHeader> header = SegmentReader::ReadHeader(path);
  ASSERT_TRUE(header.ok()) << header.status().ToString();
  EXPECT_EQ(header->format_version, 1u);
  EXPECT_EQ(header->instance_id, "");
  EXPECT_EQ(header->segment_id, 1u);
}

std::string SmallSegment();  // below, with the damage tests

// Recovery reads only the header of a file it finds uncommitted, to tell whose it is.
TEST(SegmentFormat, ReadHeaderReadsTheHeaderAndRefusesATornOne) {
  TempDir dir;
  const std::string path = dir.Sub("00000000000000000042.seg");
  const std::string bytes = SmallSegment();
  WriteFile(path, bytes);
  Result<SegmentHeader> header = SegmentReader::ReadHeader(path);
  ASSERT_TRUE(header.ok()) << header.status().ToString();
  EXPECT_EQ(header->format_version, kSegmentFormatVersion);
  EXPECT_EQ(header->instance_id, kInstanceId);
  EXPECT_EQ(header->segment_id, 42u);
  EXPECT_EQ(header->pipeline, "rides-eu");
  // The header alone is enough: a file torn after it still tells whose it is.
  const uint32_t header_bytes = LoadAt<uint32_t>(bytes, 12);
  WriteFile(path, bytes.substr(0, header_bytes));
  EXPECT_TRUE(SegmentReader::ReadHeader(path).ok());
  for (const size_t length : {size_t{0}, size_t{7}, size_t{15}, size_t{40}, size_t{header_bytes - 1}}) {
    WriteFile(path, bytes.substr(0, length));
    Result<SegmentHeader> torn = SegmentReader::ReadHeader(path);
    ASSERT_EQ(torn.status().code(), StatusCode::kCorruption) << "length " << length;
    EXPECT_THAT(torn.status().message(), HasSubstr(path));
  }
  WriteFile(path, std::string(200, '\0'));  // blocks that never reached the disk
  EXPECT_EQ(SegmentReader::ReadHeader(path).status().code(), StatusCode::kCorruption);
}

// ----- damage -----------------------------------------------------------------------------------

std::string SmallSegment() {
  SegmentHeader header = MakeHeader();
  header.source_positions = R"({"p":1})";
  return Encode(header, {UsersBatch(3), CdcBatch(2)});
}

TEST(SegmentDamage, EverySingleByteFlipIsDetectedAtOpen) {
  const std::string original = SmallSegment();
  ASSERT_LT(original.size(), 2000u);
  for (size_t offset = 0; offset < original.size(); ++offset) {
    for (uint8_t mask : {0x01, 0x10, 0x80, 0xff}) {
      std::string damaged = original;
      damaged[offset] = static_cast<char>(damaged[offset] ^ mask);
      Result<SegmentReader> reader = SegmentReader::FromBytes(damaged, "flipped.seg");
      ASSERT_FALSE(reader.ok()) << "flip " << int(mask) << " at offset " << offset << " went unseen";
      const bool in_version = offset >= 8 && offset < 12;
      if (in_version && reader.status().code() == StatusCode::kNotSupported) {
        EXPECT_THAT(reader.status().message(), HasSubstr("format version"));
        continue;
      }
      ASSERT_EQ(reader.status().code(), StatusCode::kCorruption)
          << "offset " << offset << ": " << reader.status().ToString();
      EXPECT_THAT(reader.status().message(), HasSubstr("flipped.seg"));
      EXPECT_THAT(reader.status().message(), HasSubstr("restore DATA_DIR"));
    }
  }
}

// Opened without the whole-file checksum (SegmentVerification::kEachRead, as query opens
// segments), a flipped byte is either caught by the open or by the read that uses it, or it is in
// a byte no read uses: no read ever returns data other than what was written.
TEST(SegmentDamage, OpenedForEachReadNoFlipEverReadsAsOtherData) {
  const std::string original = SmallSegment();
  const std::vector<Batch> written = {UsersBatch(3), CdcBatch(2)};
  TempDir dir;
  const std::string path = dir.Sub("flipped.seg");
  int caught_at_open = 0;
  int caught_at_read = 0;
  for (size_t offset = 0; offset < original.size(); ++offset) {
    for (uint8_t mask : {0x01, 0x80}) {
      std::string damaged = original;
      damaged[offset] = static_cast<char>(damaged[offset] ^ mask);
      WriteFile(path, damaged);
      Result<SegmentReader> reader =
          SegmentReader::Open(path, Env::Default(), SegmentVerification::kEachRead);
      if (!reader.ok()) {
        ASSERT_TRUE(reader.status().code() == StatusCode::kCorruption ||
                    reader.status().code() == StatusCode::kNotSupported)
            << "offset " << offset << ": " << reader.status().ToString();
        ++caught_at_open;
        continue;
      }
      ASSERT_EQ(reader->slices().size(), written.size()) << "offset " << offset;
      for (uint32_t ordinal = 0; ordinal < written.size(); ++ordinal) {
        Result<Batch> read = reader->ReadSlice(ordinal);
        if (!read.ok()) {
          ASSERT_EQ(read.status().code(), StatusCode::kCorruption)
              << "offset " << offset << ": " << read.status().ToString();
          ++caught_at_read;
          continue;
        }
        SCOPED_TRACE(
            fmt::format("flip {:#x} at offset {} read as slice {}", mask, offset, ordinal));
        ExpectSameBatch(*read, written[ordinal]);
      }
    }
  }
  EXPECT_GT(caught_at_open, 0);
  EXPECT_GT(caught_at_read, 0);  // the slices' own checksums, which the open no longer reads
}

TEST(SegmentDamage, ChecksumFailureNamesStoredAndComputedValues) {
  std::string damaged = SmallSegment();
  damaged[60] ^= 0x04;  // inside the first slice
  const uint64_t stored = LoadAt<uint64_t>(damaged, damaged.size() - 20);
  const uint64_t computed = XXH3_64bits(damaged.data(), damaged.size() - 20);
  Result<SegmentReader> reader = SegmentReader::FromBytes(damaged, "/data/wal/00042.seg");
  ASSERT_EQ(reader.status().code(), StatusCode::kCorruption);
  EXPECT_THAT(reader.status().message(), HasSubstr("/data/wal/00042.seg"));
  EXPECT_THAT(reader.status().message(), HasSubstr(fmt::format("stored {:016x}", stored)));
  EXPECT_THAT(reader.status().message(), HasSubstr(fmt::format("computed {:016x}", computed)));
  EXPECT_THAT(reader.status().message(), HasSubstr("committed data"));
}

TEST(SegmentDamage, ANewerFormatVersionIsNotSupported) {
  std::string newer = SmallSegment();
  StoreAt<uint32_t>(newer, 8, kSegmentFormatVersion + 1);
  Result<SegmentReader> reader = SegmentReader::FromBytes(newer, "newer.seg");
  ASSERT_EQ(reader.status().code(), StatusCode::kNotSupported);
  EXPECT_THAT(reader.status().message(),
              HasSubstr(fmt::format("format version {}", kSegmentFormatVersion + 1)));
  EXPECT_THAT(reader.status().message(), HasSubstr("newer.seg"));
}

// Version 4 adds truncate; in a version 3 file the same code is damage.
TEST(SegmentFormat, TruncateIsAVersion4Mutation) {
  Batch batch = CdcBatch(6);
  batch.cdc->mutations[5] = Mutation::kTruncate;
  std::string bytes = Encode(MakeHeader(), {batch});
  SegmentReader reader = ReaderOrDie(bytes);
  Result<Batch> read = reader.ReadSlice(0);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(read->cdc->mutations[5], Mutation::kTruncate);

  SegmentReader old = ReaderOrDie(AsZstdVersion(bytes, 3, FrameCount(batch)));
  const Status damaged = old.ReadSlice(0).status();
  EXPECT_EQ(damaged.code(), StatusCode::kCorruption);
  EXPECT_THAT(damaged.message(), HasSubstr("row 5 has mutation code 4"));
}

TEST(SegmentDamage, EveryTruncationIsDetectedByOpenAndCheckTail) {
  const std::string original = SmallSegment();
  TempDir dir;
  const std::string path = dir.Sub("truncated.seg");
  for (size_t length = 0; length < original.size(); ++length) {
    const std::string prefix = original.substr(0, length);
    Result<SegmentReader> reader = SegmentReader::FromBytes(prefix, "truncated.seg");
    ASSERT_EQ(reader.status().code(), StatusCode::kCorruption) << "length " << length;
    WriteFile(path, prefix);
    const Status tail = SegmentReader::CheckTail(path);
    ASSERT_EQ(tail.code(), StatusCode::kCorruption) << "length " << length;
    EXPECT_THAT(tail.message(), HasSubstr(path));
  }
  WriteFile(path, original);
  EXPECT_TRUE(SegmentReader::CheckTail(path).ok());
  // Bytes appended after the trailing magic (a torn rewrite) are caught too.
  WriteFile(path, original + std::string(5, '\0'));
  EXPECT_EQ(SegmentReader::CheckTail(path).code(), StatusCode::kCorruption);
}

TEST(SegmentDamage, SliceChecksumCatchesDamageTheFooterMissed) {
  const std::string original = SmallSegment();
  const SegmentReader intact = ReaderOrDie(original);
  const SliceInfo& cdc = intact.slices()[1];
  // A flip in the compressed payload, with the footer checksum recomputed over the damage.
  std::string damaged = original;
  const size_t at = cdc.payload_offset + cdc.payload_bytes - 12;
  damaged[at] ^= 0x20;
  ResealFooter(damaged);
  SegmentReader reader = ReaderOrDie(damaged);
  EXPECT_TRUE(reader.ReadSlice(0).ok());
  Result<Batch> batch = reader.ReadSlice(1);
  ASSERT_EQ(batch.status().code(), StatusCode::kCorruption);
  EXPECT_THAT(batch.status().message(), HasSubstr("slice 1 at offset"));
  EXPECT_THAT(batch.status().message(), HasSubstr("fails its checksum"));
  EXPECT_THAT(batch.status().message(), HasSubstr("test.seg"));
}

// Version 6 frames are LZ4 frames that declare their length: a zstd frame, a skippable LZ4 frame
// or an LZ4 frame without its content size is damage, named, even with every checksum resealed.
TEST(SegmentDamage, AFrameNotOfItsVersionsCodecOrWithoutItsLengthIsDamage) {
  const Batch batch = UsersBatch(40);
  const std::string bytes = Encode(MakeHeader(), {batch});
  const auto lz4_without_length = [](const std::string& content) {
    std::string frame(LZ4F_compressFrameBound(content.size(), nullptr), '\0');
    frame.resize(LZ4F_compressFrame(frame.data(), frame.size(), content.data(), content.size(),
                                    nullptr));
    return frame;
  };
  const auto skippable = [](const std::string& content) {
    std::string frame(8, '\0');
    StoreAt<uint32_t>(frame, 0, 0x184d2a50u);
    StoreAt<uint32_t>(frame, 4, static_cast<uint32_t>(content.size()));
    return frame + content;
  };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {WithFramesRewritten(bytes, FrameCount(batch), ZstdFrame), "the LZ4 frame at offset"},
      {WithFramesRewritten(bytes, FrameCount(batch), lz4_without_length), "declares 0 bytes"},
      {WithFramesRewritten(bytes, FrameCount(batch), skippable), "a skippable frame"},
  };
  for (const auto& [damaged, expected] : cases) {
    SegmentReader reader = ReaderOrDie(damaged);
    const Status read = reader.ReadSlice(0).status();
    EXPECT_EQ(read.code(), StatusCode::kCorruption) << expected;
    EXPECT_THAT(read.message(), HasSubstr(expected));
  }
  // The same content in frames of the version's own codec reads back.
  SegmentReader version5 = ReaderOrDie(AsZstdVersion(bytes, 5, FrameCount(batch)));
  Result<Batch> read = version5.ReadSlice(0);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  ExpectSameBatch(*read, batch);
}

// With every checksum recomputed over the damage, what remains are the structural checks: decoding
// may fail (Corruption) or produce a batch that validates, but never crashes or reads out of bounds.
TEST(SegmentDamage, ResealedFlipsNeverCrashTheDecoder) {
  const std::vector<Batch> batches = {UsersBatch(3), CdcBatch(2), AllTypesBatch("rides", 3, 6)};
  const std::string original = Encode(MakeHeader(), batches);
  const SegmentReader intact = ReaderOrDie(original);
  std::vector<size_t> frame_counts;
  for (const Batch& batch : batches) frame_counts.push_back(FrameCount(batch));
  int decoded = 0, refused = 0;
  for (size_t offset = 12; offset < original.size() - 28; ++offset) {
    for (uint8_t mask : {0x01, 0x80, 0xff}) {
      std::string damaged = original;
      damaged[offset] = static_cast<char>(damaged[offset] ^ mask);
      ResealSlices(damaged, intact.slices(), frame_counts);
      Result<SegmentReader> reader = SegmentReader::FromBytes(damaged, "resealed.seg");
      if (!reader.ok()) {
        ASSERT_EQ(reader.status().code(), StatusCode::kCorruption) << reader.status().ToString();
        ++refused;
        continue;
      }
      for (uint32_t ordinal = 0; ordinal < 2 * reader->slices().size(); ++ordinal) {
        // Each slice whole, then only its first column (whatever the damage made of its id).
        const uint32_t slice = ordinal % static_cast<uint32_t>(reader->slices().size());
        const bool whole = ordinal < reader->slices().size();
        Result<Batch> batch =
            reader->ReadSlice(slice, whole ? FieldSelection::All()
                                           : FieldSelection::Only({batches[slice].fields[0].id}));
        if (batch.ok()) {
          std::string reason;
          EXPECT_TRUE(batch->Validate(&reason)) << reason;
          EXPECT_EQ(batch->num_rows, reader->slices()[slice].row_count);
          ++decoded;
        } else {
          ASSERT_EQ(batch.status().code(), StatusCode::kCorruption) << batch.status().ToString();
          ++refused;
        }
      }
    }
  }
  EXPECT_GT(refused, 0);
  EXPECT_GT(decoded, 0);  // flips in the header's values or in column bytes decode to other values
}

// ----- files ------------------------------------------------------------------------------------

TEST(SegmentFile, WrittenToDiskAndOpened) {
  TempDir dir;
  const std::string path = dir.Sub("00000000000000000042.seg");
  const std::vector<Batch> batches = {AllTypesBatch("rides", 3, 12), CdcBatch(4)};
  const std::string bytes = Encode(MakeHeader(), batches);
  WriteFile(path, bytes);

  EXPECT_TRUE(SegmentReader::CheckTail(path).ok());
  Result<SegmentReader> reader = SegmentReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  EXPECT_EQ(reader->file_bytes(), bytes.size());
  EXPECT_EQ(reader->header().sequence, MakeHeader().sequence);
  ASSERT_EQ(reader->slices().size(), 2u);
  for (uint32_t ordinal = 0; ordinal < 2; ++ordinal) {
    Result<Batch> batch = reader->ReadSlice(ordinal);
    ASSERT_TRUE(batch.ok()) << batch.status().ToString();
    ExpectSameBatch(*batch, batches[ordinal]);
  }

  std::string damaged = bytes;
  damaged[bytes.size() / 2] ^= 0x01;
  WriteFile(path, damaged);
  Result<SegmentReader> bad = SegmentReader::Open(path);
  ASSERT_EQ(bad.status().code(), StatusCode::kCorruption);
  EXPECT_THAT(bad.status().message(), HasSubstr(path));
  EXPECT_THAT(bad.status().message(), HasSubstr("fails its checksum"));
}

// An opened reader keeps its file open and reads slices from it: a segment reclaimed (unlinked)
// after a query pinned it still serves every slice, and damage that appears in a slice after the
// open is caught by that slice's own checksum.
TEST(SegmentFile, AnOpenReaderServesItsSlicesAfterTheFileIsUnlinked) {
  TempDir dir;
  const std::string path = dir.Sub("00000000000000000042.seg");
  const std::vector<Batch> batches = {AllTypesBatch("rides", 3, 12), CdcBatch(4)};
  const std::string bytes = Encode(MakeHeader(), batches);
  WriteFile(path, bytes);
  Result<SegmentReader> reader = SegmentReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  ASSERT_EQ(::unlink(path.c_str()), 0);
  for (uint32_t ordinal = 0; ordinal < 2; ++ordinal) {
    Result<Batch> batch = reader->ReadSlice(ordinal);
    ASSERT_TRUE(batch.ok()) << batch.status().ToString();
    ExpectSameBatch(*batch, batches[ordinal]);
  }

  WriteFile(path, bytes);
  Result<SegmentReader> opened = SegmentReader::Open(path);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  const SliceInfo& second = opened->slices()[1];
  {
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(static_cast<std::streamoff>(second.payload_offset + second.payload_bytes / 2));
    file.put('\x7f');
  }
  EXPECT_TRUE(opened->ReadSlice(0).ok());
  Result<Batch> damaged = opened->ReadSlice(1);
  ASSERT_EQ(damaged.status().code(), StatusCode::kCorruption);
  EXPECT_THAT(damaged.status().message(), HasSubstr("slice 1"));
  EXPECT_THAT(damaged.status().message(), HasSubstr("fails its checksum"));
}

// Version 3 keeps each column in a frame of its own: a reader asked for some columns reads, checks
// and decompresses only theirs — damage in another column's frame goes unseen until that column is
// read — and returns just those columns, in the slice's order, with the CDC sidecar.
TEST(SegmentProjection, OnlyTheSelectedColumnsAreReadAndDecoded) {
  TempDir dir;
  const std::string path = dir.Sub("00000000000000000042.seg");
  const std::vector<Batch> batches = {AllTypesBatch("rides", 3, 12), CdcBatch(4)};
  const Batch& rides = batches[0];
  ASSERT_GT(rides.fields.size(), 6u);
  const std::string bytes = Encode(MakeHeader(), batches);
  WriteFile(path, bytes);
  Result<SegmentReader> reader = SegmentReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();

  // Damage the middle of column 4's frame after the open (the file's checksum was checked then).
  const SliceInfo& slice = reader->slices()[0];
  const uint32_t header_bytes = LoadAt<uint32_t>(bytes, slice.payload_offset);
  const size_t directory = slice.payload_offset + header_bytes - 8 - 24 * FrameCount(rides);
  uint64_t frame_at = slice.payload_offset + header_bytes;
  for (size_t frame = 0; frame < 4; ++frame) frame_at += LoadAt<uint64_t>(bytes, directory + 24 * frame);
  const uint64_t frame_bytes = LoadAt<uint64_t>(bytes, directory + 24 * 4);
  {
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(static_cast<std::streamoff>(frame_at + frame_bytes / 2));
    file.put(static_cast<char>(~bytes[frame_at + frame_bytes / 2]));
  }

  const auto expect_columns = [&](const Batch& got, const std::vector<size_t>& columns) {
    ASSERT_EQ(got.num_rows, rides.num_rows);
    ASSERT_EQ(got.fields.size(), columns.size());
    ASSERT_EQ(got.columns.size(), columns.size());
    for (size_t i = 0; i < columns.size(); ++i) {
      EXPECT_EQ(got.fields[i].id, rides.fields[columns[i]].id);
      EXPECT_EQ(got.fields[i].name, rides.fields[columns[i]].name);
      ExpectSameBuffers(got.columns[i], rides.columns[columns[i]], rides.fields[columns[i]].name);
    }
  };
  Result<Batch> one = reader->ReadSlice(0, FieldSelection::Only({rides.fields[2].id}));
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  expect_columns(*one, {2});
  Result<Batch> two =
      reader->ReadSlice(0, FieldSelection::Only({rides.fields[6].id, rides.fields[0].id, 9999}));
  ASSERT_TRUE(two.ok()) << two.status().ToString();
  expect_columns(*two, {0, 6});

  for (const FieldSelection& reads_the_damage :
       {FieldSelection::Only({rides.fields[4].id}), FieldSelection::All()}) {
    Result<Batch> damaged = reader->ReadSlice(0, reads_the_damage);
    ASSERT_EQ(damaged.status().code(), StatusCode::kCorruption);
    EXPECT_THAT(damaged.status().message(), HasSubstr(fmt::format("frame at offset {}", frame_at)));
    EXPECT_THAT(damaged.status().message(), HasSubstr("fails its checksum"));
  }

  Result<Batch> none = reader->ReadSlice(1, FieldSelection::Only({}));
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_EQ(none->num_rows, 4);
  EXPECT_TRUE(none->fields.empty());
  EXPECT_TRUE(none->columns.empty());
  ASSERT_TRUE(none->cdc.has_value());
  EXPECT_EQ(none->cdc->mutations, batches[1].cdc->mutations);
  EXPECT_EQ(none->cdc->business_keys, batches[1].cdc->business_keys);
}

// What version 5 stores for a buffer `held` of `width`-byte values: per 64 KiB block, byte j of
// every value, for j from 0 (docs/formats/wal.md, "Byte planes"). Written out here as the document
// says it, not with wal/byte_planes.hpp.
std::string AsBytePlanes(const void* held, size_t size, size_t width) {
  const auto* bytes = static_cast<const char*>(held);
  std::string stored;
  for (size_t block = 0; block < size; block += 65536) {
    const size_t values = std::min<size_t>(65536, size - block) / width;
    for (size_t j = 0; j < width; ++j) {
      for (size_t i = 0; i < values; ++i) stored += bytes[block + i * width + j];
    }
  }
  return stored;
}

// The split and join of one block, against the document's formula, for every count of values up
// to a few past a multiple of eight (the split takes eight values at a time, the rest one by one).
TEST(BytePlanes, SplitAndJoinAgreeWithTheDocumentForEveryCount) {
  for (const size_t width : {8u, 16u}) {
    for (size_t count = 0; count <= 41; ++count) {
      SCOPED_TRACE(fmt::format("{} values of {} bytes", count, width));
      std::vector<uint8_t> values(count * width);
      for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<uint8_t>(i * 37 + width);
      std::vector<uint8_t> planes(values.size());
      SplitIntoPlanes(values.data(), values.size(), width, planes.data());
      EXPECT_EQ(std::string(planes.begin(), planes.end()),
                AsBytePlanes(values.data(), values.size(), width));
      std::vector<uint8_t> joined(values.size());
      JoinPlanes(planes.data(), planes.size(), width, joined.data());
      EXPECT_EQ(joined, values);
    }
  }
}

// Version 5 stores 8- and 16-byte values and offsets as byte planes, validity and text as held: the
// bytes inside each frame are pinned here (10,000 longs are a whole block and part of another).
TEST(SegmentFormat, WideValuesAndOffsetsAreStoredAsBytePlanes) {
  constexpr int64_t kRows = 10000;
  Batch batch;
  batch.namespace_name = "rides";
  batch.fields = {Field{1, "id", LogicalType::Long(), true},
                  Field{2, "price", *LogicalType::Decimal(20, 2), true},
                  Field{3, "name", LogicalType::String(), true}};
  for (const Field& field : batch.fields) batch.columns.emplace_back(field.type);
  for (int64_t row = 0; row < kRows; ++row) {
    batch.columns[0].AppendInt64(row + 1);
    if (row % 7 == 3) {
      batch.columns[1].AppendNull();
    } else {
      batch.columns[1].AppendDecimal(static_cast<__int128>(row) * -100003);
    }
    batch.columns[2].AppendBytes(std::string(static_cast<size_t>(row % 5), 'a' + row % 26));
  }
  batch.num_rows = kRows;
  const std::string bytes = Encode(MakeHeader(), {batch});
  const SegmentReader reader = ReaderOrDie(bytes);

  const SliceInfo& slice = reader.slices()[0];
  const uint32_t header_bytes = LoadAt<uint32_t>(bytes, slice.payload_offset);
  const size_t directory = slice.payload_offset + header_bytes - 8 - 24 * 3;
  uint64_t frame_at = slice.payload_offset + header_bytes;
  std::vector<std::string> frames;
  for (size_t frame = 0; frame < 3; ++frame) {
    const uint64_t frame_bytes = LoadAt<uint64_t>(bytes, directory + 24 * frame);
    std::string content =
        FrameContent(FrameCodec::kLz4, std::string_view(bytes).substr(frame_at, frame_bytes));
    ASSERT_EQ(content.size(), LoadAt<uint64_t>(bytes, directory + 24 * frame + 8)) << content;
    frames.push_back(std::move(content));
    frame_at += frame_bytes;
  }
  const auto as_held = [](const auto& buffer) {
    return std::string(reinterpret_cast<const char*>(buffer.data()),
                       buffer.size() * sizeof(buffer[0]));
  };
  const Column& id = batch.columns[0];
  EXPECT_EQ(frames[0], as_held(id.validity) + AsBytePlanes(id.fixed.data(), id.fixed.size(), 8));
  EXPECT_EQ(frames[0].substr(id.validity.size(), 4), std::string("\x01\x02\x03\x04", 4));
  const Column& price = batch.columns[1];
  EXPECT_EQ(frames[1],
            as_held(price.validity) + AsBytePlanes(price.fixed.data(), price.fixed.size(), 16));
  const Column& name = batch.columns[2];
  EXPECT_EQ(frames[2], as_held(name.validity) +
                           AsBytePlanes(name.offsets.data(), name.offsets.size() * 8, 8) +
                           name.bytes);

  Result<Batch> read = reader.ReadSlice(0);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  ExpectSameBatch(*read, batch);
}

// Older segments stay readable, projection included: the committed fuzz seeds of versions 1 and 2
// (one frame per slice), 3 (as 4, buffers as held) and 5 (byte planes, zstd frames) decode to the
// same batches as their version 6 rewrites (tests/fuzz/wal_segment_seeds writes the same batches in
// every version).
TEST(SegmentFormat, OlderVersionSegmentsStayReadable) {
  const std::string seeds = std::string(SKIPPR_SOURCE_DIR) + "/tests/fuzz/wal_segment/seeds/";
  for (const std::string name : {"empty", "one_slice", "all_kinds", "two_namespaces", "cdc"}) {
    Result<SegmentReader> current = SegmentReader::Open(seeds + name + ".seg");
    ASSERT_TRUE(current.ok()) << current.status().ToString();
    EXPECT_EQ(current->header().format_version, kSegmentFormatVersion) << name;
    for (const uint32_t version : {1u, 2u, 3u, 5u}) {
      SCOPED_TRACE(fmt::format("{} version {}", name, version));
      Result<SegmentReader> old = SegmentReader::Open(fmt::format("{}{}_v{}.seg", seeds, name, version));
      ASSERT_TRUE(old.ok()) << old.status().ToString();
      EXPECT_EQ(old->header().format_version, version);
      ASSERT_EQ(old->slices().size(), current->slices().size());
      for (uint32_t ordinal = 0; ordinal < old->slices().size(); ++ordinal) {
        Result<Batch> got = old->ReadSlice(ordinal);
        Result<Batch> want = current->ReadSlice(ordinal);
        ASSERT_TRUE(got.ok() && want.ok()) << got.status().ToString() << want.status().ToString();
        ExpectSameBatch(*got, *want);
        const FieldSelection last = FieldSelection::Only({want->fields.back().id});
        Result<Batch> got_last = old->ReadSlice(ordinal, last);
        Result<Batch> want_last = current->ReadSlice(ordinal, last);
        ASSERT_TRUE(got_last.ok() && want_last.ok());
        ASSERT_EQ(got_last->columns.size(), 1u);
        ExpectSameBatch(*got_last, *want_last);
      }
    }
  }
}

TEST(SegmentFile, VerifyBytesReadsTheIndexWithoutKeepingTheBytes) {
  const SegmentBytes bytes = EncodeSegment(MakeHeader(), {UsersBatch(5), CdcBatch(3)});
  Result<SegmentReader> verified = SegmentReader::VerifyBytes(bytes, "prepared");
  ASSERT_TRUE(verified.ok()) << verified.status().ToString();
  const SegmentReader full = ReaderOrDie(std::string(bytes.begin(), bytes.end()));
  EXPECT_EQ(verified->file_bytes(), full.file_bytes());
  EXPECT_EQ(verified->checksum(), full.checksum());
  EXPECT_EQ(verified->header().segment_id, full.header().segment_id);
  ASSERT_EQ(verified->slices().size(), 2u);
  EXPECT_EQ(verified->slices()[1].row_count, 3);
  EXPECT_EQ(verified->slices()[1].payload_offset, full.slices()[1].payload_offset);

  SegmentBytes damaged = bytes;
  damaged[damaged.size() / 2] ^= 0x01;
  EXPECT_EQ(SegmentReader::VerifyBytes(damaged, "prepared").status().code(),
            StatusCode::kCorruption);
}

// The WAL writes whole 4 KiB blocks with O_DIRECT and the tail through the page cache: files of
// every size must come out byte for byte, on a disk file system and on tmpfs.
TEST(WalAppend, WritesEachSegmentFileByteForByte) {
  std::vector<std::filesystem::path> parents = {std::filesystem::temp_directory_path()};
  if (std::filesystem::is_directory("/dev/shm")) parents.push_back("/dev/shm");
  for (const std::filesystem::path& parent : parents) {
    TempDir dir(parent);
    Result<std::unique_ptr<store::Store>> store = store::Store::Open({.directory = dir.Sub("store")});
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    Result<std::unique_ptr<Wal>> wal = Wal::Open(dir.Sub("wal"), "p", **store);
    ASSERT_TRUE(wal.ok()) << wal.status().ToString();
    const std::vector<std::vector<Batch>> segments = {
        {UsersBatch(1)}, {UsersBatch(100000)}, {AllTypesBatch("rides", 3, 5000), CdcBatch(700)}};
    bool saw_a_tail = false;
    for (const std::vector<Batch>& batches : segments) {
      Result<PreparedSegment> prepared = (*wal)->Prepare(batches, "{}");
      ASSERT_TRUE(prepared.ok()) << prepared.status().ToString();
      saw_a_tail |= prepared->bytes.size() > kDirectIoAlignmentBytes &&
                    prepared->bytes.size() % kDirectIoAlignmentBytes != 0;
      Result<CommitInfo> committed = (*wal)->Append(*prepared, nullptr);
      ASSERT_TRUE(committed.ok()) << committed.status().ToString();
      std::ifstream file(dir.Sub("wal/" + prepared->entry.file_name), std::ios::binary);
      const std::string written{std::istreambuf_iterator<char>(file), {}};
      ASSERT_EQ(written.size(), prepared->bytes.size()) << parent;
      EXPECT_TRUE(written == std::string_view(prepared->bytes)) << parent;
      Result<SegmentReader> reader = OpenSegment(dir.Sub("wal"), prepared->entry);
      ASSERT_TRUE(reader.ok()) << reader.status().ToString();
      Result<Batch> first = reader->ReadSlice(0);
      ASSERT_TRUE(first.ok()) << first.status().ToString();
      ExpectSameBatch(*first, batches[0]);
    }
    EXPECT_TRUE(saw_a_tail) << "no segment ended in a partial block";
  }
}

TEST(SegmentFile, AMissingFileIsNotFoundNamingThePath) {
  TempDir dir;
  const std::string path = dir.Sub("missing.seg");
  Result<SegmentReader> reader = SegmentReader::Open(path);
  ASSERT_EQ(reader.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(reader.status().message(), HasSubstr(path));
  const Status tail = SegmentReader::CheckTail(path);
  EXPECT_EQ(tail.code(), StatusCode::kNotFound);
  EXPECT_THAT(tail.message(), HasSubstr(path));
}

TEST(SegmentFile, ADirectoryIsAnIOError) {
  TempDir dir;
  const std::string path = dir.Sub("a_directory.seg");
  std::filesystem::create_directory(path);
  Result<SegmentReader> reader = SegmentReader::Open(path);
  ASSERT_FALSE(reader.ok());
  EXPECT_EQ(reader.status().code(), StatusCode::kIOError);
  EXPECT_THAT(reader.status().message(), HasSubstr(path));
}

// ----- recovery: which uncommitted files are this store's own -----------------------------------

// A store and the WAL beside it, as sync lays them out.
class WalDirectory {
 public:
  WalDirectory() : store_(OpenStore(dir_.Sub("store"))) {}

  static std::unique_ptr<store::Store> OpenStore(const std::string& directory) {
    return skippr::testing::ValueOrDie(store::Store::Open({.directory = directory}));
  }
  std::string wal() const { return dir_.Sub("wal"); }
  std::string SegmentPath(uint64_t segment_id) const {
    return fmt::format("{}/{:020}.seg", wal(), segment_id);
  }
  store::Store& store() { return *store_; }
  Result<std::unique_ptr<Wal>> Open(store::Store& store, RecoveryReport* report = nullptr) {
    return Wal::Open(wal(), "p", store, report);
  }
  Result<std::unique_ptr<Wal>> Open(RecoveryReport* report = nullptr) {
    return Open(*store_, report);
  }
  // Commits `count` segments of one small batch each.
  void Commit(int count) {
    std::unique_ptr<Wal> wal = skippr::testing::ValueOrDie(Open());
    for (int i = 0; i < count; ++i) {
      skippr::testing::ExpectOk(wal->Commit({UsersBatch(3)}, "{}", nullptr).status());
    }
  }
  // A segment as the writer leaves it when the run dies before the store transaction.
  void WriteUncommitted(uint64_t segment_id, const std::string& instance_id) const {
    SegmentHeader header = MakeHeader();
    header.segment_id = segment_id;
    header.instance_id = instance_id;
    WriteFile(SegmentPath(segment_id), Encode(header, {UsersBatch(2)}));
  }
  const std::string& own_instance() const { return store_->identity().instance_id; }
  void Close() { store_.reset(); }

 private:
  TempDir dir_;
  std::unique_ptr<store::Store> store_;
};

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

TEST(WalRecovery, ACrashOrphanAtTheNextIdIsDeletedAndTheIdIsUsedAgain) {
  WalDirectory dir;
  dir.Commit(2);
  dir.WriteUncommitted(3, dir.own_instance());
  RecoveryReport report;
  std::unique_ptr<Wal> wal = skippr::testing::ValueOrDie(dir.Open(&report));
  EXPECT_EQ(report.live_segments, 2u);
  EXPECT_EQ(report.orphans_deleted, 1u);
  Result<CommitInfo> next = wal->Commit({UsersBatch(1)}, "{}", nullptr);
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_EQ(next->segment_id, 3u);
}

// Reclaim deletes the catalog entry, then the file: a crash between leaves a file below the next
// id that is the store's own.
TEST(WalRecovery, AReclaimedSegmentsLeftoverFileIsDeleted) {
  WalDirectory dir;
  dir.Commit(3);
  {
    auto write = skippr::testing::ValueOrDie(dir.store().BeginWrite());
    skippr::testing::ExpectOk(DeleteSegmentEntry(write, 2));
    skippr::testing::ExpectOk(write.Commit());
  }
  RecoveryReport report;
  ASSERT_TRUE(dir.Open(&report).ok());
  EXPECT_EQ(report.orphans_deleted, 1u);
  EXPECT_FALSE(std::filesystem::exists(dir.SegmentPath(2)));
  EXPECT_TRUE(std::filesystem::exists(dir.SegmentPath(3)));
}

// The store was lost (or replaced by a new one) while the WAL stayed: for a pipeline without a
// sink the segments are the dataset. Nothing is deleted; the message says what to do.
TEST(WalRecovery, AStoreThatLostItsWalRefusesAndDeletesNothing) {
  WalDirectory dir;
  dir.Commit(3);
  std::vector<std::string> before;
  for (uint64_t id = 1; id <= 3; ++id) before.push_back(ReadBytes(dir.SegmentPath(id)));
  TempDir elsewhere;
  std::unique_ptr<store::Store> new_store = WalDirectory::OpenStore(elsewhere.Sub("store"));
  Result<std::unique_ptr<Wal>> wal = dir.Open(*new_store);
  ASSERT_EQ(wal.status().code(), StatusCode::kCorruption);
  const std::string& message = wal.status().message();
  EXPECT_THAT(message, HasSubstr("deleted nothing"));
  EXPECT_THAT(message, HasSubstr("3 segment file(s)"));
  EXPECT_THAT(message, HasSubstr("00000000000000000001.seg"));
  EXPECT_THAT(message, HasSubstr("has no record of any WAL commit"));
  EXPECT_THAT(message, HasSubstr("restore the store from the same backup as the WAL"));
  EXPECT_THAT(message, HasSubstr("aside"));
  for (uint64_t id = 1; id <= 3; ++id) EXPECT_EQ(ReadBytes(dir.SegmentPath(id)), before[id - 1]);
}

TEST(WalRecovery, FilesOfAnotherInstanceAreRefusedAndKept) {
  WalDirectory dir;
  dir.Commit(2);
  dir.WriteUncommitted(3, "ffffffffffffffffffffffffffffffff");
  Result<std::unique_ptr<Wal>> wal = dir.Open();
  ASSERT_EQ(wal.status().code(), StatusCode::kCorruption);
  EXPECT_THAT(wal.status().message(),
              HasSubstr("00000000000000000003.seg (it was written by store instance "
                        "ffffffffffffffffffffffffffffffff, not by this store"));
  EXPECT_THAT(wal.status().message(), HasSubstr("different points in time"));
  EXPECT_TRUE(std::filesystem::exists(dir.SegmentPath(3)));
}

// A store restored from a backup older than the WAL: the segments committed after the backup have
// ids beyond the store's next one. Nothing is deleted — not even the one at the next id.
TEST(WalRecovery, FilesBeyondTheNextIdAreRefusedAndNothingIsDeleted) {
  WalDirectory dir;
  dir.Commit(1);
  dir.WriteUncommitted(2, dir.own_instance());
  dir.WriteUncommitted(3, dir.own_instance());
  Result<std::unique_ptr<Wal>> wal = dir.Open();
  ASSERT_EQ(wal.status().code(), StatusCode::kCorruption);
  EXPECT_THAT(wal.status().message(), HasSubstr("1 segment file(s)"));
  EXPECT_THAT(wal.status().message(),
              HasSubstr("segment 3 is beyond 2, the next id this store hands out"));
  EXPECT_TRUE(std::filesystem::exists(dir.SegmentPath(2)));
  EXPECT_TRUE(std::filesystem::exists(dir.SegmentPath(3)));
}

TEST(WalRecovery, UnreadableOrMisnamedFilesAreRefused) {
  WalDirectory dir;
  dir.Commit(1);
  WriteFile(dir.SegmentPath(2), std::string(4096, '\0'));
  Result<std::unique_ptr<Wal>> wal = dir.Open();
  ASSERT_EQ(wal.status().code(), StatusCode::kCorruption);
  EXPECT_THAT(wal.status().message(), HasSubstr("(its header is unreadable"));
  std::filesystem::remove(dir.SegmentPath(2));
  dir.WriteUncommitted(2, dir.own_instance());
  std::filesystem::rename(dir.SegmentPath(2), dir.wal() + "/copy-of-2.seg");
  wal = dir.Open();
  ASSERT_EQ(wal.status().code(), StatusCode::kCorruption);
  EXPECT_THAT(wal.status().message(), HasSubstr("which its name does not spell"));
}

// Empty files are spares created ahead of use: nothing to lose, deleted whatever the store.
TEST(WalRecovery, EmptySparesAreDeletedEvenBesideANewStore) {
  WalDirectory dir;
  std::filesystem::create_directories(dir.wal());
  WriteFile(dir.SegmentPath(7), "");
  RecoveryReport report;
  ASSERT_TRUE(dir.Open(&report).ok());
  EXPECT_EQ(report.orphans_deleted, 0u);
  EXPECT_FALSE(std::filesystem::exists(dir.SegmentPath(7)));
}

// Segments written before instance ids (format 1) carry none: one is the store's own only if the
// store is that old too (upgraded from format 1), never beside a store created with an id.
TEST(WalRecovery, Version1OrphansAreOwnOnlyInAStoreOlderThanInstanceIds) {
  WalDirectory dir;
  std::filesystem::create_directories(dir.wal());
  const std::string version1(reinterpret_cast<const char*>(kVersion1Example),
                             sizeof(kVersion1Example));
  WriteFile(dir.SegmentPath(1), version1);
  Result<std::unique_ptr<Wal>> refused = dir.Open();
  ASSERT_EQ(refused.status().code(), StatusCode::kCorruption);
  EXPECT_THAT(refused.status().message(), HasSubstr("without an instance id"));
  dir.Close();
  {  // make it a format 1 store, as an older skipprd left it
    MDB_env* env = nullptr;
    ASSERT_EQ(mdb_env_create(&env), 0);
    mdb_env_set_maxdbs(env, 8);
    ASSERT_EQ(mdb_env_open(env, std::filesystem::path(dir.wal()).parent_path().append("store").c_str(),
                           0, 0600),
              0);
    MDB_txn* txn = nullptr;
    ASSERT_EQ(mdb_txn_begin(env, nullptr, 0, &txn), 0);
    MDB_dbi meta = 0;
    ASSERT_EQ(mdb_dbi_open(txn, "meta", 0, &meta), 0);
    for (const char* key : {"instance_id", "instance_origin"}) {
      MDB_val name{std::strlen(key), const_cast<char*>(key)};
      ASSERT_EQ(mdb_del(txn, meta, &name, nullptr), 0);
    }
    MDB_val name{14, const_cast<char*>("format_version")};
    MDB_val one{1, const_cast<char*>("1")};
    ASSERT_EQ(mdb_put(txn, meta, &name, &one, 0), 0);
    ASSERT_EQ(mdb_txn_commit(txn), 0);
    mdb_env_close(env);
  }
  std::unique_ptr<store::Store> upgraded =
      WalDirectory::OpenStore(std::filesystem::path(dir.wal()).parent_path().append("store"));
  ASSERT_TRUE(upgraded->identity().predates_instance_ids);
  RecoveryReport report;
  ASSERT_TRUE(dir.Open(*upgraded, &report).ok());
  EXPECT_EQ(report.orphans_deleted, 1u);
}

}  // namespace
}  // namespace wal
}  // namespace skippr
