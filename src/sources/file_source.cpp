// The File source: a file, a directory (recursively) or a glob; JSON lines, JSON arrays, CSV and
// Parquet; gzip and zstd detected from the bytes. Each file is a partition with its own position.
#include <duckdb.h>
#include <fmt/format.h>
#include <glob.h>
#include <simdjson.h>
#include <spdlog/spdlog.h>
#include <strings.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "schema/schema.hpp"
#include "sources/csv_reader.hpp"
#include "sources/duckdb_columns.hpp"
#include "sources/file_catalog.hpp"
#include "sources/file_reader.hpp"
#include "sources/input_stream.hpp"
#include "sources/json_array_scanner.hpp"
#include "sources/json_values.hpp"
#include "sources/source_kinds.hpp"
#include "sources/typed_rows.hpp"

namespace skippr::sources {

namespace {

namespace fs = std::filesystem;

constexpr uint64_t kMaxRecordBytes = 16 << 20;           // a larger record is a deadletter
constexpr uint64_t kRecordsReservedPerBatch = 4096;      // sync reads batches of at most this many

// kWideText: UTF-16 or UTF-32 text, which the text readers would read as NUL-laden garbage.
enum class FileFormat { kJsonLines, kJsonArray, kCsv, kParquet, kBinary, kWideText };

// A UTF-16 or UTF-32 byte order mark (FF FE, FE FF, 00 00 FE FF).
bool HasWideByteOrderMark(std::string_view head) {
  for (std::string_view mark : {std::string_view("\xFF\xFE", 2), std::string_view("\xFE\xFF", 2),
                                std::string_view("\0\0\xFE\xFF", 4)}) {
    if (head.substr(0, mark.size()) == mark) return true;
  }
  return false;
}

// Text of a text format (by name or setting) whose bytes are a third or more NUL: UTF-16 or
// UTF-32 without a byte order mark.
bool LooksWide(std::string_view head) {
  const auto nul_bytes = static_cast<size_t>(std::count(head.begin(), head.end(), '\0'));
  return head.size() >= 4 && nul_bytes * 3 >= head.size();
}

struct FileInfo {
  uint64_t size_bytes = 0;
  int64_t mtime_ns = 0;
  uint64_t device = 0;
  uint64_t inode = 0;
};

// NotFound when the file is gone (deleted after it was listed).
Result<FileInfo> StatFile(const std::string& path) {
  struct stat info {};
  if (stat(path.c_str(), &info) != 0) {
    const std::string message = fmt::format("cannot stat '{}': {}", path, std::strerror(errno));
    return errno == ENOENT ? Status::NotFound(message) : Status::IOError(message);
  }
  return FileInfo{static_cast<uint64_t>(info.st_size),
                  static_cast<int64_t>(info.st_mtim.tv_sec) * 1'000'000'000 + info.st_mtim.tv_nsec,
                  info.st_dev, info.st_ino};
}

bool IsHiddenName(const fs::path& path) {
  const std::string name = path.filename().string();
  return !name.empty() && (name[0] == '.' || name[0] == '_');
}

// Why a `path` that is neither a glob, a directory nor a regular file cannot be read.
Status PathNotReadable(const std::string& path) {
  std::error_code error;
  const fs::file_status status = fs::status(path, error);
  if (status.type() == fs::file_type::not_found) {
    return Status::NotFound(fmt::format(
        "File source path '{}' does not exist; set data_sources.<name>.File.path to a file, a "
        "directory or a glob",
        path));
  }
  if (error) {
    return Status::IOError(fmt::format(
        "File source path '{}' cannot be read: {}; check its permissions and those of the "
        "directories above it",
        path, error.message()));
  }
  return Status::InvalidArgument(fmt::format(
      "File source path '{}' is not a regular file or a directory (a pipe, socket or device); the "
      "File source reads files it can read again from a committed position: write the data to a "
      "file and point data_sources.<name>.File.path at it",
      path));
}

// The files a `path` setting names, sorted so that every run reads them in the same order.
Result<std::vector<std::string>> ListFiles(const std::string& path) {
  std::vector<std::string> files;
  std::error_code error;
  if (path.find_first_of("*?[") != std::string::npos) {
    glob_t matches{};
    const int rc = glob(path.c_str(), GLOB_NOSORT, nullptr, &matches);
    if (rc != 0 && rc != GLOB_NOMATCH) {
      globfree(&matches);
      return Status::IOError(fmt::format("cannot expand the File path glob '{}'", path));
    }
    for (size_t i = 0; i < matches.gl_pathc; ++i) {
      if (fs::is_regular_file(matches.gl_pathv[i], error)) files.emplace_back(matches.gl_pathv[i]);
    }
    globfree(&matches);
  } else if (fs::is_directory(path, error)) {
    for (auto it = fs::recursive_directory_iterator(path, error); !error && it != fs::end(it);
         it.increment(error)) {
      if (IsHiddenName(it->path())) {
        if (it->is_directory(error)) it.disable_recursion_pending();
        continue;
      }
      if (it->is_regular_file(error)) files.push_back(it->path().string());
    }
    if (error) {
      return Status::IOError(fmt::format("cannot list directory '{}': {}", path, error.message()));
    }
  } else if (fs::is_regular_file(path, error)) {
    files.push_back(path);
  } else {
    return PathNotReadable(path);
  }
  for (std::string& file : files) file = fs::absolute(file, error).lexically_normal().string();
  std::sort(files.begin(), files.end());
  return files;
}

std::string StripCompressionSuffix(std::string name) {
  for (const char* suffix : {".gz", ".gzip", ".zst", ".zstd"}) {
    const std::string_view s(suffix);
    if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0) {
      return name.substr(0, name.size() - s.size());
    }
  }
  return name;
}

struct DetectedFormat {
  FileFormat format = FileFormat::kJsonLines;
  Compression compression = Compression::kNone;  // of the file's first bytes
};

// The format from the setting, else the extension, else the first decompressed bytes.
Result<DetectedFormat> DetectFormat(const OpenedFile& file,
                                    const std::optional<std::string>& setting) {
  SKIPPR_ASSIGN_OR_RETURN(auto input, file.OpenStream());
  std::string head(4096, '\0');
  SKIPPR_ASSIGN_OR_RETURN(size_t size, input->Read(head.data(), head.size()));
  head.resize(size);
  const auto detected = [&](FileFormat format) {
    return DetectedFormat{format, input->compression()};
  };
  if (head.rfind("PAR1", 0) == 0) return detected(FileFormat::kParquet);
  if (HasWideByteOrderMark(head)) return detected(FileFormat::kWideText);
  const size_t first = head.find_first_not_of(" \t\r\n\xEF\xBB\xBF");
  const bool starts_array = first != std::string::npos && head[first] == '[';
  std::string format = setting.value_or("");
  if (format.empty()) {
    const std::string name = StripCompressionSuffix(fs::path(file.path()).filename().string());
    const std::string extension = fs::path(name).extension().string();
    if (extension == ".json" || extension == ".jsonl" || extension == ".ndjson") format = "json";
    if (extension == ".csv" || extension == ".tsv") format = "csv";
    if (extension == ".parquet") format = "parquet";
  }
  if (format == "parquet") return detected(FileFormat::kParquet);
  if ((format == "json" || format == "csv") && LooksWide(head)) {
    return detected(FileFormat::kWideText);
  }
  if (format == "json") {
    return detected(starts_array ? FileFormat::kJsonArray : FileFormat::kJsonLines);
  }
  if (format == "csv") return detected(FileFormat::kCsv);
  if (head.find('\0') != std::string::npos) return detected(FileFormat::kBinary);
  if (first != std::string::npos && (head[first] == '{' || head[first] == '[')) {
    return detected(starts_array ? FileFormat::kJsonArray : FileFormat::kJsonLines);
  }
  return detected(FileFormat::kCsv);
}

// ----- readers of one file ------------------------------------------------------------------

using internal::BatchLimits;
using internal::FileReader;
using internal::ReaderStart;
using internal::StreamProgress;

// What the text readers (JSON lines, JSON arrays, CSV) share: the batch loop, the record count,
// the records a previous pass consumed, and the line reached (the File source takes the byte
// position from the stream itself). Each reader says how to read one item (a line, an element, a
// row).
class TextFileReader : public FileReader {
 public:
  Result<bool> Fill(SourceBatch& batch, const BatchLimits& limits) final {
    uint64_t bytes_in_batch = 0;
    ReadStep step = ReadStep::kRead;
    const auto has_room = [&] {
      const auto typed = static_cast<uint64_t>(typed_ ? typed_->rows() : 0);
      const uint64_t taken = batch.records.size() + batch.deadletters.size() + typed;
      // Once rows go to columns, the batch ends in columns: it may grow to the typed limits.
      return typed > 0 ? taken < limits.max_typed_records && bytes_in_batch < limits.max_typed_bytes
                       : taken < limits.max_records && bytes_in_batch < limits.max_bytes;
    };
    while (step == ReadStep::kRead && has_room()) {
      Result<ReadStep> next = ReadOne(batch, bytes_in_batch);
      if (!next.ok() && next.status().code() == StatusCode::kCorruption) {
        // A damaged or truncated gzip/zstd stream: what it held so far is read, the rest of the
        // file is one deadletter (once: a later pass skips it with the records before it).
        if (TakeRecord()) {
          batch.deadletters.push_back(schema::MakeDeadletter(
              OriginAt(next_line_), schema::FailureCode::kUnreadableFile,
              std::string(next.status().message()), ""));
        }
        step = ReadStep::kEndOfFile;
        break;
      }
      SKIPPR_ASSIGN_OR_RETURN(step, std::move(next));
    }
    const bool has_more = step != ReadStep::kEndOfFile;
    if (typed_ && typed_->rows() > 0) batch.columns = typed_->Take(first_typed_row_);
    // At the end of a file that held no record at all: one deadletter that says so, so that no
    // file is silently read as 0 rows. Not while the file grows: its first record is coming.
    const bool is_whole_file = stream_.held_back_bytes() == 0 && !stream_.ended_inside_unit();
    if (!has_more && records_ == 0 && is_whole_file && reports_empty_file_ && TakeRecord()) {
      batch.deadletters.push_back(schema::MakeDeadletter(
          OriginAt(next_line_), schema::FailureCode::kUnreadableFile, NoRecordsReason(), ""));
    }
    batch.position.next_line = next_line_;
    batch.bytes_read += bytes_in_batch;
    return !has_more;
  }

