// Typed reading (docs/schema.md): a File source decoding JSON lines and CSV rows straight into a
// namespace's columns must land exactly what the Value path lands — the same rows in the same
// order, the same schema, the same deadletters — for any input, and resume exactly once.
// Differential: each file is read both ways from the same starting schema and compared.
#include <duckdb.h>
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>

#include "sources/duckdb_columns.hpp"
#include "sources/sources.hpp"
#include "sources/typed_rows.hpp"
#include "support/gzip.hpp"
#include "support/scoped_environment.hpp"
#include "support/temp_dir.hpp"

namespace skippr::sources {
namespace {

namespace fs = std::filesystem;
using skippr::testing::TempDir;

constexpr const char* kNamespace = "p";

schema::ShaperOptions ShaperOptionsForSync() {
  schema::ShaperOptions options;
  options.default_namespace = kNamespace;
  options.build_columns = true;
  options.keep_origins = true;
  return options;
}

config::ConnectorConfig FileConnector(const std::string& path) {
  config::ConnectorConfig connector;
  connector.kind = "File";
  connector.settings["path"] = path;
  return connector;
}

// A row as it reads whatever fields were added after it (they are null in it): a batch's rows
// carry every field of the schema when it was taken, which depends on where batches ended.
Value WithoutNulls(Value value) {
  if (value.kind() != Value::Kind::kObject) return value;
  ValueObject kept;
  for (auto& [name, item] : value.mutable_object()) {
    if (!item.is_null()) kept.emplace_back(name, WithoutNulls(std::move(item)));
  }
  return Value::Object(std::move(kept));
}

// What one read of a file shaped into: every row (as JSON) with its origin, the deadletters, the
// schema, how many rows arrived as typed columns and the positions reached.
struct Shaped {
  std::vector<std::string> rows;
  std::vector<std::string> deadletters;  // "record line code"
  std::vector<std::string> deadletter_reasons;
  std::string schema;
  uint64_t typed_rows = 0;
  SourcePositions positions;
};

// Reads `path` (from `committed`, at most `max_batches` batches when positive) into `shaper`,
// sealing after every batch as sync does at its threshold, publishing the layout when `board`.
void ReadInto(const std::string& path, schema::Shaper& shaper, LayoutBoard* board,
              const SourcePositions& committed, int max_batches, Shaped& shaped) {
  Result<std::unique_ptr<Source>> source = MakeSource(FileConnector(path));
  ASSERT_TRUE(source.ok()) << source.status().message();
  ReadOptions options;
  options.max_records_per_batch = 7;  // small batches: many boundaries, typed and not
  options.max_bytes_per_batch = 1 << 20;
  options.max_typed_records_per_batch = 13;
  options.layouts = board;
  if (board != nullptr) board->Publish(shaper.TypedLayout({}));
  ASSERT_TRUE((*source)->Open(committed, options).ok());
  shaped.positions = committed;
  for (int batches = 0; max_batches <= 0 || batches < max_batches; ++batches) {
    Result<std::optional<SourceBatch>> next = (*source)->Next();
    ASSERT_TRUE(next.ok()) << next.status().message();
    if (!*next) break;
    SourceBatch& batch = **next;
    schema::RecordOrigin origin{batch.partition};
    for (SourceRecord& record : batch.records) {
      origin.line = record.line;
      origin.row = record.row;
      if (auto deadletter = shaper.Absorb(std::move(record.value), origin, batch.context)) {
        batch.deadletters.push_back(std::move(*deadletter));
      }
    }
    if (batch.columns) {
      shaped.typed_rows += static_cast<uint64_t>(batch.columns->num_rows);
      for (schema::Deadletter& deadletter :
           shaper.AbsorbColumns(std::move(*batch.columns), {batch.partition}, batch.context)) {
        batch.deadletters.push_back(std::move(deadletter));
      }
    }
    for (const schema::Deadletter& deadletter : batch.deadletters) {
      shaped.deadletters.push_back(fmt::format("{} {} {}", deadletter.origin.row,
                                               deadletter.origin.line,
                                               schema::FailureCodeName(deadletter.failure_code)));
      shaped.deadletter_reasons.push_back(deadletter.reason);
    }
    shaped.positions[batch.partition] = batch.position;
    if (!shaper.Seal().empty() && board != nullptr) board->Publish(shaper.TypedLayout({}));
    std::vector<std::vector<schema::RecordOrigin>> origins;
    const std::vector<Batch> taken = shaper.TakeBatches(&origins);
    for (size_t i = 0; i < taken.size(); ++i) {
      for (int64_t row = 0; row < taken[i].num_rows; ++row) {
        const schema::RecordOrigin& row_origin = origins[i][static_cast<size_t>(row)];
        shaped.rows.push_back(fmt::format("{} (record {}, line {})",
                                          WithoutNulls(taken[i].RowAt(row)).ToJson(),
                                          row_origin.row, row_origin.line));
      }
    }
  }
  shaped.schema =
      schema::FieldsToIcebergJson(shaper.schema().namespaces.at(kNamespace).fields, 0).dump();
}

// The schema both reads start from: `training` shaped and sealed.
schema::PipelineSchema TrainedSchema(const std::string& training) {
  schema::Shaper shaper({}, ShaperOptionsForSync());
  Shaped ignored;
  ReadInto(training, shaper, nullptr, {}, 0, ignored);
  return shaper.schema();
}

Shaped ReadWhole(const std::string& path, const schema::PipelineSchema& start, bool typed) {
  schema::Shaper shaper(start, ShaperOptionsForSync());
  LayoutBoard board;
  Shaped shaped;
  ReadInto(path, shaper, typed ? &board : nullptr, {}, 0, shaped);
  return shaped;
}

// Typed, stopping after `batches_per_pass` batches and resuming from the positions reached, as a
// pass that was killed after committing them.
Shaped ReadInPasses(const std::string& path, const schema::PipelineSchema& start,
                    int batches_per_pass) {
  schema::Shaper shaper(start, ShaperOptionsForSync());
  LayoutBoard board;
  Shaped shaped;
  for (int pass = 0; pass < 1000; ++pass) {
    const size_t rows_before = shaped.rows.size();
    const size_t deadletters_before = shaped.deadletters.size();
    ReadInto(path, shaper, &board, shaped.positions, batches_per_pass, shaped);
    if (shaped.rows.size() == rows_before && shaped.deadletters.size() == deadletters_before) break;
  }
  return shaped;
}

void ExpectSameShape(const Shaped& typed, const Shaped& values) {
  EXPECT_EQ(typed.schema, values.schema);
  ASSERT_EQ(typed.rows.size(), values.rows.size());
  for (size_t i = 0; i < typed.rows.size(); ++i) {
    ASSERT_EQ(typed.rows[i], values.rows[i]) << "row entry " << i;
  }
  // Within a batch the source's deadletters come before the shaper's, and batches end elsewhere.
  std::vector<std::string> typed_deadletters = typed.deadletters;
  std::vector<std::string> value_deadletters = values.deadletters;
  std::sort(typed_deadletters.begin(), typed_deadletters.end());
  std::sort(value_deadletters.begin(), value_deadletters.end());
  EXPECT_EQ(typed_deadletters, value_deadletters);
  EXPECT_EQ(values.typed_rows, 0u);
}

// Reads `input` as Values, typed, and typed in passes of `batches_per_pass` batches, from `start`:
// all three must shape alike, the typed read taking more than `min_typed_rows` rows typed.
void ExpectTypedReadsMatchValues(const fs::path& input, const schema::PipelineSchema& start,
                                 uint64_t min_typed_rows, int batches_per_pass) {
  const Shaped values = ReadWhole(input.string(), start, /*typed=*/false);
  const Shaped typed = ReadWhole(input.string(), start, /*typed=*/true);
  ExpectSameShape(typed, values);
  EXPECT_GT(typed.typed_rows, min_typed_rows) << "the typed path was hardly taken";
  EXPECT_EQ(typed.positions, values.positions);
  ExpectSameShape(ReadInPasses(input.string(), start, batches_per_pass), values);
}

void WriteFile(const fs::path& path, const std::string& text) {
  std::ofstream file(path, std::ios::binary);
  file << text;
}

// ----- generated JSON lines -------------------------------------------------------------------

const std::vector<std::string> kNumbers = {"0",
                                           "-0",
                                           "7",
                                           "-12",
                                           "2147483647",
                                           "2147483648",
                                           "-2147483649",
                                           "9007199254740993",
                                           "9223372036854775807",
                                           "9223372036854775808",
                                           "123456789012345678901234567890",
                                           "1.5",
                                           "-0.0",
                                           "2.50",
                                           "1e3",
                                           "1E400",
                                           "0.1234567890123456789",
                                           "0.30000000000000004",
                                           "1.0",
                                           "1262304000",
                                           "1700000000000",
                                           "01",
                                           "1.",
                                           "-",
                                           "1e",
                                           "+1",
                                           ".5"};
const std::vector<std::string> kStrings = {R"("plain")",
                                           R"("with \"quote\" and \\ backslash")",
                                           R"("caf\u00e9 ☕")",
                                           R"("")",
                                           R"("2024-03-04T12:34:56Z")",
                                           R"("2024-03-04 12:34:56.123456")",
                                           R"("2024-03-04T12:34+02:00")",
                                           R"("2024-03-04")",
                                           R"("2024-02-30")",
                                           R"("true")",
                                           R"("false")",
                                           R"("TRUE")",
                                           R"("42")",
                                           R"("-7")",
                                           R"("3.25")",
                                           R"("007")",
                                           R"("12:30:00")",
                                           R"("\ud800")",
                                           R"("bad \x escape")",
                                           "\"\xff\xfe\""};

std::string RandomScalar(std::mt19937_64& random) {
  switch (random() % 5) {
    case 0:
      return kNumbers[random() % kNumbers.size()];
    case 1:
      return kStrings[random() % kStrings.size()];
    case 2:
      return random() % 2 ? "true" : "false";
    case 3:
      return "null";
    default:
      return random() % 2 ? "[1,2]" : "{\"a\":1}";
  }
}

// A value mostly of the field's trained kind, now and then anything at all.
std::string FieldValue(const std::string& name, std::mt19937_64& random) {
  if (random() % 10 == 0) return RandomScalar(random);
  if (name == "id") return std::to_string(static_cast<int64_t>(random() % 100000));
  if (name == "small") return std::to_string(static_cast<int>(random() % 100));
  if (name == "amount") return fmt::format("{}.{:02}", random() % 1000, random() % 100);
  if (name == "name") return fmt::format("\"n{}\"", random() % 50);
  if (name == "ts") return "\"2024-01-02T03:04:05Z\"";
  if (name == "day") return "\"2024-01-02\"";
  if (name == "flag") return random() % 2 ? "true" : "false";
  if (name == "nested") {
    switch (random() % 4) {
      case 0:
        return "{\"a\":1,\"b\":\"x\"}";
      case 1:
        return "{\"b\":\"only\"}";
      case 2:
        return "{\"a\":2,\"a\":3}";
      default:
        return "{\"a\":\"text\",\"c\":true}";
    }
  }
  return "1";
}

// Keys of every length the typed path compares differently (inline up to 16 bytes, longer ones
// past the document's padding), some the start of another.
const std::string kLongKey(100, 'k');
const std::vector<std::string> kKeysOfEveryLength = {"ab", "abcdefghij", "abcdefghijklmnopq",
                                                     kLongKey};

std::string RandomJsonLine(std::mt19937_64& random) {
  static const std::vector<std::string> kFields = [] {
    std::vector<std::string> fields = {"id", "small", "amount", "name",
                                       "ts", "day",   "flag",   "nested"};
    fields.insert(fields.end(), kKeysOfEveryLength.begin(), kKeysOfEveryLength.end());
    return fields;
  }();
  switch (random() % 40) {
    case 0:
      return "";  // a blank line
    case 1:
      return R"({"id":1,"name":"x")";  // truncated
    case 2:
      return R"({"id":1} {"id":2})";  // two documents
    case 3:
      return R"([1,2,3])";  // not an object
    case 4:
      return R"({"id":1,"id":2})";  // a duplicate key
    case 5:
      return R"({"id":1,"brand_new":"field"})";  // a field the layout lacks
    case 6:
      return R"({"n\u0061me":"an escaped key","id":3})";  // "name", spelt with an escape
    case 7:
      return R"({"id":4,"we\"ird":true})";  // a key holding a quote
    // What a parse of many lines at once must not read as one line's object:
    case 8:
      return "{\"id\":5,\n\"small\":1}";  // an object across two lines
    case 9:
      return "{\"nested\":{\"a\":1}\r\n}";  // its last brace on the next line
    case 10:
      return "{\"name\":\"left open\n\"}";  // a string open to the next line
    case 11:
      return R"({"id":6} 7)";  // a scalar after the object
    case 12:
      return "{\"name\":\"a\ttab\"}";  // a raw control character in a string
    case 13:
      return "{\"id\":8}\r{\"id\":9}";  // a lone CR between two objects
    case 14:
      return " \t{\"id\":10}";  // blanks before the object
    default:
      break;
  }
  std::vector<std::string> fields = kFields;
  std::shuffle(fields.begin(), fields.end(), random);
  fields.resize(1 + random() % fields.size());
  std::string line = "{";
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i > 0) line += random() % 3 == 0 ? " , " : ",";
    line += fmt::format("\"{}\":{}", fields[i], FieldValue(fields[i], random));
  }
  return line + (random() % 5 == 0 ? "}  " : "}");
}

