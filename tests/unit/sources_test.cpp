// sources/: the Sample generator and the File source — formats, resume positions, changed files.
#include "sources/sources.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>

#include "support/temp_dir.hpp"

namespace skippr::sources {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

using skippr::testing::TempDir;

config::ConnectorConfig FileConnector(const std::string& path) {
  config::ConnectorConfig connector;
  connector.kind = "File";
  connector.settings["path"] = path;
  return connector;
}

config::ConnectorConfig SampleConnector(int64_t rows, int64_t seed) {
  config::ConnectorConfig connector;
  connector.kind = "Sample";
  connector.settings["rows"] = rows;
  connector.settings["seed"] = seed;
  return connector;
}

struct ReadResult {
  std::vector<SourceRecord> records;
  std::vector<schema::Deadletter> deadletters;
  SourcePositions positions;
};

// Reads up to `max_batches` batches (0: all), collecting records and the positions reached.
ReadResult Read(Source& source, const SourcePositions& committed, uint64_t batch_records,
                int max_batches = 0) {
  ReadOptions options;
  options.max_records_per_batch = batch_records;
  EXPECT_TRUE(source.Open(committed, options).ok());
  ReadResult result;
  result.positions = committed;
  for (int batches = 0; max_batches == 0 || batches < max_batches; ++batches) {
    Result<std::optional<SourceBatch>> batch = source.Next();
    EXPECT_TRUE(batch.ok()) << batch.status().message();
    if (!batch.ok() || !*batch) break;
    for (SourceRecord& record : (*batch)->records) result.records.push_back(std::move(record));
    for (schema::Deadletter& deadletter : (*batch)->deadletters)
      result.deadletters.push_back(deadletter);
    result.positions[(*batch)->partition] = (*batch)->position;
  }
  return result;
}

std::unique_ptr<Source> Make(const config::ConnectorConfig& connector) {
  Result<std::unique_ptr<Source>> source = MakeSource(connector);
  EXPECT_TRUE(source.ok()) << source.status().message();
  return std::move(source).value();
}

std::string JsonLines(int first, int last) {
  std::string text;
  for (int i = first; i <= last; ++i)
    text += "{\"id\":" + std::to_string(i) + ",\"name\":\"n" + std::to_string(i) + "\"}\n";
  return text;
}

int64_t IdOf(const SourceRecord& record) {
  const Value* id = record.value.Find("id");
  return id == nullptr ? -1 : id->as_int();
}

// ----- Sample ---------------------------------------------------------------------------------

TEST(SampleSource, IsDeterministicAndMatchesItsFigures) {
  EXPECT_EQ(SampleRide(42, 17), SampleRide(42, 17));
  EXPECT_NE(SampleRide(42, 17), SampleRide(43, 17));
  auto source = Make(SampleConnector(2000, 42));
  ReadResult all = Read(*source, {}, 300);
  ASSERT_EQ(all.records.size(), 2000u);
  int64_t cents = 0;
  int64_t seconds = 0;
  uint64_t members = 0;
  for (const SourceRecord& record : all.records) {
    cents += record.value.Find("amount")->as_int();
    seconds += record.value.Find("duration_seconds")->as_int();
    members += record.value.Find("rider_type")->as_string() == "member" ? 1 : 0;
  }
  const SampleFigures figures = ComputeSampleFigures(2000, 42);
  EXPECT_EQ(figures.rows, 2000u);
  EXPECT_EQ(figures.amount_cents_sum, cents);
  EXPECT_EQ(figures.duration_seconds_sum, seconds);
  EXPECT_EQ(figures.member_rides, members);
  EXPECT_TRUE(all.positions.at("sample").is_closed);
  EXPECT_EQ(all.records[0].value.Find("ride_id")->as_int(), 1);
  EXPECT_EQ(all.records[0].value.Find("start_station")->kind(), Value::Kind::kObject);
}

TEST(SampleSource, ResumesAfterTheCommittedRecord) {
  auto source = Make(SampleConnector(1000, 7));
  ReadResult first = Read(*source, {}, 100, 3);
  ASSERT_EQ(first.records.size(), 300u);
  EXPECT_FALSE(first.positions.at("sample").is_closed);
  ReadResult rest = Read(*source, first.positions, 100);
  ASSERT_EQ(rest.records.size(), 700u);
  EXPECT_EQ(rest.records.front().value, SampleRide(7, 300));
  EXPECT_EQ(Read(*source, rest.positions, 100).records.size(), 0u);
}

// ----- File: resume, closed and changed files -------------------------------------------------

TEST(FileSource, PlainJsonLinesResumeAtTheByteOffset) {
  TempDir dir;
  const std::string path = dir.Write("in/events.jsonl", JsonLines(1, 1000));
  auto source = Make(FileConnector(dir.path() + "/in"));
  ReadResult first = Read(*source, {}, 100, 2);
  ASSERT_EQ(first.records.size(), 200u);
  const PartitionPosition& position = first.positions.at(path);
  EXPECT_EQ(position.records_consumed, 200u);
  EXPECT_EQ(position.byte_offset, JsonLines(1, 200).size());
  EXPECT_EQ(position.next_line, 201u);
  EXPECT_FALSE(position.is_closed);
  ReadResult rest = Read(*source, first.positions, 100);
  ASSERT_EQ(rest.records.size(), 800u);
  EXPECT_EQ(IdOf(rest.records.front()), 201);
  EXPECT_EQ(rest.records.front().line, 201u);
  EXPECT_EQ(rest.records.front().row, 201u);
  EXPECT_EQ(IdOf(rest.records.back()), 1000);
  EXPECT_TRUE(rest.positions.at(path).is_closed);
}

// A CRLF line ends after its \n: resuming there keeps line numbers (found by
// tests/fuzz/json_source_fuzzer.cpp; the input is in tests/fuzz/json_source/regressions/).
TEST(FileSource, CrlfJsonLinesResumeAfterTheWholeLineEnd) {
  TempDir dir;
  const std::string text = "{\"id\":1}\r\n{\"id\":2}\r\n{broken}\r\n{\"id\":4}";
  const std::string path = dir.Write("events.jsonl", text);
  auto source = Make(FileConnector(path));
  ReadResult first = Read(*source, {}, 1, 1);
  ASSERT_EQ(first.records.size(), 1u);
  EXPECT_EQ(first.positions.at(path).byte_offset, text.find('{', 1));
  EXPECT_EQ(first.positions.at(path).next_line, 2u);
  ReadResult rest = Read(*source, first.positions, 1000);
  ASSERT_EQ(rest.records.size(), 2u);
  EXPECT_EQ(IdOf(rest.records[0]), 2);
  EXPECT_EQ(rest.records[0].line, 2u);
  ASSERT_EQ(rest.deadletters.size(), 1u);
  EXPECT_EQ(rest.deadletters[0].origin.line, 3u);
  EXPECT_EQ(rest.records[1].line, 4u);
  EXPECT_EQ(rest.positions.at(path).byte_offset, text.size());
  EXPECT_TRUE(rest.positions.at(path).is_closed);
}

TEST(FileSource, CompressedFilesResumeBySkippingConsumedRecords) {
  TempDir dir;
  const std::string path = dir.path() + "/events.jsonl.gz";
  const std::string text = JsonLines(1, 500);
  gzFile file = gzopen(path.c_str(), "wb");
  gzwrite(file, text.data(), static_cast<unsigned>(text.size()));
  gzclose(file);
  auto source = Make(FileConnector(path));
  ReadResult first = Read(*source, {}, 120, 1);
  ASSERT_EQ(first.records.size(), 120u);
  EXPECT_EQ(first.positions.at(path).byte_offset, 0u);  // no byte offset inside a compressed stream
  ReadResult rest = Read(*source, first.positions, 1000);
  ASSERT_EQ(rest.records.size(), 380u);
  EXPECT_EQ(IdOf(rest.records.front()), 121);
  EXPECT_EQ(rest.records.front().line, 121u);
}

TEST(FileSource, CsvResumes) {
  TempDir dir;
  std::string csv = "id,name\n";
  for (int i = 1; i <= 300; ++i) csv += std::to_string(i) + ",n" + std::to_string(i) + "\n";
  const std::string path = dir.Write("rows.csv", csv);
  auto source = Make(FileConnector(path));
  ReadResult first = Read(*source, {}, 100, 1);
  ReadResult rest = Read(*source, first.positions, 100);
  ASSERT_EQ(rest.records.size(), 200u);
  EXPECT_EQ(IdOf(rest.records.front()), 101);
  EXPECT_EQ(rest.records.front().line, 102u);  // the header is line 1
}

TEST(FileSource, ClosedUnchangedFilesAreSkippedAndChangedOnesReadAgain) {
  TempDir dir;
  const std::string path = dir.Write("events.jsonl", JsonLines(1, 50));
  auto source = Make(FileConnector(dir.path()));
  ReadResult all = Read(*source, {}, 1000);
  ASSERT_EQ(all.records.size(), 50u);
  ASSERT_TRUE(all.positions.at(path).is_closed);
  EXPECT_TRUE(Read(*source, all.positions, 1000).records.empty());
  dir.Write("events.jsonl", JsonLines(1, 60));  // changed after it closed: read again, whole
  ReadResult again = Read(*source, all.positions, 1000);
  ASSERT_EQ(again.records.size(), 60u);
  EXPECT_EQ(IdOf(again.records.front()), 1);
}

TEST(FileSource, AnUnfinishedFileThatGrewContinuesWhereItStopped) {
  TempDir dir;
  const std::string path = dir.Write("events.jsonl", JsonLines(1, 100));
  auto source = Make(FileConnector(path));
  ReadResult first = Read(*source, {}, 40, 1);
  dir.Write("events.jsonl", JsonLines(1, 150));
  ReadResult rest = Read(*source, first.positions, 1000);
  ASSERT_EQ(rest.records.size(), 110u);
  EXPECT_EQ(IdOf(rest.records.front()), 41);
  EXPECT_EQ(IdOf(rest.records.back()), 150);
}

// ----- File: listing and formats --------------------------------------------------------------

TEST(FileSource, ListsDirectoriesSortedSkippingHiddenFilesAndExpandsGlobs) {
  TempDir dir;
  dir.Write("b/2.jsonl", JsonLines(3, 3));
  dir.Write("a/1.jsonl", JsonLines(1, 2));
  dir.Write(".hidden/x.jsonl", JsonLines(9, 9));
  dir.Write("a/_tmp.jsonl", JsonLines(8, 8));
  auto all = Make(FileConnector(dir.path()));
  ReadResult records = Read(*all, {}, 1000);
  ASSERT_EQ(records.records.size(), 3u);
  EXPECT_EQ(IdOf(records.records[0]), 1);
  EXPECT_EQ(IdOf(records.records[2]), 3);
  auto globbed = Make(FileConnector(dir.path() + "/b/*.jsonl"));
  EXPECT_EQ(Read(*globbed, {}, 1000).records.size(), 1u);
}

TEST(FileSource, MissingPathIsExplained) {
  auto source = Make(FileConnector("/no/such/input"));
  Status status = source->Open({}, ReadOptions{});
  EXPECT_EQ(status.code(), StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr("File source path '/no/such/input' does not exist"));
}

TEST(FileSource, JsonArrayFilesAndTsv) {
  TempDir dir;
  dir.Write("list.json", "[{\"id\":1},{\"id\":2},\n{\"id\":3}]");
  dir.Write("rows.tsv", "id\tname\n4\ta,b\n");
  auto source = Make(FileConnector(dir.path()));
  ReadResult all = Read(*source, {}, 1000);
  ASSERT_EQ(all.records.size(), 4u);
  EXPECT_EQ(IdOf(all.records[2]), 3);
  EXPECT_EQ(all.records[3].value.Find("name")->as_string(), "a,b");
}

TEST(FileSource, SampleLimitPerPartition) {
  TempDir dir;
  dir.Write("a.jsonl", JsonLines(1, 100));
  dir.Write("b.jsonl", JsonLines(101, 200));
  auto source = Make(FileConnector(dir.path()));
  ReadOptions options;
  options.max_records_per_partition = 10;
  ASSERT_TRUE(source->Open({}, options).ok());
  uint64_t records = 0;
  while (true) {
    auto batch = source->Next();
    ASSERT_TRUE(batch.ok());
    if (!*batch) break;
    records += (*batch)->records.size();
  }
  EXPECT_EQ(records, 20u);
}

// ----- positions in the store -----------------------------------------------------------------

// Hands out `batches` numbered batches, then `failure` (or the end).
class NumberedSource : public Source {
 public:
  NumberedSource(int batches, Status failure) : batches_(batches), failure_(std::move(failure)) {}
  Status Open(const SourcePositions&, const ReadOptions&) override { return Status::OK(); }
  Result<std::optional<SourceBatch>> Next() override {
    if (next_ == batches_) {
      if (!failure_.ok()) return failure_;
      return std::optional<SourceBatch>();
    }
    SourceBatch batch;
    batch.partition = "p";
    batch.position.records_consumed = static_cast<uint64_t>(++next_);
    return std::optional<SourceBatch>(std::move(batch));
  }