  void UseLayout(std::shared_ptr<const schema::RecordLayout> layout) final {
    if (layout == nullptr) {
      typed_.reset();
    } else if (!typed_ || typed_->layout() != layout.get()) {
      typed_ = MakeTypedRows(std::move(layout));
    }
  }

 protected:
  enum class ReadStep {
    kRead,        // an item was read (or skipped); go on
    kEndOfFile,
    kEndOfBatch,  // the next record takes the Value path after typed rows: the next batch's
  };
  // `stream`: the reader's input (owned by the reader's parser), for whether it was cut.
  TextFileReader(std::string path, const InputStream& stream, const ReaderStart& start)
      : path_(std::move(path)),
        stream_(stream),
        records_(start.records),
        skip_records_(start.skip_records),
        next_line_(start.line),
        reports_empty_file_(start.reports_empty_file) {}

  // Reads the next item into `batch` (a record, a deadletter, or nothing for a blank line or one
  // a previous pass consumed), adding its input bytes.
  virtual Result<ReadStep> ReadOne(SourceBatch& batch, uint64_t& bytes_in_batch) = 0;
  virtual std::string NoRecordsReason() const = 0;
  // The typed rows of `layout` this reader's records can be decoded into, if any.
  virtual std::optional<internal::TypedRows> MakeTypedRows(
      std::shared_ptr<const schema::RecordLayout> layout) {
    return std::nullopt;
  }

  // The typed rows the next record may go to: null without a layout, and while records a previous
  // pass consumed are still being skipped.
  internal::TypedRows* typed_rows() { return typed_ && skip_records_ == 0 ? &*typed_ : nullptr; }
  // Counts the record just appended to typed_rows(), which ended before line `next_line` and took
  // `bytes` of input.
  void TakeTypedRecord(uint64_t next_line, uint64_t bytes, uint64_t& bytes_in_batch) {
    SKIPPR_CHECK(TakeRecord());
    if (typed_->rows() == 1) first_typed_row_ = records_;
    AdvanceToLine(next_line);
    bytes_in_batch += bytes;
  }

  // Counts the next record; false while it is one a previous pass already consumed.
  bool TakeRecord() {
    ++records_;
    if (skip_records_ == 0) return true;
    --skip_records_;
    return false;
  }
  void AdvanceToLine(uint64_t next_line) { next_line_ = next_line; }
  schema::RecordOrigin OriginAt(uint64_t line) const { return {path_, line, records_}; }
  // A deadletter for the record just taken, which started at `byte_offset` of the stream.
  void AddDeadletter(SourceBatch& batch, uint64_t line, uint64_t byte_offset,
                     schema::FailureCode code, std::string reason, std::string_view raw) const {
    batch.deadletters.push_back(schema::MakeDeadletter(OriginAt(line), code, std::move(reason), raw));
    batch.deadletters.back().byte_offset = byte_offset;
  }

  uint64_t records() const { return records_; }  // read so far, this pass's and earlier ones'

  std::string path_;

 private:
  const InputStream& stream_;
  uint64_t records_;
  uint64_t skip_records_;
  uint64_t next_line_;
  const bool reports_empty_file_;
  std::optional<internal::TypedRows> typed_;
  uint64_t first_typed_row_ = 0;  // the record number of typed_'s row 0
};

// Lines are parsed in place: LineReader's padding is what simdjson reads past a text's end.
static_assert(kLinePaddingBytes >= simdjson::SIMDJSON_PADDING);

class JsonLinesReader final : public TextFileReader {
 public:
  static Result<std::unique_ptr<FileReader>> Open(std::string path,
                                                  std::unique_ptr<InputStream> input,
                                                  const ReaderStart& start) {
    return std::unique_ptr<FileReader>(new JsonLinesReader(std::move(path), std::move(input), start));
  }

 private:
  JsonLinesReader(std::string path, std::unique_ptr<InputStream> input, const ReaderStart& start)
      : TextFileReader(std::move(path), *input, start),
        lines_(std::move(input), start.line, kMaxRecordBytes) {}

  Result<ReadStep> ReadOne(SourceBatch& batch, uint64_t& bytes_in_batch) override {
    if (internal::TypedRows* typed = typed_rows()) {
      SKIPPR_ASSIGN_OR_RETURN(std::optional<Line> peeked, lines_.Peek());
      if (peeked && !peeked->is_over_limit && !IsBlank(peeked->text)) {
        if (AppendTyped(*typed, *peeked)) {
          SKIPPR_RETURN_IF_ERROR(lines_.Next().status());
          TakeTypedRecord(peeked->line_number + 1, peeked->size_bytes + 1, bytes_in_batch);
          return ReadStep::kRead;
        }
        if (typed->rows() > 0) return ReadStep::kEndOfBatch;
      }
    }
    SKIPPR_ASSIGN_OR_RETURN(std::optional<Line> line, lines_.Next());
    if (!line) return ReadStep::kEndOfFile;
    AdvanceToLine(line->line_number + 1);
    if ((IsBlank(line->text) && !line->is_over_limit) || !TakeRecord()) return ReadStep::kRead;
    bytes_in_batch += line->size_bytes + 1;
    if (line->is_over_limit) {
      AddDeadletter(batch, line->line_number, line->byte_offset,
                    schema::FailureCode::kRecordTooLarge,
                    fmt::format("record of {} bytes (from byte offset {}) exceeds the {} MiB "
                                "limit; split it into smaller records",
                                line->size_bytes, line->byte_offset, kMaxRecordBytes >> 20),
                    line->text);
      return ReadStep::kRead;
    }
    Value value;
    if (const simdjson::error_code error = json_.Parse(line->text, /*has_padding=*/true, &value)) {
      AddDeadletter(batch, line->line_number, line->byte_offset,
                    error == simdjson::UTF8_ERROR ? schema::FailureCode::kInvalidUtf8
                                                  : schema::FailureCode::kInvalidJson,
                    fmt::format("invalid JSON: {} (line at byte offset {})",
                                simdjson::error_message(error), line->byte_offset),
                    line->text);
      return ReadStep::kRead;
    }
    batch.records.push_back({std::move(value), line->line_number, records()});
    return ReadStep::kRead;
  }
  std::optional<internal::TypedRows> MakeTypedRows(
      std::shared_ptr<const schema::RecordLayout> layout) override {
    return internal::TypedRows(std::move(layout));
  }
  // Appends `line` to `typed` from the parse of the run of buffered lines it is in, or alone. A run
  // starts at the first line past the last one and ends where it does, even when a line it could
  // not take ended its parse early: the lines left go one by one.
  bool AppendTyped(internal::TypedRows& typed, const Line& line) {
    if (line.byte_offset >= run_end_byte_offset_) {
      const std::string_view run = lines_.BufferedLines(internal::TypedRows::kMaxJsonLinesRunBytes);
      typed.StartJsonLines(run);
      run_end_byte_offset_ = line.byte_offset + run.size();  // at the run's last line end
    }
    return (typed.has_json_lines() && typed.AppendJsonLine(line.text, line.line_number)) ||
           typed.AppendJson(line.text, line.line_number);
  }
  static bool IsBlank(std::string_view text) {
    return text.find_first_not_of(" \t\r") == std::string_view::npos;
  }
  std::string NoRecordsReason() const override { return kNoRecordsReason; }

 public:
  static constexpr const char* kNoRecordsReason = "no records: the file holds only blank lines";

 private:
  LineReader lines_;
  uint64_t run_end_byte_offset_ = 0;  // where the run of lines typed rows last started ends
  internal::JsonParser json_{kMaxRecordBytes};
};

// Streams the array's elements (JsonArrayScanner) from the file's start: memory is bounded by the
// largest element, and a bad element is one deadletter. A resumed read skips the elements already
// read (a JSON array cannot grow by appending, so what a pass resumes is its own unfinished read).
class JsonArrayReader final : public TextFileReader {
 public:
  static Result<std::unique_ptr<FileReader>> Open(std::string path,
                                                  std::unique_ptr<InputStream> input,
                                                  const ReaderStart& start) {
    return std::unique_ptr<FileReader>(new JsonArrayReader(std::move(path), std::move(input), start));
  }

