// sources/: the Sample generator and the File source — formats, resume positions, changed files.
#include "sources/sources.hpp"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
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
    cents += static_cast<int64_t>(record.value.Find("amount")->decimal_unscaled());
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

// A compressed file is read again from its start, skipping the 120 records already consumed
// (file_change_test checks the positions). `resumed_line`: the line of record 121.
void ExpectCompressedResumeSkips(const std::string& path, const std::string& text,
                                 uint64_t resumed_line) {
  gzFile file = gzopen(path.c_str(), "wb");
  gzwrite(file, text.data(), static_cast<unsigned>(text.size()));
  gzclose(file);
  auto source = Make(FileConnector(path));
  ReadResult first = Read(*source, {}, 120, 1);
  ASSERT_EQ(first.records.size(), 120u);
  ReadResult rest = Read(*source, first.positions, 1000);
  ASSERT_EQ(rest.records.size(), 380u);
  EXPECT_EQ(IdOf(rest.records.front()), 121);
  EXPECT_EQ(rest.records.front().line, resumed_line);
}

// A gzip file cut short (a broken copy, not one still being written): its records up to the damage
// are read, the rest is one deadletter naming the damage, and the pipeline goes on; a later pass
// neither reads the records again nor adds the deadletter twice.
TEST(FileSource, ATruncatedGzipFileCostsOnlyItsDamagedTail) {
  TempDir dir;
  std::string text;
  for (int id = 1; id <= 20'000; ++id) text += fmt::format("{{\"id\": {}, \"pad\": \"{}\"}}\n", id, id * 7919 % 10007);
  const std::string whole = dir.path() + "/whole.jsonl.gz";
  gzFile file = gzopen(whole.c_str(), "wb");
  gzwrite(file, text.data(), static_cast<unsigned>(text.size()));
  gzclose(file);
  std::string bytes;
  {
    std::ifstream in(whole, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  std::filesystem::remove(whole);
  const std::string path = dir.Write("cut.jsonl.gz", bytes.substr(0, bytes.size() / 2));
  auto source = Make(FileConnector(path));
  ReadResult first = Read(*source, {}, 1000);
  ASSERT_GT(first.records.size(), 1000u);
  ASSERT_LT(first.records.size(), 20'000u);
  EXPECT_EQ(IdOf(first.records.back()), static_cast<int64_t>(first.records.size()));
  ASSERT_EQ(first.deadletters.size(), 1u);
  EXPECT_THAT(first.deadletters[0].reason, HasSubstr("is truncated"));
  EXPECT_EQ(first.deadletters[0].origin.row, first.records.size() + 1);
  ReadResult again = Read(*source, first.positions, 1000);
  EXPECT_TRUE(again.records.empty());
  EXPECT_TRUE(again.deadletters.empty());
}

TEST(FileSource, CompressedFilesResumeBySkippingConsumedRecords) {
  TempDir dir;
  ExpectCompressedResumeSkips(dir.path() + "/events.jsonl.gz", JsonLines(1, 500), 121);
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

TEST(FileSource, ClosedUnchangedFilesAreSkippedAndAppendedOnesReadOn) {
  TempDir dir;
  const std::string path = dir.Write("events.jsonl", JsonLines(1, 50));
  auto source = Make(FileConnector(dir.path()));
  ReadResult all = Read(*source, {}, 1000);
  ASSERT_EQ(all.records.size(), 50u);
  ASSERT_TRUE(all.positions.at(path).is_closed);
  EXPECT_TRUE(Read(*source, all.positions, 1000).records.empty());
  dir.Write("events.jsonl", JsonLines(1, 60));  // appended after it closed: only the new lines
  ReadResult again = Read(*source, all.positions, 1000);
  ASSERT_EQ(again.records.size(), 10u);
  EXPECT_EQ(IdOf(again.records.front()), 51);  // (rewritten files: file_change_test.cpp)
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

// A named pipe exists but cannot be read again from a position: refused as what it is, not as
// a path that does not exist.
TEST(FileSource, APipeIsRefusedAsNotARegularFile) {
  TempDir dir;
  const std::string pipe = dir.Sub("events.jsonl");
  ASSERT_EQ(mkfifo(pipe.c_str(), 0600), 0);
  auto source = Make(FileConnector(pipe));
  Status status = source->Open({}, ReadOptions{});
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              HasSubstr("File source path '" + pipe + "' is not a regular file or a directory"));
  EXPECT_THAT(status.message(), HasSubstr("write the data to a file"));
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

// ----- File: hostile input loses nothing -----------------------------------------------------

// A field of a record, or the text "<missing>" (so a missing field fails the test, not the binary).
Value FieldOf(const Value& record, const std::string& name) {
  const Value* field = record.Find(name);
  return field != nullptr ? *field : Value::String("<missing>");
}

std::string Reasons(const ReadResult& result) {
  std::string text;
  for (const schema::Deadletter& deadletter : result.deadletters) {
    text += schema::DescribeDeadletter(deadletter) + "\n";
  }
  return text;
}

// Symptom: integers beyond 64 bits made simdjson reject the whole record (and CSV text lost
// digits in a double). Every digit is kept: decimal(38, 0), text beyond 38 digits, exact decimals.
TEST(FileSourceNumbers, JsonAndCsvNumbersKeepEveryDigit) {
  TempDir dir;
  const std::string numbers =
      "{\"n\":9223372036854775807,\"u\":18446744073709551615,\"big\":123456789012345678901234567890,"
      "\"neg\":-9223372036854775809,\"huge\":1234567890123456789012345678901234567890,"
      "\"d\":0.1234567890123456789,\"r\":0.30000000000000004,\"inf\":1e999,"
      "\"nested\":[{\"x\":99999999999999999999}],\"s\":\"1e999 stays a string\"}";
  dir.Write("n.jsonl", numbers + "\n");
  dir.Write("a.json", "[" + numbers + "]");
  dir.Write("c.csv", "n,big,d\n9223372036854775808,123456789012345678901234567890,"
                     "0.1234567890123456789\n");
  auto source = Make(FileConnector(dir.path()));
  ReadResult all = Read(*source, {}, 1000);
  EXPECT_TRUE(all.deadletters.empty()) << Reasons(all);
  ASSERT_EQ(all.records.size(), 3u);
  for (const SourceRecord* record : {&all.records[0], &all.records[2]}) {  // a.json, n.jsonl
    const Value& value = record->value;
    EXPECT_EQ(FieldOf(value, "n").kind(), Value::Kind::kInt);
    EXPECT_EQ(FieldOf(value, "n").as_int(), INT64_MAX);
    EXPECT_EQ(FieldOf(value, "u").kind(), Value::Kind::kDecimal);
    EXPECT_EQ(FieldOf(value, "u").ToJson(), "18446744073709551615");
    EXPECT_EQ(FieldOf(value, "big").ToJson(), "123456789012345678901234567890");
    EXPECT_EQ(FieldOf(value, "neg").ToJson(), "-9223372036854775809");
    EXPECT_EQ(FieldOf(value, "huge").kind(), Value::Kind::kString);
    EXPECT_EQ(FieldOf(value, "huge").as_string(), "1234567890123456789012345678901234567890");
    EXPECT_EQ(FieldOf(value, "d").kind(), Value::Kind::kDecimal);
    EXPECT_EQ(FieldOf(value, "d").ToJson(), "0.1234567890123456789");
    EXPECT_EQ(FieldOf(value, "r").kind(), Value::Kind::kDouble);
    EXPECT_EQ(FieldOf(value, "inf").as_string(), "1e999");
    EXPECT_EQ(FieldOf(value, "nested").ToJson(), "[{\"x\":99999999999999999999}]");
    EXPECT_EQ(FieldOf(value, "s").as_string(), "1e999 stays a string");
  }
  const Value& csv = all.records[1].value;  // c.csv
  EXPECT_EQ(FieldOf(csv, "n").ToJson(), "9223372036854775808");
  EXPECT_EQ(FieldOf(csv, "big").ToJson(), "123456789012345678901234567890");
  EXPECT_EQ(FieldOf(csv, "d").ToJson(), "0.1234567890123456789");
}

std::string ArrayOfRecords(int count, int bad_id) {
  std::string text = "[\n";
  for (int id = 1; id <= count; ++id) {
    text += id == bad_id ? "  {\"id\": " + std::to_string(id) + ", \"name\": tru}"
                         : "  {\"id\": " + std::to_string(id) + ", \"name\": \"n\"}";
    text += id < count ? ",\n" : "\n";
  }
  return text + "]\n";
}

// Symptom: one bad element made the whole file one deadletter (and the file was read whole).
TEST(FileSourceJsonArray, OneBadElementCostsOnlyItself) {
  TempDir dir;
  const std::string text = ArrayOfRecords(10'000, 5'000);
  const std::string path = dir.Write("records.json", text);
  auto source = Make(FileConnector(path));
  ReadResult all = Read(*source, {}, 4096);
  ASSERT_EQ(all.records.size(), 9'999u) << Reasons(all);
  ASSERT_EQ(all.deadletters.size(), 1u);
  const schema::Deadletter& bad = all.deadletters[0];
  EXPECT_EQ(bad.origin.line, 5'001u);
  EXPECT_EQ(bad.origin.row, 5'000u);
  const size_t bad_offset = text.find("{\"id\": 5000,");
  EXPECT_THAT(bad.reason, HasSubstr(fmt::format("invalid JSON: ")));
  EXPECT_THAT(bad.reason, HasSubstr(fmt::format("(element 5000 at byte offset {})", bad_offset)));
  EXPECT_EQ(bad.payload, "{\"id\": 5000, \"name\": tru}");
  EXPECT_EQ(IdOf(all.records[4'999]), 5'001);
  EXPECT_EQ(all.records[4'999].line, 5'002u);
  EXPECT_EQ(all.records[4'999].row, 5'001u);
  EXPECT_TRUE(all.positions.at(path).is_closed);
}

// A JSON array is read from its start again, skipping the elements already read (it cannot grow by
// appending: file_change_test covers what a changed array does).
TEST(FileSourceJsonArray, AnUnfinishedFileResumesAfterTheElementsAlreadyRead) {
  TempDir dir;
  const std::string text = ArrayOfRecords(1'000, 0);
  const std::string path = dir.Write("records.json", text);
  auto source = Make(FileConnector(path));
  ReadResult first = Read(*source, {}, 100, 2);
  ASSERT_EQ(first.records.size(), 200u);
  EXPECT_FALSE(first.positions.at(path).is_closed);
  ReadResult rest = Read(*source, first.positions, 100);
  ASSERT_EQ(rest.records.size(), 800u) << Reasons(rest);
  EXPECT_EQ(IdOf(rest.records.front()), 201);
  EXPECT_EQ(rest.records.front().line, 202u);
  EXPECT_EQ(rest.records.front().row, 201u);
  EXPECT_EQ(IdOf(rest.records.back()), 1'000);
  EXPECT_TRUE(rest.positions.at(path).is_closed);
}

TEST(FileSourceJsonArray, ACompressedFileResumesBySkippingConsumedElements) {
  TempDir dir;
  ExpectCompressedResumeSkips(dir.path() + "/records.json.gz", ArrayOfRecords(500, 0), 122);
}

// "[", "[]", a truncated last element, a missing ']', garbage after it: each costs only itself,
// and no file is silently read as 0 rows.
TEST(FileSourceJsonArray, BrokenEndsCostOnlyThemselves) {
  TempDir dir;
  const auto read = [&](const std::string& text) {
    const std::string path = dir.Write("a.json", text);
    auto source = Make(FileConnector(path));
    return Read(*source, {}, 1000);
  };
  ReadResult only_bracket = read("[");
  EXPECT_TRUE(only_bracket.records.empty());
  ASSERT_EQ(only_bracket.deadletters.size(), 1u);
  EXPECT_THAT(only_bracket.deadletters[0].reason, HasSubstr("ends before the array's closing ']'"));

  ReadResult empty = read("[ ]\n");
  ASSERT_EQ(empty.deadletters.size(), 1u);
  EXPECT_THAT(empty.deadletters[0].reason, HasSubstr("no records: the JSON array is empty"));

  ReadResult truncated = read("[{\"id\":1},\n{\"id\":2},\n{\"id\":3, \"na");
  EXPECT_EQ(truncated.records.size(), 2u);
  ASSERT_EQ(truncated.deadletters.size(), 1u);
  EXPECT_EQ(truncated.deadletters[0].origin.line, 3u);
  EXPECT_THAT(truncated.deadletters[0].reason, HasSubstr("the file ends inside this element"));

  ReadResult unclosed = read("[{\"id\":1},\n{\"id\":2}\n");
  EXPECT_EQ(unclosed.records.size(), 2u);
  ASSERT_EQ(unclosed.deadletters.size(), 1u);
  EXPECT_THAT(unclosed.deadletters[0].reason, HasSubstr("before the array's closing ']'"));

  ReadResult trailing = read("[{\"id\":1},{\"id\":2}]\n{\"id\":3}\n");
  EXPECT_EQ(trailing.records.size(), 2u);
  ASSERT_EQ(trailing.deadletters.size(), 1u);
  EXPECT_THAT(trailing.deadletters[0].reason, HasSubstr("content after the array's closing ']'"));
  EXPECT_EQ(trailing.deadletters[0].payload, "{\"id\":3}\n");

  ReadResult unbalanced = read("[\n{\"id\":1, \"name\":\"x},\n{\"id\":2},\n{\"id\":3}\n]");
  EXPECT_EQ(unbalanced.records.size(), 2u) << Reasons(unbalanced);
  ASSERT_EQ(unbalanced.deadletters.size(), 1u);
  EXPECT_EQ(unbalanced.deadletters[0].origin.line, 2u);
  EXPECT_THAT(unbalanced.deadletters[0].reason, HasSubstr("a quote is missing"));
}

// Symptom: a CSV with CR-only line ends (old Mac) was one header line: 0 rows, exit 0.
TEST(FileSourceCsv, CrOnlyAndMixedLineEndsReadEveryRow) {
  TempDir dir;
  dir.Write("mac.csv", "id,name\r1,a\r2,b\r3,c\r");
  dir.Write("mixed.csv", "id,name\r\n4,d\r5,e\n6,f");
  auto source = Make(FileConnector(dir.path()));
  ReadResult all = Read(*source, {}, 1000);
  EXPECT_TRUE(all.deadletters.empty()) << Reasons(all);
  ASSERT_EQ(all.records.size(), 6u);
  for (size_t i = 0; i < all.records.size(); ++i) EXPECT_EQ(IdOf(all.records[i]), i + 1);
  EXPECT_EQ(all.records[2].line, 4u);
  EXPECT_EQ(all.records[5].line, 4u);
}

// Symptom: an unbalanced quote swallowed the rest of the file as one deadletter.
TEST(FileSourceCsv, AnUnbalancedQuoteCostsOnlyItsRecord) {
  TempDir dir;
  std::string text = "id,name\n1,a\n2,\"broken\n";
  for (int id = 3; id <= 1000; ++id) text += std::to_string(id) + ",n\n";
  const std::string path = dir.Write("q.csv", text);
  auto source = Make(FileConnector(path));
  ReadResult all = Read(*source, {}, 100);
  ASSERT_EQ(all.records.size(), 999u) << Reasons(all);
  ASSERT_EQ(all.deadletters.size(), 1u);
  EXPECT_EQ(all.deadletters[0].origin.line, 3u);
  EXPECT_EQ(all.deadletters[0].origin.row, 2u);
  EXPECT_THAT(all.deadletters[0].reason,
              HasSubstr("unterminated quoted field starting at line 3 (byte offset 14)"));
  EXPECT_EQ(all.deadletters[0].payload, "2,\"broken");
  EXPECT_EQ(IdOf(all.records[1]), 3);
  EXPECT_EQ(all.records[1].line, 4u);
}

// Symptom: invalid UTF-8 in a header name aborted every run (the name reached JSON text).
TEST(FileSourceCsv, InvalidUtf8InTheHeaderIsReplacedNotFatal) {
  TempDir dir;
  dir.Write("h.csv", "id,na\xffme,\xc3\x28,ok\xc3\xa9\n1,a,b,c\n");
  auto source = Make(FileConnector(dir.path()));
  ReadResult all = Read(*source, {}, 1000);
  EXPECT_TRUE(all.deadletters.empty()) << Reasons(all);
  ASSERT_EQ(all.records.size(), 1u);
  std::vector<std::string> names;
  for (const auto& [name, value] : all.records[0].value.as_object()) names.push_back(name);
  EXPECT_THAT(names, ::testing::ElementsAre("id", "na\xEF\xBF\xBDme", "\xEF\xBF\xBD(",
                                            "ok\xc3\xa9"));
}

TEST(FileSourceCsv, AFileWithoutRowsIsADeadletterNotZeroRows) {
  TempDir dir;
  const auto read = [&](const std::string& name, const std::string& text) {
    TempDir one;
    one.Write(name, text);
    auto source = Make(FileConnector(one.path()));
    return Read(*source, {}, 1000);
  };
  ReadResult header_only = read("h.csv", "a,b,c\n");
  ASSERT_EQ(header_only.deadletters.size(), 1u);
  EXPECT_EQ(header_only.deadletters[0].reason, "no records: only a header line (3 columns)");
  ReadResult blank = read("b.csv", "\n\r\n\n");
  ASSERT_EQ(blank.deadletters.size(), 1u);
  EXPECT_EQ(blank.deadletters[0].reason, "no records: the file holds only blank lines");
  ReadResult blank_jsonl = read("b.jsonl", "\n  \n");
  ASSERT_EQ(blank_jsonl.deadletters.size(), 1u);
  EXPECT_EQ(blank_jsonl.deadletters[0].reason, "no records: the file holds only blank lines");
  ReadResult broken_header = read("q.csv", "a,\"b\n");
  ASSERT_EQ(broken_header.deadletters.size(), 1u);
  EXPECT_THAT(broken_header.deadletters[0].reason,
              HasSubstr("the header line cannot be read: unterminated quoted field"));
}

// CsvFileReader reports byte offsets like the JSON lines reader, and resumes a plain file there.
TEST(FileSourceCsv, APlainFileResumesAtTheCommittedByteOffset) {
  TempDir dir;
  std::string text = "id;name\r\n";
  for (int i = 1; i <= 300; ++i) text += std::to_string(i) + ";n" + std::to_string(i) + "\r\n";
  const std::string path = dir.Write("rows.csv", text);
  auto source = Make(FileConnector(path));
  ReadResult first = Read(*source, {}, 100, 1);
  const PartitionPosition& position = first.positions.at(path);
  EXPECT_EQ(position.byte_offset, text.find("101;"));
  EXPECT_EQ(position.next_line, 102u);
  ReadResult rest = Read(*source, first.positions, 100);
  ASSERT_EQ(rest.records.size(), 200u) << Reasons(rest);
  EXPECT_EQ(IdOf(rest.records.front()), 101);
  EXPECT_EQ(rest.records.front().line, 102u);
  EXPECT_EQ(rest.records.front().row, 101u);
  EXPECT_EQ(FieldOf(rest.records.front().value, "name").as_string(), "n101");
}

// A CRLF line's next offset is after its '\n': resuming does not read a phantom blank line and
// number every later line one too high.
TEST(FileSource, CrLfJsonLinesResumeWithTheRightLineNumbers) {
  TempDir dir;
  std::string text;
  for (int i = 1; i <= 300; ++i) text += "{\"id\":" + std::to_string(i) + "}\r\n";
  const std::string path = dir.Write("crlf.jsonl", text);
  auto source = Make(FileConnector(path));
  ReadResult first = Read(*source, {}, 100, 1);
  EXPECT_EQ(first.positions.at(path).byte_offset, text.find("{\"id\":101}"));
  ReadResult rest = Read(*source, first.positions, 100);
  ASSERT_EQ(rest.records.size(), 200u);
  EXPECT_EQ(IdOf(rest.records.front()), 101);
  EXPECT_EQ(rest.records.front().line, 101u);
}

TEST(FileSource, CrOnlyJsonLinesAreRecordsToo) {
  TempDir dir;
  dir.Write("mac.jsonl", "{\"id\":1}\r{\"id\":2}\r{\"id\":3}");
  auto source = Make(FileConnector(dir.path()));
  ReadResult all = Read(*source, {}, 1000);
  EXPECT_TRUE(all.deadletters.empty()) << Reasons(all);
  ASSERT_EQ(all.records.size(), 3u);
  EXPECT_EQ(all.records[2].line, 3u);
}

TEST(FileSource, Utf16TextIsOneDeadletterNotGarbageRows) {
  TempDir dir;
  dir.Write("bom.csv", std::string("\xFF\xFE" "a\0,\0b\0\n\0" "1\0,\0" "2\0\n\0", 18));
  dir.Write("plain16.jsonl", std::string("{\0\"\0a\0\"\0:\0" "1\0}\0\n\0", 16));
  auto source = Make(FileConnector(dir.path()));
  ReadResult all = Read(*source, {}, 1000);
  EXPECT_TRUE(all.records.empty());
  ASSERT_EQ(all.deadletters.size(), 2u);
  for (const schema::Deadletter& deadletter : all.deadletters) {
    EXPECT_THAT(deadletter.reason, HasSubstr("UTF-16 or UTF-32 text")) << deadletter.origin.source;
  }
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
  // Ids too long for a store key (LMDB's 511 bytes): a deep path, a long S3 key — two of them that
  // share their first 300 bytes stay apart.
  const std::string deep = "/data/" + std::string(300, 'd') + "/";
  positions[deep + std::string(400, 'x') + ".jsonl"] = PartitionPosition{1, 2, 3, 4, 5, true};
  positions[deep + std::string(400, 'y') + ".jsonl"] = PartitionPosition{6, 7, 8, 9, 10, false};
  positions["s3://bucket/" + std::string(1000, 'k')] = PartitionPosition{11, 12, 13, 14, 15, true};
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

  // Saved again (a later pass): the same keys, not a second copy of each position.
  {
    auto write = (*opened)->BeginWrite();
    ASSERT_TRUE(write.ok());
    ASSERT_TRUE(SavePositions(*write, positions).ok());
    ASSERT_TRUE(write->Commit().ok());
  }
  auto again = (*opened)->BeginRead();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*LoadPositions(*again), positions);
}

}  // namespace
}  // namespace skippr::sources
