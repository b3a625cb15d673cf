// sources/ file input: decompression (plain, gzip, zstd), lines, and streaming CSV, on real files.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

#include "sources/csv_reader.hpp"
#include "sources/input_stream.hpp"
#include "sources/json_array_scanner.hpp"
#include "support/scale.hpp"
#include "support/temp_dir.hpp"

namespace skippr::sources {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// ----- helpers ----------------------------------------------------------------------------------

using skippr::testing::TempDir;

void WriteFile(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// mode "wb" starts a file; "ab" appends another gzip member to it.
void WriteGzip(const std::string& path, std::string_view bytes, const char* mode = "wb") {
  gzFile file = gzopen(path.c_str(), mode);
  ASSERT_NE(file, nullptr) << path;
  for (size_t offset = 0; offset < bytes.size();) {
    unsigned chunk_bytes = static_cast<unsigned>(std::min<size_t>(bytes.size() - offset, 1 << 20));
    ASSERT_EQ(gzwrite(file, bytes.data() + offset, chunk_bytes), static_cast<int>(chunk_bytes));
    offset += chunk_bytes;
  }
  ASSERT_EQ(gzclose(file), Z_OK);
}

// With a content checksum, as the zstd command line writes it, so damage cannot go unnoticed.
std::string ZstdFrame(std::string_view bytes) {
  std::string frame(ZSTD_compressBound(bytes.size()), '\0');
  ZSTD_CCtx* context = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(context, ZSTD_c_compressionLevel, 3);
  ZSTD_CCtx_setParameter(context, ZSTD_c_checksumFlag, 1);
  size_t frame_bytes =
      ZSTD_compress2(context, frame.data(), frame.size(), bytes.data(), bytes.size());
  ZSTD_freeCCtx(context);
  if (ZSTD_isError(frame_bytes)) std::abort();
  frame.resize(frame_bytes);
  return frame;
}

// Deterministic, poorly compressible lines, so compressed files span several 1 MiB reads.
std::string GeneratedLines(size_t line_count) {
  std::string text;
  uint64_t state = 0x9e3779b97f4a7c15u;
  for (size_t i = 0; i < line_count; ++i) {
    state = state * 6364136223846793005u + 1442695040888963407u;
    text += "row " + std::to_string(i) + " value " + std::to_string(state >> 20) + " tag " +
            std::to_string(state % 977) + "\n";
  }
  return text;
}

std::unique_ptr<InputStream> OpenOrDie(const std::string& path) {
  auto stream = InputStream::Open(path);
  if (!stream.ok()) ADD_FAILURE() << stream.status().ToString();
  return std::move(stream).value();
}

// Reads everything through Read() with an odd, small buffer; returns the failure if any.
Result<std::string> ReadAll(InputStream& stream, size_t chunk_bytes = 7777) {
  std::string all;
  std::vector<char> chunk(chunk_bytes);
  while (true) {
    SKIPPR_ASSIGN_OR_RETURN(size_t read_bytes, stream.Read(chunk.data(), chunk.size()));
    if (read_bytes == 0) return all;
    all.append(chunk.data(), read_bytes);
  }
}

struct LineCopy {
  std::string text;
  uint64_t line_number;
  uint64_t byte_offset;
  bool operator==(const LineCopy&) const = default;
};

void PrintTo(const LineCopy& line, std::ostream* out) {
  *out << "{\"" << line.text << "\", line " << line.line_number << ", offset " << line.byte_offset
       << "}";
}

Result<std::vector<LineCopy>> ReadLines(std::unique_ptr<InputStream> stream,
                                        uint64_t first_line_number = 1) {
  LineReader reader(std::move(stream), first_line_number);
  std::vector<LineCopy> lines;
  while (true) {
    SKIPPR_ASSIGN_OR_RETURN(std::optional<Line> line, reader.Next());
    if (!line) return lines;
    lines.push_back({std::string(line->text), line->line_number, line->byte_offset});
  }
}

std::vector<LineCopy> ReadLinesOrDie(const std::string& path) {
  auto lines = ReadLines(OpenOrDie(path));
  if (!lines.ok()) ADD_FAILURE() << lines.status().ToString();
  return lines.ok() ? *lines : std::vector<LineCopy>{};
}

// ----- InputStream ------------------------------------------------------------------------------

TEST(InputStream, PlainGzipAndZstdGiveIdenticalBytesAndLines) {
  TempDir dir;
  const std::string text = GeneratedLines(150'000);  // ~6 MB
  const std::string half_one = text.substr(0, text.size() / 3);
  const std::string half_two = text.substr(text.size() / 3);

  WriteFile(dir.Sub("plain.txt"), text);
  WriteGzip(dir.Sub("one.gz"), text);
  WriteGzip(dir.Sub("two_members.gz"), half_one);
  WriteGzip(dir.Sub("two_members.gz"), half_two, "ab");
  WriteFile(dir.Sub("one.zst"), ZstdFrame(text));
  WriteFile(dir.Sub("two_frames.zst"), ZstdFrame(half_one) + ZstdFrame(half_two));
  // Names lie on purpose: detection is by magic bytes.
  WriteFile(dir.Sub("gzip_named.csv"), ReadFile(dir.Sub("one.gz")));

  const std::vector<std::pair<std::string, Compression>> files = {
      {"plain.txt", Compression::kNone},      {"one.gz", Compression::kGzip},
      {"two_members.gz", Compression::kGzip}, {"one.zst", Compression::kZstd},
      {"two_frames.zst", Compression::kZstd}, {"gzip_named.csv", Compression::kGzip}};
  const std::vector<LineCopy> expected_lines = ReadLinesOrDie(dir.Sub("plain.txt"));
  ASSERT_EQ(expected_lines.size(), 150'000u);
  EXPECT_EQ(expected_lines[1].byte_offset, expected_lines[0].text.size() + 1);

  for (const auto& [name, compression] : files) {
    SCOPED_TRACE(name);
    const std::string path = dir.Sub(name);
    const uint64_t file_bytes = fs::file_size(path);
    if (compression != Compression::kNone) {
      EXPECT_GT(file_bytes, size_t{1} << 20) << "should span several compressed reads";
    }

    auto stream = OpenOrDie(path);
    EXPECT_EQ(stream->compression(), compression);
    EXPECT_EQ(stream->path(), path);
    EXPECT_EQ(stream->file_bytes_read(), 0u);
    auto bytes = ReadAll(*stream);
    ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
    EXPECT_TRUE(*bytes == text);
    EXPECT_EQ(stream->file_bytes_read(), file_bytes);

    EXPECT_TRUE(ReadLinesOrDie(path) == expected_lines);
  }
}

TEST(InputStream, TruncatedCompressedFilesAreCorruptionNamingThePath) {
  TempDir dir;
  const std::string text = GeneratedLines(100'000);
  WriteGzip(dir.Sub("full.gz"), text);
  const std::string gzip_bytes = ReadFile(dir.Sub("full.gz"));
  const std::string zstd_bytes = ZstdFrame(text);

  const std::vector<std::pair<std::string, std::string>> damaged = {
      {"half.gz", gzip_bytes.substr(0, gzip_bytes.size() / 2)},
      {"no_trailer.gz", gzip_bytes.substr(0, gzip_bytes.size() - 4)},
      {"header_only.gz", gzip_bytes.substr(0, 12)},
      {"magic_only.gz", gzip_bytes.substr(0, 2)},
      {"half.zst", zstd_bytes.substr(0, zstd_bytes.size() / 2)},
      {"last_byte_missing.zst", zstd_bytes.substr(0, zstd_bytes.size() - 1)},
      {"magic_only.zst", zstd_bytes.substr(0, 4)},
      {"second_frame_cut.zst", zstd_bytes + zstd_bytes.substr(0, 100)},
  };
  for (const auto& [name, bytes] : damaged) {
    SCOPED_TRACE(name);
    const std::string path = dir.Sub(name);
    WriteFile(path, bytes);
    auto stream = OpenOrDie(path);
    auto all = ReadAll(*stream);
    ASSERT_FALSE(all.ok());
    EXPECT_EQ(all.status().code(), StatusCode::kCorruption);
    EXPECT_THAT(all.status().message(), HasSubstr(path));
    EXPECT_THAT(all.status().message(), HasSubstr("truncated"));
    EXPECT_THAT(all.status().message(), HasSubstr("compressed byte offset"));
  }
}

TEST(InputStream, DamagedCompressedDataIsCorruption) {
  TempDir dir;
  const std::string text = GeneratedLines(50'000);
  WriteGzip(dir.Sub("ok.gz"), text);
  std::string gzip_bytes = ReadFile(dir.Sub("ok.gz"));
  std::string zstd_bytes = ZstdFrame(text);
  for (size_t i = 100; i < 400; ++i) {
    gzip_bytes[gzip_bytes.size() / 2 + i] ^= 0x5a;
    zstd_bytes[zstd_bytes.size() / 2 + i] ^= 0x5a;
  }
  WriteFile(dir.Sub("bad.gz"), gzip_bytes);
  WriteFile(dir.Sub("bad.zst"), zstd_bytes);
  for (const std::string name : {"bad.gz", "bad.zst"}) {
    SCOPED_TRACE(name);
    auto stream = OpenOrDie(dir.Sub(name));
    auto all = ReadAll(*stream, size_t{1} << 20);
    ASSERT_FALSE(all.ok());
    EXPECT_EQ(all.status().code(), StatusCode::kCorruption);
    EXPECT_THAT(all.status().message(), HasSubstr(dir.Sub(name)));
    EXPECT_THAT(all.status().message(), HasSubstr("damaged"));
  }
}

TEST(InputStream, OpenAtResumesPlainFilesWithStreamByteOffsets) {
  TempDir dir;
  const std::string path = dir.Sub("plain.txt");
  WriteFile(path, "alpha\nbeta\r\ngamma\n");
  auto stream = InputStream::OpenAt(path, 6);
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  EXPECT_EQ((*stream)->start_byte_offset(), 6u);
  auto lines = ReadLines(std::move(stream).value(), /*first_line_number=*/2);
  ASSERT_TRUE(lines.ok()) << lines.status().ToString();
  EXPECT_THAT(*lines, ElementsAre(LineCopy{"beta", 2, 6}, LineCopy{"gamma", 3, 12}));

  auto at_end = InputStream::OpenAt(path, 18);
  ASSERT_TRUE(at_end.ok());
  auto no_lines = ReadLines(std::move(at_end).value());
  ASSERT_TRUE(no_lines.ok());
  EXPECT_TRUE(no_lines->empty());

  auto past_end = InputStream::OpenAt(path, 19);
  ASSERT_FALSE(past_end.ok());
  EXPECT_EQ(past_end.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(past_end.status().message(), HasSubstr(path));
}

TEST(InputStream, OpenAtPastTheFirstReadBuffer) {
  TempDir dir;
  const std::string path = dir.Sub("big.txt");
  const std::string text = GeneratedLines(100'000);
  WriteFile(path, text);
  const size_t offset = text.find('\n', 3'000'000) + 1;
  auto stream = InputStream::OpenAt(path, offset);
  ASSERT_TRUE(stream.ok());
  auto rest = ReadAll(**stream);
  ASSERT_TRUE(rest.ok());
  EXPECT_TRUE(*rest == text.substr(offset));
  EXPECT_EQ((*stream)->file_bytes_read(), text.size() - offset);
}

TEST(InputStream, OpenAtOnCompressedFilesIsNotSupported) {
  TempDir dir;
  WriteGzip(dir.Sub("a.gz"), "one\ntwo\n");
  WriteFile(dir.Sub("a.zst"), ZstdFrame("one\ntwo\n"));
  for (const std::string name : {"a.gz", "a.zst"}) {
    auto stream = InputStream::OpenAt(dir.Sub(name), 4);
    ASSERT_FALSE(stream.ok());
    EXPECT_EQ(stream.status().code(), StatusCode::kNotSupported);
    EXPECT_THAT(stream.status().message(), HasSubstr(dir.Sub(name)));
  }
  // Offset 0 is the start, which every file supports.
  auto from_start = InputStream::OpenAt(dir.Sub("a.gz"), 0);
  ASSERT_TRUE(from_start.ok());
  auto lines = ReadLines(std::move(from_start).value());
  ASSERT_TRUE(lines.ok());
  EXPECT_THAT(*lines, ElementsAre(LineCopy{"one", 1, 0}, LineCopy{"two", 2, 4}));
}

TEST(InputStream, OpenErrorsNameThePath) {
  TempDir dir;
  auto missing = InputStream::Open(dir.Sub("missing.csv"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr(dir.Sub("missing.csv")));
  EXPECT_THAT(missing.status().message(), HasSubstr("No such file"));

  fs::create_directory(dir.Sub("a_directory"));
  auto directory = InputStream::Open(dir.Sub("a_directory"));
  ASSERT_FALSE(directory.ok());
  EXPECT_EQ(directory.status().code(), StatusCode::kIOError);
  EXPECT_THAT(directory.status().message(), HasSubstr("directory"));
}

// ----- LineReader -------------------------------------------------------------------------------

TEST(LineReader, LineEndsNumbersAndOffsets) {
  TempDir dir;
  WriteFile(dir.Sub("mixed.txt"), "a\nbb\r\n\nccc\r\n\r\nlast");
  EXPECT_THAT(ReadLinesOrDie(dir.Sub("mixed.txt")),
              ElementsAre(LineCopy{"a", 1, 0}, LineCopy{"bb", 2, 2}, LineCopy{"", 3, 6},
                          LineCopy{"ccc", 4, 7}, LineCopy{"", 5, 12}, LineCopy{"last", 6, 14}));

  WriteFile(dir.Sub("trailing.txt"), "x\ny\n");
  EXPECT_THAT(ReadLinesOrDie(dir.Sub("trailing.txt")),
              ElementsAre(LineCopy{"x", 1, 0}, LineCopy{"y", 2, 2}));
}

// Old Mac files end lines with a lone CR; files that passed through several tools mix all three.
TEST(LineReader, CrLfAndCrrlfAllEndALineAndNextOffsetsFollowThem) {
  TempDir dir;
  WriteFile(dir.Sub("cr.txt"), "a\rbb\r\n\ncc\r\r\nlast\r");
  LineReader reader(OpenOrDie(dir.Sub("cr.txt")));
  std::vector<std::tuple<std::string, uint64_t, uint64_t, uint64_t>> lines;
  while (true) {
    auto line = reader.Next();
    ASSERT_TRUE(line.ok());
    if (!line->has_value()) break;
    lines.emplace_back(std::string((*line)->text), (*line)->line_number, (*line)->byte_offset,
                       (*line)->next_byte_offset);
  }
  using L = std::tuple<std::string, uint64_t, uint64_t, uint64_t>;
  EXPECT_THAT(lines, ElementsAre(L{"a", 1, 0, 2}, L{"bb", 2, 2, 6}, L{"", 3, 6, 7},
                                 L{"cc", 4, 7, 10}, L{"", 5, 10, 12}, L{"last", 6, 12, 17}));
}

// A CRLF split across reads is one line end, not a line end and a blank line.
TEST(LineReader, ACrLfSplitAcrossReadsIsOneLineEnd) {
  TempDir dir;
  std::string text(kFileReadBytes - 1, 'x');
  text += "\r\nnext\n";
  WriteGzip(dir.Sub("split.gz"), text);  // gzip hands out the bytes in pieces
  std::vector<LineCopy> lines = ReadLinesOrDie(dir.Sub("split.gz"));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1], (LineCopy{"next", 2, kFileReadBytes + 1}));
}

TEST(LineReader, ALineOverTheLimitIsReadThroughWithoutBeingHeld) {
  TempDir dir;
  const std::string long_line(5 << 20, 'y');
  WriteFile(dir.Sub("long.txt"), "short\n" + long_line + "\r\nafter");
  LineReader reader(OpenOrDie(dir.Sub("long.txt")), 1, /*max_line_bytes=*/1 << 20);
  auto first = reader.Next();
  ASSERT_TRUE(first.ok() && first->has_value());
  EXPECT_FALSE((*first)->is_over_limit);
  auto second = reader.Next();
  ASSERT_TRUE(second.ok() && second->has_value());
  EXPECT_TRUE((*second)->is_over_limit);
  EXPECT_EQ((*second)->line_number, 2u);
  EXPECT_EQ((*second)->byte_offset, 6u);
  EXPECT_EQ((*second)->size_bytes, long_line.size());
  EXPECT_EQ((*second)->text, long_line.substr(0, kLongLinePrefixBytes));
  EXPECT_EQ((*second)->next_byte_offset, 6 + long_line.size() + 2);
  auto third = reader.Next();
  ASSERT_TRUE(third.ok() && third->has_value());
  EXPECT_EQ((*third)->text, "after");
  EXPECT_EQ((*third)->line_number, 3u);
}

TEST(LineReader, EmptyFileYieldsNothing) {
  TempDir dir;
  WriteFile(dir.Sub("empty.txt"), "");
  EXPECT_TRUE(ReadLinesOrDie(dir.Sub("empty.txt")).empty());
  WriteGzip(dir.Sub("empty.gz"), "");
  EXPECT_TRUE(ReadLinesOrDie(dir.Sub("empty.gz")).empty());
  WriteFile(dir.Sub("bom_only.txt"), "\xEF\xBB\xBF");
  EXPECT_TRUE(ReadLinesOrDie(dir.Sub("bom_only.txt")).empty());
}

TEST(LineReader, SkipsAByteOrderMarkOnlyAtTheStart) {
  TempDir dir;
  WriteFile(dir.Sub("bom.txt"), "\xEF\xBB\xBF{\"a\":1}\n\xEF\xBB\xBFkept\n");
  EXPECT_THAT(ReadLinesOrDie(dir.Sub("bom.txt")),
              ElementsAre(LineCopy{"{\"a\":1}", 1, 3}, LineCopy{"\xEF\xBB\xBFkept", 2, 11}));
  WriteFile(dir.Sub("bom.zst"), ZstdFrame("\xEF\xBB\xBFid\n"));
  EXPECT_THAT(ReadLinesOrDie(dir.Sub("bom.zst")), ElementsAre(LineCopy{"id", 1, 3}));
}

TEST(LineReader, FiftyMegabyteLineThenAShortOne) {
  TempDir dir;
  const size_t long_line_bytes = 50u << 20;
  std::string text(long_line_bytes, 'x');
  text.front() = '<';
  text.back() = '>';
  text += "\nshort\n";
  WriteFile(dir.Sub("long.txt"), text);
  text.clear();
  text.shrink_to_fit();

  LineReader reader(OpenOrDie(dir.Sub("long.txt")));
  auto first = reader.Next();
  ASSERT_TRUE(first.ok() && first->has_value());
  const Line& long_line = **first;
  ASSERT_EQ(long_line.text.size(), long_line_bytes);
  EXPECT_EQ(long_line.text.front(), '<');
  EXPECT_EQ(long_line.text.back(), '>');
  EXPECT_EQ(long_line.text.substr(1, long_line_bytes - 2).find_first_not_of('x'),
            std::string_view::npos);
  EXPECT_EQ(long_line.line_number, 1u);
  EXPECT_EQ(long_line.byte_offset, 0u);

  auto second = reader.Next();
  ASSERT_TRUE(second.ok() && second->has_value());
  EXPECT_EQ((*second)->text, "short");
  EXPECT_EQ((*second)->line_number, 2u);
  EXPECT_EQ((*second)->byte_offset, long_line_bytes + 1);
  auto end = reader.Next();
  ASSERT_TRUE(end.ok());
  EXPECT_FALSE(end->has_value());
}

TEST(LineReader, LongGzipLineGrowsTheWindowThroughShortReads) {
  TempDir dir;
  std::string text = GeneratedLines(3);
  std::string long_line = GeneratedLines(200'000);  // ~8 MB with its newlines replaced
  std::replace(long_line.begin(), long_line.end(), '\n', ' ');
  text += long_line + "\nend";
  WriteGzip(dir.Sub("long.gz"), text);
  auto lines = ReadLinesOrDie(dir.Sub("long.gz"));
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_TRUE(lines[3].text == long_line);
  EXPECT_EQ(lines[4], (LineCopy{"end", 5, text.size() - 3}));
}

// Every line must have kLinePaddingBytes readable bytes after it (simdjson parses in place);
// includes lines ending exactly where the 1 MiB window ends and the file's last byte.
TEST(LineReader, PaddingAfterEveryLineIsReadable) {
  TempDir dir;
  std::string window_sized(kFileReadBytes - 1, 'w');
  window_sized += '\n';
  const std::string text = GeneratedLines(1000) + window_sized + std::string(kFileReadBytes, 'z');
  WriteFile(dir.Sub("padded.txt"), text);

  LineReader reader(OpenOrDie(dir.Sub("padded.txt")));
  size_t line_count = 0;
  uint64_t padding_byte_sum = 0;
  while (true) {
    auto line = reader.Next();
    ASSERT_TRUE(line.ok());
    if (!line->has_value()) break;
    ++line_count;
    const volatile char* after = (*line)->text.data() + (*line)->text.size();
    for (size_t i = 0; i < kLinePaddingBytes; ++i)
      padding_byte_sum += static_cast<uint8_t>(after[i]);
  }
  EXPECT_EQ(line_count, 1002u);
  EXPECT_GT(padding_byte_sum, 0u);  // the reads happened (the sum itself is meaningless)
}

// ----- CSV --------------------------------------------------------------------------------------

struct RowCopy {
  std::vector<std::string> fields;
  uint64_t line_number;
  uint64_t byte_offset;
  bool operator==(const RowCopy&) const = default;
};

void PrintTo(const RowCopy& row, std::ostream* out) {
  *out << "{[";
  for (const std::string& field : row.fields) *out << "\"" << field << "\" ";
  *out << "], line " << row.line_number << ", offset " << row.byte_offset << "}";
}

Result<std::unique_ptr<CsvReader>> OpenCsv(const std::string& path, CsvOptions options = {}) {
  SKIPPR_ASSIGN_OR_RETURN(auto stream, InputStream::Open(path));
  return CsvReader::Open(std::move(stream), options);
}

Result<std::vector<RowCopy>> ReadRows(CsvReader& reader) {
  std::vector<RowCopy> rows;
  while (true) {
    SKIPPR_ASSIGN_OR_RETURN(std::optional<CsvRow> row, reader.Next());
    if (!row) return rows;
    rows.push_back({{row->fields.begin(), row->fields.end()}, row->line_number, row->byte_offset});
  }
}

// The rows of a CSV file, or ADD_FAILURE with the status.
std::vector<RowCopy> CsvRowsOrDie(const std::string& path, CsvOptions options = {},
                                  std::vector<std::string>* header = nullptr,
                                  char* delimiter = nullptr) {
  auto reader = OpenCsv(path, options);
  if (!reader.ok()) {
    ADD_FAILURE() << reader.status().ToString();
    return {};
  }
  if (header != nullptr) *header = (*reader)->header();
  if (delimiter != nullptr) *delimiter = (*reader)->delimiter();
  auto rows = ReadRows(**reader);
  if (!rows.ok()) ADD_FAILURE() << rows.status().ToString();
  return rows.ok() ? *rows : std::vector<RowCopy>{};
}

TEST(CsvReader, HeaderAndRows) {
  TempDir dir;
  WriteFile(dir.Sub("a.csv"), "\xEF\xBB\xBFid,name,score\n1,alice,9.5\n2,bob,\n");
  std::vector<std::string> header;
  char delimiter = 0;
  auto rows = CsvRowsOrDie(dir.Sub("a.csv"), {}, &header, &delimiter);
  EXPECT_THAT(header, ElementsAre("id", "name", "score"));
  EXPECT_EQ(delimiter, ',');
  EXPECT_THAT(rows,
              ElementsAre(RowCopy{{"1", "alice", "9.5"}, 2, 17}, RowCopy{{"2", "bob", ""}, 3, 29}));
}

TEST(CsvReader, WithoutHeaderTheFirstRowIsData) {
  TempDir dir;
  WriteFile(dir.Sub("a.csv"), "1|x\n2|y");
  CsvOptions options;
  options.has_header = false;
  options.delimiter = '|';
  std::vector<std::string> header = {"unset"};
  auto rows = CsvRowsOrDie(dir.Sub("a.csv"), options, &header);
  EXPECT_TRUE(header.empty());
  EXPECT_THAT(rows, ElementsAre(RowCopy{{"1", "x"}, 1, 0}, RowCopy{{"2", "y"}, 2, 4}));
}

class CsvSniffing : public ::testing::TestWithParam<char> {};

TEST_P(CsvSniffing, FindsTheDelimiter) {
  const char d = GetParam();
  TempDir dir;
  std::string text = fmt::format("id{0}city{0}note\n", d);
  // Notes carry the other candidates irregularly, so only `d` is consistent.
  const std::vector<std::string> notes = {"a, b", "x;y|z", "plain", "1,2,3", "tab\there", "q"};
  for (size_t i = 0; i < 60; ++i) {
    std::string note = notes[i % notes.size()];
    std::erase(note, d);
    text += fmt::format("{1}{0}Paris{0}{2}\n", d, i, note);
  }
  WriteFile(dir.Sub("sniff.csv"), text);
  std::vector<std::string> header;
  char delimiter = 0;
  auto rows = CsvRowsOrDie(dir.Sub("sniff.csv"), {}, &header, &delimiter);
  EXPECT_EQ(delimiter, d);
  EXPECT_THAT(header, ElementsAre("id", "city", "note"));
  ASSERT_EQ(rows.size(), 60u);
  for (const RowCopy& row : rows) EXPECT_EQ(row.fields.size(), 3u) << row.line_number;
}

INSTANTIATE_TEST_SUITE_P(Delimiters, CsvSniffing, ::testing::Values(',', '\t', ';', '|'),
                         [](const auto& info) {
                           switch (info.param) {
                             case ',':
                               return std::string("comma");
                             case '\t':
                               return std::string("tab");
                             case ';':
                               return std::string("semicolon");
                             default:
                               return std::string("pipe");
                           }
                         });

TEST(CsvReader, SniffsSemicolonWhenQuotedFieldsHoldCommas) {
  TempDir dir;
  WriteFile(dir.Sub("eu.csv"),
            "name;address;amount\n"
            "\"Smith, John\";\"1 Main St, Springfield\";\"1,50\"\n"
            "\"Doe, Jane\";\"2 Elm St, Apt 4, Shelbyville\";\"20,00\"\n"
            "\"Roe, R.\";\"3 Oak St\";\"3,25\"\n");
  std::vector<std::string> header;
  char delimiter = 0;
  auto rows = CsvRowsOrDie(dir.Sub("eu.csv"), {}, &header, &delimiter);
  EXPECT_EQ(delimiter, ';');
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_THAT(rows[1].fields, ElementsAre("Doe, Jane", "2 Elm St, Apt 4, Shelbyville", "20,00"));
}

TEST(CsvReader, SnifferRules) {
  // Consistent counts tie: ',' wins.
  EXPECT_EQ(SniffCsvDelimiter("a,b;c\n1,2;3\n", '"', true), ',');
  EXPECT_EQ(SniffCsvDelimiter("a;b|c\n1;2|3\n", '"', true), ';');
  // A single column (no candidate at all) defaults to ','.
  EXPECT_EQ(SniffCsvDelimiter("name\nalice\nbob\n", '"', true), ',');
  // The more consistent candidate wins even with a smaller count.
  EXPECT_EQ(SniffCsvDelimiter("a|b\n1,2,3|4\n5|6\n7,8|9\n", '"', true), '|');
  // A stray quote inside an unquoted field does not open a quoted section.
  EXPECT_EQ(SniffCsvDelimiter("h;w\n5'11\";x\n6'0\";y\n", '"', true), ';');
  // The cut-off last line of a partial sample is ignored.
  EXPECT_EQ(SniffCsvDelimiter("a;b\n1;2\n3;4\n5,6,7,8,9,", '"', false), ';');
  // Blank lines say nothing.
  EXPECT_EQ(SniffCsvDelimiter("a\tb\n\n\r\n1\t2\n", '"', true), '\t');
}

TEST(CsvReader, QuotedFields) {
  TempDir dir;
  const std::string text =
      "id,text,n\n"
      "1,\"a,b\",x\n"
      "2,\"line one\nline two\",y\n"
      "3,\"say \"\"hi\"\"\",z\n"
      "4,plain\"quote,w\n"
      "5,\"\",\"\"\"\"\n"
      "6,\"a\"\"\nb\"\"\",v\n";
  WriteFile(dir.Sub("q.csv"), text);
  auto rows = CsvRowsOrDie(dir.Sub("q.csv"));
  ASSERT_EQ(rows.size(), 6u);
  EXPECT_EQ(rows[0], (RowCopy{{"1", "a,b", "x"}, 2, text.find("1,")}));
  EXPECT_EQ(rows[1], (RowCopy{{"2", "line one\nline two", "y"}, 3, text.find("2,")}));
  EXPECT_EQ(rows[2], (RowCopy{{"3", "say \"hi\"", "z"}, 5, text.find("3,")}));
  EXPECT_EQ(rows[3], (RowCopy{{"4", "plain\"quote", "w"}, 6, text.find("4,")}));
  EXPECT_EQ(rows[4], (RowCopy{{"5", "", "\""}, 7, text.find("5,")}));
  EXPECT_EQ(rows[5], (RowCopy{{"6", "a\"\nb\"", "v"}, 8, text.find("6,")}));
}

// A row says whether all its bytes are ASCII, quoted fields and the line end included, so the
// File source checks UTF-8 field by field only for the rows that need it.
TEST(CsvReader, ARowSaysWhetherItIsAllAscii) {
  TempDir dir;
  WriteFile(dir.Sub("u.csv"),
            "id,name\n1,plain\n2,caf\xc3\xa9\n3,\"caf\xc3\xa9, \"\"quoted\"\"\"\n"
            "4,\"a\nb\"\n5,\xc3\x28\n");
  auto reader = OpenCsv(dir.Sub("u.csv"));
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  std::vector<std::pair<std::string, bool>> rows;
  while (true) {
    Result<std::optional<CsvRow>> row = (*reader)->Next();
    ASSERT_TRUE(row.ok()) << row.status().ToString();
    if (!*row) break;
    rows.emplace_back(std::string((*row)->fields[1]), (*row)->is_ascii);
  }
  EXPECT_THAT(rows, ElementsAre(std::pair<std::string, bool>{"plain", true},
                                std::pair<std::string, bool>{"caf\xc3\xa9", false},
                                std::pair<std::string, bool>{"caf\xc3\xa9, \"quoted\"", false},
                                std::pair<std::string, bool>{"a\nb", true},
                                std::pair<std::string, bool>{"\xc3\x28", false}));
}

TEST(CsvReader, CrLfLineEnds) {
  TempDir dir;
  WriteFile(dir.Sub("crlf.csv"), "a,b\r\n1,2\r\n\"x\r\ny\",3\r\n4,\"5\"\r\n6,7");
  auto rows = CsvRowsOrDie(dir.Sub("crlf.csv"));
  EXPECT_THAT(rows, ElementsAre(RowCopy{{"1", "2"}, 2, 5}, RowCopy{{"x\r\ny", "3"}, 3, 10},
                                RowCopy{{"4", "5"}, 5, 20}, RowCopy{{"6", "7"}, 6, 27}));
}

// CR (old Mac), LF and CRLF all end a record outside quotes, also mixed in one file; inside quotes
// they are the field's text and count as one line each.
TEST(CsvReader, CrOnlyAndMixedLineEnds) {
  TempDir dir;
  WriteFile(dir.Sub("mac.csv"), "id,name\r1,alice\r2,bob\r");
  std::vector<std::string> header;
  EXPECT_THAT(CsvRowsOrDie(dir.Sub("mac.csv"), {}, &header),
              ElementsAre(RowCopy{{"1", "alice"}, 2, 8}, RowCopy{{"2", "bob"}, 3, 16}));
  EXPECT_THAT(header, ElementsAre("id", "name"));

  const std::string mixed = "a;b\r\n1;\"x\ry\"\r2;\"p\r\nq\"\n3;z";
  WriteFile(dir.Sub("mixed.csv"), mixed);
  EXPECT_THAT(CsvRowsOrDie(dir.Sub("mixed.csv")),
              ElementsAre(RowCopy{{"1", "x\ry"}, 2, 5}, RowCopy{{"2", "p\r\nq"}, 4, mixed.find("2;")},
                          RowCopy{{"3", "z"}, 6, mixed.find("3;")}));
}

// Each row knows where it ends, and a reader opened there with the header it had reads on with the
// same rows and line numbers (the File source resumes a CSV file so).
TEST(CsvReader, RowsCarryTheirOffsetsAndAReaderOpensAtAny) {
  TempDir dir;
  const std::string path = dir.Sub("resume.csv");
  const std::string text = "id;note\r\n1;\"two\nlines\"\r\n\r\n2;b\r3;c\n";
  WriteFile(path, text);
  auto reader = OpenCsv(path);
  ASSERT_TRUE(reader.ok());
  std::vector<std::tuple<uint64_t, uint64_t, uint64_t, uint64_t>> offsets;
  std::vector<RowCopy> rows;
  while (true) {
    auto row = (*reader)->Next();
    ASSERT_TRUE(row.ok());
    if (!row->has_value()) break;
    offsets.emplace_back((*row)->byte_offset, (*row)->next_byte_offset, (*row)->line_number,
                         (*row)->next_line_number);
    rows.push_back({{(*row)->fields.begin(), (*row)->fields.end()}, (*row)->line_number,
                    (*row)->byte_offset});
  }
  using O = std::tuple<uint64_t, uint64_t, uint64_t, uint64_t>;
  EXPECT_THAT(offsets, ElementsAre(O{9, 24, 2, 4}, O{26, 30, 5, 6}, O{30, 34, 6, 7}));
  for (size_t i = 0; i < rows.size(); ++i) {
    SCOPED_TRACE(i);
    auto stream = InputStream::OpenAt(path, std::get<0>(offsets[i]));
    ASSERT_TRUE(stream.ok());
    CsvOptions options;
    options.delimiter = (*reader)->delimiter();
    options.known_header = (*reader)->header();
    options.first_line_number = std::get<2>(offsets[i]);
    auto resumed = CsvReader::Open(std::move(*stream), options);
    ASSERT_TRUE(resumed.ok()) << resumed.status().ToString();
    EXPECT_THAT((*resumed)->header(), ElementsAre("id", "note"));
    auto rest = ReadRows(**resumed);
    ASSERT_TRUE(rest.ok());
    EXPECT_EQ(*rest, std::vector<RowCopy>(rows.begin() + static_cast<long>(i), rows.end()));
  }
}

// RFC 4180 read leniently, as Python's csv and most readers do: a quote inside an unquoted field
// is a character, text after a closing quote is kept; nothing after them is lost.
TEST(CsvReader, StrayQuotesAreReadLeniently) {
  TempDir dir;
  WriteFile(dir.Sub("stray.csv"), "h,w\n5'11\",x\n\"ab\"c,d\n\"q\"\"\"tail,e\nlast,row\n");
  EXPECT_THAT(CsvRowsOrDie(dir.Sub("stray.csv")),
              ElementsAre(RowCopy{{"5'11\"", "x"}, 2, 4}, RowCopy{{"abc", "d"}, 3, 12},
                          RowCopy{{"q\"tail", "e"}, 4, 20}, RowCopy{{"last", "row"}, 5, 32}));
}

TEST(CsvReader, RaggedRowsAreReturnedAsTheyAre) {
  TempDir dir;
  WriteFile(dir.Sub("ragged.csv"), "a,b,c\n1,2\n1,2,3,4\n1,2,3\n");
  std::vector<std::string> header;
  auto rows = CsvRowsOrDie(dir.Sub("ragged.csv"), {}, &header);
  ASSERT_EQ(header.size(), 3u);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].fields.size(), 2u);
  EXPECT_EQ(rows[1].fields.size(), 4u);
  EXPECT_EQ(rows[2].fields.size(), 3u);
  EXPECT_EQ(rows[1].line_number, 3u);
}

TEST(CsvReader, BlankLinesAreSkippedButCounted) {
  TempDir dir;
  WriteFile(dir.Sub("blank.csv"), "\na,b\n\n1,2\r\n\r\n\n3,4\n\"\"\n\n");
  std::vector<std::string> header;
  auto rows = CsvRowsOrDie(dir.Sub("blank.csv"), {}, &header);
  EXPECT_THAT(header, ElementsAre("a", "b"));
  // A quoted empty field is a row, not a blank line.
  EXPECT_THAT(rows, ElementsAre(RowCopy{{"1", "2"}, 4, 6}, RowCopy{{"3", "4"}, 7, 14},
                                RowCopy{{""}, 8, 18}));
}

// The physical line where the broken record started is one problem row (line, byte offset, raw
// text) and reading resumes at the next physical line: the rest of the file is not lost.
TEST(CsvReader, AnUnterminatedQuoteCostsOnlyTheLineWhereItsRecordStarted) {
  TempDir dir;
  const std::string path = dir.Sub("open.csv");
  const std::string text = "a,b\n1,2\n3,\"open\n4,5\n6,7\n";
  WriteFile(path, text);
  auto reader = OpenCsv(path);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  std::vector<RowCopy> rows;
  std::vector<std::string> problems;
  std::vector<std::string> raw_texts;
  while (true) {
    auto row = (*reader)->Next();
    ASSERT_TRUE(row.ok()) << row.status().ToString();
    if (!row->has_value()) break;
    const CsvRow& csv_row = **row;
    if (csv_row.problem) {
      problems.push_back(*csv_row.problem);
      raw_texts.emplace_back(csv_row.raw_text);
      EXPECT_TRUE(csv_row.fields.empty());
    }
    rows.push_back({{csv_row.fields.begin(), csv_row.fields.end()}, csv_row.line_number,
                    csv_row.byte_offset});
  }
  EXPECT_THAT(rows, ElementsAre(RowCopy{{"1", "2"}, 2, 4}, RowCopy{{}, 3, 8},
                                RowCopy{{"4", "5"}, 4, 16}, RowCopy{{"6", "7"}, 5, 20}));
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0],
            "unterminated quoted field starting at line 3 (byte offset 10): the file ends inside "
            "the quotes; line 3 (byte offset 8) is skipped and reading resumes after it: close "
            "the quote or fix the file");
  EXPECT_THAT(raw_texts, ElementsAre("3,\"open"));

  // The second field of a row whose first field spans lines 2-3 starts on line 3. The record's
  // first line (2) is the problem; line 3 is then read afresh, and its own quote is open too.
  WriteFile(path, "a,b\n\"x\ny\",\"open\nz\n");
  auto spanning = OpenCsv(path);
  ASSERT_TRUE(spanning.ok());
  std::vector<std::pair<uint64_t, std::string>> spanning_problems;
  std::vector<RowCopy> spanning_rows;
  while (true) {
    auto row = (*spanning)->Next();
    ASSERT_TRUE(row.ok());
    if (!row->has_value()) break;
    if ((*row)->problem) {
      spanning_problems.emplace_back((*row)->line_number, *(*row)->problem);
    } else {
      spanning_rows.push_back({{(*row)->fields.begin(), (*row)->fields.end()},
                               (*row)->line_number, (*row)->byte_offset});
    }
  }
  EXPECT_THAT(spanning_rows, ElementsAre(RowCopy{{"z"}, 4, 16}));
  ASSERT_EQ(spanning_problems.size(), 2u);
  EXPECT_EQ(spanning_problems[0].first, 2u);
  EXPECT_THAT(spanning_problems[0].second, HasSubstr("starting at line 3 (byte offset 10)"));
  EXPECT_EQ(spanning_problems[1].first, 3u);
  EXPECT_THAT(spanning_problems[1].second, HasSubstr("starting at line 3 (byte offset 10)"));
}

// A quoted field that never closes stops being buffered at the record limit: the line where it
// started is the problem, and the lines after it are read.
TEST(CsvReader, AQuotedFieldOutgrowingTheRecordLimitCostsOnlyItsFirstLine) {
  TempDir dir;
  std::string text = "a,b\n1,\"never closed\n";
  for (int i = 0; i < 2000; ++i) text += fmt::format("{},{}\n", i, i * 2);
  WriteFile(dir.Sub("big.csv"), text);
  CsvOptions options;
  options.max_record_bytes = 4096;
  auto reader = OpenCsv(dir.Sub("big.csv"), options);
  ASSERT_TRUE(reader.ok());
  size_t problems = 0;
  size_t rows = 0;
  uint64_t last_line = 0;
  while (true) {
    auto row = (*reader)->Next();
    ASSERT_TRUE(row.ok()) << row.status().ToString();
    if (!row->has_value()) break;
    if ((*row)->problem) {
      ++problems;
      EXPECT_EQ((*row)->line_number, 2u);
      EXPECT_THAT(*(*row)->problem, HasSubstr("the record grows past the 4096-byte limit"));
      EXPECT_EQ((*row)->raw_text, "1,\"never closed");
      continue;
    }
    ++rows;
    last_line = (*row)->line_number;
  }
  EXPECT_EQ(problems, 1u);
  EXPECT_EQ(rows, 2000u);
  EXPECT_EQ(last_line, 2002u);
}

// A line longer than the limit is skipped without being held (the window stays small).
TEST(CsvReader, ALineOverTheRecordLimitIsSkippedWithoutBeingHeld) {
  TempDir dir;
  const std::string long_line(3 << 20, 'x');
  WriteFile(dir.Sub("long.csv"), "a\n" + long_line + "\nafter\n");
  CsvOptions options;
  options.max_record_bytes = 1 << 20;
  auto reader = OpenCsv(dir.Sub("long.csv"), options);
  ASSERT_TRUE(reader.ok());
  auto first = (*reader)->Next();
  ASSERT_TRUE(first.ok() && first->has_value());
  ASSERT_TRUE((*first)->problem.has_value());
  EXPECT_THAT(*(*first)->problem, HasSubstr("line 2 (byte offset 2) is longer than the 1 MiB record limit"));
  EXPECT_EQ((*first)->raw_text.size(), kCsvProblemTextBytes);
  EXPECT_EQ((*first)->next_byte_offset, 2 + long_line.size() + 1);
  auto second = (*reader)->Next();
  ASSERT_TRUE(second.ok() && second->has_value());
  EXPECT_THAT((*second)->fields, ElementsAre("after"));
  EXPECT_EQ((*second)->line_number, 3u);
}

TEST(CsvReader, InvalidOptions) {
  TempDir dir;
  WriteFile(dir.Sub("a.csv"), "a,b\n");
  CsvOptions options;
  options.delimiter = '"';
  auto reader = OpenCsv(dir.Sub("a.csv"), options);
  ASSERT_FALSE(reader.ok());
  EXPECT_EQ(reader.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(reader.status().message(), HasSubstr(dir.Sub("a.csv")));
}

TEST(CsvReader, OtherQuoteCharacter) {
  TempDir dir;
  WriteFile(dir.Sub("a.csv"), "a;b\n'x;y';'it''s'\n");
  CsvOptions options;
  options.quote = '\'';
  auto rows = CsvRowsOrDie(dir.Sub("a.csv"), options);
  EXPECT_THAT(rows, ElementsAre(RowCopy{{"x;y", "it's"}, 2, 4}));
}

TEST(CsvReader, GzipCsv) {
  TempDir dir;
  WriteGzip(dir.Sub("data.csv.gz"), "id\tname\n1\t\"tab\there\"\n2\tbob\n");
  char delimiter = 0;
  auto rows = CsvRowsOrDie(dir.Sub("data.csv.gz"), {}, nullptr, &delimiter);
  EXPECT_EQ(delimiter, '\t');
  EXPECT_THAT(rows, ElementsAre(RowCopy{{"1", "tab\there"}, 2, 8}, RowCopy{{"2", "bob"}, 3, 21}));
}

TEST(CsvReader, HugeQuotedFieldAcrossManyWindows) {
  TempDir dir;
  std::string big_field;
  std::string escaped;
  for (size_t i = 0; i < 300'000; ++i) {
    big_field += "chunk " + std::to_string(i) + " \"q\"\n";
    escaped += "chunk " + std::to_string(i) + " \"\"q\"\"\n";
  }
  const std::string text = "id,body\n1,\"" + escaped + "\"\n2,after\n";
  WriteFile(dir.Sub("big.csv"), text);
  auto rows = CsvRowsOrDie(dir.Sub("big.csv"));
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_TRUE(rows[0].fields[1] == big_field);
  EXPECT_EQ(rows[1], (RowCopy{{"2", "after"}, 2 + 300'000 + 1, text.size() - 8}));
}

TEST(CsvReader, MillionRowsWithAColumnChecksum) {
  TempDir dir;
  const std::string path = dir.Sub("million.csv");
  const auto row_count = static_cast<size_t>(skippr::testing::Scaled(1'000'000));
  uint64_t expected_value_sum = 0;
  size_t expected_quoted_rows = 0;
  {
    std::string text = "id,value,label\n";
    for (size_t i = 0; i < row_count; ++i) {
      uint64_t value = (i * 2654435761u) % 1'000'003;
      expected_value_sum += value;
      if (i % 1000 == 0) {
        ++expected_quoted_rows;
        text += fmt::format("{},{},\"label, \"\"{}\"\"\"\n", i, value, i);
      } else {
        text += fmt::format("{},{},label{}\n", i, value, i);
      }
    }
    WriteFile(path, text);
  }
  auto reader = OpenCsv(path);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  ASSERT_THAT((*reader)->header(), ElementsAre("id", "value", "label"));
  size_t rows_read = 0;
  size_t quoted_rows = 0;
  uint64_t value_sum = 0;
  while (true) {
    auto row = (*reader)->Next();
    ASSERT_TRUE(row.ok()) << row.status().ToString();
    if (!row->has_value()) break;
    const CsvRow& csv_row = **row;
    ASSERT_EQ(csv_row.fields.size(), 3u) << csv_row.line_number;
    ASSERT_EQ(csv_row.line_number, rows_read + 2);
    uint64_t value = 0;
    std::string_view field = csv_row.fields[1];
    ASSERT_EQ(std::from_chars(field.data(), field.data() + field.size(), value).ec, std::errc());
    value_sum += value;
    if (csv_row.fields[2].find('"') != std::string_view::npos) {
      ++quoted_rows;
      ASSERT_EQ(csv_row.fields[2], fmt::format("label, \"{}\"", rows_read));
    }
    ++rows_read;
  }
  EXPECT_EQ(rows_read, row_count);
  EXPECT_EQ(value_sum, expected_value_sum);
  EXPECT_EQ(quoted_rows, expected_quoted_rows);
  EXPECT_EQ((*reader)->input().file_bytes_read(), fs::file_size(path));
}

// ----- JSON arrays -------------------------------------------------------------------------------

struct ElementCopy {
  std::string text;  // the element, or "!" + the problem's reason
  uint64_t line_number;
  uint64_t byte_offset;
  uint64_t next_byte_offset;
  uint64_t next_line_number;
  bool operator==(const ElementCopy&) const = default;
};

void PrintTo(const ElementCopy& element, std::ostream* out) {
  *out << "{\"" << element.text << "\", line " << element.line_number << ", offset "
       << element.byte_offset << ", next " << element.next_byte_offset << " line "
       << element.next_line_number << "}";
}

std::vector<ElementCopy> ScanElements(const std::string& path, uint64_t start_offset = 0,
                                      uint64_t first_line = 1, uint64_t max_element_bytes = 1 << 20) {
  auto stream = InputStream::OpenAt(path, start_offset);
  if (!stream.ok()) {
    ADD_FAILURE() << stream.status().ToString();
    return {};
  }
  JsonArrayScanner scanner(std::move(*stream), start_offset == 0, first_line, max_element_bytes);
  std::vector<ElementCopy> elements;
  while (true) {
    auto element = scanner.Next();
    if (!element.ok()) {
      ADD_FAILURE() << element.status().ToString();
      return elements;
    }
    if (!element->has_value()) return elements;
    const JsonArrayElement& e = **element;
    elements.push_back({e.problem ? "!" + *e.problem : std::string(e.text), e.line_number,
                        e.byte_offset, e.next_byte_offset, e.next_line_number});
  }
}

// Problems only, as "line: reason".
std::vector<std::string> Problems(const std::vector<ElementCopy>& elements) {
  std::vector<std::string> problems;
  for (const ElementCopy& e : elements) {
    if (e.text.starts_with("!")) problems.push_back(fmt::format("{}: {}", e.line_number, e.text.substr(1)));
  }
  return problems;
}

std::vector<std::string> Texts(const std::vector<ElementCopy>& elements) {
  std::vector<std::string> texts;
  for (const ElementCopy& e : elements) texts.push_back(e.text.starts_with("!") ? "!" : e.text);
  return texts;
}

TEST(JsonArrayScanner, ElementsWithLinesAndOffsetsAndResumingAtEach) {
  TempDir dir;
  const std::string path = dir.Sub("a.json");
  const std::string text =
      "\xEF\xBB\xBF [\r\n  {\"a\":1},\r\n  {\"b\":\"x,]}\\\"\"} ,\n  [1,[2]],\n  3\n]\n";
  WriteFile(path, text);
  const std::vector<ElementCopy> elements = ScanElements(path);
  const auto at = [&](std::string_view needle) { return text.find(needle); };
  EXPECT_THAT(elements,
              ElementsAre(ElementCopy{"{\"a\":1}", 2, at("{\"a\""), at("{\"a\"") + 8, 2},
                          ElementCopy{"{\"b\":\"x,]}\\\"\"}", 3, at("{\"b\""), at("[1,") - 3, 3},
                          ElementCopy{"[1,[2]]", 4, at("[1,"), at("[1,") + 8, 4},
                          ElementCopy{"3", 5, at("3\n"), at("]\n"), 6}));
  // Resuming at any element's next offset (with its line) reads the rest exactly.
  for (size_t i = 0; i < elements.size(); ++i) {
    SCOPED_TRACE(i);
    std::vector<ElementCopy> rest =
        ScanElements(path, elements[i].next_byte_offset, elements[i].next_line_number);
    EXPECT_EQ(rest, std::vector<ElementCopy>(elements.begin() + static_cast<long>(i) + 1,
                                             elements.end()));
  }
}

TEST(JsonArrayScanner, EachStructuralProblemCostsOnlyItself) {
  TempDir dir;
  const std::string path = dir.Sub("p.json");
  const auto scan = [&](const std::string& text) {
    WriteFile(path, text);
    return ScanElements(path);
  };
  EXPECT_TRUE(scan("[]").empty());
  EXPECT_TRUE(scan(" [ \n ] \n").empty());
  EXPECT_THAT(Problems(scan("[")), ElementsAre("1: the file ends before the array's closing ']'; "
                                               "it may be truncated: re-copy it"));
  EXPECT_THAT(Texts(scan("[1,,2]")), ElementsAre("1", "!", "2"));
  EXPECT_THAT(Problems(scan("[1,,2]")),
              ElementsAre("1: an empty element (a ',' without a value before it)"));
  EXPECT_THAT(Texts(scan("[1,2,]")), ElementsAre("1", "2"));  // a trailing ',' is accepted
  EXPECT_THAT(Texts(scan("[1,2]\ntrailing")), ElementsAre("1", "2", "!"));
  EXPECT_THAT(Problems(scan("[1,2]\ntrailing")),
              ElementsAre("2: content after the array's closing ']'; a JSON array file holds one "
                          "array"));
  EXPECT_THAT(Texts(scan("[{\"a\":1},\n{\"b\":")), ElementsAre("{\"a\":1}", "!"));
  EXPECT_THAT(Problems(scan("[{\"a\":1},\n{\"b\":")),
              ElementsAre("2: the file ends inside this element; it may be truncated: re-copy it"));
  EXPECT_THAT(Texts(scan("[{\"a\":1},\n{\"b\":2}")), ElementsAre("{\"a\":1}", "{\"b\":2}", "!"));
  EXPECT_THAT(Problems(scan("{\"a\":1}")),
              ElementsAre("1: a JSON array file must start with '['"));
  // A bracket that closes the wrong thing: the element ends there, the next line starts afresh.
  EXPECT_THAT(Texts(scan("[{\"a\":1},\n{\"a\": [2}, \"z\": 0},\n{\"c\":3}\n]")),
              ElementsAre("{\"a\":1}", "!", "{\"c\":3}"));
  EXPECT_THAT(Problems(scan("[{\"a\":1},\n{\"a\": [2}, \"z\": 0},\n{\"c\":3}\n]")),
              ElementsAre("2: a '}' where a '[' is open"));
  EXPECT_THAT(Problems(scan("[{\"a\":1}},\n{\"c\":3}]")), ElementsAre("1: a '}' that closes nothing"));
  EXPECT_THAT(Texts(scan("[" + std::string(1025, '[') + std::string(1025, ']') + ",\n7]")),
              ElementsAre("!", "7"));
  // Too deep, pretty-printed: one deadletter for the whole element, although every nested line
  // beyond the limit starts where elements start.
  std::string deep = "[\n";
  for (int i = 0; i < 2000; ++i) deep += "[\n";
  for (int i = 0; i < 2000; ++i) deep += "]\n";
  const std::vector<ElementCopy> deep_elements = scan(deep + ",\n7\n]\n");
  EXPECT_THAT(Texts(deep_elements), ElementsAre("!", "7"));
  EXPECT_THAT(Problems(deep_elements), ElementsAre("2: nested deeper than 1024 levels"));
  // Too deep and truncated: the file ends inside it.
  EXPECT_THAT(Problems(scan("[" + std::string(1500, '['))),
              ElementsAre("1: the file ends inside this element; it may be truncated: re-copy it"));
}

// An unbalanced quote would swallow the rest of the file; JSON strings cannot hold a line break,
// so the element breaks at its line and the next element (at the elements' column) starts afresh —
// not a nested object that happens to start a line.
TEST(JsonArrayScanner, AnUnbalancedQuoteCostsOnlyItsElement) {
  TempDir dir;
  const std::string path = dir.Sub("q.json");
  WriteFile(path, "[\n{\"a\":\"x},\n{\"b\":2},\n{\"c\":3}\n]\n");
  std::vector<ElementCopy> compact = ScanElements(path);
  EXPECT_THAT(Texts(compact), ElementsAre("!", "{\"b\":2}", "{\"c\":3}"));
  EXPECT_THAT(Problems(compact),
              ElementsAre("2: a line break inside a string (JSON strings cannot hold one): a "
                          "quote is missing"));
  EXPECT_EQ(compact[0].next_byte_offset, compact[1].byte_offset);

  const std::string pretty =
      "[\n"
      "  {\n"
      "    \"a\": \"broken,\n"
      "    \"items\": [\n"
      "      {\n"
      "        \"x\": 1\n"
      "      }\n"
      "    ]\n"
      "  },\n"
      "  {\n"
      "    \"b\": 2\n"
      "  }\n"
      "]\n";
  WriteFile(path, pretty);
  std::vector<ElementCopy> elements = ScanElements(path);
  ASSERT_EQ(elements.size(), 2u);
  EXPECT_EQ(elements[0].line_number, 2u);
  EXPECT_TRUE(elements[0].text.starts_with("!a line break inside a string"));
  EXPECT_EQ(elements[1].text, "{\n    \"b\": 2\n  }");
  EXPECT_EQ(elements[1].line_number, 10u);
}

TEST(JsonArrayScanner, AnElementOverTheLimitIsSkippedWithoutBeingHeld) {
  TempDir dir;
  const std::string path = dir.Sub("big.json");
  const std::string big = "{\"big\":\"" + std::string(3 << 20, 'x') + "\",\"n\":[1,[2]]}";
  WriteFile(path, "[" + big + ",\n{\"a\":1}]");
  std::vector<ElementCopy> elements = ScanElements(path, 0, 1, /*max_element_bytes=*/1 << 20);
  ASSERT_EQ(elements.size(), 2u);
  EXPECT_EQ(elements[0].text, fmt::format("!an element of {} bytes exceeds the 1 MiB limit; split it",
                                          big.size() + 1));
  EXPECT_EQ(elements[0].next_byte_offset, 1 + big.size() + 1);
  EXPECT_EQ(elements[1], (ElementCopy{"{\"a\":1}", 2, big.size() + 3, big.size() + 10, 2}));
}

}  // namespace
}  // namespace skippr::sources