 private:
  JsonArrayReader(std::string path, std::unique_ptr<InputStream> input, const ReaderStart& start)
      : TextFileReader(std::move(path), *input, start),
        elements_(std::move(input), /*is_at_array_start=*/true, start.line, kMaxRecordBytes) {}

  Result<ReadStep> ReadOne(SourceBatch& batch, uint64_t& bytes_in_batch) override {
    SKIPPR_ASSIGN_OR_RETURN(std::optional<JsonArrayElement> element, elements_.Next());
    if (!element) return ReadStep::kEndOfFile;
    AdvanceToLine(element->next_line_number);
    if (!TakeRecord()) return ReadStep::kRead;
    bytes_in_batch += element->size_bytes + 1;
    const auto deadletter = [&](std::string_view reason) {
      AddDeadletter(batch, element->line_number, element->byte_offset,
                    schema::FailureCode::kInvalidJson,
                    fmt::format("{} (element {} at byte offset {})", reason, records(),
                                element->byte_offset),
                    element->text);
      return ReadStep::kRead;
    };
    if (element->problem) return deadletter(*element->problem);
    Value value;
    if (const simdjson::error_code error =
            json_.Parse(element->text, /*has_padding=*/true, &value)) {
      return deadletter(fmt::format("invalid JSON: {}", simdjson::error_message(error)));
    }
    batch.records.push_back({std::move(value), element->line_number, records()});
    return ReadStep::kRead;
  }
  std::string NoRecordsReason() const override { return "no records: the JSON array is empty"; }

  JsonArrayScanner elements_;
  internal::JsonParser json_{kMaxRecordBytes};
};

class CsvFileReader final : public TextFileReader {
 public:
  // `rows` starts where `start` says; past the file's start, the header and the delimiter are
  // read from the start of `file` (a stream of their own), and the rows stream has none.
  static Result<std::unique_ptr<FileReader>> Open(const OpenedFile& file,
                                                  std::unique_ptr<InputStream> rows,
                                                  const ReaderStart& start) {
    CsvOptions options;
    options.max_record_bytes = kMaxRecordBytes;
    if (fs::path(StripCompressionSuffix(file.path())).extension() == ".tsv") {
      options.delimiter = '\t';
    }
    if (rows->start_byte_offset() > 0) {
      SKIPPR_ASSIGN_OR_RETURN(auto head, file.OpenStream());
      SKIPPR_ASSIGN_OR_RETURN(auto header_reader, CsvReader::Open(std::move(head), options));
      options.delimiter = header_reader->delimiter();
      options.known_header = header_reader->header();
      options.first_line_number = start.line;
    }
    const InputStream& stream = *rows;
    SKIPPR_ASSIGN_OR_RETURN(std::unique_ptr<CsvReader> csv, CsvReader::Open(std::move(rows), options));
    return std::unique_ptr<FileReader>(new CsvFileReader(file.path(), stream, std::move(csv), start));
  }

  Result<ReadStep> ReadOne(SourceBatch& batch, uint64_t& bytes_in_batch) override {
    if (!has_reported_header_) {
      has_reported_header_ = true;
      if (const std::optional<CsvRow>& header = csv_->header_problem(); header && TakeRecord()) {
        AddDeadletter(batch, header->line_number, header->byte_offset,
                      schema::FailureCode::kInvalidCsv,
                      "the header line cannot be read: " + *header->problem, header->raw_text);
        return ReadStep::kRead;
      }
    }
    if (internal::TypedRows* typed = typed_rows()) {
      SKIPPR_ASSIGN_OR_RETURN(const CsvRow* peeked, csv_->Peek());
      // Peek consumed the blank lines before the row: a batch ending here ends after them.
      AdvanceToLine(csv_->next_line_number());
      if (peeked != nullptr && !Unreadable(*peeked) &&
          typed->AppendCells(peeked->fields, peeked->line_number)) {
        const uint64_t next_line = peeked->next_line_number;
        const uint64_t bytes = peeked->next_byte_offset - peeked->byte_offset;
        csv_->SkipPeeked();
        TakeTypedRecord(next_line, bytes, bytes_in_batch);
        return ReadStep::kRead;
      }
      if (typed->rows() > 0) return ReadStep::kEndOfBatch;
    }
    SKIPPR_ASSIGN_OR_RETURN(std::optional<CsvRow> next, csv_->Next());
    if (!next) {
      AdvanceToLine(csv_->next_line_number());  // past the blank lines the file ends with
      return ReadStep::kEndOfFile;
    }
    const CsvRow& row = *next;
    AdvanceToLine(row.next_line_number);
    if (!TakeRecord()) return ReadStep::kRead;
    bytes_in_batch += row.next_byte_offset - row.byte_offset;
    if (row.problem) {
      AddDeadletter(batch, row.line_number, row.byte_offset, schema::FailureCode::kInvalidCsv,
                    *row.problem, row.raw_text);
      return ReadStep::kRead;
    }
    if (std::optional<Problem> problem = Unreadable(row)) {
      AddDeadletter(batch, row.line_number, row.byte_offset, problem->code,
                    std::move(problem->reason), JoinRow(row));
      return ReadStep::kRead;
    }
    ValueObject object;
    object.reserve(names_.size());
    for (size_t i = 0; i < names_.size(); ++i) {
      object.emplace_back(names_[i], schema::ValueFromText(row.fields[i]));
    }
    batch.records.push_back({Value::Object(std::move(object)), row.line_number, records()});
    return ReadStep::kRead;
  }
  std::optional<internal::TypedRows> MakeTypedRows(
      std::shared_ptr<const schema::RecordLayout> layout) override {
    return internal::TypedRows::ForHeader(std::move(layout), names_);
  }
  std::string NoRecordsReason() const override {
    if (names_.empty()) return "no records: the file holds only blank lines";
    return fmt::format("no records: only a header line ({} columns)", names_.size());
  }

 private:
  CsvFileReader(std::string path, const InputStream& stream, std::unique_ptr<CsvReader> csv,
                const ReaderStart& start)
      : TextFileReader(std::move(path), stream, start), csv_(std::move(csv)) {
    // Names must be valid UTF-8, unique and non-empty: "a, a, " → a, a_2, column_3.
    std::map<std::string, int> seen;
    const std::vector<std::string>& header = csv_->header();
    for (size_t i = 0; i < header.size(); ++i) {
      std::string name = schema::ValidUtf8(header[i]);
      if (name != header[i]) {
        spdlog::warn("{}: header column {} is not valid UTF-8; its invalid bytes read as U+FFFD: "
                     "'{}'",
                     path_, i + 1, name);
      }
      if (name.empty()) name = fmt::format("column_{}", i + 1);
      if (int count = ++seen[name]; count > 1) name = fmt::format("{}_{}", name, count);
      names_.push_back(std::move(name));
    }
  }

  struct Problem {
    schema::FailureCode code;
    std::string reason;
  };
  // Why a parsed row cannot be a record, or nullopt.
  std::optional<Problem> Unreadable(const CsvRow& row) const {
    if (const uint64_t row_bytes = row.next_byte_offset - row.byte_offset;
        row_bytes > kMaxRecordBytes) {
      return Problem{schema::FailureCode::kRecordTooLarge,
                     fmt::format("record of {} bytes (from byte offset {}) exceeds the {} MiB limit",
                                 row_bytes, row.byte_offset, kMaxRecordBytes >> 20)};
    }
    if (row.fields.size() != names_.size()) {
      return Problem{
          schema::FailureCode::kCsvFieldCount,
          fmt::format("row has {} fields, the header {}; quote fields that contain the delimiter "
                      "'{}'",
                      row.fields.size(), names_.size(),
                      csv_->delimiter() == '\t' ? "\\t" : std::string(1, csv_->delimiter()))};
    }
    const auto is_valid_utf8 = [](std::string_view field) {
      return simdjson::validate_utf8(field.data(), field.size());
    };
    if (!row.is_ascii && !std::all_of(row.fields.begin(), row.fields.end(), is_valid_utf8)) {
      return Problem{schema::FailureCode::kInvalidUtf8,
                     fmt::format("invalid UTF-8 (row at byte offset {}); save the file as UTF-8",
                                 row.byte_offset)};
    }
    return std::nullopt;
  }

  std::string JoinRow(const CsvRow& row) const {
    std::string text;
    for (size_t i = 0; i < row.fields.size(); ++i) {
      if (i) text.push_back(csv_->delimiter());
      text += row.fields[i];
    }
    return text;
  }

  std::unique_ptr<CsvReader> csv_;
  std::vector<std::string> names_;
  bool has_reported_header_ = false;
};

// ----- Parquet, through DuckDB ----------------------------------------------------------------

std::string SqlQuote(std::string_view text) {
  std::string quoted = "'";
  for (char c : text) {
    quoted.push_back(c);
    if (c == '\'') quoted.push_back('\'');
  }
  return quoted + "'";
}

class DuckdbConnection {
 public:
  ~DuckdbConnection() {
    if (connection_) duckdb_disconnect(&connection_);
    if (database_) duckdb_close(&database_);
  }
  Status Open() {
    if (database_) return Status::OK();
    if (duckdb_open(nullptr, &database_) != DuckDBSuccess ||
        duckdb_connect(database_, &connection_) != DuckDBSuccess) {
      return Status::Internal("cannot start the embedded DuckDB");
    }
    // DuckDB decodes on the reader's thread, a chunk when the reader asks for one. Its own threads
    // would decode row groups ahead, into a streaming buffer that counts a string as its 16-byte
    // header: on a file of wide strings they held hundreds of MB ahead of the reader, more or less
    // from run to run. They also took cores from the committer and the lander: on bench/lake's
    // rides a 2M-row sync took 0.95x the time and 0.91x the CPU with this one thread.
    duckdb_result result;
    const bool is_set = duckdb_query(connection_, "SET threads = 1", &result) == DuckDBSuccess;
    duckdb_destroy_result(&result);
    if (!is_set) return Status::Internal("cannot set the embedded DuckDB's threads");
    return Status::OK();
  }
  duckdb_connection get() const { return connection_; }