const std::string kJsonTraining =
    R"({"id":99,"small":1,"amount":1.5,"name":"a","ts":"2024-01-01T00:00:00Z",)"
    R"("day":"2024-01-01","flag":true,"nested":{"a":1,"b":"x"},)"
    R"("ab":1,"abcdefghij":2,"abcdefghijklmnopq":3,")" + kLongKey + R"(":4})"
    "\n";

TEST(TypedReading, JsonLinesShapeExactlyAsValues) {
  TempDir dir;
  const fs::path training = fs::path(dir.path()) / "training.jsonl";
  WriteFile(training, kJsonTraining);
  const schema::PipelineSchema start = TrainedSchema(training.string());
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    std::mt19937_64 random(seed);
    std::string text;
    for (int i = 0; i < 400; ++i) text += RandomJsonLine(random) + (i % 7 == 0 ? "\r\n" : "\n");
    const fs::path input = fs::path(dir.path()) / fmt::format("input-{}.jsonl", seed);
    WriteFile(input, text);
    SCOPED_TRACE(fmt::format("seed {}", seed));
    ExpectTypedReadsMatchValues(input, start, /*min_typed_rows=*/50, /*batches_per_pass=*/3);
  }
}

// Two reads of one text alike: the same rows and deadletters with the same origins and reasons,
// the same schema, and positions at the same record, line and stream offset.
void ExpectSameRead(const Shaped& read, const Shaped& expected, const std::string& expected_path,
                    const std::string& path) {
  EXPECT_EQ(read.schema, expected.schema);
  ASSERT_EQ(read.rows.size(), expected.rows.size());
  for (size_t i = 0; i < read.rows.size(); ++i) ASSERT_EQ(read.rows[i], expected.rows[i]) << i;
  // Within a batch the source's deadletters come before the shaper's, and batches end elsewhere.
  const auto sorted = [](std::vector<std::string> texts) {
    std::sort(texts.begin(), texts.end());
    return texts;
  };
  EXPECT_EQ(sorted(read.deadletters), sorted(expected.deadletters));
  EXPECT_EQ(sorted(read.deadletter_reasons), sorted(expected.deadletter_reasons));
  const PartitionPosition& position = read.positions.at(path);
  const PartitionPosition& expected_position = expected.positions.at(expected_path);
  EXPECT_EQ(position.records_consumed, expected_position.records_consumed);
  EXPECT_EQ(position.next_line, expected_position.next_line);
  EXPECT_EQ(position.byte_offset, expected_position.byte_offset);
  EXPECT_EQ(position.is_closed, expected_position.is_closed);
  EXPECT_EQ(position.ends_at_line_end, expected_position.ends_at_line_end);
}

