// WAL segment decoding over any bytes. Each input is tried twice: as it is (almost every mutation
// then fails the footer checksum, which must be a Corruption and nothing worse) and with its
// checksums and tail recomputed (docs/formats/wal.md), so that the fuzzer reaches the header,
// index, field, directory and payload checks behind them. Invariants:
//   * FromBytes and VerifyBytes agree; failures are Corruption or NotSupported; ReadSlice fails
//     only with Corruption, and past the last slice with InvalidArgument;
//   * a slice that decodes whole also decodes with only its first field selected, to the same
//     column (and every other field of that id);
//   * a segment whose every slice decodes re-encodes (EncodeSegment) into one that decodes to the
//     same header, index and batches, and encoding that again gives the same bytes.
#include <xxhash.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "fuzz/fuzz_support.hpp"
#include "support/byte_fields.hpp"
#include "wal/segment.hpp"

namespace skippr::fuzz {
namespace {

constexpr uint64_t kTailBytes = 20;      // checksum u64, footer_bytes u32, trailing magic
constexpr uint64_t kMinimumBytes = 80;   // an empty segment with empty names
constexpr uint64_t kIndexEntryFixedBytes = 41;

using ::skippr::testing::LoadAt;
using ::skippr::testing::StoreAt;

// Version 3 keeps a slice's checksums in its header: each frame's in the frame directory (the
// header's last entries before its own checksum), then the header's. The frame count follows from
// the fields, so take the fewest trailing directory entries whose lengths add up to the payload.
void RepairVersion3Slice(std::string& bytes, uint64_t record_offset, uint64_t record_bytes) {
  const uint64_t header_bytes = LoadAt<uint32_t>(bytes, record_offset);
  if (header_bytes < 8 || header_bytes > record_bytes) return;
  const uint64_t payload_bytes = record_bytes - header_bytes;
  const uint64_t directory_end = record_offset + header_bytes - 8;
  uint64_t frames = 0;
  uint64_t sum = 0;
  for (uint64_t count = 1; payload_bytes > 0 && 24 * count <= header_bytes - 8; ++count) {
    const uint64_t frame_bytes = LoadAt<uint64_t>(bytes, directory_end - 24 * count);
    if (frame_bytes > payload_bytes - sum) break;
    sum += frame_bytes;
    if (sum == payload_bytes) {
      frames = count;
      break;
    }
  }
  uint64_t frame_at = record_offset + header_bytes;
  for (uint64_t frame = 0; frame < frames; ++frame) {
    const uint64_t entry = directory_end - 24 * (frames - frame);
    const uint64_t frame_bytes = LoadAt<uint64_t>(bytes, entry);
    StoreAt<uint64_t>(bytes, entry + 16, XXH3_64bits(bytes.data() + frame_at, frame_bytes));
    frame_at += frame_bytes;
  }
  StoreAt<uint64_t>(bytes, directory_end, XXH3_64bits(bytes.data() + record_offset, header_bytes - 8));
}

// Recomputes what a writer derives from the rest: each slice's checksums the index can place, the
// footer length and trailing magic, then the footer checksum over every byte before it.
std::string WithChecksumsRepaired(std::string bytes) {
  const uint64_t file_bytes = bytes.size();
  if (file_bytes < kMinimumBytes) return bytes;
  const uint64_t footer_offset = LoadAt<uint64_t>(bytes, file_bytes - 28);
  if (footer_offset <= file_bytes - 28) {
    StoreAt<uint32_t>(bytes, file_bytes - 12, static_cast<uint32_t>(file_bytes - footer_offset));
    const uint64_t index_end = file_bytes - 28;
    uint64_t at = footer_offset + 4;
    const uint32_t slice_count = footer_offset + 4 <= index_end ? LoadAt<uint32_t>(bytes, footer_offset) : 0;
    const uint32_t version = LoadAt<uint32_t>(bytes, 8);
    for (uint32_t ordinal = 0; ordinal < slice_count && at + kIndexEntryFixedBytes <= index_end;
         ++ordinal) {
      const uint64_t record_offset = LoadAt<uint64_t>(bytes, at);
      const uint64_t record_bytes = LoadAt<uint64_t>(bytes, at + 8);
      at += kIndexEntryFixedBytes + LoadAt<uint32_t>(bytes, at + 37);
      if (record_bytes < 8 || record_offset > index_end || record_bytes > index_end - record_offset) {
        continue;
      }
      if (version >= 3) {
        RepairVersion3Slice(bytes, record_offset, record_bytes);
        continue;
      }
      const uint64_t checksum_at = record_offset + record_bytes - 8;
      StoreAt<uint64_t>(bytes, checksum_at, XXH3_64bits(bytes.data() + record_offset, record_bytes - 8));
    }
  }
  std::memcpy(bytes.data() + file_bytes - 8, "SKPRTAIL", 8);
  const uint64_t checksum_offset = file_bytes - kTailBytes;
  StoreAt<uint64_t>(bytes, checksum_offset, XXH3_64bits(bytes.data(), checksum_offset));
  return bytes;
}

bool SameHeader(const wal::SegmentHeader& a, const wal::SegmentHeader& b) {
  return a.instance_id == b.instance_id && a.pipeline == b.pipeline &&
         a.segment_id == b.segment_id && a.sequence == b.sequence &&
         a.created_unix_micros == b.created_unix_micros && a.source_positions == b.source_positions;
}

bool SameSliceInfo(const wal::SliceInfo& a, const wal::SliceInfo& b) {
  return a.ordinal == b.ordinal && a.namespace_name == b.namespace_name &&
         a.schema_id == b.schema_id && a.row_count == b.row_count && a.is_cdc == b.is_cdc &&
         a.uncompressed_bytes == b.uncompressed_bytes;
}

// Opens `bytes` both ways; the reader when it verifies.
std::optional<wal::SegmentReader> Open(const std::string& bytes) {
  Result<wal::SegmentReader> verified = wal::SegmentReader::VerifyBytes(bytes, "fuzz.seg");
  Result<wal::SegmentReader> reader = wal::SegmentReader::FromBytes(bytes, "fuzz.seg");
  FUZZ_CHECK(verified.ok() == reader.ok(), reader.status().ToString() + " / " +
                                               verified.status().ToString());
  if (!reader.ok()) {
    FUZZ_CHECK(verified.status().code() == reader.status().code(), reader.status().ToString());
    CheckCodeIn(reader.status(), {StatusCode::kCorruption, StatusCode::kNotSupported},
                "SegmentReader::FromBytes");
    return std::nullopt;
  }
  FUZZ_CHECK(reader->file_bytes() == bytes.size(), "file_bytes");
  FUZZ_CHECK(verified->checksum() == reader->checksum(), "checksum");
  return std::move(reader).value();
}

// Slice `ordinal` decoded whole as `whole`: with only its first field's id selected it decodes to
// the columns of that id.
void CheckProjection(const wal::SegmentReader& reader, uint32_t ordinal, const Batch& whole) {
  const int32_t id = whole.fields[0].id;
  Result<Batch> projected = reader.ReadSlice(ordinal, FieldSelection::Only({id}));
  FUZZ_CHECK(projected.ok(), "a slice that decodes whole fails with one column selected: " +
                                 projected.status().ToString());
  Batch expected = whole;
  expected.fields.clear();
  expected.columns.clear();
  for (size_t i = 0; i < whole.fields.size(); ++i) {
    if (whole.fields[i].id != id) continue;
    expected.fields.push_back(whole.fields[i]);
    expected.columns.push_back(whole.columns[i]);
  }
  FUZZ_CHECK(SameBatch(*projected, expected), "a projected slice differs from the whole one's column");
}

// Every slice decoded, or nullopt when one is damaged.
std::optional<std::vector<Batch>> DecodeAll(const wal::SegmentReader& reader) {
  std::vector<Batch> batches;
  bool is_whole = true;
  for (const wal::SliceInfo& info : reader.slices()) {
    Result<Batch> batch = reader.ReadSlice(info.ordinal);
    if (!batch.ok()) {
      CheckCodeIn(batch.status(), {StatusCode::kCorruption}, "SegmentReader::ReadSlice");
      is_whole = false;
      continue;
    }
    FUZZ_CHECK(batch->num_rows == info.row_count, "decoded rows differ from the index");
    FUZZ_CHECK(batch->namespace_name == info.namespace_name, "namespace differs from the index");
    FUZZ_CHECK(batch->cdc.has_value() == info.is_cdc, "kind differs from the index");
    for (int64_t row = 0; row < batch->num_rows; ++row) (void)batch->RowAt(row);
    if (!batch->fields.empty()) CheckProjection(reader, info.ordinal, *batch);
    batches.push_back(std::move(batch).value());
  }
  Result<Batch> past_end = reader.ReadSlice(static_cast<uint32_t>(reader.slices().size()));
  FUZZ_CHECK(!past_end.ok() && past_end.status().code() == StatusCode::kInvalidArgument,
             "ReadSlice past the last slice");
  if (!is_whole) return std::nullopt;
  return batches;
}

void CheckReencodes(const wal::SegmentReader& reader, const std::vector<Batch>& batches) {
  // EncodeSegment writes the current version, which needs an instance id a version 1 segment
  // does not have: it gets a fixed one, and the rest of the header must survive as it was.
  wal::SegmentHeader header = reader.header();
  if (header.instance_id.empty()) header.instance_id = "0123456789abcdef0123456789abcdef";
  const wal::SegmentBytes encoded = wal::EncodeSegment(header, batches);
  const std::string first(encoded.data(), encoded.size());
  std::optional<wal::SegmentReader> again = Open(first);
  FUZZ_CHECK(again.has_value(), "a re-encoded segment does not verify");
  FUZZ_CHECK(SameHeader(again->header(), header), "re-encoded header differs");
  FUZZ_CHECK(again->slices().size() == reader.slices().size(), "re-encoded slice count");
  std::vector<Batch> decoded_again;
  for (size_t i = 0; i < batches.size(); ++i) {
    FUZZ_CHECK(SameSliceInfo(again->slices()[i], reader.slices()[i]), "re-encoded index differs");
    Result<Batch> batch = again->ReadSlice(static_cast<uint32_t>(i));
    FUZZ_CHECK(batch.ok(), batch.status().ToString());
    FUZZ_CHECK(SameBatch(*batch, batches[i]), "re-encoded slice decodes to another batch");
    decoded_again.push_back(std::move(batch).value());
  }
  const wal::SegmentBytes encoded_again = wal::EncodeSegment(again->header(), decoded_again);
  FUZZ_CHECK(std::string_view(encoded_again.data(), encoded_again.size()) == first,
             "encoding is not deterministic");
}

void FuzzSegment(const std::string& bytes) {
  std::optional<wal::SegmentReader> reader = Open(bytes);
  if (!reader) return;
  std::optional<std::vector<Batch>> batches = DecodeAll(*reader);
  if (batches) CheckReencodes(*reader, *batches);
}

}  // namespace
}  // namespace skippr::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  skippr::fuzz::FuzzSegment(bytes);
  const std::string repaired = skippr::fuzz::WithChecksumsRepaired(bytes);
  if (repaired != bytes) skippr::fuzz::FuzzSegment(repaired);
  return 0;
}