 private:
  duckdb_database database_ = nullptr;
  duckdb_connection connection_ = nullptr;
};

// Where a Parquet file's row groups begin and end, from its footer.
class ParquetRowGroups {
 public:
  // None when DuckDB cannot read the footer's row groups.
  static std::optional<ParquetRowGroups> Read(DuckdbConnection& duckdb,
                                              const std::string& read_path) {
    const std::string sql = fmt::format(
        "SELECT DISTINCT row_group_id, row_group_num_rows FROM parquet_metadata({}) ORDER BY 1",
        SqlQuote(read_path));
    duckdb_result result;
    std::optional<ParquetRowGroups> groups;
    if (duckdb_query(duckdb.get(), sql.c_str(), &result) == DuckDBSuccess) {
      groups.emplace();
      uint64_t end = 0;
      for (idx_t row = 0; row < duckdb_row_count(&result); ++row) {
        end += static_cast<uint64_t>(std::max<int64_t>(0, duckdb_value_int64(&result, 1, row)));
        groups->ends_.push_back(end);
      }
    }
    duckdb_destroy_result(&result);
    return groups;
  }

  // The group holding the row numbered `row` (from 0); the number of groups past the last row.
  size_t GroupOf(uint64_t row) const {
    return static_cast<size_t>(std::upper_bound(ends_.begin(), ends_.end(), row) - ends_.begin());
  }
  // The rows [first, end) of the group holding `row`; an empty range past the last row.
  std::pair<uint64_t, uint64_t> GroupRecords(uint64_t row) const {
    const size_t group = GroupOf(row);
    if (group == ends_.size()) return {row, row};
    return {group == 0 ? 0 : ends_[group - 1], ends_[group]};
  }
  uint64_t EndOfGroup(uint64_t row) const { return GroupRecords(row).second; }

 private:
  std::vector<uint64_t> ends_;  // cumulative: group i holds rows [ends_[i-1], ends_[i])
};

class ParquetReader final : public FileReader {
 public:
  // Reads the file at `read_path` (the opened file's descriptor path), named `path` in messages,
  // from record `skip_records` on; `max_records` > 0 (discover's sample) ends the reading after so
  // many, which lets DuckDB decode only the row groups that hold them.
  static Result<std::unique_ptr<FileReader>> Open(DuckdbConnection& duckdb, const std::string& path,
                                                  const std::string& read_path,
                                                  uint64_t skip_records, uint64_t max_records,
                                                  std::map<std::string, LogicalType>* declared) {
    SKIPPR_RETURN_IF_ERROR(duckdb.Open());
    auto reader = std::unique_ptr<ParquetReader>(new ParquetReader(duckdb, path, read_path));
    reader->records_ = skip_records;
    if (!reader->DescribeColumns()) return std::unique_ptr<FileReader>(std::move(reader));
    reader->streaming_buffer_bytes_ = reader->StreamingBufferBytes();
    // The footer's types, kept exactly (nested ones too); a column of a type we have no kind for
    // is inferred from its values.
    declared->clear();
    bool every_column_is_declared = true;
    for (const internal::ResultColumn& column : reader->columns_) {
      if (std::optional<LogicalType> type = internal::DeclaredTypeOf(column.type())) {
        declared->emplace(schema::ValidUtf8(column.name()), std::move(*type));
      } else {
        every_column_is_declared = false;
      }
    }
    if (max_records > 0) {
      // A footer that declares every column's type leaves the sample's values nothing to infer
      // (the shaper creates each field as declared, null-only ones too): a vector of rows shows
      // the file reads, and spares discover decoding a row group of every column.
      if (every_column_is_declared) max_records = std::min(max_records, kDeclaredSampleRecords);
      reader->end_record_ = skip_records + max_records;
    }
    return std::unique_ptr<FileReader>(std::move(reader));
  }

  ~ParquetReader() override { CloseQuery(); }

  bool HasReadSample() const override { return IsAtEndRecord(); }

  Result<bool> Fill(SourceBatch& batch, const BatchLimits& limits) override {
    // The source stops asking at its sample's end: asked again, the reader would hand over
    // nothing and not be done, forever.
    SKIPPR_CHECK_MSG(!IsAtEndRecord(), "a Parquet reader was asked for records past its end");
    const bool is_done = FillRows(batch, limits);
    if (!error_) return is_done;
    // The rows before a damaged page land; the rest of the file is one deadletter, the record
    // after them (record 1 when the file cannot be opened at all).
    batch.deadletters.push_back(schema::MakeDeadletter(
        {path_, 0, records_ + 1}, schema::FailureCode::kUnreadableFile, *error_, ""));
    return true;
  }

  void UseLayout(std::shared_ptr<const schema::RecordLayout> layout) override {
    if (layout == nullptr) {
      plan_.reset();
      typed_.reset();
    } else if (!typed_ || typed_->layout() != layout.get()) {
      plan_ = internal::DuckdbColumnsPlan::Make(*layout, columns_);
      typed_.emplace(std::move(layout));
    }
  }

 private:
  // How the query hands rows over: DuckDB's columns, copied into the layout's columns where they
  // fit it (DuckdbColumnsPlan), or each row as DuckDB's JSON text of it, read by the JSON path —
  // typed when it fits, as a Value otherwise.
  enum class RowsAs { kColumns, kJsonText };

  // A row counts at least this many bytes in a batch, as a sync counts a record whose input bytes
  // it cannot tell (sync_pass.cpp): narrow rows make batches of a bounded number of rows.
  static constexpr uint64_t kNominalRecordBytes = 256;
  // What DuckDB may hold of the file's rows ahead of the reader, in the bytes the rows take: its
  // default streaming buffer, which it counts in rows of strings as narrow as their headers.
  static constexpr uint64_t kRowBytesAhead = 1'000'000;
  // The most a sample reads of a file whose footer declares every column's type: one DuckDB
  // vector (STANDARD_VECTOR_SIZE).
  static constexpr uint64_t kDeclaredSampleRecords = 2048;

  ParquetReader(DuckdbConnection& duckdb, std::string path, std::string read_path)
      : duckdb_(duckdb), read_path_(std::move(read_path)), path_(std::move(path)) {}

  std::string ReadSql() const { return "read_parquet(" + SqlQuote(read_path_) + ")"; }

  // DuckDB's streaming_buffer_size for this file's queries. DuckDB holds that many bytes of rows
  // ahead of the reader, but counts a string as its 16-byte header, not its text (the vector's
  // width: CountedBytesPerRow): a file of 8 KB strings was read whole into memory ahead of the
  // reader. The setting is scaled down by how much wider the rows are than DuckDB counts them (by
  // the footer's uncompressed bytes per row), so that about kRowBytesAhead of them are held.
  // Strings the file's dictionaries hold once still count once each: their copies are not bounded.
  uint64_t StreamingBufferBytes() const {
    uint64_t counted_bytes_per_row = 0;
    for (const internal::ResultColumn& column : columns_) {
      counted_bytes_per_row += internal::CountedBytesPerRow(column.type());
    }
    const std::string sql = fmt::format(
        "SELECT (SELECT sum(total_uncompressed_size) FROM parquet_metadata({0}))::UBIGINT, "
        "(SELECT sum(num_rows) FROM parquet_file_metadata({0}))::UBIGINT",
        SqlQuote(read_path_));
    duckdb_result result;
    uint64_t file_bytes = 0;
    uint64_t file_rows = 0;
    if (duckdb_query(duckdb_.get(), sql.c_str(), &result) == DuckDBSuccess &&
        duckdb_row_count(&result) == 1) {
      file_bytes = duckdb_value_uint64(&result, 0, 0);
      file_rows = duckdb_value_uint64(&result, 1, 0);
    }
    duckdb_destroy_result(&result);
    if (file_rows == 0 || counted_bytes_per_row == 0) return kRowBytesAhead;
    const uint64_t bytes_per_row = std::max(counted_bytes_per_row, file_bytes / file_rows);
    return std::max<uint64_t>(1, kRowBytesAhead * counted_bytes_per_row / bytes_per_row);
  }

  // The file's columns as DuckDB reads them, for the declared types and the plans; false, with
  // the error set, when DuckDB cannot read the file's footer.
  bool DescribeColumns() {
    duckdb_prepared_statement statement;
    const bool is_readable = duckdb_prepare(duckdb_.get(), ("SELECT * FROM " + ReadSql()).c_str(),
                                            &statement) == DuckDBSuccess;
    if (!is_readable) {
      SetError(duckdb_prepare_error(statement));
    } else {
      for (idx_t i = 0; i < duckdb_prepared_statement_column_count(statement); ++i) {
        // A copy the caller frees, though typed const (LeakSanitizer found it).
        const char* name = duckdb_prepared_statement_column_name(statement, i);
        columns_.emplace_back(name != nullptr ? name : "",
                              duckdb_prepared_statement_column_logical_type(statement, i));
        duckdb_free(const_cast<char*>(name));
        // DuckDB's names are case-insensitive.
        const std::string& column = columns_.back().name();
        can_filter_row_numbers_ &= strcasecmp(column.c_str(), "file_row_number") != 0;
      }
    }
    duckdb_destroy_prepare(&statement);
    return is_readable;
  }