// A plain JSON-lines file is read a chunk of whole lines per worker thread and renumbered as one
// reader of the whole file numbers it. Cut into chunks of one line to a few dozen, each text reads
// exactly as its gzip copy does (one reader: a compressed file is never cut), typed and as Values,
// whole and in passes resumed mid-file; so do texts of blank lines only and with no last line end.
TEST(TypedReading, JsonLinesReadInChunksReadAsOneReaderReadsThem) {
  TempDir dir;
  const fs::path training = fs::path(dir.path()) / "training.jsonl";
  WriteFile(training, kJsonTraining);
  const schema::PipelineSchema start = TrainedSchema(training.string());
  std::vector<std::string> texts = {std::string(300, '\n'), "\n\n \r\n\t\n",
                                    "\n\n{\"id\":1}\n\n{\"id\":2}"};
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    std::mt19937_64 random(seed);
    std::string text(seed, '\n');  // blank lines first: the first records are in a later chunk
    for (int i = 0; i < 300; ++i) text += RandomJsonLine(random) + (i % 7 == 0 ? "\r\n" : "\n");
    texts.push_back(text);
  }
  for (size_t t = 0; t < texts.size(); ++t) {
    const fs::path plain = fs::path(dir.path()) / fmt::format("input-{}.jsonl", t);
    const fs::path gzip = fs::path(dir.path()) / fmt::format("input-{}.jsonl.gz", t);
    WriteFile(plain, texts[t]);
    WriteFile(gzip, skippr::testing::GzipMember(texts[t]));
    for (const bool typed : {true, false}) {
      const Shaped one_reader = ReadWhole(gzip.string(), start, typed);
      for (const char* chunk_bytes : {"1", "64", "700"}) {
        SCOPED_TRACE(fmt::format("text {}, chunks of {} bytes, typed {}", t, chunk_bytes, typed));
        const skippr::testing::ScopedEnvironment seam("SKIPPR_LINE_CHUNK_BYTES", chunk_bytes);
        const Shaped chunked = ReadWhole(plain.string(), start, typed);
        ExpectSameRead(chunked, one_reader, gzip.string(), plain.string());
        if (typed && t >= 3) EXPECT_GT(chunked.typed_rows, 50u) << "typed path hardly taken";
      }
    }
    SCOPED_TRACE(fmt::format("text {} in passes", t));
    const skippr::testing::ScopedEnvironment seam("SKIPPR_LINE_CHUNK_BYTES", "64");
    const Shaped one_reader = ReadWhole(gzip.string(), start, /*typed=*/true);
    const Shaped in_passes = ReadInPasses(plain.string(), start, /*batches_per_pass=*/3);
    ExpectSameRead(in_passes, one_reader, gzip.string(), plain.string());
  }
}

// A text's lines as LineReader splits them (at LF, CR and CRLF): each line's text and where the
// next line starts.
struct TextLine {
  std::string_view text;
  size_t next_offset;
};
std::vector<TextLine> SplitLines(std::string_view text) {
  std::vector<TextLine> lines;
  for (size_t at = 0; at < text.size();) {
    const size_t end = std::min(text.find_first_of("\r\n", at), text.size());
    size_t next = end + 1;
    if (end + 1 < text.size() && text[end] == '\r' && text[end + 1] == '\n') ++next;
    lines.push_back({text.substr(at, end - at), next});
    at = next;
  }
  return lines;
}