 private:
  int batches_;
  Status failure_;
  int next_ = 0;
};

TEST(ReadAhead, HandsOverEveryBatchInOrderThenTheEnd) {
  std::unique_ptr<Source> source = ReadAhead(std::make_unique<NumberedSource>(100, Status::OK()), 3);
  ASSERT_TRUE(source->Open({}, {}).ok());
  for (uint64_t expected = 1; expected <= 100; ++expected) {
    Result<std::optional<SourceBatch>> batch = source->Next();
    ASSERT_TRUE(batch.ok() && batch->has_value()) << expected;
    EXPECT_EQ((*batch)->position.records_consumed, expected);
  }
  Result<std::optional<SourceBatch>> end = source->Next();
  ASSERT_TRUE(end.ok());
  EXPECT_FALSE(end->has_value());
}

TEST(ReadAhead, AnErrorArrivesAfterTheBatchesReadBeforeIt) {
  std::unique_ptr<Source> source = ReadAhead(
      std::make_unique<NumberedSource>(5, Status::IOError("input.jsonl: disk on fire")), 2);
  ASSERT_TRUE(source->Open({}, {}).ok());
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(source->Next().ok());
  Result<std::optional<SourceBatch>> failed = source->Next();
  ASSERT_FALSE(failed.ok());
  EXPECT_THAT(failed.status().message(), HasSubstr("disk on fire"));
}

TEST(ReadAhead, StopsReadingWhenDestroyedMidway) {
  std::unique_ptr<Source> source =
      ReadAhead(std::make_unique<NumberedSource>(1000000, Status::OK()), 4);
  ASSERT_TRUE(source->Open({}, {}).ok());
  ASSERT_TRUE(source->Next().ok());
  source.reset();  // the reader thread waits for room; destruction must wake and join it
}

TEST(SourcePositionsStore, RoundTrip) {
  TempDir dir;
  auto opened = store::Store::Open(store::StoreOptions{dir.path() + "/store"});
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  SourcePositions positions;
  positions["/data/a.jsonl"] = PartitionPosition{1234, 99, 10, 600, 11, false};
  positions["sample"] = PartitionPosition{1000, 0, 1000, 0, 1, true};
  {
    auto write = (*opened)->BeginWrite();
    ASSERT_TRUE(write.ok());
    ASSERT_TRUE(SavePositions(*write, positions).ok());
    ASSERT_TRUE(write->Commit().ok());
  }
  auto read = (*opened)->BeginRead();
  ASSERT_TRUE(read.ok());
  Result<SourcePositions> loaded = LoadPositions(*read);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  EXPECT_EQ(*loaded, positions);
}

}  // namespace
}  // namespace skippr::sources