  RowsAs WantedRows() const {
    return plan_ && records_ >= json_until_ ? RowsAs::kColumns : RowsAs::kJsonText;
  }

  // The row after the current one is the first the columns may take again. Each switch re-runs
  // the query, which costs DuckDB a row group's decoding: a file whose rows keep needing the
  // JSON path stays on it twice as long each time, so switches stay logarithmic in its rows.
  void ReadNextRowAsJson() {
    json_until_ = records_ + 1 + json_stretch_;
    json_stretch_ = json_stretch_ * 2 + 1;
  }

  // The file's rows from the next record on, up to end_record_ and, when reading a group at a
  // time, to the end of its row group. DuckDB skips the row groups outside the range when it may
  // filter on the file's row numbers (no column already has their name); OFFSET reads them.
  std::string RowsFromNextSql() const {
    // From the first record to the end, a filter would only cost: every row passes it.
    if (records_ == 0 && !end_record_ && !row_groups_) return ReadSql() + " t";
    if (!can_filter_row_numbers_ && !end_record_) {
      return fmt::format("{} t OFFSET {}", ReadSql(), records_);
    }
    if (!can_filter_row_numbers_) {
      return fmt::format("(SELECT * FROM {} LIMIT {} OFFSET {}) t", ReadSql(),
                         *end_record_ - records_, records_);
    }
    std::optional<uint64_t> end = end_record_;
    if (row_groups_) end = std::min(end.value_or(UINT64_MAX), row_groups_->EndOfGroup(records_));
    const std::string before_end = end ? fmt::format(" AND file_row_number < {}", *end) : "";
    return fmt::format(
        "(SELECT * EXCLUDE (file_row_number) FROM read_parquet({}, file_row_number = true) "
        "WHERE file_row_number >= {}{}) t",
        SqlQuote(read_path_), records_, before_end);
  }

  bool IsAtEndRecord() const { return end_record_ && records_ >= *end_record_; }

  // Runs the query that hands rows over `rows_as`, from the next record on, unless it is running.
  void RunQuery(RowsAs rows_as) {
    if (has_result_ && rows_as_ == rows_as) return;
    CloseQuery();
    // JSON text keeps the declared types' values exact (timestamps and decimals as text), and
    // nested values arrive as objects and lists.
    const std::string sql =
        fmt::format("SELECT {} FROM {}", rows_as == RowsAs::kColumns ? "*" : "to_json(t)::VARCHAR",
                    RowsFromNextSql());
    // Per query: the connection reads other files, each with a setting of its own.
    const std::string buffer_sql =
        fmt::format("SET streaming_buffer_size = '{} bytes'", streaming_buffer_bytes_);
    duckdb_result set_result;
    SKIPPR_CHECK(duckdb_query(duckdb_.get(), buffer_sql.c_str(), &set_result) == DuckDBSuccess);
    duckdb_destroy_result(&set_result);
    duckdb_prepared_statement statement;
    bool is_running = false;
    if (duckdb_prepare(duckdb_.get(), sql.c_str(), &statement) != DuckDBSuccess) {
      SetError(duckdb_prepare_error(statement));
    } else {
      is_running = duckdb_execute_prepared_streaming(statement, &result_) == DuckDBSuccess;
    }
    duckdb_destroy_prepare(&statement);
    has_result_ = true;
    rows_as_ = rows_as;
    query_first_record_ = records_;
    if (!is_running && !error_) QueryFailed(rows_as);
  }

  // The running query failed reading the file. DuckDB reads row groups ahead, on several threads,
  // and drops the rows it read before a damaged one: the file is read again a row group at a time
  // from the next record, so every row before the damaged group is read.
  void QueryFailed(RowsAs rows_as) {
    const std::string message = DuckdbMessage(duckdb_result_error(&result_));
    if (!row_groups_ && can_filter_row_numbers_) {
      row_groups_ = ParquetRowGroups::Read(duckdb_, read_path_);
      if (row_groups_) {
        CloseQuery();
        return RunQuery(rows_as);
      }
    }
    if (row_groups_) {
      const auto [first, end] = row_groups_->GroupRecords(records_);
      error_ = fmt::format(
          "unreadable Parquet: row group {} (records {} to {}) is damaged, and the records after "
          "it are not read: {}",
          row_groups_->GroupOf(records_), first + 1, end, message);
    } else {
      error_ = fmt::format("unreadable Parquet after record {} (the records after it are not "
                           "read): {}", records_, message);
    }
  }

  void CloseQuery() {
    // A reader dropped mid-file (discover's sample, a pass that stops) still holds a chunk.
    if (chunk_ != nullptr) duckdb_destroy_data_chunk(&chunk_);
    if (has_result_) duckdb_destroy_result(&result_);
    has_result_ = false;
    chunk_row_ = 0;
  }

  // The rows the next copy into the typed columns may take: what is left of the batch's records,
  // and of its bytes (kNominalRecordBytes a row at least) at the bytes per row so far — at most as
  // many rows as it holds, so that rows
  // wider than those so far overshoot the bytes by no more than the batch's size. A batch is
  // bounded by what its columns weigh, not by its records: a file of wide rows compresses them,
  // and its size does not tell.
  uint64_t TypedRowsLeft(const BatchLimits& limits) const {
    const auto rows = static_cast<uint64_t>(typed_->rows());
    if (rows >= limits.max_typed_records) return 0;
    if (rows == 0) return 1;
    const uint64_t bytes = std::max(typed_->DataBytes(), rows * kNominalRecordBytes);
    if (bytes >= limits.max_typed_bytes) return 0;
    const uint64_t bytes_per_row = bytes / rows;
    const uint64_t most = std::min(limits.max_typed_records - rows, rows);
    return std::clamp<uint64_t>((limits.max_typed_bytes - bytes) / bytes_per_row, 1, most);
  }

  // Rows copied as columns or read from JSON text; true at the end of the file or at an error.
  bool FillRows(SourceBatch& batch, const BatchLimits& limits) {
    if (!error_) RunQuery(WantedRows());
    if (!error_ && rows_as_ == RowsAs::kColumns) {
      if (const std::optional<bool> is_done = FillColumns(batch, limits)) return *is_done;
      RunQuery(RowsAs::kJsonText);  // the next row is for the JSON path
    }
    return error_ || FillJson(batch, limits);
  }

  // Rows copied as columns; nullopt, with nothing read, when the next row is for the JSON path.
  std::optional<bool> FillColumns(SourceBatch& batch, const BatchLimits& limits) {
    bool is_done = false;
    for (uint64_t rows_left = TypedRowsLeft(limits); rows_left > 0;
         rows_left = TypedRowsLeft(limits)) {
      if (!HasRow()) {
        is_done = !IsAtEndRecord();
        break;
      }
      const uint64_t rows_before = static_cast<uint64_t>(typed_->rows());
      const uint64_t end =
          std::min<uint64_t>(duckdb_data_chunk_get_size(chunk_), chunk_row_ + rows_left);
      const uint64_t appended = plan_->Append(chunk_, chunk_row_, end, *typed_);
      if (rows_before == 0 && appended > 0) first_typed_row_ = records_ + 1;
      chunk_row_ += appended;
      records_ += appended;
      if (chunk_row_ < end) {  // a row the columns do not take as it is
        ReadNextRowAsJson();
        if (typed_->rows() == 0) return std::nullopt;
        break;
      }
    }
    if (typed_->rows() > 0) batch.columns = typed_->Take(first_typed_row_);
    return is_done;
  }

  // Rows read from their JSON text: typed while they fit the layout, as Values otherwise.
  bool FillJson(SourceBatch& batch, const BatchLimits& limits) {
    uint64_t value_bytes = 0;  // the JSON text of the rows read as Values: their memory's measure
    bool is_done = false;
    while (true) {
      const auto typed_rows = static_cast<uint64_t>(typed_ ? typed_->rows() : 0);
      const uint64_t taken = batch.records.size() + batch.deadletters.size() + typed_rows;
      if (typed_rows > 0 ? TypedRowsLeft(limits) == 0
                         : taken >= limits.max_records || value_bytes >= limits.max_bytes) {
        break;
      }
      // Past the rows that needed this path, the next batch goes back to copying columns.
      if (taken > 0 && WantedRows() == RowsAs::kColumns) break;
      const std::optional<std::string_view> row = NextJsonRow();
      if (!row) {
        is_done = !IsAtEndRecord();
        break;
      }
      // The row's JSON text, padded for simdjson.
      padded_row_.assign(*row);
      padded_row_.resize(row->size() + simdjson::SIMDJSON_PADDING, '\0');
      const std::string_view text(padded_row_.data(), row->size());
      if (typed_ && typed_->AppendJson(text, /*line=*/0)) {
        TakeRow();
        if (typed_->rows() == 1) first_typed_row_ = records_;
        continue;
      }
      if (typed_rows > 0) break;  // the next batch reads this row as a Value
      TakeRow();
      value_bytes += row->size();
      Value value;
      if (const simdjson::error_code error = json_.Parse(text, /*has_padding=*/true, &value)) {
        batch.deadletters.push_back(schema::MakeDeadletter(
            {path_, 0, records_}, schema::FailureCode::kUnconvertibleRow,
            fmt::format("row not convertible: {}", simdjson::error_message(error)), *row));
        continue;
      }
      batch.records.push_back({std::move(value), /*line=*/0, /*row=*/records_});
    }
    if (typed_ && typed_->rows() > 0) batch.columns = typed_->Take(first_typed_row_);
    return is_done;
  }