std::vector<std::string> RowsOf(const ColumnRows& rows) {
  std::vector<std::string> described;
  for (int64_t row = 0; row < rows.num_rows; ++row) {
    described.push_back(fmt::format("{} (line {})", rows.RowAt(row).ToJson(),
                                     rows.lines[static_cast<size_t>(row)]));
  }
  return described;
}

// A run of lines parsed at once takes exactly the lines, and the values, that AppendJson takes one
// by one. Here a run restarts at the line after each one it could not take (the reader waits for
// the run's end), so that runs start everywhere: after each hostile line, mid-file.
TEST(TypedReading, JsonLinesFromARunAreExactlyThoseReadOneByOne) {
  TempDir dir;
  const fs::path training = fs::path(dir.path()) / "training.jsonl";
  WriteFile(training, kJsonTraining);
  const schema::Shaper shaper(TrainedSchema(training.string()), ShaperOptionsForSync());
  const std::shared_ptr<const schema::RecordLayout> layout = shaper.TypedLayout({});
  ASSERT_NE(layout, nullptr);
  uint64_t lines_from_runs = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    SCOPED_TRACE(fmt::format("seed {}", seed));
    std::mt19937_64 random(seed);
    std::string text;
    for (int i = 0; i < 300; ++i) text += RandomJsonLine(random) + (i % 5 == 0 ? "\r\n" : "\n");
    if (seed % 2 == 0) text += RandomJsonLine(random);  // a last line without a line end
    const size_t run_bytes = text.rfind('\n') + 1;
    // The bytes after a run's last line end are readable but none of its business: here, the start
    // of an object.
    const std::string padded = text + std::string(simdjson::SIMDJSON_PADDING, '{');
    const std::string_view run_text(padded.data(), run_bytes);

    // A run from `offset` over a few lines, up to a '\n' (as LineReader::BufferedLines gives): the
    // lines a file holds beyond one are left out of its parse, and one spoilt by a line (invalid
    // UTF-8, a string left open) spoils no other.
    const auto run_from = [&](size_t offset) {
      size_t end = offset;
      for (uint64_t lines = 1 + random() % 20; lines > 0 && end < run_bytes; --lines) {
        end = text.find('\n', end) + 1;
      }
      return run_text.substr(offset, end > offset ? end - 1 - offset : 0);
    };
    sources::internal::TypedRows alone(layout);
    sources::internal::TypedRows in_runs(layout);
    in_runs.StartJsonLines(run_from(0));
    uint64_t line_number = 0;
    for (const TextLine& line : SplitLines(run_text)) {
      ++line_number;
      if (line.text.find_first_not_of(" \t") == std::string_view::npos) continue;  // blank
      const bool expected = alone.AppendJson(line.text, line_number);
      bool taken = in_runs.has_json_lines() && in_runs.AppendJsonLine(line.text, line_number);
      lines_from_runs += taken;
      if (!taken) taken = in_runs.AppendJson(line.text, line_number);
      if (!in_runs.has_json_lines()) in_runs.StartJsonLines(run_from(line.next_offset));
      ASSERT_EQ(taken, expected) << "line " << line_number << ": " << line.text;
    }
    EXPECT_EQ(RowsOf(in_runs.Take(1)), RowsOf(alone.Take(1)));
  }
  EXPECT_GT(lines_from_runs, 2500u) << "the runs were hardly taken";
}

// ----- generated CSV --------------------------------------------------------------------------

const std::vector<std::string> kCells = {"",
                                         "0",
                                         "-0",
                                         "42",
                                         "-7",
                                         "007",
                                         "2147483648",
                                         "9223372036854775808",
                                         "1.5",
                                         "2.50",
                                         "1e3",
                                         "1E400",
                                         "0.1234567890123456789",
                                         "true",
                                         "FALSE",
                                         "True",
                                         "yes",
                                         "2024-03-04",
                                         "2024-03-04T12:34:56Z",
                                         "2024-03-04 12:34",
                                         "2024-02-30",
                                         "1262304000",
                                         "12:30:00",
                                         "\"a, quoted\"",
                                         "\"\"\"\"",
                                         "plain text",
                                         "caf\xc3\xa9",
                                         "\xff\xfe"};

std::string RandomCsvRow(std::mt19937_64& random, size_t columns) {
  switch (random() % 30) {
    case 0:
      return "";  // a blank line
    case 1:
      return "1,2";  // too few fields
    case 2:
      return "\"open, 1";  // an unbalanced quote (costs its first line)
    default:
      break;
  }
  std::string row;
  for (size_t i = 0; i < columns; ++i) {
    if (i > 0) row += ",";
    row += random() % 12 == 0
               ? kCells[random() % kCells.size()]
               : std::vector<std::string>{"12",         "3.25", "word", "2024-01-02T03:04:05Z",
                                          "2024-01-02", "true", "5"}[i % 7];
  }
  return row;
}

TEST(TypedReading, CsvShapesExactlyAsValues) {
  TempDir dir;
  const std::string header = "id,amount,name,ts,day,flag,small\n";
  const fs::path training = fs::path(dir.path()) / "training.csv";
  WriteFile(training, header + "99,1.5,a,2024-01-01T00:00:00Z,2024-01-01,true,3\n");
  const schema::PipelineSchema start = TrainedSchema(training.string());
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    std::mt19937_64 random(seed);
    std::string text = header;
    for (int i = 0; i < 400; ++i) text += RandomCsvRow(random, 7) + (i % 9 == 0 ? "\r\n" : "\n");
    const fs::path input = fs::path(dir.path()) / fmt::format("input-{}.csv", seed);
    WriteFile(input, text);
    SCOPED_TRACE(fmt::format("seed {}", seed));
    ExpectTypedReadsMatchValues(input, start, /*min_typed_rows=*/50, /*batches_per_pass=*/3);
  }
}

TEST(TypedReading, AHeaderNameWithoutAFieldReadsAsValues) {
  TempDir dir;
  const fs::path training = fs::path(dir.path()) / "training.csv";
  WriteFile(training, "id,name\n1,a\n");
  const schema::PipelineSchema start = TrainedSchema(training.string());
  const fs::path input = fs::path(dir.path()) / "input.csv";
  WriteFile(input, "id,name,extra\n1,a,x\n2,b,y\n");
  const Shaped values = ReadWhole(input.string(), start, false);
  const Shaped typed = ReadWhole(input.string(), start, true);
  ExpectSameShape(typed, values);
}

