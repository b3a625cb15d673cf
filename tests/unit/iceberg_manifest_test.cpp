// iceberg/manifest: Iceberg v2 manifests and manifest lists as Avro files
// (docs/formats/iceberg-manifests.md) — round trips through our reader; every bound encoding
// against bytes worked out by hand from the spec (appendix D); damaged files (sync markers,
// truncation, every single-byte flip) rejected with errors naming the file; and Debian's
// python3-avro, a reader written by others, reading every kind of file we write with the spec's
// field ids intact.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdio.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "iceberg/manifest.hpp"
#include "support/temp_dir.hpp"

namespace skippr::iceberg {
namespace {

using ::skippr::testing::TempDir;
using ::testing::HasSubstr;

// ----- building manifests ------------------------------------------------------------------------

constexpr int64_t kSnapshotId = 3051729675574597004;
constexpr char kTableSchemaJson[] =
    R"json({"type":"struct","schema-id":1,"fields":[)json"
    R"json({"id":1,"name":"ride_id","required":true,"type":"long"},)json"
    R"json({"id":2,"name":"station","required":false,"type":"string"},)json"
    R"json({"id":3,"name":"fare","required":false,"type":"decimal(10,2)"}]})json";

std::string Bytes(std::initializer_list<int> values) {
  std::string bytes;
  for (const int value : values) bytes.push_back(static_cast<char>(value));
  return bytes;
}

std::string Hex(std::string_view bytes) {
  std::string hex;
  for (const char byte : bytes) hex += fmt::format("{:02x}", static_cast<uint8_t>(byte));
  return hex;
}

ManifestHeader Header(ManifestContent content) {
  return ManifestHeader{kTableSchemaJson, 1, PartitionSpec{}, content};
}

// A data file with every field that a data file may carry set.
DataFile FullDataFile(int index) {
  DataFile file;
  file.file_path = fmt::format("/lake/rides/data/{:05d}-0-6c4bd1a8.parquet", index);
  file.record_count = 1000 + index;
  file.file_size_in_bytes = 81'920 + index;
  file.column_sizes = {{1, 8000}, {2, 12'345}, {3, 4000 + index}};
  file.value_counts = {{1, 1000}, {2, 1000}, {3, 1000}};
  file.null_value_counts = {{1, 0}, {2, 17}, {3, 0}};
  file.nan_value_counts = {{3, 0}};
  file.lower_bounds = {{1, Bytes({0x01, 0, 0, 0, 0, 0, 0, 0})}, {2, "Aldgate"}, {3, Bytes({0x00})}};
  file.upper_bounds = {
      {1, Bytes({0xe8, 0x03, 0, 0, 0, 0, 0, 0})}, {2, "Waterloo"}, {3, Bytes({0x04, 0xd2})}};
  file.key_metadata = Bytes({0x00, 0xff, 0x10});
  file.split_offsets = {4, 40'000 + index, 80'000};
  file.sort_order_id = 0;
  return file;
}

// A data file with only the required fields.
DataFile MinimalDataFile(int index) {
  DataFile file;
  file.file_path = fmt::format("s3://bucket/lake/rides/data/{}.parquet", index);
  file.record_count = index;
  file.file_size_in_bytes = 512 + index;
  return file;
}

Manifest DataManifest(int entry_count) {
  Manifest manifest{Header(ManifestContent::kData), {}};
  for (int i = 0; i < entry_count; ++i) {
    ManifestEntry entry;
    entry.data_file = i % 3 == 2 ? MinimalDataFile(i) : FullDataFile(i);
    if (i % 4 == 1) {  // carried over from an earlier snapshot: sequence numbers explicit
      entry.status = EntryStatus::kExisting;
      entry.snapshot_id = kSnapshotId - 1;
      entry.sequence_number = 3;
      entry.file_sequence_number = 4;
    } else if (i % 4 == 3) {
      entry.status = EntryStatus::kDeleted;
      entry.snapshot_id = kSnapshotId;
      entry.sequence_number = 2;
      entry.file_sequence_number = 2;
    } else {  // added: the sequence numbers are inherited from the manifest list
      entry.snapshot_id = i % 8 == 0 ? std::optional<int64_t>(kSnapshotId) : std::nullopt;
    }
    manifest.entries.push_back(std::move(entry));
  }
  return manifest;
}

Manifest DeleteManifest() {
  Manifest manifest{Header(ManifestContent::kDeletes), {}};
  ManifestEntry position;
  position.data_file = MinimalDataFile(7);
  position.data_file.content = FileContent::kPositionDeletes;
  position.data_file.referenced_data_file = "/lake/rides/data/00007-0-6c4bd1a8.parquet";
  position.data_file.lower_bounds = {{2147483546, "/lake/rides/data/00007-0-6c4bd1a8.parquet"}};
  manifest.entries.push_back(position);
  ManifestEntry equality;
  equality.data_file = FullDataFile(8);
  equality.data_file.content = FileContent::kEqualityDeletes;
  equality.data_file.equality_ids = {1, 2};
  equality.data_file.sort_order_id = std::nullopt;
  equality.snapshot_id = kSnapshotId;
  manifest.entries.push_back(equality);
  return manifest;
}

ManifestList SampleManifestList(std::optional<int64_t> parent_snapshot_id) {
  ManifestList list;
  list.header = {kSnapshotId, parent_snapshot_id, 5};
  ManifestFile data =
      DescribeNewManifest(DataManifest(8), "/lake/rides/metadata/a-m0.avro", 6120, kSnapshotId, 5);
  ManifestFile deletes =
      DescribeNewManifest(DeleteManifest(), "/lake/rides/metadata/a-m1.avro", 2048, kSnapshotId, 5);
  ManifestFile older;
  older.manifest_path = "/lake/rides/metadata/b-m0.avro";
  older.manifest_length = 9999;
  older.sequence_number = 2;
  older.min_sequence_number = 1;
  older.added_snapshot_id = kSnapshotId - 7;
  older.added_files_count = 3;
  older.existing_files_count = 1;
  older.added_rows_count = 3'000'000'000;
  older.existing_rows_count = 12;
  older.key_metadata = Bytes({0xca, 0xfe});
  list.manifests = {data, deletes, older};
  return list;
}

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// The byte offsets just past each sync marker: the end of the header and of every block. Every file
// ends with the marker (after its last block, or after the header when it has none).
std::vector<size_t> SyncMarkerEnds(const std::string& bytes) {
  const std::string sync = bytes.substr(bytes.size() - 16);
  std::vector<size_t> ends;
  for (size_t at = bytes.find(sync); at != std::string::npos; at = bytes.find(sync, at + 1)) {
    ends.push_back(at + 16);
  }
  return ends;
}

// ----- round trips -------------------------------------------------------------------------------

TEST(IcebergManifest, DataManifestRoundTripsThroughAFile) {
  TempDir dir;
  const Manifest manifest = DataManifest(40);
  for (const AvroCodec codec : {AvroCodec::kDeflate, AvroCodec::kNull}) {
    const std::string path = dir.Sub(codec == AvroCodec::kNull ? "null.avro" : "deflate.avro");
    Result<int64_t> length = WriteManifest(path, manifest, {.codec = codec});
    ASSERT_TRUE(length.ok()) << length.status().ToString();
    EXPECT_EQ(*length, static_cast<int64_t>(std::filesystem::file_size(path)));
    Result<Manifest> read = ReadManifest(path, *length);
    ASSERT_TRUE(read.ok()) << read.status().ToString();
    EXPECT_EQ(*read, manifest);
  }
  // Nothing but the two files: the temporary files were renamed into place.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 2);
}

TEST(IcebergManifest, ManyBlocksRoundTrip) {
  const Manifest manifest = DataManifest(300);
  for (const AvroCodec codec : {AvroCodec::kDeflate, AvroCodec::kNull}) {
    Result<std::string> bytes =
        EncodeManifest(manifest, {.codec = codec, .block_target_bytes = 700});
    ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
    EXPECT_GT(SyncMarkerEnds(*bytes).size(), 20u);  // the header's marker and one per block
    Result<Manifest> read = DecodeManifest(*bytes, "many-blocks.avro");
    ASSERT_TRUE(read.ok()) << read.status().ToString();
    EXPECT_EQ(*read, manifest);
  }
}

TEST(IcebergManifest, DeflateIsSmallerThanNull) {
  const Manifest manifest = DataManifest(200);
  const std::string deflated = EncodeManifest(manifest, {.codec = AvroCodec::kDeflate}).value();
  const std::string plain = EncodeManifest(manifest, {.codec = AvroCodec::kNull}).value();
  EXPECT_LT(deflated.size() * 3, plain.size());
}

TEST(IcebergManifest, DeleteAndEmptyManifestsRoundTrip) {
  for (const Manifest& manifest : {DeleteManifest(), Manifest{Header(ManifestContent::kData), {}},
                                   Manifest{Header(ManifestContent::kDeletes), {}}}) {
    Result<std::string> bytes = EncodeManifest(manifest);
    ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
    Result<Manifest> read = DecodeManifest(*bytes, "m.avro");
    ASSERT_TRUE(read.ok()) << read.status().ToString();
    EXPECT_EQ(*read, manifest);
  }
}

TEST(IcebergManifest, ManifestListRoundTripsThroughAFile) {
  TempDir dir;
  for (const auto& parent : {std::optional<int64_t>(), std::optional<int64_t>(kSnapshotId - 1)}) {
    const ManifestList list = SampleManifestList(parent);
    const std::string path = dir.Sub("snap.avro");
    Result<int64_t> length = WriteManifestList(path, list);
    ASSERT_TRUE(length.ok()) << length.status().ToString();
    EXPECT_EQ(*length, static_cast<int64_t>(std::filesystem::file_size(path)));
    Result<ManifestList> read = ReadManifestList(path);
    ASSERT_TRUE(read.ok()) << read.status().ToString();
    EXPECT_EQ(*read, list);
  }
}

TEST(IcebergManifest, DescribeNewManifestCountsEntriesByStatus) {
  // Entries 0..7: added 0, 2, 4, 6; existing 1, 5 (sequence 3); deleted 3, 7 (sequence 2).
  const Manifest manifest = DataManifest(8);
  const ManifestFile file = DescribeNewManifest(manifest, "/m.avro", 777, kSnapshotId, 9);
  EXPECT_EQ(file.manifest_path, "/m.avro");
  EXPECT_EQ(file.manifest_length, 777);
  EXPECT_EQ(file.partition_spec_id, 0);
  EXPECT_EQ(file.content, ManifestContent::kData);
  EXPECT_EQ(file.sequence_number, 9);
  EXPECT_EQ(file.min_sequence_number, 3);  // deleted entries (2) are not live
  EXPECT_EQ(file.added_snapshot_id, kSnapshotId);
  EXPECT_EQ(file.added_files_count, 4);
  EXPECT_EQ(file.existing_files_count, 2);
  EXPECT_EQ(file.deleted_files_count, 2);
  int64_t added_rows = 0;
  for (int i : {0, 2, 4, 6}) added_rows += manifest.entries[i].data_file.record_count;
  EXPECT_EQ(file.added_rows_count, added_rows);
  EXPECT_EQ(file.existing_rows_count, manifest.entries[1].data_file.record_count +
                                          manifest.entries[5].data_file.record_count);
  EXPECT_EQ(file.deleted_rows_count, manifest.entries[3].data_file.record_count +
                                         manifest.entries[7].data_file.record_count);
  EXPECT_TRUE(file.partitions.empty());

  // Only added entries: they all inherit the manifest's sequence number.
  Manifest added{Header(ManifestContent::kData), {ManifestEntry{.data_file = MinimalDataFile(1)}}};
  EXPECT_EQ(DescribeNewManifest(added, "/a.avro", 1, kSnapshotId, 9).min_sequence_number, 9);
}

// A merged deletes manifest (what a merge_by_key landing writes past the merge threshold): the
// equality deletes of earlier snapshots as EXISTING entries keeping their own sequence numbers —
// a delete applies only to data files older than itself, so it must never take a newer number —
// beside this snapshot's ADDED one, which inherits the manifest's.
TEST(IcebergManifest, MergedEqualityDeleteManifestKeepsEachDeletesSequenceNumber) {
  Manifest manifest{Header(ManifestContent::kDeletes), {}};
  for (int64_t sequence : {3, 6}) {
    ManifestEntry existing;
    existing.status = EntryStatus::kExisting;
    existing.snapshot_id = kSnapshotId - 10 + sequence;
    existing.sequence_number = sequence;
    existing.file_sequence_number = sequence;
    existing.data_file = MinimalDataFile(static_cast<int>(sequence));
    existing.data_file.content = FileContent::kEqualityDeletes;
    existing.data_file.equality_ids = {1};
    manifest.entries.push_back(existing);
  }
  ManifestEntry added{.snapshot_id = kSnapshotId, .data_file = MinimalDataFile(40)};
  added.data_file.content = FileContent::kEqualityDeletes;
  added.data_file.equality_ids = {2, 1};  // a two-column key, in the key's order
  manifest.entries.push_back(added);

  TempDir dir;
  const std::string path = dir.Sub("deletes.avro");
  Result<int64_t> bytes = WriteManifest(path, manifest);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  Result<Manifest> read = ReadManifest(path, *bytes);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(*read, manifest);
  EXPECT_EQ(read->entries[0].sequence_number, 3);
  EXPECT_EQ(read->entries[2].sequence_number, std::nullopt);
  EXPECT_THAT(read->entries[2].data_file.equality_ids, ::testing::ElementsAre(2, 1));

  const ManifestFile file = DescribeNewManifest(manifest, path, *bytes, kSnapshotId, 9);
  EXPECT_EQ(file.content, ManifestContent::kDeletes);
  EXPECT_EQ(file.min_sequence_number, 3);
  EXPECT_EQ(file.added_files_count, 1);
  EXPECT_EQ(file.existing_files_count, 2);
  EXPECT_EQ(file.added_rows_count, 40) << "for delete files, rows count the deletes";
  EXPECT_EQ(file.existing_rows_count, 3 + 6);
}

// ----- what writers refuse -----------------------------------------------------------------------

void ExpectRefused(const Manifest& manifest, StatusCode code, std::string_view fragment) {
  Result<std::string> bytes = EncodeManifest(manifest);
  ASSERT_FALSE(bytes.ok());
  EXPECT_EQ(bytes.status().code(), code) << bytes.status().ToString();
  EXPECT_THAT(bytes.status().message(), HasSubstr(std::string(fragment)));
}

TEST(IcebergManifest, WriterRefusesManifestsThatBreakTheSpec) {
  Manifest manifest = DataManifest(2);
  manifest.entries[1].sequence_number.reset();  // EXISTING without its sequence number
  ExpectRefused(manifest, StatusCode::kInvalidArgument, "only ADDED ones inherit");

  manifest = DeleteManifest();
  manifest.entries[1].data_file.equality_ids.clear();
  ExpectRefused(manifest, StatusCode::kInvalidArgument, "equality_ids");

  manifest = DeleteManifest();
  manifest.entries[1].data_file.equality_ids = {1, 2, 1};
  ExpectRefused(manifest, StatusCode::kInvalidArgument, "equality_ids listing 1");

  manifest = DeleteManifest();
  manifest.entries[1].data_file.equality_ids = {0};
  ExpectRefused(manifest, StatusCode::kInvalidArgument, "each must be a field id, once");

  manifest = DeleteManifest();
  manifest.entries[0].data_file.sort_order_id = 0;
  ExpectRefused(manifest, StatusCode::kInvalidArgument, "sort_order_id on position deletes");

  manifest = DataManifest(1);
  manifest.header.content = ManifestContent::kDeletes;
  ExpectRefused(manifest, StatusCode::kInvalidArgument, "a data file in a deletes manifest");

  manifest = DataManifest(1);
  manifest.entries[0].data_file.split_offsets = {10, 4};
  ExpectRefused(manifest, StatusCode::kInvalidArgument, "ascending");

  manifest = DataManifest(1);
  manifest.header.schema_id = 2;  // the JSON says 1
  ExpectRefused(manifest, StatusCode::kInvalidArgument, "schema-id");

  manifest = DataManifest(1);
  manifest.header.partition_spec.fields.push_back({3, 1000, "fare_bucket", "bucket[16]"});
  ExpectRefused(manifest, StatusCode::kNotSupported, "unpartitioned");

  ManifestList list = SampleManifestList(std::nullopt);
  list.manifests[0].sequence_number = 6;  // after the snapshot's own sequence number 5
  Result<std::string> bytes = EncodeManifestList(list);
  ASSERT_FALSE(bytes.ok());
  EXPECT_EQ(bytes.status().code(), StatusCode::kInvalidArgument);
}

TEST(IcebergManifest, WriteReportsIOErrorsWithThePath) {
  TempDir dir;
  const std::string path = dir.Sub("missing-dir/m.avro");
  Result<int64_t> length = WriteManifest(path, DataManifest(1));
  ASSERT_FALSE(length.ok());
  EXPECT_EQ(length.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(length.status().message(), HasSubstr(path));

  Result<Manifest> read = ReadManifest(dir.Sub("absent.avro"));
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(read.status().message(), HasSubstr(dir.Sub("absent.avro")));
}

// ----- damaged files -----------------------------------------------------------------------------

class DamagedManifest : public ::testing::Test {
 protected:
  void SetUp() override {
    bytes_ =
        EncodeManifest(DataManifest(30), {.codec = AvroCodec::kDeflate, .block_target_bytes = 2000})
            .value();
    path_ = dir_.Sub("damaged.avro");
  }

  Status ReadDamaged(const std::string& bytes) {
    WriteBytes(path_, bytes);
    return ReadManifest(path_).status();
  }

  TempDir dir_;
  std::string bytes_;
  std::string path_;
};

TEST_F(DamagedManifest, ChangedSyncMarkerIsCorruptionNamingFileAndBlock) {
  const std::vector<size_t> ends = SyncMarkerEnds(bytes_);
  ASSERT_GE(ends.size(), 3u);
  std::string damaged = bytes_;
  damaged[ends[1] - 1] ^= 0x01;  // the marker after block 0
  const Status status = ReadDamaged(damaged);
  EXPECT_EQ(status.code(), StatusCode::kCorruption);
  EXPECT_THAT(status.message(), HasSubstr(path_));
  EXPECT_THAT(status.message(), HasSubstr(fmt::format("block 0 at byte offset {}", ends[0])));
  EXPECT_THAT(status.message(), HasSubstr("sync marker"));
}

TEST_F(DamagedManifest, EveryTruncationIsCorruptionOrShowsInTheLength) {
  const std::vector<size_t> ends = SyncMarkerEnds(bytes_);
  for (size_t length = 0; length < bytes_.size(); ++length) {
    const std::string cut = bytes_.substr(0, length);
    if (std::find(ends.begin(), ends.end(), length) != ends.end()) {
      // Cut right after a block (or the header): valid Avro with fewer records. The manifest list's
      // manifest_length is what catches it.
      WriteBytes(path_, cut);
      const Status status = ReadManifest(path_, static_cast<int64_t>(bytes_.size())).status();
      EXPECT_EQ(status.code(), StatusCode::kCorruption) << length;
      EXPECT_THAT(status.message(), HasSubstr("manifest list says"));
      continue;
    }
    const Status status = DecodeManifest(cut, path_).status();
    ASSERT_EQ(status.code(), StatusCode::kCorruption)
        << "cut at " << length << ": " << status.ToString();
    EXPECT_THAT(status.message(), HasSubstr(path_));
  }
  EXPECT_EQ(ReadDamaged(bytes_.substr(0, bytes_.size() - 1)).code(), StatusCode::kCorruption);
}

TEST_F(DamagedManifest, WrongMagicIsCorruption) {
  std::string damaged = bytes_;
  damaged[3] = '\x02';
  const Status status = ReadDamaged(damaged);
  EXPECT_EQ(status.code(), StatusCode::kCorruption);
  EXPECT_THAT(status.message(), HasSubstr("does not start with 'Obj' 0x01"));
}

TEST_F(DamagedManifest, OtherFormatVersionIsNotSupported) {
  // The header map holds "format-version" then its value, each with a zigzag length: 1 → 0x02.
  const std::string key = "format-version" + Bytes({0x02}) + "2";
  const size_t at = bytes_.find(key);
  ASSERT_NE(at, std::string::npos);
  std::string damaged = bytes_;
  damaged[at + key.size() - 1] = '3';
  const Status status = ReadDamaged(damaged);
  EXPECT_EQ(status.code(), StatusCode::kNotSupported);
  EXPECT_THAT(status.message(), HasSubstr("format version 3"));
}

// Flip every byte after the header, with and without compression, and make sure each flip reads as
// a clean error (or as other values where the encoding cannot tell), never a crash: without a codec
// the records lie bare, and Avro C trusts every length in them, so the encoding check in front of
// it must not.
TEST(IcebergManifestDamage, EverySingleByteFlipIsHandled) {
  const Manifest manifest = DataManifest(4);
  for (const AvroCodec codec : {AvroCodec::kNull, AvroCodec::kDeflate}) {
    const std::string bytes = EncodeManifest(manifest, {.codec = codec}).value();
    const size_t header_end = SyncMarkerEnds(bytes).front();
    int corruptions = 0;
    for (size_t at = header_end; at < bytes.size(); ++at) {
      for (const int mask : {0x01, 0x80, 0xff}) {
        std::string damaged = bytes;
        damaged[at] ^= static_cast<char>(mask);
        Result<Manifest> read = DecodeManifest(damaged, "flipped.avro");
        if (read.ok()) {
          // A deflate stream ends with padding bits nobody reads: flipping those changes nothing.
          if (codec == AvroCodec::kNull) {
            EXPECT_NE(*read, manifest) << "flip at " << at;
          }
          continue;
        }
        EXPECT_EQ(read.status().code(), StatusCode::kCorruption) << read.status().ToString();
        EXPECT_THAT(read.status().message(), HasSubstr("flipped.avro"));
        ++corruptions;
      }
    }
    EXPECT_GT(corruptions, 0);
  }
}

TEST(IcebergManifestDamage, AHugeStringLengthIsCaughtBeforeAvroC) {
  Manifest manifest{Header(ManifestContent::kData),
                    {ManifestEntry{.data_file = MinimalDataFile(1)}}};
  std::string bytes = EncodeManifest(manifest, {.codec = AvroCodec::kNull}).value();
  const std::string& path = manifest.entries[0].data_file.file_path;
  const size_t at = bytes.find(path);
  ASSERT_NE(at, std::string::npos);
  // The byte before the path is its zigzag length; make it -1 (0x01), which Avro C would turn
  // into a write before its buffer.
  for (const int length_byte : {0x01, 0x7f}) {
    bytes[at - 1] = static_cast<char>(length_byte);
    Result<Manifest> read = DecodeManifest(bytes, "huge.avro");
    ASSERT_FALSE(read.ok());
    EXPECT_EQ(read.status().code(), StatusCode::kCorruption);
    EXPECT_THAT(read.status().message(), HasSubstr("string length"));
  }
}

// ----- single values (spec appendix D), bytes worked out by hand ---------------------------------

LogicalType Decimal(int precision, int scale) {
  return LogicalType::Decimal(precision, scale).value();
}

void ExpectEncoding(const LogicalType& type, const PrimitiveValue& value,
                    const std::string& expected) {
  Result<std::string> encoded = EncodeSingleValue(type, value);
  ASSERT_TRUE(encoded.ok()) << encoded.status().ToString();
  EXPECT_EQ(Hex(*encoded), Hex(expected)) << type.ToString();
  Result<PrimitiveValue> decoded = DecodeSingleValue(type, *encoded);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_TRUE(*decoded == value) << type.ToString() << " " << Hex(expected);
}

TEST(IcebergBounds, FixedWidthTypesAreLittleEndian) {
  ExpectEncoding(LogicalType::Boolean(), false, Bytes({0x00}));
  ExpectEncoding(LogicalType::Boolean(), true, Bytes({0x01}));
  ExpectEncoding(LogicalType::Int(), int32_t{1}, Bytes({0x01, 0x00, 0x00, 0x00}));
  ExpectEncoding(LogicalType::Int(), int32_t{-2}, Bytes({0xfe, 0xff, 0xff, 0xff}));
  ExpectEncoding(LogicalType::Long(), int64_t{0x0102030405060708},
                 Bytes({0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01}));
  ExpectEncoding(LogicalType::Long(), int64_t{-1}, std::string(8, '\xff'));
  ExpectEncoding(LogicalType::Float(), 1.0f, Bytes({0x00, 0x00, 0x80, 0x3f}));
  ExpectEncoding(LogicalType::Float(), -0.0f, Bytes({0x00, 0x00, 0x00, 0x80}));
  ExpectEncoding(LogicalType::Double(), 1.0, Bytes({0, 0, 0, 0, 0, 0, 0xf0, 0x3f}));
  ExpectEncoding(LogicalType::Double(), -2.5, Bytes({0, 0, 0, 0, 0, 0, 0x04, 0xc0}));
  // 2022-01-08 is day 19000 = 0x4a38.
  ExpectEncoding(LogicalType::Date(), int32_t{19000}, Bytes({0x38, 0x4a, 0x00, 0x00}));
  // 01:00:00 is 3,600,000,000 µs = 0xd693a400.
  ExpectEncoding(LogicalType::Time(), int64_t{3'600'000'000},
                 Bytes({0x00, 0xa4, 0x93, 0xd6, 0x00, 0x00, 0x00, 0x00}));
  // 2024-01-01T00:00:00 is 1,704,067,200,000,000 µs = 0x00060dd710212000.
  const std::string new_year = Bytes({0x00, 0x20, 0x21, 0x10, 0xd7, 0x0d, 0x06, 0x00});
  ExpectEncoding(LogicalType::Timestamp(), int64_t{1'704'067'200'000'000}, new_year);
  ExpectEncoding(LogicalType::TimestampTz(), int64_t{1'704'067'200'000'000}, new_year);
}

TEST(IcebergBounds, StringsBinaryAndUuidsAreTheirBytes) {
  ExpectEncoding(LogicalType::String(), std::string("iceberg"),
                 Bytes({0x69, 0x63, 0x65, 0x62, 0x65, 0x72, 0x67}));
  ExpectEncoding(LogicalType::String(), std::string("é"), Bytes({0xc3, 0xa9}));
  ExpectEncoding(LogicalType::String(), std::string(), std::string());
  ExpectEncoding(LogicalType::Binary(), Bytes({0x00, 0x01, 0xff}), Bytes({0x00, 0x01, 0xff}));
  // f79c3e09-677c-4bbd-a479-3f349cb785e7 (the spec's JSON example), most significant byte first.
  const std::string uuid = Bytes({0xf7, 0x9c, 0x3e, 0x09, 0x67, 0x7c, 0x4b, 0xbd, 0xa4, 0x79, 0x3f,
                                  0x34, 0x9c, 0xb7, 0x85, 0xe7});
  ExpectEncoding(LogicalType::Uuid(), uuid, uuid);
}

TEST(IcebergBounds, DecimalsAreMinimalBigEndianTwosComplement) {
  const LogicalType fare = Decimal(10, 2);
  ExpectEncoding(fare, Decimal128::FromInt64(0), Bytes({0x00}));
  ExpectEncoding(fare, Decimal128::FromInt64(1), Bytes({0x01}));
  ExpectEncoding(fare, Decimal128::FromInt64(-1), Bytes({0xff}));
  ExpectEncoding(fare, Decimal128::FromInt64(127), Bytes({0x7f}));
  ExpectEncoding(fare, Decimal128::FromInt64(128), Bytes({0x00, 0x80}));
  ExpectEncoding(fare, Decimal128::FromInt64(-128), Bytes({0x80}));
  ExpectEncoding(fare, Decimal128::FromInt64(-129), Bytes({0xff, 0x7f}));
  ExpectEncoding(fare, Decimal128::FromInt64(1420), Bytes({0x05, 0x8c}));  // 14.20
  // ±(10^38 − 1), the largest decimal(38, s): all 16 bytes.
  const LogicalType widest = Decimal(38, 0);
  ExpectEncoding(widest, Decimal128{0x098a223fffffffffULL, 0x4b3b4ca85a86c47aLL},
                 Bytes({0x4b, 0x3b, 0x4c, 0xa8, 0x5a, 0x86, 0xc4, 0x7a, 0x09, 0x8a, 0x22, 0x3f,
                        0xff, 0xff, 0xff, 0xff}));
  ExpectEncoding(widest,
                 Decimal128{0xf675ddc000000001ULL, static_cast<int64_t>(0xb4c4b357a5793b85ULL)},
                 Bytes({0xb4, 0xc4, 0xb3, 0x57, 0xa5, 0x79, 0x3b, 0x85, 0xf6, 0x75, 0xdd, 0xc0,
                        0x00, 0x00, 0x00, 0x01}));
  // 2^64: the low half is zero, the high half one.
  ExpectEncoding(widest, Decimal128{0, 1}, Bytes({0x01, 0, 0, 0, 0, 0, 0, 0, 0}));
}

TEST(IcebergBounds, EncoderRefusesWhatIsNoBound) {
  EXPECT_EQ(EncodeSingleValue(LogicalType::Double(), std::nan("")).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(EncodeSingleValue(LogicalType::Float(), std::numeric_limits<float>::quiet_NaN())
                .status()
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(EncodeSingleValue(LogicalType::Int(), int64_t{1}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(EncodeSingleValue(LogicalType::Uuid(), std::string(15, 'x')).status().code(),
            StatusCode::kInvalidArgument);
  const LogicalType list = LogicalType::List(Field{5, "element", LogicalType::Int(), true});
  EXPECT_EQ(EncodeSingleValue(list, int32_t{1}).status().code(), StatusCode::kNotSupported);
}

TEST(IcebergBounds, DecoderChecksLengthsAndReadsPromotedBounds) {
  EXPECT_EQ(DecodeSingleValue(LogicalType::Int(), Bytes({1, 0, 0})).status().code(),
            StatusCode::kCorruption);
  EXPECT_EQ(DecodeSingleValue(LogicalType::Date(), std::string(8, '\0')).status().code(),
            StatusCode::kCorruption);
  EXPECT_EQ(DecodeSingleValue(LogicalType::Uuid(), std::string(4, '\0')).status().code(),
            StatusCode::kCorruption);
  EXPECT_EQ(DecodeSingleValue(Decimal(10, 2), std::string()).status().code(),
            StatusCode::kCorruption);
  EXPECT_EQ(DecodeSingleValue(Decimal(38, 2), std::string(17, '\x01')).status().code(),
            StatusCode::kCorruption);
  // Written while the column was an int (float), read after its promotion to long (double).
  EXPECT_TRUE(DecodeSingleValue(LogicalType::Long(), Bytes({0xfe, 0xff, 0xff, 0xff})).value() ==
              PrimitiveValue(int64_t{-2}));
  EXPECT_TRUE(DecodeSingleValue(LogicalType::Double(), Bytes({0x00, 0x00, 0x80, 0x3f})).value() ==
              PrimitiveValue(1.0));
  EXPECT_TRUE(DecodeSingleValue(LogicalType::Boolean(), Bytes({0x07})).value() ==
              PrimitiveValue(true));
}

TEST(IcebergBounds, StringBoundsKeepSixteenCodePoints) {
  const LogicalType text = LogicalType::String();
  const std::string alphabet = "abcdefghijklmnopqrstuvwxyz";
  EXPECT_EQ(TruncateLowerBound(text, alphabet), "abcdefghijklmnop");
  EXPECT_EQ(TruncateUpperBound(text, alphabet), "abcdefghijklmnoq");
  EXPECT_EQ(TruncateLowerBound(text, "short"), "short");
  EXPECT_EQ(TruncateUpperBound(text, "short"), "short");  // exact: nothing cut, nothing incremented
  // Code points, not bytes: 17 two-byte "é" keep 16 (32 bytes); the last becomes "ê".
  std::string accents;
  for (int i = 0; i < 17; ++i) accents += "é";
  EXPECT_EQ(TruncateLowerBound(text, accents), accents.substr(0, 32));
  EXPECT_EQ(TruncateUpperBound(text, accents), accents.substr(0, 30) + "ê");
  // U+10FFFF cannot be incremented: the code point before it is, and the rest dropped.
  EXPECT_EQ(TruncateUpperBound(text, "ab\U0010FFFFcd", 3), "ac");
  EXPECT_EQ(TruncateUpperBound(text, "\U0010FFFF\U0010FFFFx", 2), std::nullopt);
  // After U+D7FF comes U+E000: UTF-8 has no surrogates.
  EXPECT_EQ(TruncateUpperBound(text, "a\uD7FFz", 2), "a\uE000");
}

TEST(IcebergBounds, BinaryBoundsKeepSixteenBytes) {
  const LogicalType binary = LogicalType::Binary();
  const std::string long_value(20, '\x10');
  EXPECT_EQ(TruncateLowerBound(binary, long_value), std::string(16, '\x10'));
  EXPECT_EQ(TruncateUpperBound(binary, long_value), std::string(15, '\x10') + '\x11');
  EXPECT_EQ(TruncateUpperBound(binary, Bytes({0x01, 0xff, 0xff}), 2), Bytes({0x02}));
  EXPECT_EQ(TruncateUpperBound(binary, Bytes({0xff, 0xff, 0x00}), 2), std::nullopt);
  // Other types are never truncated.
  const std::string eight(8, '\x7f');
  EXPECT_EQ(TruncateUpperBound(LogicalType::Long(), eight, 2), eight);
  EXPECT_EQ(TruncateLowerBound(LogicalType::Long(), eight, 2), eight);
}

// ----- an independent reader: Debian's python3-avro ----------------------------------------------

constexpr char kPython[] = "/usr/bin/python3";

// Reads one Avro file and prints, as JSON: the header metadata, every record (bytes as
// {"hex": ...}), and for every field of the writer's schema its Iceberg id, whether it is optional
// and its Avro type, as python3-avro parsed them.
constexpr char kReaderScript[] = R"PY(
import json, sys, warnings
warnings.simplefilter("ignore")  # Iceberg's "map" logical type on arrays is unknown to Avro
import avro.datafile, avro.io, avro.schema

def plain(value):
    if isinstance(value, bytes):
        return {"hex": value.hex()}
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [plain(item) for item in value]
    return value

def describe(schema, path, fields, map_arrays):
    optional = False
    if isinstance(schema, avro.schema.UnionSchema):
        branches = [s for s in schema.schemas if s.type != "null"]
        optional = len(branches) < len(schema.schemas)
        schema = branches[0]
    if isinstance(schema, avro.schema.RecordSchema):
        for field in schema.fields:
            child = path + [field.name]
            info = describe(field.type, child, fields, map_arrays)
            info["id"] = field.other_props.get("field-id")
            fields[".".join(child)] = info
    elif isinstance(schema, avro.schema.ArraySchema):
        if schema.props.get("logicalType") == "map":
            map_arrays.append(".".join(path))
        child = path + ["element"]
        info = describe(schema.items, child, fields, map_arrays)
        if "element-id" in schema.other_props:
            info["id"] = schema.other_props["element-id"]
            fields[".".join(child)] = info
    return {"optional": optional, "type": schema.type}

with avro.datafile.DataFileReader(open(sys.argv[1], "rb"), avro.io.DatumReader()) as reader:
    meta = {key: value.decode("utf-8") for key, value in reader.meta.items()}
    records = [plain(record) for record in reader]
    fields, map_arrays = {}, []
    describe(reader.datum_reader.writers_schema, [], fields, map_arrays)
print(json.dumps({"meta": meta, "records": records, "fields": fields, "map_arrays": map_arrays}))
)PY";

// Writes an Avro file from a JSON description: {"schema", "codec", "meta", "records"} (bytes as
// {"hex": ...}).
constexpr char kWriterScript[] = R"PY(
import json, sys, warnings
warnings.simplefilter("ignore")
import avro.datafile, avro.io, avro.schema

def unhex(value):
    if isinstance(value, dict) and set(value) == {"hex"}:
        return bytes.fromhex(value["hex"])
    if isinstance(value, dict):
        return {key: unhex(item) for key, item in value.items()}
    if isinstance(value, list):
        return [unhex(item) for item in value]
    return value

with open(sys.argv[1]) as description_file:
    description = json.load(description_file)
schema = avro.schema.parse(json.dumps(description["schema"]))
with avro.datafile.DataFileWriter(open(sys.argv[2], "wb"), avro.io.DatumWriter(), schema,
                                  codec=description["codec"]) as writer:
    for key, value in description["meta"].items():
        writer.set_meta(key, value.encode("utf-8"))
    for record in description["records"]:
        writer.append(unhex(record))
)PY";

bool PythonHasAvro() {
  const std::string command = fmt::format("{} -c 'import avro' >/dev/null 2>&1", kPython);
  return std::system(command.c_str()) == 0;
}

nlohmann::json ReadWithPython(const TempDir& dir, const std::string& avro_path) {
  const std::string script = dir.Write("read_avro.py", kReaderScript);
  const std::string errors = dir.Sub("python-errors.txt");
  const std::string command = fmt::format("{} {} {} 2>{}", kPython, script, avro_path, errors);
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    ADD_FAILURE() << "cannot run " << command;
    return {};
  }
  std::string output;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof(buffer), pipe)) > 0;) output.append(buffer, n);
  const int rc = pclose(pipe);
  if (rc != 0) {
    ADD_FAILURE() << "python3-avro could not read " << avro_path << ":\n" << ReadBytes(errors);
    return {};
  }
  return nlohmann::json::parse(output);
}

void WriteWithPython(const TempDir& dir, const nlohmann::json& description,
                     const std::string& avro_path) {
  const std::string script = dir.Write("write_avro.py", kWriterScript);
  const std::string input = dir.Write("description.json", description.dump());
  const std::string errors = dir.Sub("python-errors.txt");
  const std::string command =
      fmt::format("{} {} {} {} 2>{}", kPython, script, input, avro_path, errors);
  if (std::system(command.c_str()) != 0) {
    ADD_FAILURE() << "python3-avro could not write " << avro_path << ":\n" << ReadBytes(errors);
  }
}

// The records as python3-avro shows them, built from the model independently of our Avro schema.
nlohmann::json Hexed(const std::optional<std::string>& bytes) {
  return bytes ? nlohmann::json{{"hex", Hex(*bytes)}} : nlohmann::json(nullptr);
}

template <typename Value, typename ToJson>
nlohmann::json KeyValues(const std::map<int32_t, Value>& entries, const ToJson& to_json) {
  if (entries.empty()) return nullptr;
  nlohmann::json items = nlohmann::json::array();
  for (const auto& [key, value] : entries) {
    items.push_back({{"key", key}, {"value", to_json(value)}});
  }
  return items;
}

template <typename Item>
nlohmann::json ListOrNull(const std::vector<Item>& items) {
  return items.empty() ? nlohmann::json(nullptr) : nlohmann::json(items);
}

template <typename Value>
nlohmann::json OrNull(const std::optional<Value>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

nlohmann::json ExpectedRecord(const ManifestEntry& entry) {
  const DataFile& file = entry.data_file;
  const auto same = [](int64_t count) { return count; };
  const auto hexed = [](const std::string& bytes) { return nlohmann::json{{"hex", Hex(bytes)}}; };
  return {{"status", static_cast<int>(entry.status)},
          {"snapshot_id", OrNull(entry.snapshot_id)},
          {"sequence_number", OrNull(entry.sequence_number)},
          {"file_sequence_number", OrNull(entry.file_sequence_number)},
          {"data_file",
           {{"content", static_cast<int>(file.content)},
            {"file_path", file.file_path},
            {"file_format", file.file_format},
            {"partition", nlohmann::json::object()},
            {"record_count", file.record_count},
            {"file_size_in_bytes", file.file_size_in_bytes},
            {"column_sizes", KeyValues(file.column_sizes, same)},
            {"value_counts", KeyValues(file.value_counts, same)},
            {"null_value_counts", KeyValues(file.null_value_counts, same)},
            {"nan_value_counts", KeyValues(file.nan_value_counts, same)},
            {"lower_bounds", KeyValues(file.lower_bounds, hexed)},
            {"upper_bounds", KeyValues(file.upper_bounds, hexed)},
            {"key_metadata", Hexed(file.key_metadata)},
            {"split_offsets", ListOrNull(file.split_offsets)},
            {"equality_ids", ListOrNull(file.equality_ids)},
            {"sort_order_id", OrNull(file.sort_order_id)},
            {"referenced_data_file", OrNull(file.referenced_data_file)}}}};
}

nlohmann::json ExpectedRecord(const ManifestFile& file) {
  nlohmann::json partitions = nlohmann::json::array();
  for (const PartitionFieldSummary& summary : file.partitions) {
    partitions.push_back({{"contains_null", summary.contains_null},
                          {"contains_nan", OrNull(summary.contains_nan)},
                          {"lower_bound", Hexed(summary.lower_bound)},
                          {"upper_bound", Hexed(summary.upper_bound)}});
  }
  return {{"manifest_path", file.manifest_path},
          {"manifest_length", file.manifest_length},
          {"partition_spec_id", file.partition_spec_id},
          {"content", static_cast<int>(file.content)},
          {"sequence_number", file.sequence_number},
          {"min_sequence_number", file.min_sequence_number},
          {"added_snapshot_id", file.added_snapshot_id},
          {"added_files_count", file.added_files_count},
          {"existing_files_count", file.existing_files_count},
          {"deleted_files_count", file.deleted_files_count},
          {"added_rows_count", file.added_rows_count},
          {"existing_rows_count", file.existing_rows_count},
          {"deleted_rows_count", file.deleted_rows_count},
          {"partitions", partitions},
          {"key_metadata", Hexed(file.key_metadata)}};
}

template <typename Item>
nlohmann::json ExpectedRecords(const std::vector<Item>& items) {
  nlohmann::json records = nlohmann::json::array();
  for (const Item& item : items) records.push_back(ExpectedRecord(item));
  return records;
}

// Field path → {id, optional, Avro type}, copied by hand from the spec's tables ("Manifest Entry
// Fields", "Data File Fields" for v2) — not from our schema code.
nlohmann::json SpecField(int id, bool is_optional, const char* type) {
  return {{"id", id}, {"optional", is_optional}, {"type", type}};
}

nlohmann::json ExpectedManifestFields() {
  nlohmann::json fields = {
      {"status", SpecField(0, false, "int")},
      {"snapshot_id", SpecField(1, true, "long")},
      {"sequence_number", SpecField(3, true, "long")},
      {"file_sequence_number", SpecField(4, true, "long")},
      {"data_file", SpecField(2, false, "record")},
      {"data_file.content", SpecField(134, false, "int")},
      {"data_file.file_path", SpecField(100, false, "string")},
      {"data_file.file_format", SpecField(101, false, "string")},
      {"data_file.partition", SpecField(102, false, "record")},
      {"data_file.record_count", SpecField(103, false, "long")},
      {"data_file.file_size_in_bytes", SpecField(104, false, "long")},
      {"data_file.key_metadata", SpecField(131, true, "bytes")},
      {"data_file.split_offsets", SpecField(132, true, "array")},
      {"data_file.split_offsets.element", SpecField(133, false, "long")},
      {"data_file.equality_ids", SpecField(135, true, "array")},
      {"data_file.equality_ids.element", SpecField(136, false, "int")},
      {"data_file.sort_order_id", SpecField(140, true, "int")},
      {"data_file.referenced_data_file", SpecField(143, true, "string")},
  };
  const struct {
    const char* name;
    int id, key_id, value_id;
    const char* value_type;
  } maps[] = {
      {"column_sizes", 108, 117, 118, "long"},      {"value_counts", 109, 119, 120, "long"},
      {"null_value_counts", 110, 121, 122, "long"}, {"nan_value_counts", 137, 138, 139, "long"},
      {"lower_bounds", 125, 126, 127, "bytes"},     {"upper_bounds", 128, 129, 130, "bytes"}};
  for (const auto& map : maps) {
    const std::string path = std::string("data_file.") + map.name;
    fields[path] = SpecField(map.id, true, "array");
    fields[path + ".element.key"] = SpecField(map.key_id, false, "int");
    fields[path + ".element.value"] = SpecField(map.value_id, false, map.value_type);
  }
  return fields;
}

nlohmann::json ExpectedManifestListFields() {
  return {
      {"manifest_path", SpecField(500, false, "string")},
      {"manifest_length", SpecField(501, false, "long")},
      {"partition_spec_id", SpecField(502, false, "int")},
      {"content", SpecField(517, false, "int")},
      {"sequence_number", SpecField(515, false, "long")},
      {"min_sequence_number", SpecField(516, false, "long")},
      {"added_snapshot_id", SpecField(503, false, "long")},
      {"added_files_count", SpecField(504, false, "int")},
      {"existing_files_count", SpecField(505, false, "int")},
      {"deleted_files_count", SpecField(506, false, "int")},
      {"added_rows_count", SpecField(512, false, "long")},
      {"existing_rows_count", SpecField(513, false, "long")},
      {"deleted_rows_count", SpecField(514, false, "long")},
      {"partitions", SpecField(507, true, "array")},
      {"partitions.element", SpecField(508, false, "record")},
      {"partitions.element.contains_null", SpecField(509, false, "boolean")},
      {"partitions.element.contains_nan", SpecField(518, true, "boolean")},
      {"partitions.element.lower_bound", SpecField(510, true, "bytes")},
      {"partitions.element.upper_bound", SpecField(511, true, "bytes")},
      {"key_metadata", SpecField(519, true, "bytes")},
  };
}

class PythonAvro : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!PythonHasAvro()) {
      GTEST_SKIP() << kPython << " cannot import avro (Debian package python3-avro): the "
                   << "independent-reader checks did not run";
    }
  }
  TempDir dir_;
};

TEST_F(PythonAvro, ReadsDataAndDeleteManifestsWithTheirFieldIds) {
  struct Case {
    std::string name;
    Manifest manifest;
    AvroWriteOptions options;
  };
  const std::vector<Case> cases = {
      {"data-deflate-many-blocks.avro", DataManifest(60), {AvroCodec::kDeflate, 900}},
      {"data-null.avro", DataManifest(5), {AvroCodec::kNull, 64 * 1024}},
      {"deletes.avro", DeleteManifest(), {}},
      {"empty.avro", Manifest{Header(ManifestContent::kData), {}}, {}},
  };
  for (const Case& test : cases) {
    SCOPED_TRACE(test.name);
    const std::string path = dir_.Sub(test.name);
    ASSERT_TRUE(WriteManifest(path, test.manifest, test.options).ok());
    const nlohmann::json read = ReadWithPython(dir_, path);
    ASSERT_FALSE(read.is_null());

    const nlohmann::json& meta = read["meta"];
    EXPECT_EQ(meta["avro.codec"], test.options.codec == AvroCodec::kNull ? "null" : "deflate");
    EXPECT_EQ(meta["schema"], kTableSchemaJson);
    EXPECT_EQ(meta["schema-id"], "1");
    EXPECT_EQ(meta["partition-spec"], "[]");
    EXPECT_EQ(meta["partition-spec-id"], "0");
    EXPECT_EQ(meta["format-version"], "2");
    EXPECT_EQ(meta["content"],
              test.manifest.header.content == ManifestContent::kData ? "data" : "deletes");
    // The stored schema is the one we wrote, ids and all (Avro C's writer would have dropped them).
    EXPECT_THAT(meta["avro.schema"].get<std::string>(), HasSubstr(R"("field-id":134)"));

    EXPECT_EQ(read["fields"], ExpectedManifestFields());
    EXPECT_THAT(
        read["map_arrays"].get<std::vector<std::string>>(),
        ::testing::UnorderedElementsAre("data_file.column_sizes", "data_file.value_counts",
                                        "data_file.null_value_counts", "data_file.nan_value_counts",
                                        "data_file.lower_bounds", "data_file.upper_bounds"));
    EXPECT_EQ(read["records"], ExpectedRecords(test.manifest.entries));
  }
}

TEST_F(PythonAvro, ReadsManifestListsWithTheirFieldIds) {
  for (const auto& parent : {std::optional<int64_t>(), std::optional<int64_t>(kSnapshotId - 1)}) {
    const ManifestList list = SampleManifestList(parent);
    const std::string path = dir_.Sub("snap.avro");
    ASSERT_TRUE(WriteManifestList(path, list).ok());
    const nlohmann::json read = ReadWithPython(dir_, path);
    ASSERT_FALSE(read.is_null());

    const nlohmann::json& meta = read["meta"];
    EXPECT_EQ(meta["snapshot-id"], std::to_string(kSnapshotId));
    EXPECT_EQ(meta["parent-snapshot-id"], parent ? std::to_string(*parent) : "null");
    EXPECT_EQ(meta["sequence-number"], "5");
    EXPECT_EQ(meta["format-version"], "2");
    EXPECT_EQ(read["fields"], ExpectedManifestListFields());
    EXPECT_EQ(read["records"], ExpectedRecords(list.manifests));
  }
}

// Another writer's manifest: python3-avro writes it with Iceberg's schema laid out differently —
// data_file fields in another order, "doc" attributes, a v3 field we do not know (first_row_id),
// optional fields left out, other record names. Fields are found by name, so it reads the same.
TEST_F(PythonAvro, ManifestFromAnotherWriterReads) {
  using nlohmann::json;
  const auto optional = [](const char* name, json type, int id) {
    return json{{"name", name},
                {"type", {"null", type}},
                {"default", nullptr},
                {"field-id", id},
                {"doc", "written by another tool"}};
  };
  const auto required = [](const char* name, json type, int id) {
    return json{{"name", name}, {"type", type}, {"field-id", id}};
  };
  const auto map = [](int key_id, int value_id, const char* value_type) {
    return json{{"type", "array"},
                {"logicalType", "map"},
                {"items",
                 {{"type", "record"},
                  {"name", fmt::format("k{}_v{}", key_id, value_id)},
                  {"fields",
                   {{{"name", "key"}, {"type", "int"}, {"field-id", key_id}},
                    {{"name", "value"}, {"type", value_type}, {"field-id", value_id}}}}}}};
  };
  const json data_file = {
      {"type", "record"},
      {"name", "data_file"},
      {"fields",
       {required("file_path", "string", 100), required("file_format", "string", 101),
        required("content", "int", 134),
        required("partition", json{{"type", "record"}, {"name", "r102"}, {"fields", json::array()}},
                 102),
        required("record_count", "long", 103), required("file_size_in_bytes", "long", 104),
        optional("value_counts", map(119, 120, "long"), 109),
        optional("null_value_counts", map(121, 122, "long"), 110),
        optional("upper_bounds", map(129, 130, "bytes"), 128),
        optional("lower_bounds", map(126, 127, "bytes"), 125),
        optional("split_offsets", json{{"type", "array"}, {"items", "long"}, {"element-id", 133}},
                 132),
        optional("sort_order_id", "int", 140), optional("first_row_id", "long", 142)}}};
  const json schema = {
      {"type", "record"},
      {"name", "manifest_entry"},
      {"fields",
       {required("status", "int", 0), optional("snapshot_id", "long", 1),
        optional("sequence_number", "long", 3), optional("file_sequence_number", "long", 4),
        required("data_file", data_file, 2)}}};
  const json record = {{"status", 0},
                       {"snapshot_id", kSnapshotId},
                       {"sequence_number", 7},
                       {"file_sequence_number", 8},
                       {"data_file",
                        {{"file_path", "s3://bucket/t/data/a.parquet"},
                         {"file_format", "PARQUET"},
                         {"content", 0},
                         {"partition", json::object()},
                         {"record_count", 10},
                         {"file_size_in_bytes", 4096},
                         {"value_counts", {{{"key", 1}, {"value", 10}}}},
                         {"null_value_counts", nullptr},
                         {"upper_bounds", {{{"key", 1}, {"value", {{"hex", "0a00000000000000"}}}}}},
                         {"lower_bounds", {{{"key", 1}, {"value", {{"hex", "0100000000000000"}}}}}},
                         {"split_offsets", {4}},
                         {"sort_order_id", nullptr},
                         {"first_row_id", 1000}}}};
  const json description = {{"schema", schema},
                            {"codec", "deflate"},
                            {"meta",
                             {{"schema", kTableSchemaJson},
                              {"schema-id", "1"},
                              {"partition-spec", "[]"},
                              {"partition-spec-id", "0"},
                              {"format-version", "2"},
                              {"content", "data"}}},
                            {"records", {record, record}}};
  const std::string path = dir_.Sub("from-python.avro");
  WriteWithPython(dir_, description, path);

  Result<Manifest> read = ReadManifest(path);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  ManifestEntry expected;
  expected.status = EntryStatus::kExisting;
  expected.snapshot_id = kSnapshotId;
  expected.sequence_number = 7;
  expected.file_sequence_number = 8;
  expected.data_file.file_path = "s3://bucket/t/data/a.parquet";
  expected.data_file.record_count = 10;
  expected.data_file.file_size_in_bytes = 4096;
  expected.data_file.value_counts = {{1, 10}};
  expected.data_file.lower_bounds = {{1, Bytes({1, 0, 0, 0, 0, 0, 0, 0})}};
  expected.data_file.upper_bounds = {{1, Bytes({10, 0, 0, 0, 0, 0, 0, 0})}};
  expected.data_file.split_offsets = {4};
  EXPECT_EQ(*read, (Manifest{Header(ManifestContent::kData), {expected, expected}}));
}

}  // namespace
}  // namespace skippr::iceberg