  // Whether the query has a row left; the next chunk is fetched once the current one is read.
  // DuckDB ends a result the same way at its end and at an error (a damaged page mid-file): the
  // result's error tells them apart, so a damaged file never reads as a shorter one.
  bool HasRow() {
    while (chunk_ == nullptr || chunk_row_ >= duckdb_data_chunk_get_size(chunk_)) {
      if (chunk_ != nullptr) duckdb_destroy_data_chunk(&chunk_);
      if (error_) return false;
      chunk_ = duckdb_fetch_chunk(result_);
      chunk_row_ = 0;
      if (chunk_ != nullptr) continue;
      if (duckdb_result_error(&result_) != nullptr) {
        QueryFailed(rows_as_);
        continue;
      }
      // Read a group at a time, the file goes on while a group's query hands rows over.
      if (!row_groups_ || records_ == query_first_record_ || IsAtEndRecord()) return false;
      const RowsAs rows_as = rows_as_;
      CloseQuery();
      RunQuery(rows_as);
    }
    return true;
  }

  // The next row's JSON text, or nullopt at the end. It stays the next row, its text valid, until
  // TakeRow().
  std::optional<std::string_view> NextJsonRow() {
    if (!HasRow()) return std::nullopt;
    duckdb_vector vector = duckdb_data_chunk_get_vector(chunk_, 0);
    auto* strings = static_cast<duckdb_string_t*>(duckdb_vector_get_data(vector));
    duckdb_string_t& cell = strings[chunk_row_];
    return std::string_view(duckdb_string_t_data(&cell), duckdb_string_t_length(cell));
  }
  void TakeRow() {
    ++chunk_row_;
    ++records_;
  }

  // DuckDB's message names the descriptor path it read; the user knows the file by its name.
  std::string DuckdbMessage(const char* duckdb_message) const {
    std::string message = duckdb_message != nullptr ? duckdb_message : "unknown error";
    for (size_t at = message.find(read_path_); at != std::string::npos;
         at = message.find(read_path_, at + path_.size())) {
      message.replace(at, read_path_.size(), path_);
    }
    return message;
  }
  void SetError(const char* duckdb_message) {
    error_ = "unreadable Parquet: " + DuckdbMessage(duckdb_message);
  }

  DuckdbConnection& duckdb_;
  std::string read_path_;
  std::string path_;
  std::optional<std::string> error_;
  std::vector<internal::ResultColumn> columns_;
  uint64_t streaming_buffer_bytes_ = kRowBytesAhead;  // StreamingBufferBytes
  duckdb_result result_{};
  bool has_result_ = false;
  RowsAs rows_as_ = RowsAs::kJsonText;
  bool can_filter_row_numbers_ = true;  // false: a column of the file is named file_row_number
  duckdb_data_chunk chunk_ = nullptr;
  idx_t chunk_row_ = 0;
  uint64_t records_ = 0;     // the rows read (or skipped on resuming) so far
  std::optional<uint64_t> end_record_;  // the reading ends after this record (a sample's end)
  uint64_t query_first_record_ = 0;  // records_ when the running query began
  uint64_t json_until_ = 0;  // rows up to this record take the JSON path
  uint64_t json_stretch_ = 0;
  internal::JsonParser json_{kMaxRecordBytes};
  std::string padded_row_;
  std::optional<internal::TypedRows> typed_;
  std::optional<internal::DuckdbColumnsPlan> plan_;  // typed_'s layout: slots point into it
  std::optional<ParquetRowGroups> row_groups_;  // set once the file is read a group at a time
  uint64_t first_typed_row_ = 0;  // the record number of typed_'s row 0
};

// A file that cannot be read as any format: one deadletter for the whole file (line 0), which is
// its record 1 — the position counts it in records_consumed, as an unreadable Parquet file's is.
class UnreadableFileReader final : public FileReader {
 public:
  UnreadableFileReader(std::string path, std::string reason)
      : path_(std::move(path)), reason_(std::move(reason)) {}
  Result<bool> Fill(SourceBatch& batch, const BatchLimits&) override {
    batch.deadletters.push_back(
        schema::MakeDeadletter({path_, 0, 1}, schema::FailureCode::kUnreadableFile, reason_, ""));
    return true;
  }