// ----- Parquet (DuckDB's columns copied where they fit, its JSON text of each row otherwise) -----

// An in-memory DuckDB with one connection, for the tests' own queries.
class TestDuckdb {
 public:
  TestDuckdb() {
    EXPECT_EQ(duckdb_open(nullptr, &database_), DuckDBSuccess);
    EXPECT_EQ(duckdb_connect(database_, &connection_), DuckDBSuccess);
  }
  ~TestDuckdb() {
    duckdb_disconnect(&connection_);
    duckdb_close(&database_);
  }
  TestDuckdb(const TestDuckdb&) = delete;
  TestDuckdb& operator=(const TestDuckdb&) = delete;
  duckdb_connection connection() const { return connection_; }

  // Runs `sql`, which must succeed; the caller destroys `result`.
  void Query(const std::string& sql, duckdb_result* result) const {
    EXPECT_EQ(duckdb_query(connection_, sql.c_str(), result), DuckDBSuccess)
        << duckdb_result_error(result);
  }

 private:
  duckdb_database database_ = nullptr;
  duckdb_connection connection_ = nullptr;
};

void WriteParquet(const fs::path& path, const std::string& select_sql,
                  const std::string& options = "FORMAT parquet") {
  const TestDuckdb duckdb;
  duckdb_result result;
  duckdb.Query(fmt::format("COPY ({}) TO '{}' ({})", select_sql, path.string(), options), &result);
  duckdb_destroy_result(&result);
}

TEST(TypedReading, ParquetShapesExactlyAsValues) {
  TempDir dir;
  // Every column type the reader declares, nested ones, nulls, and values that drift: `drift` is
  // an integer column in the training file and text in the input.
  const std::string columns =
      "i AS id, i * 1.5 AS amount, 'n' || i AS name, "
      "TIMESTAMPTZ '2024-01-01 00:00:00+00' + INTERVAL (i) SECOND AS ts, "
      "TIMESTAMP '2024-01-01' + INTERVAL (i) MINUTE AS local_ts, DATE '2024-01-01' + i::INTEGER AS "
      "day, "
      "i % 2 = 0 AS flag, {'a': i, 'b': 'x' || i} AS nested, "
      "CASE WHEN i % 7 = 0 THEN NULL ELSE i END AS maybe, "
      "(i * 1.01)::DECIMAL(10, 2) AS price, (i % 3)::TINYINT AS tiny, "
      "(i * 1000000000000)::UBIGINT AS big";
  const fs::path training = fs::path(dir.path()) / "training.parquet";
  WriteParquet(training, fmt::format("SELECT {}, i AS drift FROM range(3) t(i)", columns));
  const fs::path input = fs::path(dir.path()) / "input.parquet";
  WriteParquet(input, fmt::format("SELECT {}, CASE WHEN i % 11 = 0 THEN 'text' ELSE i::VARCHAR "
                                  "END AS drift FROM range(300) t(i)",
                                  columns));
  const schema::PipelineSchema start = TrainedSchema(training.string());
  ExpectTypedReadsMatchValues(input, start, /*min_typed_rows=*/0, /*batches_per_pass=*/3);
}

// Every column type the columns are copied from, struct fields nested twice, nulls and edge values
// (pre-1970 and year 1 and 9999 dates, -0.0, 1e300, quotes and escapes). With `misfits`, rows the
// columns do not take as they are, which the JSON path reads: NaN and infinity, an infinite date,
// a UBIGINT beyond long, the same inside a struct (its fields copied as runs stop there), a
// decimal wider than its field.
std::string AllColumnTypesSql(uint64_t rows, bool misfits) {
  const std::string misfit = misfits ? "true" : "false";
  return fmt::format(
      "SELECT i AS id, (i % 100)::TINYINT AS tiny, ((i * 7) % 60000 - 30000)::SMALLINT AS small, "
      "(i * 1000 - 2000000)::INTEGER AS int32, (i * 100000000000)::BIGINT AS int64, "
      "(i % 200)::UTINYINT AS utiny, ((i * 3) % 65536)::USMALLINT AS usmall, "
      "(i * 800000)::UINTEGER AS uint32, "
      "(CASE WHEN {0} AND i % 313 = 5 THEN 18446744073709551615 ELSE i * 1000000000000 "
      "END)::UBIGINT "
      "AS ubig, (i / 7.0)::FLOAT AS f32, "
      "CASE WHEN {0} AND i % 317 = 3 THEN 'nan'::DOUBLE WHEN {0} AND i % 331 = 4 THEN "
      "'inf'::DOUBLE "
      "WHEN i % 17 = 5 THEN -0.0::DOUBLE WHEN i % 17 = 6 THEN 1e300::DOUBLE ELSE i / 3.0 END AS "
      "f64, "
      "(i * 1.01)::DECIMAL(10, 2) AS price, (i * 123456789.123)::DECIMAL(38, 3) AS wide, "
      "(CASE WHEN {0} AND i % 347 = 2 THEN 123456789012.5 ELSE i * 0.5 END)::{1} AS grows, "
      "CASE WHEN {0} AND i % 353 = 1 THEN 'infinity'::DATE WHEN i % 23 = 2 THEN DATE '0001-01-01' "
      "WHEN i % 23 = 3 THEN DATE '9999-12-31' ELSE DATE '2024-01-01' + i::INTEGER END AS day, "
      "TIME '00:00:00' + INTERVAL (i * 1234567) MICROSECOND AS clock, "
      "TIMESTAMP '1960-01-01' + INTERVAL (i * 12345678901) MICROSECOND AS local_ts, "
      "TIMESTAMPTZ '2024-01-01 00:00:00+00' + INTERVAL (i) SECOND AS ts, "
      "'n' || i || CASE WHEN i % 5 = 0 THEN ' \"quoted\" \\ é ✓' ELSE '' END AS name, "
      "i % 2 = 0 AS flag, CASE WHEN i % 5 = 0 THEN NULL ELSE i % 3 = 0 END AS maybe_flag, "
      "{{'a': CASE WHEN {0} AND i % 359 = 7 THEN i * 10000000000 ELSE i END, 'b': 'x' || i, "
      "'c': {{'d': i * 0.5, 'e': CASE WHEN i % 4 = 0 THEN NULL ELSE DATE '2024-01-01' END}}, "
      "'g': CASE WHEN {0} AND i % 367 = 8 THEN 'nan'::DOUBLE ELSE i / 4.0 END, "
      "'u': (CASE WHEN {0} AND i % 373 = 9 THEN 18446744073709551615 ELSE i END)::UBIGINT}} "
      "AS nested, CASE WHEN i % 6 = 0 THEN NULL ELSE {{'p': i}} END AS maybe_struct "
      "FROM range({2}) t(i)",
      misfit, misfits ? "DECIMAL(20, 2)" : "DECIMAL(10, 2)", rows);
}

