// The File source when files change between and during passes: appended files resume where the last
// pass stopped, growing files are read up to the size they had when the pass opened them, and files
// whose bytes already read changed are read again as a new version — never an interleaving of old
// and new rows (docs/config.md, "When files change").
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <fmt/format.h>
#include <zstd.h>

#include <filesystem>
#include <functional>
#include <fstream>
#include <set>

#include "sources/input_stream.hpp"
#include "sources/sources.hpp"
#include "support/gzip.hpp"
#include "support/scoped_environment.hpp"
#include "support/scale.hpp"
#include "support/status_matchers.hpp"
#include "support/temp_dir.hpp"

namespace skippr::sources {
namespace {

using ::testing::HasSubstr;
using skippr::testing::GzipMember;
using skippr::testing::TempDir;
using skippr::testing::ValueOrDie;
namespace fs = std::filesystem;

config::ConnectorConfig FileConnector(const std::string& path) {
  config::ConnectorConfig connector;
  connector.kind = "File";
  connector.settings["path"] = path;
  return connector;
}

std::unique_ptr<Source> MakeFileSource(const std::string& path) {
  return ValueOrDie(MakeSource(FileConnector(path)));
}

// Every record (and deadletter) of one pass, and the positions it reached.
struct Pass {
  std::vector<SourceRecord> records;
  std::vector<schema::Deadletter> deadletters;
  SourcePositions positions;
  size_t batches = 0;
};

// Reads batches until the source is done, or until `after_first_batch` has run once and
// `max_batches` were read (0: all). The callback runs between two batches of the same pass.
Pass Read(Source& source, const SourcePositions& committed, uint64_t batch_records = 100,
          const std::function<void()>& after_first_batch = nullptr) {
  ReadOptions options;
  options.max_records_per_batch = batch_records;
  options.max_bytes_per_batch = 64 << 10;
  skippr::testing::ExpectOk(source.Open(committed, options));
  Pass pass;
  pass.positions = committed;
  while (true) {
    Result<std::optional<SourceBatch>> batch = source.Next();
    EXPECT_TRUE(batch.ok()) << batch.status().ToString();
    if (!batch.ok() || !*batch) break;
    for (SourceRecord& record : (*batch)->records) pass.records.push_back(std::move(record));
    for (schema::Deadletter& deadletter : (*batch)->deadletters) {
      pass.deadletters.push_back(deadletter);
    }
    pass.positions[(*batch)->partition] = (*batch)->position;
    if (++pass.batches == 1 && after_first_batch) after_first_batch();
  }
  return pass;
}

std::string JsonLine(int id) {
  return "{\"id\":" + std::to_string(id) + ",\"name\":\"n" + std::to_string(id) + "\"}\n";
}
std::string JsonLines(int first, int last) {
  std::string text;
  for (int i = first; i <= last; ++i) text += JsonLine(i);
  return text;
}

int64_t IdOf(const SourceRecord& record) {
  const Value* id = record.value.Find("id");
  return id == nullptr ? -1 : id->as_int();
}

std::vector<int64_t> Ids(const Pass& pass) {
  std::vector<int64_t> ids;
  for (const SourceRecord& record : pass.records) ids.push_back(IdOf(record));
  return ids;
}

std::vector<int64_t> Range(int64_t first, int64_t last) {
  std::vector<int64_t> ids;
  for (int64_t i = first; i <= last; ++i) ids.push_back(i);
  return ids;
}

void Append(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::app) << bytes;
}

// Sets the modification time explicitly: a rewrite within one timestamp tick must still count.
void SetMtime(const std::string& path, int64_t seconds) {
  const struct timespec times[2] = {{seconds, 0}, {seconds, 0}};
  ASSERT_EQ(utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
}

std::string Zstd(const std::string& text) {
  std::string out(ZSTD_compressBound(text.size()), '\0');
  out.resize(ZSTD_compress(out.data(), out.size(), text.data(), text.size(), 3));
  return out;
}

// The pass read `path` as version `version`, new because of a reason containing `why`.
void ExpectVersion(const Pass& pass, const std::string& path, uint64_t version,
                   const std::string& why) {
  const PartitionPosition& position = pass.positions.at(path);
  EXPECT_EQ(position.version, version);
  EXPECT_THAT(position.version_reason, HasSubstr(why));
}

// ----- appends --------------------------------------------------------------------------------

TEST(FileAppend, OneAppendedLineIsTheOnlyRecordOfTheNextPass) {
  TempDir dir;
  const std::string path = dir.Write("in/events.jsonl", JsonLines(1, 1000));
  auto source = MakeFileSource(dir.Sub("in"));
  Pass first = Read(*source, {});
  ASSERT_EQ(first.records.size(), 1000u);
  ASSERT_TRUE(first.positions.at(path).is_closed);
  Append(path, JsonLine(1001));
  Pass second = Read(*source, first.positions);
  EXPECT_EQ(Ids(second), std::vector<int64_t>{1001});
  ASSERT_EQ(second.records.size(), 1u);
  EXPECT_EQ(second.records[0].line, 1001u);
  EXPECT_EQ(second.records[0].row, 1001u);
  const PartitionPosition& position = second.positions.at(path);
  EXPECT_TRUE(position.is_closed);
  EXPECT_EQ(position.version, 1u);
  EXPECT_EQ(position.records_consumed, 1001u);
  EXPECT_EQ(position.byte_offset, fs::file_size(path));
  EXPECT_TRUE(Read(*source, second.positions).records.empty());
}

TEST(FileAppend, AppendedCsvRowsResumeUnderTheHeaderTheFileStartedWith) {
  TempDir dir;
  std::string csv = "id;name\n";
  for (int i = 1; i <= 300; ++i) csv += std::to_string(i) + ";n" + std::to_string(i) + "\n";
  const std::string path = dir.Write("rows.csv", csv);
  auto source = MakeFileSource(path);
  Pass first = Read(*source, {});
  ASSERT_EQ(first.records.size(), 300u);
  Append(path, "301;n301\n302;\"n;302\"\n");
  Pass second = Read(*source, first.positions);
  ASSERT_EQ(Ids(second), Range(301, 302));
  EXPECT_EQ(second.records[1].value.Find("name")->as_string(), "n;302");  // the sniffed ';'
  EXPECT_EQ(second.records[0].line, 302u);  // the header is line 1
  EXPECT_EQ(second.records[1].row, 302u);
  EXPECT_EQ(second.positions.at(path).next_line, 304u);
}

// A pass that stopped in the middle (a crash, a failed commit) resumes a CSV at its byte offset
// too, not by reading and skipping the rows before it.
TEST(FileAppend, AnUnfinishedCsvResumesAtItsByteOffset) {
  TempDir dir;
  std::string csv = "id,name\n";
  for (int i = 1; i <= 300; ++i) csv += std::to_string(i) + ",n" + std::to_string(i) + "\n";
  const std::string path = dir.Write("rows.csv", csv);
  auto source = MakeFileSource(path);
  ReadOptions options;
  options.max_records_per_batch = 100;
  skippr::testing::ExpectOk(source->Open({}, options));
  SourceBatch first = *ValueOrDie(source->Next());
  ASSERT_EQ(first.records.size(), 100u);
  EXPECT_EQ(first.position.byte_offset, csv.find("101,"));
  EXPECT_EQ(first.position.next_line, 102u);
  Pass rest = Read(*source, {{path, first.position}});
  ASSERT_EQ(Ids(rest), Range(101, 300));
  EXPECT_EQ(rest.records.front().line, 102u);
}

TEST(FileAppend, GzipMembersAppendedAfterTheFileWasReadResumeAtTheOldCompressedSize) {
  TempDir dir;
  const std::string path = dir.Write("events.jsonl.gz", GzipMember(JsonLines(1, 500)));
  const uint64_t first_member_bytes = fs::file_size(path);
  auto source = MakeFileSource(path);
  Pass first = Read(*source, {});
  ASSERT_EQ(first.records.size(), 500u);
  const PartitionPosition& closed = first.positions.at(path);
  ASSERT_TRUE(closed.is_closed);
  EXPECT_EQ(closed.resume.prefix.file_bytes, first_member_bytes);
  EXPECT_EQ(closed.resume.byte_offset, JsonLines(1, 500).size());
  Append(path, GzipMember(JsonLines(501, 510)));
  Pass second = Read(*source, first.positions);
  ASSERT_EQ(Ids(second), Range(501, 510));
  EXPECT_EQ(second.records.front().line, 501u);
  EXPECT_EQ(second.positions.at(path).version, 1u);
  EXPECT_EQ(second.positions.at(path).resume.prefix.file_bytes, fs::file_size(path));
}

TEST(FileAppend, ZstdFramesAppendedAfterTheFileWasReadResumeAtTheOldCompressedSize) {
  TempDir dir;
  const std::string path = dir.Write("events.jsonl.zst", Zstd(JsonLines(1, 500)));
  auto source = MakeFileSource(path);
  Pass first = Read(*source, {});
  ASSERT_EQ(first.records.size(), 500u);
  Append(path, Zstd(JsonLines(501, 503)));
  EXPECT_EQ(Ids(Read(*source, first.positions)), Range(501, 503));
}

// A compressed file a pass left unfinished is read again from where it can be (its start), and the
// records already consumed are skipped only once the bytes they came from are proven unchanged.
TEST(FileAppend, AnUnfinishedGzipIsReReadSkippingOnlyProvenRecords) {
  TempDir dir;
  const std::string path = dir.Write("events.jsonl.gz", GzipMember(JsonLines(1, 500)));
  auto source = MakeFileSource(path);
  ReadOptions options;
  options.max_records_per_batch = 120;
  skippr::testing::ExpectOk(source->Open({}, options));
  const SourceBatch first = *ValueOrDie(source->Next());
  ASSERT_EQ(first.records.size(), 120u);
  EXPECT_EQ(first.position.byte_offset, JsonLines(1, 120).size());
  EXPECT_EQ(first.position.next_line, 121u);
  EXPECT_EQ(first.position.resume.prefix.file_bytes, 0u);
  Pass rest = Read(*source, {{path, first.position}});
  ASSERT_EQ(Ids(rest), Range(121, 500));
  EXPECT_EQ(rest.records.front().line, 121u);

  // Same records read by then, other bytes (one name differs): a new version from the start.
  std::string changed = JsonLines(1, 500);
  changed.replace(changed.find("n7\""), 3, "x7\"");
  std::ofstream(path, std::ios::binary | std::ios::trunc) << GzipMember(changed);
  Pass again = Read(*source, {{path, first.position}});
  EXPECT_EQ(Ids(again), Range(1, 500));
  ExpectVersion(again, path, 2, "the bytes already read changed");
}

// ----- growing while read ---------------------------------------------------------------------

// A file is read up to the size it had when the pass opened it. Lines appended meanwhile are the
// next pass's; a line cut by that size (still being written) is not read until it is whole.
TEST(FileGrowth, AFileGrowingDuringAPassIsReadToItsSizeAtOpenAndNoLineIsCut) {
  TempDir dir;
  // Over 1 MiB, so that the reader has not reached the end when the file grows: in chunks of
  // 64 KiB, its workers read a few ahead of the first batch, not to the end.
  const skippr::testing::ScopedEnvironment chunks("SKIPPR_LINE_CHUNK_BYTES", "65536");
  const std::string lines = JsonLines(1, 120000);
  ASSERT_GT(lines.size(), size_t{3} << 20);
  const std::string partial = "{\"id\":120001,\"na";
  const std::string path = dir.Write("events.jsonl", lines + partial);
  auto source = MakeFileSource(path);
  Pass first = Read(*source, {}, 100, [&] { Append(path, "me\":\"n120001\"}\n" + JsonLine(120002)); });
  EXPECT_EQ(Ids(first), Range(1, 120000));
  EXPECT_TRUE(first.deadletters.empty());
  const PartitionPosition& cut = first.positions.at(path);
  EXPECT_FALSE(cut.is_closed);
  EXPECT_EQ(cut.byte_offset, lines.size());
  EXPECT_EQ(cut.size_bytes, lines.size() + partial.size());
  Pass second = Read(*source, first.positions);
  EXPECT_EQ(Ids(second), Range(120001, 120002));
  EXPECT_TRUE(second.deadletters.empty());
  EXPECT_TRUE(second.positions.at(path).is_closed);
}

// The same for a gzip member still being written: the member cut by the size at open is the end of
// that pass, not a truncated file.
TEST(FileGrowth, AGzipMemberCutByTheSizeAtOpenEndsThePassWithoutAnError) {
  TempDir dir;
  std::string text;
  uint64_t state = 0x9e3779b97f4a7c15u;
  for (int i = 1; i <= 100000; ++i) {  // random names: the gzip member stays over 1 MiB
    state = state * 6364136223846793005u + 1442695040888963407u;
    text += fmt::format("{{\"id\":{},\"name\":\"{:016x}{:016x}\"}}\n", i, state, state * 31);
  }
  const std::string whole = GzipMember(text);
  const size_t cut_at = whole.size() * 2 / 3;
  ASSERT_GT(cut_at, kFileReadBytes);
  const std::string path = dir.Write("events.jsonl.gz", whole.substr(0, cut_at));
  auto source = MakeFileSource(path);
  Pass first = Read(*source, {}, 100, [&] { Append(path, whole.substr(cut_at)); });
  ASSERT_FALSE(first.records.empty());
  ASSERT_LT(first.records.size(), 100000u);
  EXPECT_TRUE(first.deadletters.empty());
  EXPECT_FALSE(first.positions.at(path).is_closed);
  Pass second = Read(*source, first.positions);
  EXPECT_EQ(first.records.size() + second.records.size(), 100000u);
  std::set<int64_t> ids;
  for (const Pass* pass : {&first, &second}) {
    for (int64_t id : Ids(*pass)) ids.insert(id);
  }
  EXPECT_EQ(ids.size(), 100000u);
  EXPECT_TRUE(second.positions.at(path).is_closed);
}

// The last line of a file that did not grow is read even without a line end; if an append then
// continues it, what was read of it was a cut record, and the file is read again as a new version.
TEST(FileGrowth, AnAppendThatContinuesALineReadWithoutItsLineEndIsANewVersion) {
  TempDir dir;
  const std::string path = dir.Write("events.jsonl", JsonLines(1, 3) + "{\"id\":4");
  auto source = MakeFileSource(path);
  Pass first = Read(*source, {});
  ASSERT_EQ(Ids(first), Range(1, 3));
  ASSERT_EQ(first.deadletters.size(), 1u);  // the cut line, read as it was
  ASSERT_FALSE(first.positions.at(path).ends_at_line_end);
  Append(path, "}\n" + JsonLine(5));
  Pass second = Read(*source, first.positions);
  EXPECT_EQ(Ids(second), Range(1, 5));  // nothing lost: re-read from the start
  EXPECT_TRUE(second.deadletters.empty());
  ExpectVersion(second, path, 2, "continued its last line");
}

// An append that starts with the line end the last line lacked just ends it: no new version.
TEST(FileGrowth, AnAppendThatEndsTheLastLineReadIsAnAppend) {
  TempDir dir;
  const std::string path = dir.Write("events.jsonl", JsonLines(1, 3) + "{\"id\":4}");
  auto source = MakeFileSource(path);
  Pass first = Read(*source, {});
  ASSERT_EQ(Ids(first), Range(1, 4));
  Append(path, "\n" + JsonLine(5));
  Pass second = Read(*source, first.positions);
  EXPECT_EQ(Ids(second), std::vector<int64_t>{5});
  EXPECT_EQ(second.positions.at(path).version, 1u);
  EXPECT_EQ(second.records[0].line, 5u);
}

// A quoted CSV field still being written (a line end inside it) when the pass's size cut it: the
// row is left whole for the next pass, not read as a broken record.
TEST(FileGrowth, ACsvRowWithAQuotedFieldCutByTheSizeAtOpenIsLeftForTheNextPass) {
  TempDir dir;
  std::string csv = "id,note\n";
  for (int i = 1; i <= 120000; ++i) csv += std::to_string(i) + ",plain note " + std::to_string(i) + "\n";
  ASSERT_GT(csv.size(), size_t{2} << 20);
  const std::string path = dir.Write("rows.csv", csv + "120001,\"first line\nsecond");
  auto source = MakeFileSource(path);
  Pass first = Read(*source, {}, 100, [&] { Append(path, " line\"\n120002,last\n"); });
  EXPECT_EQ(Ids(first), Range(1, 120000));
  EXPECT_TRUE(first.deadletters.empty());
  EXPECT_FALSE(first.positions.at(path).is_closed);
  EXPECT_EQ(first.positions.at(path).byte_offset, csv.size());
  Pass second = Read(*source, first.positions);
  ASSERT_EQ(Ids(second), Range(120001, 120002));
  EXPECT_EQ(second.records[0].value.Find("note")->as_string(), "first line\nsecond line");
  EXPECT_EQ(second.records[0].line, 120002u);
  EXPECT_EQ(second.records[1].line, 120004u);
  EXPECT_TRUE(second.deadletters.empty());
}

// An empty file has nothing read: when it gets content, that is its first version, not a new one.
TEST(FileGrowth, AFileThatWasEmptyWhenReadIsReadFromItsStartAsItsFirstVersion) {
  TempDir dir;
  const std::string path = dir.Write("events.jsonl", "");
  auto source = MakeFileSource(path);
  Pass first = Read(*source, {});
  ASSERT_EQ(first.deadletters.size(), 1u);  // "empty file (0 bytes)"
  Append(path, JsonLines(1, 3));
  Pass second = Read(*source, first.positions);
  EXPECT_EQ(Ids(second), Range(1, 3));
  EXPECT_EQ(second.positions.at(path).version, 1u);
}

// ----- rewritten, truncated, touched -----------------------------------------------------------

TEST(FileVersions, RewrittenInPlaceWithTheSameSizeIsANewVersionReadFromItsStart) {
  TempDir dir;
  std::string before;
  std::string after;
  for (int i = 101; i <= 200; ++i) {
    before += fmt::format("{{\"id\":{}}}\n", i);
    after += fmt::format("{{\"id\":{}}}\n", i + 100);
  }
  ASSERT_EQ(before.size(), after.size());
  const std::string path = dir.Write("events.jsonl", before);
  SetMtime(path, 1'000'000);
  auto source = MakeFileSource(path);
  Pass first = Read(*source, {});
  ASSERT_EQ(first.records.size(), 100u);
  dir.Write("events.jsonl", after);
  SetMtime(path, 1'000'001);
  Pass second = Read(*source, first.positions);
  EXPECT_EQ(Ids(second), Range(201, 300));
  EXPECT_EQ(second.records.front().row, 1u);
  ExpectVersion(second, path, 2, "rewritten in place or replaced");
  EXPECT_TRUE(Read(*source, second.positions).records.empty());
}

// Same size, new modification time, same bytes (touched, or copied over with the same content):
// not a new version; only the position's time moves.
TEST(FileVersions, ANewModificationTimeWithTheSameBytesIsNoChange) {
  TempDir dir;
  const std::string path = dir.Write("events.jsonl", JsonLines(1, 50));
  SetMtime(path, 2'000'000);
  auto source = MakeFileSource(path);
  Pass first = Read(*source, {});
  SetMtime(path, 1'000'000);  // backwards, as a restore from an older copy makes it
  Pass touched = Read(*source, first.positions);
  EXPECT_TRUE(touched.records.empty());
  EXPECT_EQ(touched.batches, 1u);  // the position with its new time, to commit
  EXPECT_EQ(touched.positions.at(path).mtime_ns, 1'000'000'000'000'000);
  EXPECT_EQ(touched.positions.at(path).version, 1u);
  EXPECT_EQ(Read(*source, touched.positions).batches, 0u);
  // Older time and an append: still an append.
  Append(path, JsonLine(51));
  SetMtime(path, 500'000);
  EXPECT_EQ(Ids(Read(*source, touched.positions)), std::vector<int64_t>{51});
}

TEST(FileVersions, ATruncatedFileIsANewVersion) {
  TempDir dir;
  const std::string path = dir.Write("events.jsonl", JsonLines(1, 100));
  auto source = MakeFileSource(path);
  Pass first = Read(*source, {});
  fs::resize_file(path, JsonLines(1, 40).size());
  Pass second = Read(*source, first.positions);
  EXPECT_EQ(Ids(second), Range(1, 40));
  ExpectVersion(second, path, 2, "fewer than the");
}

// A JSON array cannot grow by appending: any change is a new version.
TEST(FileVersions, AChangedJsonArrayIsANewVersion) {
  TempDir dir;
  const std::string path = dir.Write("list.json", "[{\"id\":1},{\"id\":2}]");
  auto source = MakeFileSource(path);
  Pass first = Read(*source, {});
  ASSERT_EQ(Ids(first), Range(1, 2));
  dir.Write("list.json", "[{\"id\":1},{\"id\":2},{\"id\":3}]");
  Pass second = Read(*source, first.positions);
  EXPECT_EQ(Ids(second), Range(1, 3));
  ExpectVersion(second, path, 2, "cannot grow by appending");
}

// ----- names, links and listing ----------------------------------------------------------------

TEST(FileNames, TwoNamesOfOneFileAreReadOnce) {
  TempDir dir;
  const std::string path = dir.Write("in/a.jsonl", JsonLines(1, 10));
  fs::create_symlink(path, dir.Sub("in/b.jsonl"));
  fs::create_hard_link(path, dir.Sub("in/c.jsonl"));
  auto source = MakeFileSource(dir.Sub("in"));
  Pass pass = Read(*source, {});
  EXPECT_EQ(Ids(pass), Range(1, 10));
  EXPECT_EQ(pass.positions.size(), 1u);
  EXPECT_EQ(pass.positions.count(path), 1u);
}

// A name that now points at another file (a symlink replaced, a file moved over it): its bytes
// differ from what was read, so it is a new version of that partition.
TEST(FileNames, AFileReplacedByASymlinkToOtherBytesIsANewVersion) {
  TempDir dir;
  const std::string path = dir.Write("in/a.jsonl", JsonLines(1, 10));
  dir.Write("elsewhere/b.jsonl", JsonLines(101, 120));
  auto source = MakeFileSource(dir.Sub("in"));
  Pass first = Read(*source, {});
  fs::remove(path);
  fs::create_symlink(dir.Sub("elsewhere/b.jsonl"), path);
  Pass second = Read(*source, first.positions);
  EXPECT_EQ(Ids(second), Range(101, 120));
  ExpectVersion(second, path, 2, "rewritten in place or replaced");
}

TEST(FileNames, AFileDeletedAfterItWasListedIsSkipped) {
  TempDir dir;
  dir.Write("in/a.jsonl", JsonLines(1, 10));
  const std::string doomed = dir.Write("in/b.jsonl", JsonLines(11, 20));
  auto source = MakeFileSource(dir.Sub("in"));
  ReadOptions options;
  skippr::testing::ExpectOk(source->Open({}, options));
  fs::remove(doomed);  // listed by Open, gone before it is opened
  uint64_t records = 0;
  while (true) {
    auto batch = ValueOrDie(source->Next());
    if (!batch) break;
    records += batch->records.size();
    EXPECT_NE(batch->partition, doomed);
  }
  EXPECT_EQ(records, 10u);
}

// A renamed file is another partition (its name is its id): read again under the new name.
TEST(FileNames, ARenamedFileIsANewPartition) {
  TempDir dir;
  dir.Write("in/a.jsonl", JsonLines(1, 10));
  auto source = MakeFileSource(dir.Sub("in"));
  Pass first = Read(*source, {});
  fs::rename(dir.Sub("in/a.jsonl"), dir.Sub("in/renamed.jsonl"));
  Pass second = Read(*source, first.positions);
  EXPECT_EQ(Ids(second), Range(1, 10));
  EXPECT_EQ(second.positions.at(dir.Sub("in/renamed.jsonl")).version, 1u);
}

// 10,000 files (1,000 in the sanitizer builds): the second pass finds the one that grew.
TEST(FileNames, ManyFilesThenOneAppend) {
  const auto files = static_cast<int>(skippr::testing::Scaled(10000));
  TempDir dir;
  for (int i = 0; i < files; ++i) dir.Write(fmt::format("in/{:05}.jsonl", i), JsonLine(i));
  auto source = MakeFileSource(dir.Sub("in"));
  Pass first = Read(*source, {});
  ASSERT_EQ(first.records.size(), static_cast<size_t>(files));
  ASSERT_EQ(first.positions.size(), static_cast<size_t>(files));
  Append(dir.Sub(fmt::format("in/{:05}.jsonl", files / 2)), JsonLine(files));
  Pass second = Read(*source, first.positions);
  EXPECT_EQ(Ids(second), std::vector<int64_t>{int64_t{files}});
}

// A file cut short while a pass reads it: the pass ends where the bytes end; the next pass finds
// fewer bytes than were read only if it was cut below them.
TEST(FileGrowth, AFileThatShrinksDuringAPassIsReadToWhereItEnds) {
  TempDir dir;
  const std::string lines = JsonLines(1, 40000);
  const std::string path = dir.Write("events.jsonl", lines);
  auto source = MakeFileSource(path);
  const uint64_t kept_bytes = JsonLines(1, 30000).size();
  Pass first = Read(*source, {}, 100, [&] { fs::resize_file(path, kept_bytes); });
  const std::vector<int64_t> ids = Ids(first);
  ASSERT_GE(ids.size(), 100u);
  ASSERT_LE(ids.size(), 40000u);
  EXPECT_EQ(ids, Range(1, static_cast<int64_t>(ids.size())));  // in order, none twice
  ASSERT_GT(first.positions.at(path).byte_offset, kept_bytes);  // read from the reader's window
  Pass second = Read(*source, first.positions);
  EXPECT_EQ(Ids(second), Range(1, 30000));
  ExpectVersion(second, path, 2, "fewer than the");
}

// ----- positions in the store ------------------------------------------------------------------

TEST(FilePositionsStore, Format2RoundTripsAndFormat1ReadsAsUnverified) {
  TempDir dir;
  auto store = ValueOrDie(store::Store::Open(store::StoreOptions{dir.path() + "/store"}));
  PartitionPosition position{1234, 99, 10, 600, 11, false};
  position.version = 3;
  position.version_reason = "the bytes already read changed";
  position.resume = {{600, 0x1111, 0xffffffffffffffff, 65536}, 600, 11, 10};
  position.skipped_bytes_hash = 0xabcdef;
  position.ends_at_line_end = false;
  {
    auto write = ValueOrDie(store->BeginWrite());
    skippr::testing::ExpectOk(SavePositions(write, {{"/data/a.jsonl", position}}));
    skippr::testing::ExpectOk(
        write.Put(store::Family::kOffsets, store::KeyBuilder().Text("partition").Text("old").key(),
                  R"({"format_version":1,"size_bytes":50,"mtime_ns":7,"records_consumed":4,)"
                  R"("byte_offset":40,"next_line":5,"is_closed":false})"));
    skippr::testing::ExpectOk(write.Commit());
  }
  auto read = ValueOrDie(store->BeginRead());
  SourcePositions loaded = ValueOrDie(LoadPositions(read));
  EXPECT_EQ(loaded.at("/data/a.jsonl"), position);
  const PartitionPosition& old = loaded.at("old");
  EXPECT_TRUE(old.is_unverified);
  EXPECT_EQ(old.version, 1u);
  EXPECT_EQ(old.records_consumed, 4u);
  EXPECT_EQ(old.resume.prefix.file_bytes, 40u);
  EXPECT_EQ(old.resume.records, 4u);
}

// A file whose position an older skipprd wrote: an unfinished one goes on as it would have; a
// finished one that changed cannot be told apart from a rewrite and is read again.
TEST(FilePositionsStore, Format1PositionsResumeAsBeforeOrReadAChangedFileAgain) {
  TempDir dir;
  const std::string path = dir.Write("events.jsonl", JsonLines(1, 10));
  PartitionPosition unfinished{fs::file_size(path), 0, 4, JsonLines(1, 4).size(), 5, false};
  unfinished.is_unverified = true;
  unfinished.resume = {{unfinished.byte_offset, 0, 0, 0}, unfinished.byte_offset, 5, 4};
  auto source = MakeFileSource(path);
  EXPECT_EQ(Ids(Read(*source, {{path, unfinished}})), Range(5, 10));
  PartitionPosition finished{1, 0, 10, 0, 1, true};
  finished.is_unverified = true;
  Pass again = Read(*source, {{path, finished}});
  EXPECT_EQ(Ids(again), Range(1, 10));
  ExpectVersion(again, path, 2, "no fingerprint");
  EXPECT_FALSE(again.positions.at(path).is_unverified);
}

// ----- the bounded stream --------------------------------------------------------------------

TEST(OpenedFile, StreamsReadNoFurtherThanTheSizeAtOpenAndTellWhenTheFileGrewPastIt) {
  TempDir dir;
  const std::string path = dir.Write("a.txt", "one\ntwo\n");
  auto file = ValueOrDie(OpenedFile::Open(path));
  Append(path, "three\n");
  auto stream = ValueOrDie(file->OpenStream());
  std::string all(64, '\0');
  all.resize(ValueOrDie(stream->Read(all.data(), all.size())));
  EXPECT_EQ(all, "one\ntwo\n");
  EXPECT_EQ(ValueOrDie(stream->Read(all.data(), all.size())), 0u);
  EXPECT_TRUE(stream->is_cut_by_limit());
  // Renamed away and replaced: the opened file is still the one read.
  fs::rename(path, dir.Sub("moved.txt"));
  dir.Write("a.txt", "other\n");
  auto again = ValueOrDie(file->OpenStream({4, 4}));
  all.resize(64);
  all.resize(ValueOrDie(again->Read(all.data(), all.size())));
  EXPECT_EQ(all, "two\n");
  EXPECT_EQ(ValueOrDie(file->HashRange(0, 4)), ValueOrDie(file->HashRange(0, 4)));
  EXPECT_NE(ValueOrDie(file->HashRange(0, 4)), ValueOrDie(file->HashRange(4, 4)));
  EXPECT_FALSE(ValueOrDie(file->HashRange(10, 10)).has_value());  // past the end
}

TEST(OpenedFile, AStreamStartedAtACompressedBoundaryMustFindTheSameCompressionThere) {
  TempDir dir;
  const std::string first = GzipMember("a\n");
  const std::string path = dir.Write("a.gz", first + "plain bytes\n");
  auto file = ValueOrDie(OpenedFile::Open(path));
  Result<std::unique_ptr<InputStream>> stream =
      file->OpenStream({first.size(), 2}, Compression::kGzip);
  ASSERT_EQ(stream.status().code(), StatusCode::kCorruption);
  EXPECT_THAT(stream.status().message(), HasSubstr("not another gzip member"));
}

}  // namespace
}  // namespace skippr::sources