 private:
  std::string path_;
  std::string reason_;
};

// ----- what changed since the last pass -----------------------------------------------------

// The head and tail windows of the fingerprint of what a position has read (FilePrefix).
constexpr uint64_t kFingerprintWindowBytes = 64 << 10;

// JSON lines and CSV are streams: they resume at a byte offset and may grow by appending. JSON
// arrays and Parquet are read whole (a resumed read skips records) and cannot grow validly: any
// change to one is a new version.
bool IsStreamed(FileFormat format) {
  return format == FileFormat::kJsonLines || format == FileFormat::kCsv;
}

bool IsLineEnd(char c) { return c == '\n' || c == '\r'; }

// The fingerprint of the file's first `file_bytes` bytes; the empty prefix is all zeros. A file cut
// below `file_bytes` while it was read gets hashes of 0: the next pass finds it shorter than the
// prefix (a new version) before it compares them.
Result<FilePrefix> Fingerprint(const OpenedFile& file, uint64_t file_bytes,
                               uint64_t window_bytes) {
  if (file_bytes == 0) return FilePrefix{};
  const uint64_t hashed_bytes = std::min(file_bytes, window_bytes);
  SKIPPR_ASSIGN_OR_RETURN(const std::optional<uint64_t> head, file.HashRange(0, hashed_bytes));
  SKIPPR_ASSIGN_OR_RETURN(const std::optional<uint64_t> tail,
                          file.HashRange(file_bytes - hashed_bytes, hashed_bytes));
  return FilePrefix{file_bytes, head.value_or(0), tail.value_or(0), window_bytes};
}

// Whether the stream byte at `start` (the byte after what was read) is a line end: an append that
// starts with one ended the last line read, an append that does not continued it.
Result<bool> StartsWithLineEnd(const OpenedFile& file, StreamStart start,
                               Compression compression) {
  SKIPPR_ASSIGN_OR_RETURN(std::unique_ptr<InputStream> stream, file.OpenStream(start, compression));
  char next = 0;
  SKIPPR_ASSIGN_OR_RETURN(const size_t read_bytes, stream->Read(&next, 1));
  return read_bytes == 1 && IsLineEnd(next);
}

using ChangeReason = std::optional<std::string>;

// A re-read of a compressed file skips the records of stream bytes [resume.byte_offset,
// byte_offset): they must be the bytes the earlier pass read, or the skip would drop other records.
Result<ChangeReason> WhySkippedBytesChanged(const PartitionPosition& previous,
                                            const OpenedFile& file,
                                            const DetectedFormat& detected) {
  const ResumePoint& resume = previous.resume;
  Result<std::unique_ptr<InputStream>> stream =
      file.OpenStream({resume.prefix.file_bytes, resume.byte_offset}, detected.compression);
  if (!stream.ok() && stream.status().code() == StatusCode::kCorruption) {
    return ChangeReason(stream.status().message());
  }
  SKIPPR_RETURN_IF_ERROR(stream.status());
  Result<std::optional<uint64_t>> hash =
      (*stream)->HashNextBytes(previous.byte_offset - resume.byte_offset);
  if (!hash.ok() && hash.status().code() == StatusCode::kCorruption) {
    return ChangeReason(hash.status().message());
  }
  SKIPPR_RETURN_IF_ERROR(hash.status());
  if (!*hash) {
    return ChangeReason(fmt::format("it decompresses to fewer than the {} bytes already read",
                                    previous.byte_offset));
  }
  if (**hash != previous.skipped_bytes_hash) {
    return ChangeReason("the bytes already read changed: it was rewritten in place or replaced");
  }
  return ChangeReason();
}

// Why the bytes `previous` vouches for are no longer what `file` holds; nullopt while they are.
Result<ChangeReason> WhyChanged(const PartitionPosition& previous, const OpenedFile& file,
                                const DetectedFormat& detected) {
  const FilePrefix& prefix = previous.resume.prefix;
  if (file.size_bytes() < prefix.file_bytes) {
    return ChangeReason(fmt::format("it has {} bytes, fewer than the {} already read: truncated or "
                                    "replaced",
                                    file.size_bytes(), prefix.file_bytes));
  }
  if (previous.is_unverified) {
    if (!previous.is_closed) return ChangeReason();  // carry on as the older skipprd would have
    return ChangeReason("it changed after it was read, and its position (written by an older "
                        "skipprd) has no fingerprint to tell an append from a rewrite");
  }
  if (!IsStreamed(detected.format) && file.size_bytes() != prefix.file_bytes) {
    return ChangeReason(fmt::format("it changed from {} to {} bytes, and a {} file cannot grow by "
                                    "appending",
                                    prefix.file_bytes, file.size_bytes(),
                                    detected.format == FileFormat::kParquet     ? "Parquet"
                                    : detected.format == FileFormat::kJsonArray ? "JSON array"
                                                                                : "binary"));
  }
  SKIPPR_ASSIGN_OR_RETURN(const FilePrefix now,
                          Fingerprint(file, prefix.file_bytes, prefix.window_bytes));
  if (now != prefix) {
    return ChangeReason("the bytes already read changed: it was rewritten in place or replaced");
  }
  if (!previous.ends_at_line_end && file.size_bytes() > prefix.file_bytes) {
    // Only a pass that reached the end reads a line without its line end: resume is that end.
    Result<bool> ended = StartsWithLineEnd(file, {prefix.file_bytes, previous.resume.byte_offset},
                                           detected.compression);
    if (!ended.ok() && ended.status().code() != StatusCode::kCorruption) return ended.status();
    if (!ended.ok() || !*ended) {
      return ChangeReason("an append continued its last line, which was read before it had a "
                          "line end");
    }
  }
  if (previous.byte_offset > previous.resume.byte_offset) {
    return WhySkippedBytesChanged(previous, file, detected);
  }
  return ChangeReason();
}

// What a pass does with one file.
struct FilePlan {
  bool is_touched = false;      // only its modification time changed: commit `position`, read nothing
  PartitionPosition position;   // where reading starts (or the position to commit)
  StreamStart stream_start;
  ReaderStart reader_start;
};

// Decides from the position committed for a file (nullptr: none) whether to read it from its start
// (a new file or a new version), from where the last pass stopped, or not at all.
Result<FilePlan> PlanFile(const PartitionPosition* previous, const OpenedFile& file,
                          const DetectedFormat& detected) {
  FilePlan plan;
  PartitionPosition& position = plan.position;
  ChangeReason why_changed;
  if (previous != nullptr && previous->size_bytes > 0) {  // an empty file read nothing
    SKIPPR_ASSIGN_OR_RETURN(why_changed, WhyChanged(*previous, file, detected));
    position = *previous;
    position.is_unverified = false;  // the positions this pass writes are fingerprinted
  }
  if (why_changed) {
    position = PartitionPosition{};
    position.version = previous->version + 1;
    position.version_reason = *why_changed;
    spdlog::warn("file {} changed since it was read ({}): reading version {} from its start; tables "
                 "written with write_policy append keep the rows of the earlier version(s)",
                 file.path(), *why_changed, position.version);
  } else if (previous != nullptr) {
    position.version = previous->version;  // an empty file's next content is no new version
  }
  position.size_bytes = file.size_bytes();
  position.mtime_ns = file.mtime_ns();
  if (previous != nullptr && !why_changed && previous->is_closed &&
      file.size_bytes() == previous->resume.prefix.file_bytes) {
    plan.is_touched = true;  // touched, or copied over with the same bytes
    return plan;
  }
  position.is_closed = false;
  if (!IsStreamed(detected.format)) {
    // Read whole: what a position vouches for is the whole file (unchanged, if this resumes).
    SKIPPR_ASSIGN_OR_RETURN(position.resume.prefix,
                            Fingerprint(file, file.size_bytes(), kFingerprintWindowBytes));
    plan.reader_start = {1, 0, position.records_consumed};
    return plan;
  }
  const ResumePoint& resume = position.resume;
  plan.stream_start = {resume.prefix.file_bytes, resume.byte_offset};
  plan.reader_start = {resume.line, resume.records, position.records_consumed - resume.records};
  // The append starts with the line end the last line read lacked (WhyChanged checked): that first
  // line end belongs to the line before.
  if (!position.ends_at_line_end && resume.line > 1) --plan.reader_start.line;
  return plan;
}

// ----- the source ----------------------------------------------------------------------------

// The file a pass is reading.
struct FileReading {
  std::unique_ptr<OpenedFile> file;
  DetectedFormat detected;
  std::unique_ptr<FileReader> reader;
  InputStream* stream = nullptr;  // the reader's, for the streamed formats
  uint64_t stream_start_file_offset = 0;
  PartitionPosition position;
  uint64_t records_this_pass = 0;
};

// Local files: a file, a directory (recursively, without hidden names) or a glob.
class LocalFiles final : public internal::FileCatalog {
 public:
  explicit LocalFiles(std::string path) : path_(std::move(path)) {}

  Result<std::vector<std::string>> List(const ReadOptions&) override { return ListFiles(path_); }

  Result<std::optional<internal::FileVersion>> Describe(const std::string& path) override {
    Result<FileInfo> info = StatFile(path);
    if (!info.ok() && info.status().code() == StatusCode::kNotFound) {
      return std::optional<internal::FileVersion>();
    }
    SKIPPR_RETURN_IF_ERROR(info.status());
    return std::optional<internal::FileVersion>(internal::FileVersion{
        info->size_bytes, info->mtime_ns, "", std::make_pair(info->device, info->inode)});
  }

  Result<std::unique_ptr<OpenedFile>> Open(const std::string& path,
                                           const internal::FileVersion&) override {
    return OpenedFile::Open(path);
  }

 private:
  std::string path_;
};

// Whether a file read to its end has not changed since: a local file by size and modification
// time, an object by size and ETag.
bool IsUnchangedSinceClosed(const PartitionPosition& previous,
                            const internal::FileVersion& version) {
  if (!previous.is_closed || previous.size_bytes != version.size_bytes) return false;
  if (!version.etag.empty()) return previous.object_etag == version.etag;
  return previous.mtime_ns == version.mtime_ns;
}

class FileSource final : public Source {
 public:
  FileSource(std::unique_ptr<internal::FileCatalog> catalog, std::optional<std::string> format)
      : catalog_(std::move(catalog)), format_(std::move(format)) {}

  Status Open(const SourcePositions& committed, const ReadOptions& options) override {
    committed_ = committed;
    options_ = options;
    SKIPPR_ASSIGN_OR_RETURN(files_, catalog_->List(options));
    next_file_ = 0;
    reading_.reset();
    seen_files_.clear();
    return Status::OK();
  }

  Result<std::optional<SourceBatch>> Next() override {
    while (true) {
      if (!reading_) {
        if (next_file_ >= files_.size()) return std::optional<SourceBatch>();
        SKIPPR_ASSIGN_OR_RETURN(std::optional<SourceBatch> touched,
                                StartFile(files_[next_file_++]));
        if (touched) return touched;
        if (!reading_) continue;  // nothing to read in that file
      }
      SKIPPR_ASSIGN_OR_RETURN(std::optional<SourceBatch> batch, ReadBatch());
      if (batch) return batch;
    }
  }

 private:
  // Sets reading_ for `path` when it has something to read; a batch (with no records) when only
  // its position needs committing.
  Result<std::optional<SourceBatch>> StartFile(const std::string& path) {
    using NoBatch = std::optional<SourceBatch>;
    SKIPPR_ASSIGN_OR_RETURN(std::optional<internal::FileVersion> version, catalog_->Describe(path));
    if (!version) {
      spdlog::info("file {} is gone since it was listed; skipped", path);
      return NoBatch();
    }
    auto committed = committed_.find(path);
    const PartitionPosition* previous =
        committed == committed_.end() ? nullptr : &committed->second;
    if (version->identity && !IsFirstName(path, *version->identity)) return NoBatch();
    if (previous != nullptr && IsUnchangedSinceClosed(*previous, *version)) {
      return NoBatch();  // unchanged since it was read to its end
    }
    Result<std::unique_ptr<OpenedFile>> opened = catalog_->Open(path, *version);
    if (!opened.ok() && opened.status().code() == StatusCode::kNotFound) {
      spdlog::info("{}; skipped", opened.status().message());
      return NoBatch();
    }
    SKIPPR_RETURN_IF_ERROR(opened.status());
    SKIPPR_RETURN_IF_ERROR(PrefetchNextToRead());
    // Replaced between the stat and the open: the opened file is what this pass reads.
    if (version->identity &&
        !IsFirstName(path, {(*opened)->device(), (*opened)->inode()})) {
      return NoBatch();
    }
    auto reading = std::make_unique<FileReading>();
    reading->file = std::move(opened).value();
    if (reading->file->size_bytes() == 0) {
      reading->position = PartitionPosition{0, reading->file->mtime_ns()};
      reading->position.object_etag = version->etag;
      if (previous != nullptr) reading->position.version = previous->version;
      reading->reader =
          std::make_unique<UnreadableFileReader>(path, "empty file (0 bytes): nothing to read");
      reading_ = std::move(reading);
      return NoBatch();
    }
    SKIPPR_ASSIGN_OR_RETURN(reading->detected, DetectFormat(*reading->file, format_));
    SKIPPR_ASSIGN_OR_RETURN(FilePlan plan, PlanFile(previous, *reading->file, reading->detected));
    plan.position.object_etag = version->etag;
    if (plan.is_touched) {
      SourceBatch batch;
      batch.partition = path;
      batch.position = std::move(plan.position);
      return NoBatch(std::move(batch));
    }
    reading->position = std::move(plan.position);
    SKIPPR_RETURN_IF_ERROR(OpenReader(*reading, plan));
    reading_ = std::move(reading);
    return NoBatch();
  }