TEST(TypedReading, ParquetColumnsShapeExactlyAsValues) {
  TempDir dir;
  const fs::path training = fs::path(dir.path()) / "training.parquet";
  WriteParquet(training, AllColumnTypesSql(3, /*misfits=*/false));
  // More rows than a DuckDB chunk holds (2048): batches end inside chunks and across them.
  const fs::path input = fs::path(dir.path()) / "input.parquet";
  WriteParquet(input, AllColumnTypesSql(2500, /*misfits=*/true));
  const schema::PipelineSchema start = TrainedSchema(training.string());
  // Fewer, longer passes than above: each opens the file again.
  ExpectTypedReadsMatchValues(input, start, /*min_typed_rows=*/1000, /*batches_per_pass=*/61);
}

// DuckDB names the file's row numbers file_row_number, which the reader filters on to resume: a
// file with a column of that name (in any case) is resumed by OFFSET instead.
TEST(TypedReading, ParquetWithAColumnNamedFileRowNumberResumes) {
  TempDir dir;
  const std::string select =
      "SELECT i AS id, i * 2 AS File_Row_Number, 'n' || i AS name FROM range({}) t(i)";
  const fs::path training = fs::path(dir.path()) / "training.parquet";
  WriteParquet(training, fmt::format(fmt::runtime(select), 3));
  const fs::path input = fs::path(dir.path()) / "input.parquet";
  WriteParquet(input, fmt::format(fmt::runtime(select), 100));
  const schema::PipelineSchema start = TrainedSchema(training.string());
  const Shaped values = ReadWhole(input.string(), start, /*typed=*/false);
  ASSERT_EQ(values.rows.size(), 100u);
  EXPECT_THAT(values.rows[99], ::testing::HasSubstr("\"File_Row_Number\":198"));
  ExpectSameShape(ReadInPasses(input.string(), start, 2), values);
}

// The columns of the file the training schema came from are all copied: no row needs the JSON
// path (the test above holds the copy to what that path makes).
TEST(TypedReading, ParquetColumnsOfTheTrainingTypesAreCopiedWhole) {
  TempDir dir;
  const fs::path training = fs::path(dir.path()) / "training.parquet";
  WriteParquet(training, AllColumnTypesSql(3, /*misfits=*/false));
  const fs::path input = fs::path(dir.path()) / "input.parquet";
  WriteParquet(input, AllColumnTypesSql(5000, /*misfits=*/false));
  schema::Shaper shaper(TrainedSchema(training.string()), ShaperOptionsForSync());
  const std::shared_ptr<const schema::RecordLayout> layout = shaper.TypedLayout({});
  ASSERT_NE(layout, nullptr);

  const TestDuckdb duckdb;
  const std::string sql = fmt::format("SELECT * FROM read_parquet('{}')", input.string());
  duckdb_prepared_statement statement = nullptr;
  ASSERT_EQ(duckdb_prepare(duckdb.connection(), sql.c_str(), &statement), DuckDBSuccess);
  std::vector<internal::ResultColumn> columns;
  for (idx_t i = 0; i < duckdb_prepared_statement_column_count(statement); ++i) {
    const char* name = duckdb_prepared_statement_column_name(statement, i);
    columns.emplace_back(name, duckdb_prepared_statement_column_logical_type(statement, i));
    duckdb_free(const_cast<char*>(name));
  }
  const std::optional<internal::DuckdbColumnsPlan> plan =
      internal::DuckdbColumnsPlan::Make(*layout, columns);
  ASSERT_TRUE(plan.has_value()) << "a column type has no copy";

  duckdb_result result;
  ASSERT_EQ(duckdb_execute_prepared_streaming(statement, &result), DuckDBSuccess);
  internal::TypedRows rows(layout);
  uint64_t total = 0;
  while (duckdb_data_chunk chunk = duckdb_fetch_chunk(result)) {
    const uint64_t size = duckdb_data_chunk_get_size(chunk);
    EXPECT_EQ(plan->Append(chunk, 0, size, rows), size);
    total += size;
    duckdb_destroy_data_chunk(&chunk);
  }
  EXPECT_EQ(total, 5000u);
  const ColumnRows taken = rows.Take(1);
  EXPECT_EQ(taken.num_rows, 5000);
  for (const Column& column : taken.columns) {
    std::string reason;
    EXPECT_TRUE(column.Validate(&reason)) << reason;
  }
  duckdb_destroy_result(&result);
  duckdb_destroy_prepare(&statement);
}

// Rows read as Values (no layout: discover's sample) are held as Values until the batch is shaped:
// a batch ends at the byte limit as well as the record limit, whatever the rows' size.
TEST(TypedReading, ParquetRowsReadAsValuesKeepBatchesWithinTheByteLimit) {
  TempDir dir;
  const fs::path input = fs::path(dir.path()) / "wide.parquet";
  WriteParquet(input, "SELECT i AS id, repeat('x', 10000) AS wide FROM range(1000) t(i)");
  Result<std::unique_ptr<Source>> source = MakeSource(FileConnector(input.string()));
  ASSERT_TRUE(source.ok()) << source.status().message();
  ReadOptions options;
  options.max_records_per_batch = 100'000;
  options.max_bytes_per_batch = 100'000;  // about 10 rows of JSON text
  ASSERT_TRUE((*source)->Open({}, options).ok());
  uint64_t rows = 0;
  uint64_t batches = 0;
  while (true) {
    Result<std::optional<SourceBatch>> next = (*source)->Next();
    ASSERT_TRUE(next.ok()) << next.status().message();
    if (!*next) break;
    EXPECT_LE((*next)->records.size(), 11u);
    rows += (*next)->records.size();
    ++batches;
  }
  EXPECT_EQ(rows, 1000u);
  EXPECT_GE(batches, 90u);
}

// Rows copied as columns end a batch at its byte limit too: a Parquet file's size does not tell
// what its rows weigh (wide text compresses well), and a batch of 40,000 rows of 8 KB used to be
// one batch of 320 MB, however small the limit.
TEST(TypedReading, ParquetRowsCopiedAsColumnsKeepBatchesWithinTheByteLimit) {
  TempDir dir;
  const std::string select =
      "SELECT i AS id, repeat(md5(i::VARCHAR), {}) AS wide FROM range({}) t(i)";
  const fs::path training = fs::path(dir.path()) / "training.parquet";
  WriteParquet(training, fmt::format(fmt::runtime(select), 1, 3));
  const fs::path input = fs::path(dir.path()) / "wide.parquet";
  WriteParquet(input, fmt::format(fmt::runtime(select), 312, 3000));  // rows of 9,984 bytes
  schema::Shaper shaper(TrainedSchema(training.string()), ShaperOptionsForSync());
  LayoutBoard board;
  board.Publish(shaper.TypedLayout({}));
  Result<std::unique_ptr<Source>> source = MakeSource(FileConnector(input.string()));
  ASSERT_TRUE(source.ok()) << source.status().message();
  constexpr uint64_t kLimitBytes = 100'000;  // about 10 rows
  ReadOptions options;
  options.max_typed_bytes_per_batch = kLimitBytes;
  options.layouts = &board;
  ASSERT_TRUE((*source)->Open({}, options).ok());
  int64_t rows = 0;
  uint64_t batches = 0;
  while (true) {
    Result<std::optional<SourceBatch>> next = (*source)->Next();
    ASSERT_TRUE(next.ok()) << next.status().message();
    if (!*next) break;
    EXPECT_TRUE((*next)->records.empty() && (*next)->deadletters.empty())
        << "every row is copied as columns";
    if (!(*next)->columns) continue;  // the file's end, a position alone
    const uint64_t bytes = (*next)->columns->DataBytes();
    EXPECT_LE(bytes, kLimitBytes + 10'100) << "a batch overshoots its limit by at most a row";
    EXPECT_GE(bytes, kLimitBytes / 2) << "batches are not cut needlessly small";
    rows += (*next)->columns->num_rows;
    ++batches;
  }
  EXPECT_EQ(rows, 3000);
  EXPECT_GE(batches, 280u);
}

// The ids a sample of at most `records` reads from `path`, resuming at `committed`, as Values (as
// discover reads) or typed; `positions` receives where it ended.
std::vector<int64_t> SampleIds(const fs::path& path, const SourcePositions& committed,
                               uint64_t records, bool typed, SourcePositions* positions) {
  std::vector<int64_t> ids;
  Result<std::unique_ptr<Source>> source = MakeSource(FileConnector(path.string()));
  EXPECT_TRUE(source.ok()) << source.status().message();
  schema::Shaper shaper(TrainedSchema(path.string()), ShaperOptionsForSync());
  LayoutBoard board;
  board.Publish(shaper.TypedLayout({}));
  ReadOptions options;
  options.max_records_per_batch = 700;
  options.max_typed_records_per_batch = 700;
  options.max_records_per_partition = records;
  if (typed) options.layouts = &board;
  EXPECT_TRUE((*source)->Open(committed, options).ok());
  *positions = committed;
  while (true) {
    Result<std::optional<SourceBatch>> next = (*source)->Next();
    EXPECT_TRUE(next.ok()) << next.status().message();
    if (!next.ok() || !*next) break;
    const SourceBatch& batch = **next;
    EXPECT_TRUE(batch.deadletters.empty());
    for (const SourceRecord& record : batch.records)
      ids.push_back(record.value.Find("id")->as_int());
    for (int64_t row = 0; batch.columns && row < batch.columns->num_rows; ++row) {
      ids.push_back(batch.columns->RowAt(row).Find("id")->as_int());
    }
    (*positions)[batch.partition] = batch.position;
  }
  return ids;
}

// A sample (discover's) asks DuckDB only for its records: it reads exactly the records after the
// committed position, in order, up to its limit, and the file is not taken as read to its end —
// also when a column is named file_row_number (the reader then bounds its query by LIMIT).
TEST(TypedReading, AParquetSampleReadsExactlyItsRecordsAndLeavesTheFileOpen) {
  TempDir dir;
  const fs::path plain = fs::path(dir.path()) / "plain.parquet";
  WriteParquet(plain, "SELECT i AS id, 'n' || i AS name FROM range(10000) t(i)",
               "FORMAT parquet, ROW_GROUP_SIZE 1024");
  const fs::path named = fs::path(dir.path()) / "named.parquet";
  WriteParquet(named, "SELECT i AS id, i * 2 AS file_row_number FROM range(10000) t(i)",
               "FORMAT parquet, ROW_GROUP_SIZE 1024");
  // Below the most a file that declares every column's type is sampled (2048 records), across
  // row groups.
  constexpr uint64_t kSample = 1500;
  for (const fs::path& path : {plain, named}) {
    for (const bool typed : {false, true}) {
      SCOPED_TRACE(fmt::format("{}, {}", path.filename().string(), typed ? "typed" : "values"));
      std::vector<int64_t> expected(kSample);
      std::iota(expected.begin(), expected.end(), 0);
      SourcePositions first;
      EXPECT_EQ(SampleIds(path, {}, kSample, typed, &first), expected);
      const PartitionPosition& position = first.at(path.string());
      EXPECT_EQ(position.records_consumed, kSample);
      EXPECT_FALSE(position.is_closed);

      std::iota(expected.begin(), expected.end(), kSample);
      SourcePositions second;
      EXPECT_EQ(SampleIds(path, first, kSample, typed, &second), expected);
      EXPECT_EQ(second.at(path.string()).records_consumed, 2 * kSample);

      expected.resize(1000);
      std::iota(expected.begin(), expected.end(), 9000);
      SourcePositions at_nine_thousand = second;
      at_nine_thousand[path.string()].records_consumed = 9000;
      SourcePositions last;
      EXPECT_EQ(SampleIds(path, at_nine_thousand, kSample, typed, &last), expected);
      EXPECT_TRUE(last.at(path.string()).is_closed);
    }
  }
}

// A footer that declares every column's type, nested ones included, leaves a sample's values
// nothing to infer: the sample reads one DuckDB vector (2048 records), however many it may read.
// A column of a type the schema has no kind for (a map) is inferred from values: the whole sample.
TEST(TypedReading, AParquetFileThatDeclaresEveryTypeIsSampledOneVectorDeep) {
  TempDir dir;
  const fs::path declared = fs::path(dir.path()) / "declared.parquet";
  WriteParquet(declared,
               "SELECT i AS id, {'n': i % 7, 'tags': [i::INTEGER]} AS nested "
               "FROM range(10000) t(i)",
               "FORMAT parquet, ROW_GROUP_SIZE 1024");
  const fs::path mapped = fs::path(dir.path()) / "mapped.parquet";
  WriteParquet(mapped, "SELECT i AS id, MAP {'k': i} AS m FROM range(10000) t(i)",
               "FORMAT parquet, ROW_GROUP_SIZE 1024");
  for (const bool typed : {false, true}) {
    SCOPED_TRACE(typed ? "typed" : "values");
    SourcePositions positions;
    std::vector<int64_t> expected(2048);
    std::iota(expected.begin(), expected.end(), 0);
    EXPECT_EQ(SampleIds(declared, {}, 5000, typed, &positions), expected);
    EXPECT_EQ(positions.at(declared.string()).records_consumed, 2048u);
    EXPECT_FALSE(positions.at(declared.string()).is_closed);
    EXPECT_EQ(SampleIds(mapped, {}, 5000, typed, &positions).size(), 5000u);
  }
}

// Parquet's types are kept exactly, inside structs and lists too: a BIGINT whose values are small
// is a long, not the int its values would make.
TEST(TypedReading, ParquetKeepsItsNestedTypesExactly) {
  TempDir dir;
  const fs::path path = fs::path(dir.path()) / "nested.parquet";
  WriteParquet(path,
               "SELECT i AS id, {'n': i % 7, 'price': (i / 4)::DECIMAL(9, 2), "
               "'tags': [i::INTEGER]} AS nested FROM range(100) t(i)");
  const schema::PipelineSchema trained = TrainedSchema(path.string());
  ASSERT_EQ(trained.namespaces.size(), 1u);
  const std::vector<Field>& fields = trained.namespaces.begin()->second.fields;
  ASSERT_EQ(fields.size(), 2u);
  EXPECT_EQ(fields[0].type, LogicalType::Long());
  ASSERT_EQ(fields[1].type.id(), TypeId::kStruct);
  const std::vector<Field>& children = fields[1].type.children();
  ASSERT_EQ(children.size(), 3u);
  EXPECT_EQ(children[0].name, "n");
  EXPECT_EQ(children[0].type, LogicalType::Long());
  EXPECT_EQ(children[1].type, LogicalType::Decimal(9, 2).value());
  ASSERT_EQ(children[2].type.id(), TypeId::kList);
  EXPECT_EQ(children[2].type.children()[0].type, LogicalType::Int());
}

// Overwrites the column chunk of `column` in the file's row group `row_group` with 0xff bytes, the
// footer left whole; returns the first row of that group.
uint64_t DamageRowGroup(const fs::path& path, int row_group, const std::string& column) {
  const std::string sql = fmt::format(
      "SELECT (SELECT coalesce(sum(num_rows), 0) FROM (SELECT DISTINCT row_group_id, "
      "row_group_num_rows AS num_rows FROM parquet_metadata('{0}') WHERE row_group_id < {1})), "
      "data_page_offset, total_compressed_size FROM parquet_metadata('{0}') "
      "WHERE row_group_id = {1} AND path_in_schema = '{2}'",
      path.string(), row_group, column);
  const TestDuckdb duckdb;  // outlives the result
  duckdb_result result;
  duckdb.Query(sql, &result);
  EXPECT_EQ(duckdb_row_count(&result), 1u);
  const auto first_row = static_cast<uint64_t>(duckdb_value_int64(&result, 0, 0));
  const int64_t offset = duckdb_value_int64(&result, 1, 0);
  const int64_t size = duckdb_value_int64(&result, 2, 0);
  duckdb_destroy_result(&result);
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  file.seekp(offset);
  const std::string damage(static_cast<size_t>(size), '\xff');
  file.write(damage.data(), static_cast<std::streamsize>(damage.size()));
  EXPECT_TRUE(file.good());
  return first_row;
}

// A damaged page mid-file ends DuckDB's result as its end does, and DuckDB drops rows it read
// ahead: every row before the damaged row group is read, the rest of the file is one deadletter at
// the record after them — never a file that merely ends early. Damage in the first, a middle and
// the last row group, read as values, typed, and typed in passes that resume.
TEST(TypedReading, ParquetDamagedMidFileReadsEveryRowBeforeTheDamagedGroup) {
  TempDir dir;
  const std::string select =
      "SELECT i AS id, 'n' || i AS name, i * 0.5 AS amount FROM range({}) t(i)";
  const fs::path training = fs::path(dir.path()) / "training.parquet";
  WriteParquet(training, fmt::format(fmt::runtime(select), 3));
  const schema::PipelineSchema start = TrainedSchema(training.string());
  for (const int damaged_group : {0, 11, 19}) {
    SCOPED_TRACE(fmt::format("row group {} damaged", damaged_group));
    const fs::path input = fs::path(dir.path()) / fmt::format("input-{}.parquet", damaged_group);
    // 20 row groups, the last one short, which DuckDB reads on several threads.
    WriteParquet(input, fmt::format(fmt::runtime(select), 40000),
                 "FORMAT parquet, ROW_GROUP_SIZE 2048");
    const uint64_t readable_rows = DamageRowGroup(input, damaged_group, "name");
    const uint64_t group_end = std::min<uint64_t>(readable_rows + 2048, 40000);
    for (const auto& [how, shaped] :
         {std::pair{"as values", ReadWhole(input.string(), start, /*typed=*/false)},
          std::pair{"typed", ReadWhole(input.string(), start, /*typed=*/true)},
          std::pair{"typed in passes", ReadInPasses(input.string(), start, 211)}}) {
      SCOPED_TRACE(how);
      ASSERT_EQ(shaped.rows.size(), readable_rows);
      for (uint64_t row = 0; row < readable_rows; row += 997) {
        EXPECT_THAT(shaped.rows[row], ::testing::StartsWith(fmt::format("{{\"id\":{},", row)));
      }
      EXPECT_THAT(shaped.deadletters,
                  ::testing::ElementsAre(fmt::format("{} 0 unreadable_file", readable_rows + 1)));
      EXPECT_THAT(shaped.deadletter_reasons,
                  ::testing::ElementsAre(::testing::StartsWith(fmt::format(
                      "unreadable Parquet: row group {} (records {} to {}) is damaged, and the "
                      "records after it are not read: ",
                      damaged_group, readable_rows + 1, group_end))));
    }
  }
}

}  // namespace
}  // namespace skippr::sources