  // Tells the catalog which file the pass opens after the current one: the next listed that is
  // not unchanged since it was read to its end.
  Status PrefetchNextToRead() {
    if (!catalog_->HasSlowOpen()) return Status::OK();
    for (size_t index = next_file_; index < files_.size(); ++index) {
      const std::string& name = files_[index];
      SKIPPR_ASSIGN_OR_RETURN(std::optional<internal::FileVersion> version,
                              catalog_->Describe(name));
      if (!version) continue;
      auto committed = committed_.find(name);
      if (committed != committed_.end() && IsUnchangedSinceClosed(committed->second, *version)) {
        continue;
      }
      catalog_->Prefetch(name, *version);
      break;
    }
    return Status::OK();
  }

  // Two names of one file (a symlink, a hard link, a directory listed twice by a glob): read once,
  // under the first name in sorted order.
  bool IsFirstName(const std::string& path, std::pair<uint64_t, uint64_t> identity) {
    auto [seen, is_new] = seen_files_.emplace(identity, path);
    if (is_new || seen->second == path) return true;
    spdlog::info("file {} is the same file as {}: read once, as {}", path, seen->second,
                 seen->second);
    return false;
  }

  // A plain JSON-lines file read on (not sampled, nothing to skip) is read a chunk per worker
  // thread: its lines are independent, and parsing them is most of a sync's work.
  bool ReadsInChunks(const DetectedFormat& detected, const FilePlan& plan) const {
    return detected.format == FileFormat::kJsonLines &&
           detected.compression == Compression::kNone && options_.max_records_per_partition == 0 &&
           plan.reader_start.skip_records == 0;
  }

  Status OpenReader(FileReading& reading, const FilePlan& plan) {
    const OpenedFile& file = *reading.file;
    const std::string& path = file.path();
    if (ReadsInChunks(reading.detected, plan)) {
      SKIPPR_CHECK(plan.stream_start.byte_offset == plan.stream_start.file_offset);
      reading.reader = internal::MakeChunkedLinesReader(
          file, plan.stream_start.file_offset, plan.reader_start,
          [path](std::unique_ptr<InputStream> stream, const ReaderStart& start) {
            return JsonLinesReader::Open(path, std::move(stream), start);
          },
          JsonLinesReader::kNoRecordsReason);
      return Status::OK();
    }
    std::unique_ptr<InputStream> stream;
    if (IsStreamed(reading.detected.format)) {
      SKIPPR_ASSIGN_OR_RETURN(stream, file.OpenStream(plan.stream_start, reading.detected.compression));
      reading.stream = stream.get();
      reading.stream_start_file_offset = plan.stream_start.file_offset;
    }
    switch (reading.detected.format) {
      case FileFormat::kJsonLines: {
        SKIPPR_ASSIGN_OR_RETURN(reading.reader,
                                JsonLinesReader::Open(path, std::move(stream), plan.reader_start));
        break;
      }
      case FileFormat::kCsv: {
        SKIPPR_ASSIGN_OR_RETURN(reading.reader,
                                CsvFileReader::Open(file, std::move(stream), plan.reader_start));
        break;
      }
      case FileFormat::kJsonArray: {
        SKIPPR_ASSIGN_OR_RETURN(auto whole, file.OpenStream());
        SKIPPR_ASSIGN_OR_RETURN(reading.reader,
                                JsonArrayReader::Open(path, std::move(whole), plan.reader_start));
        break;
      }
      case FileFormat::kParquet: {
        SKIPPR_ASSIGN_OR_RETURN(
            reading.reader,
            ParquetReader::Open(duckdb_, path, file.DescriptorPath(),
                                plan.reader_start.skip_records,
                                options_.max_records_per_partition, &declared_types_));
        break;
      }
      case FileFormat::kBinary:
        reading.reader = std::make_unique<UnreadableFileReader>(
            path,
            "binary content: not JSON, CSV or Parquet (set File.format if it is one of them)");
        break;
      case FileFormat::kWideText:
        reading.reader = std::make_unique<UnreadableFileReader>(
            path, "UTF-16 or UTF-32 text (a byte order mark, or NUL bytes between the "
                  "characters): save the file as UTF-8");
        break;
    }
    return Status::OK();
  }

  // The next batch of the file being read; nullopt when a Fill took nothing and the file goes on.
  Result<std::optional<SourceBatch>> ReadBatch() {
    FileReading& reading = *reading_;
    const FileFormat format = reading.detected.format;
    SourceBatch batch;
    batch.partition = reading.file->path();
    batch.context.infer_epoch_timestamps = format != FileFormat::kParquet;
    // Only JSON objects can name a key twice (CSV headers are made unique, Parquet has a schema).
    batch.context.keys_may_repeat =
        format == FileFormat::kJsonLines || format == FileFormat::kJsonArray;
    batch.context.records_are_flat = format == FileFormat::kCsv;
    if (format == FileFormat::kParquet) batch.context.declared_types = &declared_types_;
    BatchLimits limits{options_.max_records_per_batch, options_.max_bytes_per_batch,
                       options_.max_typed_records_per_batch, options_.max_typed_bytes_per_batch};
    if (options_.max_records_per_partition > 0) {
      const uint64_t left = options_.max_records_per_partition -
                            std::min(options_.max_records_per_partition, reading.records_this_pass);
      limits.max_records = std::min(limits.max_records, left);
      limits.max_typed_records = std::min(limits.max_typed_records, left);
    }
    batch.records.reserve(std::min<uint64_t>(limits.max_records, kRecordsReservedPerBatch));
    reading.reader->UseLayout(options_.layouts != nullptr ? options_.layouts->Current() : nullptr);
    SKIPPR_ASSIGN_OR_RETURN(bool is_done, reading.reader->Fill(batch, limits));
    const uint64_t taken = batch.record_count() + batch.deadletters.size();
    reading.records_this_pass += taken;
    reading.position.records_consumed += taken;
    SKIPPR_RETURN_IF_ERROR(RecordProgress(reading, batch.position.next_line, is_done));
    const bool hit_sample_limit =
        options_.max_records_per_partition > 0 &&
        (reading.records_this_pass >= options_.max_records_per_partition ||
         reading.reader->HasReadSample());
    batch.position = reading.position;
    if (is_done || hit_sample_limit) reading_.reset();
    if (taken == 0 && !is_done) return std::optional<SourceBatch>();
    return std::optional<SourceBatch>(std::move(batch));
  }

  // Moves the position to what the reader has consumed; a pass never claims bytes it did not read.
  Status RecordProgress(FileReading& reading, uint64_t next_line, bool is_done) {
    PartitionPosition& position = reading.position;
    std::optional<StreamProgress> progress = reading.reader->LastBatchProgress();
    if (!progress && reading.stream != nullptr) progress = StreamProgress::Of(*reading.stream);
    if (!progress) {  // read whole: the resume point is the whole file
      position.is_closed = is_done;
      return Status::OK();
    }
    const ConsumedBytes& consumed = progress->consumed;
    position.byte_offset = consumed.byte_offset;
    position.next_line = next_line;
    if (consumed.last_byte) position.ends_at_line_end = IsLineEnd(*consumed.last_byte);
    position.is_closed = is_done && progress->held_back_bytes == 0 && !progress->ended_inside_unit;
    // Without a stream of the source's own, the reader read the file in chunks: a plain file.
    const bool is_plain =
        reading.stream == nullptr || reading.stream->compression() == Compression::kNone;
    if (!is_plain && !position.is_closed) {
      position.skipped_bytes_hash = consumed.hash;  // from the resume point, where stream began
      return Status::OK();
    }
    // A plain file resumes right here; a compressed one read to its end resumes at its end (the
    // next gzip member or zstd frame an append adds).
    const uint64_t file_offset =
        is_plain ? consumed.byte_offset
                 : reading.stream_start_file_offset + reading.stream->file_bytes_read();
    SKIPPR_ASSIGN_OR_RETURN(FilePrefix prefix,
                            Fingerprint(*reading.file, file_offset, kFingerprintWindowBytes));
    position.resume = {prefix, consumed.byte_offset, next_line, position.records_consumed};
    position.skipped_bytes_hash = 0;
    return Status::OK();
  }

  std::unique_ptr<internal::FileCatalog> catalog_;
  std::optional<std::string> format_;
  SourcePositions committed_;
  ReadOptions options_;
  std::vector<std::string> files_;
  size_t next_file_ = 0;
  std::unique_ptr<FileReading> reading_;
  std::map<std::pair<uint64_t, uint64_t>, std::string> seen_files_;  // (device, inode) → first name
  DuckdbConnection duckdb_;
  std::map<std::string, LogicalType> declared_types_;
};

}  // namespace

namespace internal {
Result<std::unique_ptr<Source>> MakeFileSource(const config::ConnectorConfig& connector) {
  std::optional<std::string> format;
  if (connector.Has("format")) format = connector.GetString("format");
  return MakeCatalogSource(std::make_unique<LocalFiles>(connector.GetString("path")), format);
}

std::unique_ptr<Source> MakeCatalogSource(std::unique_ptr<FileCatalog> catalog,
                                          std::optional<std::string> format) {
  return std::make_unique<FileSource>(std::move(catalog), std::move(format));
}
}  // namespace internal

}  // namespace skippr::sources
