// The File source: a file, a directory (recursively) or a glob; JSON lines, JSON arrays, CSV and
// Parquet; gzip and zstd detected from the bytes. Each file is a partition with its own position.
#include <duckdb.h>
#include <fmt/format.h>
#include <glob.h>
#include <simdjson.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "schema/schema.hpp"
#include "sources/csv_reader.hpp"
#include "sources/input_stream.hpp"
#include "sources/json_values.hpp"
#include "sources/source_kinds.hpp"

namespace skippr::sources {

namespace {

namespace fs = std::filesystem;

constexpr uint64_t kMaxRecordBytes = 16 << 20;           // a larger record is a deadletter
constexpr uint64_t kMaxJsonArrayFileBytes = 1ull << 30;  // JSON arrays are parsed whole
constexpr uint64_t kRecordsReservedPerBatch = 4096;      // sync reads batches of at most this many

// Most cells are ASCII; checking that eight bytes at a time is cheaper than a UTF-8 validator call.
bool IsAscii(std::string_view text) {
  constexpr uint64_t kHighBits = 0x8080808080808080ull;
  size_t at = 0;
  for (; at + 8 <= text.size(); at += 8) {
    uint64_t word;
    std::memcpy(&word, text.data() + at, 8);
    if (word & kHighBits) return false;
  }
  for (; at < text.size(); ++at) {
    if (static_cast<unsigned char>(text[at]) >= 0x80) return false;
  }
  return true;
}

enum class FileFormat { kJsonLines, kJsonArray, kCsv, kParquet, kBinary };

struct FileInfo {
  std::string path;
  uint64_t size_bytes = 0;
  int64_t mtime_ns = 0;
};

Result<FileInfo> StatFile(const std::string& path) {
  struct stat info {};
  if (stat(path.c_str(), &info) != 0) {
    return Status::IOError(fmt::format("cannot stat '{}': {}", path, std::strerror(errno)));
  }
  return FileInfo{path, static_cast<uint64_t>(info.st_size),
                  static_cast<int64_t>(info.st_mtim.tv_sec) * 1'000'000'000 + info.st_mtim.tv_nsec};
}

bool IsHiddenName(const fs::path& path) {
  const std::string name = path.filename().string();
  return !name.empty() && (name[0] == '.' || name[0] == '_');
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
    return Status::NotFound(fmt::format(
        "File source path '{}' does not exist; set data_sources.<name>.File.path to a file, a "
        "directory or a glob",
        path));
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

// The format from the setting, else the extension, else the first decompressed bytes.
Result<FileFormat> DetectFormat(const std::string& path,
                                const std::optional<std::string>& setting) {
  SKIPPR_ASSIGN_OR_RETURN(auto input, InputStream::Open(path));
  std::string head(4096, '\0');
  SKIPPR_ASSIGN_OR_RETURN(size_t size, input->Read(head.data(), head.size()));
  head.resize(size);
  if (head.rfind("PAR1", 0) == 0) return FileFormat::kParquet;
  const size_t first = head.find_first_not_of(" \t\r\n\xEF\xBB\xBF");
  const bool starts_array = first != std::string::npos && head[first] == '[';
  std::string format = setting.value_or("");
  if (format.empty()) {
    const std::string name = StripCompressionSuffix(fs::path(path).filename().string());
    const std::string extension = fs::path(name).extension().string();
    if (extension == ".json" || extension == ".jsonl" || extension == ".ndjson") format = "json";
    if (extension == ".csv" || extension == ".tsv") format = "csv";
    if (extension == ".parquet") format = "parquet";
  }
  if (format == "parquet") return FileFormat::kParquet;
  if (format == "json") return starts_array ? FileFormat::kJsonArray : FileFormat::kJsonLines;
  if (format == "csv") return FileFormat::kCsv;
  if (head.find('\0') != std::string::npos) return FileFormat::kBinary;
  if (first != std::string::npos && (head[first] == '{' || head[first] == '[')) {
    return starts_array ? FileFormat::kJsonArray : FileFormat::kJsonLines;
  }
  return FileFormat::kCsv;
}

std::string Truncated(std::string_view text) { return std::string(text.substr(0, 1024)); }

// ----- readers of one file ------------------------------------------------------------------

class FileReader {
 public:
  virtual ~FileReader() = default;
  // Adds records to `batch` until a limit is hit or the file ends; true when the file ended.
  virtual Result<bool> Fill(SourceBatch& batch, uint64_t max_records, uint64_t max_bytes) = 0;
};

class JsonLinesReader final : public FileReader {
 public:
  // Plain files resume at the byte where the last run stopped; compressed ones are read again from
  // the start, skipping the records already consumed.
  static Result<std::unique_ptr<FileReader>> Open(const std::string& path,
                                                  const PartitionPosition& start) {
    std::unique_ptr<InputStream> input;
    if (start.byte_offset > 0) {
      Result<std::unique_ptr<InputStream>> at = InputStream::OpenAt(path, start.byte_offset);
      if (at.ok()) input = std::move(at).value();
    }
    const bool resumes_in_place = input != nullptr;
    if (!resumes_in_place) {
      SKIPPR_ASSIGN_OR_RETURN(input, InputStream::Open(path));
    }
    const uint64_t first_line = resumes_in_place ? start.next_line : 1;
    auto reader = std::unique_ptr<JsonLinesReader>(new JsonLinesReader(
        path, std::move(input), first_line, resumes_in_place ? start.byte_offset : 0));
    reader->records_ = resumes_in_place ? start.records_consumed : 0;
    reader->skip_records_ = resumes_in_place ? 0 : start.records_consumed;
    return std::unique_ptr<FileReader>(std::move(reader));
  }

  Result<bool> Fill(SourceBatch& batch, uint64_t max_records, uint64_t max_bytes) override {
    uint64_t bytes_in_batch = 0;
    while (batch.records.size() + batch.deadletters.size() < max_records &&
           bytes_in_batch < max_bytes) {
      SKIPPR_ASSIGN_OR_RETURN(std::optional<Line> line, lines_.Next());
      if (!line) {
        SetPosition(batch);
        batch.bytes_read += bytes_in_batch;
        return true;
      }
      next_byte_offset_ = line->end_offset;
      next_line_ = line->line_number + 1;
      if (line->text.find_first_not_of(" \t\r") == std::string_view::npos) continue;  // blank
      ++records_;
      if (skip_records_ > 0) {
        --skip_records_;
        continue;
      }
      bytes_in_batch += line->end_offset - line->byte_offset;
      // Built only for a deadletter: a path copy per record would cost more than the record.
      const auto origin = [&] { return schema::RecordOrigin{path_, line->line_number, records_}; };
      if (line->text.size() > kMaxRecordBytes) {
        batch.deadletters.push_back(
            {origin(),
             fmt::format(
                 "record of {} bytes exceeds the {} MiB limit; split it into smaller records",
                 line->text.size(), kMaxRecordBytes >> 20),
             Truncated(line->text)});
        continue;
      }
      auto parsed =
          parser_.parse(line->text.data(), line->text.size(), /*realloc_if_needed=*/false);
      if (parsed.error()) {
        batch.deadletters.push_back(
            {origin(), fmt::format("invalid JSON: {}", simdjson::error_message(parsed.error())),
             Truncated(line->text)});
        continue;
      }
      batch.records.push_back(
          {internal::ValueFromJson(parsed.value_unsafe()), line->line_number, records_});
    }
    SetPosition(batch);
    batch.bytes_read += bytes_in_batch;
    return false;
  }

 private:
  void SetPosition(SourceBatch& batch) const {
    batch.position.byte_offset = is_plain_ ? next_byte_offset_ : 0;
    batch.position.next_line = is_plain_ ? next_line_ : 1;
  }

  JsonLinesReader(std::string path, std::unique_ptr<InputStream> input, uint64_t first_line,
                  uint64_t first_byte_offset)
      : path_(std::move(path)),
        is_plain_(input->compression() == Compression::kNone),
        lines_(std::move(input), first_line),
        next_byte_offset_(first_byte_offset),
        next_line_(first_line) {}

  std::string path_;
  bool is_plain_;  // only plain files record a byte offset to resume at
  LineReader lines_;
  simdjson::dom::parser parser_{kMaxRecordBytes + simdjson::SIMDJSON_PADDING};
  uint64_t records_ = 0;
  uint64_t skip_records_ = 0;
  uint64_t next_byte_offset_ = 0;
  uint64_t next_line_ = 1;
};

class JsonArrayReader final : public FileReader {
 public:
  static Result<std::unique_ptr<FileReader>> Open(const std::string& path, uint64_t skip_records) {
    auto reader = std::unique_ptr<JsonArrayReader>(new JsonArrayReader(path));
    SKIPPR_ASSIGN_OR_RETURN(auto input, InputStream::Open(path));
    std::string text;
    std::string chunk(1 << 20, '\0');
    while (true) {
      SKIPPR_ASSIGN_OR_RETURN(size_t size, input->Read(chunk.data(), chunk.size()));
      if (size == 0) break;
      text.append(chunk.data(), size);
      if (text.size() > kMaxJsonArrayFileBytes) {
        reader->error_ = fmt::format("a JSON array file larger than {} GiB; write it as JSON lines",
                                     kMaxJsonArrayFileBytes >> 30);
        return std::unique_ptr<FileReader>(std::move(reader));
      }
    }
    reader->text_ = simdjson::padded_string(text);
    auto parsed = reader->parser_.parse(reader->text_);
    if (parsed.error()) {
      reader->error_ =
          fmt::format("invalid JSON array: {}", simdjson::error_message(parsed.error()));
    } else if (!parsed.value_unsafe().is_array()) {
      reader->error_ = "a JSON file starting with '[' must hold one array of records";
    } else {
      reader->array_ = parsed.value_unsafe().get_array().value_unsafe();
      reader->next_ = reader->array_.begin();
      for (; reader->skip_ < skip_records && reader->next_ != reader->array_.end();
           ++reader->skip_) {
        ++reader->next_;
      }
    }
    return std::unique_ptr<FileReader>(std::move(reader));
  }

  Result<bool> Fill(SourceBatch& batch, uint64_t max_records, uint64_t) override {
    if (error_) {
      batch.deadletters.push_back({{path_, 1, 1}, *error_, ""});
      return true;
    }
    while (batch.records.size() < max_records) {
      if (next_ == array_.end()) return true;
      ++skip_;
      batch.records.push_back({internal::ValueFromJson(*next_), /*line=*/0, /*row=*/skip_});
      ++next_;
    }
    return next_ == array_.end();
  }

 private:
  explicit JsonArrayReader(std::string path) : path_(std::move(path)) {}
  std::string path_;
  std::optional<std::string> error_;
  simdjson::padded_string text_;
  simdjson::dom::parser parser_;
  simdjson::dom::array array_;
  simdjson::dom::array::iterator next_;
  uint64_t skip_ = 0;
};

class CsvFileReader final : public FileReader {
 public:
  static Result<std::unique_ptr<FileReader>> Open(const std::string& path, uint64_t skip_records) {
    SKIPPR_ASSIGN_OR_RETURN(auto input, InputStream::Open(path));
    CsvOptions options;
    if (fs::path(StripCompressionSuffix(path)).extension() == ".tsv") options.delimiter = '\t';
    SKIPPR_ASSIGN_OR_RETURN(auto csv, CsvReader::Open(std::move(input), options));
    auto reader = std::unique_ptr<CsvFileReader>(new CsvFileReader(path, std::move(csv)));
    reader->skip_records_ = skip_records;
    return std::unique_ptr<FileReader>(std::move(reader));
  }

  Result<bool> Fill(SourceBatch& batch, uint64_t max_records, uint64_t max_bytes) override {
    uint64_t bytes_in_batch = 0;
    while (batch.records.size() + batch.deadletters.size() < max_records &&
           bytes_in_batch < max_bytes) {
      Result<std::optional<CsvRow>> next = csv_->Next();
      if (!next.ok()) {  // an unterminated quote: the rest of the file is one broken record
        batch.deadletters.push_back({{path_, 0, records_ + 1}, next.status().message(), ""});
        return true;
      }
      if (!*next) {
        batch.bytes_read += bytes_in_batch;
        return true;
      }
      const CsvRow& row = **next;
      ++records_;
      if (skip_records_ > 0) {
        --skip_records_;
        continue;
      }
      const auto origin = [&] { return schema::RecordOrigin{path_, row.line_number, records_}; };
      uint64_t row_bytes = 0;
      bool is_utf8 = true;
      for (std::string_view field : row.fields) {
        row_bytes += field.size() + 1;
        if (!IsAscii(field) && !simdjson::validate_utf8(field.data(), field.size()))
          is_utf8 = false;
      }
      bytes_in_batch += row_bytes;
      if (row.fields.size() != names_.size()) {
        batch.deadletters.push_back(
            {origin(),
             fmt::format("row has {} fields, the header {}; quote fields that contain the "
                         "delimiter '{}'",
                         row.fields.size(), names_.size(),
                         csv_->delimiter() == '\t' ? "\\t" : std::string(1, csv_->delimiter())),
             Truncated(JoinRow(row))});
        continue;
      }
      if (!is_utf8) {
        batch.deadletters.push_back({origin(), "invalid UTF-8; save the file as UTF-8", ""});
        continue;
      }
      if (row_bytes > kMaxRecordBytes) {
        batch.deadletters.push_back({origin(),
                                     fmt::format("record of {} bytes exceeds the {} MiB limit",
                                                 row_bytes, kMaxRecordBytes >> 20),
                                     ""});
        continue;
      }
      ValueObject object;
      object.reserve(names_.size());
      for (size_t i = 0; i < names_.size(); ++i) {
        object.emplace_back(names_[i], schema::ValueFromText(row.fields[i]));
      }
      batch.records.push_back({Value::Object(std::move(object)), row.line_number, records_});
    }
    batch.bytes_read += bytes_in_batch;
    return false;
  }

 private:
  CsvFileReader(std::string path, std::unique_ptr<CsvReader> csv)
      : path_(std::move(path)), csv_(std::move(csv)) {
    // Names must be unique and non-empty: "a, a, " → a, a_2, column_3.
    std::map<std::string, int> seen;
    const std::vector<std::string>& header = csv_->header();
    for (size_t i = 0; i < header.size(); ++i) {
      std::string name = header[i].empty() ? fmt::format("column_{}", i + 1) : header[i];
      if (int count = ++seen[name]; count > 1) name = fmt::format("{}_{}", name, count);
      names_.push_back(std::move(name));
    }
  }

  std::string JoinRow(const CsvRow& row) const {
    std::string text;
    for (size_t i = 0; i < row.fields.size(); ++i) {
      if (i) text.push_back(csv_->delimiter());
      text += row.fields[i];
    }
    return text;
  }

  std::string path_;
  std::unique_ptr<CsvReader> csv_;
  std::vector<std::string> names_;
  uint64_t records_ = 0;
  uint64_t skip_records_ = 0;
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

// DuckDB's name of a column type → ours, for top-level primitive columns; nested columns are
// inferred from their values.
std::optional<LogicalType> LogicalTypeFromDuckdb(const std::string& name) {
  if (name == "BOOLEAN") return LogicalType::Boolean();
  if (name == "TINYINT" || name == "SMALLINT" || name == "INTEGER" || name == "UTINYINT" ||
      name == "USMALLINT") {
    return LogicalType::Int();
  }
  if (name == "BIGINT" || name == "UINTEGER") return LogicalType::Long();
  if (name == "FLOAT") return LogicalType::Float();
  if (name == "DOUBLE") return LogicalType::Double();
  if (name == "DATE") return LogicalType::Date();
  if (name == "TIME") return LogicalType::Time();
  if (name.rfind("TIMESTAMP WITH TIME ZONE", 0) == 0) return LogicalType::TimestampTz();
  if (name.rfind("TIMESTAMP", 0) == 0) return LogicalType::Timestamp();
  if (name == "VARCHAR") return LogicalType::String();
  if (name == "UUID") return LogicalType::Uuid();
  if (name.rfind("DECIMAL(", 0) == 0) {
    if (auto type = ParseLogicalType("decimal" + name.substr(7)); type.ok()) return *type;
  }
  return std::nullopt;
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
    return Status::OK();
  }
  duckdb_connection get() const { return connection_; }

 private:
  duckdb_database database_ = nullptr;
  duckdb_connection connection_ = nullptr;
};

class ParquetReader final : public FileReader {
 public:
  static Result<std::unique_ptr<FileReader>> Open(DuckdbConnection& duckdb, const std::string& path,
                                                  uint64_t skip_records,
                                                  std::map<std::string, LogicalType>* declared) {
    SKIPPR_RETURN_IF_ERROR(duckdb.Open());
    auto reader = std::unique_ptr<ParquetReader>(new ParquetReader(path));
    const std::string source = "read_parquet(" + SqlQuote(path) + ")";
    duckdb_result described;
    if (duckdb_query(duckdb.get(), ("DESCRIBE SELECT * FROM " + source).c_str(), &described) !=
        DuckDBSuccess) {
      reader->error_ = fmt::format("unreadable Parquet: {}", duckdb_result_error(&described));
      duckdb_destroy_result(&described);
      return std::unique_ptr<FileReader>(std::move(reader));
    }
    declared->clear();
    for (idx_t row = 0; row < duckdb_row_count(&described); ++row) {
      char* name = duckdb_value_varchar(&described, 0, row);
      char* type = duckdb_value_varchar(&described, 1, row);
      if (auto logical = LogicalTypeFromDuckdb(type)) declared->emplace(name, *logical);
      duckdb_free(name);
      duckdb_free(type);
    }
    duckdb_destroy_result(&described);
    // Each row as JSON text with the declared types above: values convert back exactly
    // (timestamps and decimals as text), and nested values arrive as objects and lists.
    const std::string sql =
        fmt::format("SELECT to_json(t)::VARCHAR FROM {} t OFFSET {}", source, skip_records);
    duckdb_prepared_statement statement;
    if (duckdb_prepare(duckdb.get(), sql.c_str(), &statement) != DuckDBSuccess ||
        duckdb_execute_prepared_streaming(statement, &reader->result_) != DuckDBSuccess) {
      reader->error_ = fmt::format("unreadable Parquet: {}", duckdb_result_error(&reader->result_));
    }
    duckdb_destroy_prepare(&statement);
    reader->has_result_ = true;
    reader->records_ = skip_records;
    return std::unique_ptr<FileReader>(std::move(reader));
  }

  ~ParquetReader() override {
    if (has_result_) duckdb_destroy_result(&result_);
  }

  Result<bool> Fill(SourceBatch& batch, uint64_t max_records, uint64_t) override {
    if (error_) {
      batch.deadletters.push_back({{path_, 0, 1}, *error_, ""});
      return true;
    }
    while (batch.records.size() < max_records) {
      if (chunk_ == nullptr || chunk_row_ >= duckdb_data_chunk_get_size(chunk_)) {
        if (chunk_ != nullptr) duckdb_destroy_data_chunk(&chunk_);
        chunk_ = duckdb_fetch_chunk(result_);
        chunk_row_ = 0;
        if (chunk_ == nullptr) return true;
      }
      duckdb_vector vector = duckdb_data_chunk_get_vector(chunk_, 0);
      auto* strings = static_cast<duckdb_string_t*>(duckdb_vector_get_data(vector));
      duckdb_string_t& cell = strings[chunk_row_++];
      const char* data =
          duckdb_string_is_inlined(cell) ? cell.value.inlined.inlined : cell.value.pointer.ptr;
      const uint32_t length = cell.value.inlined.length;
      ++records_;
      auto parsed = parser_.parse(data, length, /*realloc_if_needed=*/true);
      if (parsed.error()) {
        batch.deadletters.push_back({{path_, 0, records_}, "row not convertible", ""});
        continue;
      }
      batch.records.push_back(
          {internal::ValueFromJson(parsed.value_unsafe()), /*line=*/0, /*row=*/records_});
    }
    return false;
  }

 private:
  explicit ParquetReader(std::string path) : path_(std::move(path)) {}
  std::string path_;
  std::optional<std::string> error_;
  duckdb_result result_{};
  bool has_result_ = false;
  duckdb_data_chunk chunk_ = nullptr;
  idx_t chunk_row_ = 0;
  uint64_t records_ = 0;
  simdjson::dom::parser parser_;
};

// A file that cannot be read as any format: one deadletter for the whole file.
class UnreadableFileReader final : public FileReader {
 public:
  UnreadableFileReader(std::string path, std::string reason)
      : path_(std::move(path)), reason_(std::move(reason)) {}
  Result<bool> Fill(SourceBatch& batch, uint64_t, uint64_t) override {
    batch.deadletters.push_back({{path_, 0, 0}, reason_, ""});
    return true;
  }

 private:
  std::string path_;
  std::string reason_;
};

// ----- the source ----------------------------------------------------------------------------

class FileSource final : public Source {
 public:
  FileSource(std::string path, std::optional<std::string> format)
      : path_(std::move(path)), format_(std::move(format)) {}

  Status Open(const SourcePositions& committed, const ReadOptions& options) override {
    committed_ = committed;
    options_ = options;
    SKIPPR_ASSIGN_OR_RETURN(files_, ListFiles(path_));
    next_file_ = 0;
    reader_.reset();
    return Status::OK();
  }

  Result<std::optional<SourceBatch>> Next() override {
    while (true) {
      if (!reader_) {
        SKIPPR_ASSIGN_OR_RETURN(bool has_file, OpenNextFile());
        if (!has_file) return std::optional<SourceBatch>();
        if (!reader_) continue;  // unchanged since it closed
      }
      SourceBatch batch;
      batch.partition = current_.path;
      batch.context.infer_epoch_timestamps = current_format_ != FileFormat::kParquet;
      // Only JSON objects can name a key twice (CSV headers are made unique, Parquet has a schema).
      batch.context.keys_may_repeat =
          current_format_ == FileFormat::kJsonLines || current_format_ == FileFormat::kJsonArray;
      batch.context.records_are_flat = current_format_ == FileFormat::kCsv;
      if (current_format_ == FileFormat::kParquet) batch.context.declared_types = &declared_types_;
      uint64_t limit = options_.max_records_per_batch;
      if (options_.max_records_per_partition > 0) {
        limit =
            std::min(limit, options_.max_records_per_partition -
                                std::min(options_.max_records_per_partition, records_this_file_));
      }
      batch.records.reserve(std::min<uint64_t>(limit, kRecordsReservedPerBatch));
      SKIPPR_ASSIGN_OR_RETURN(bool is_done,
                              reader_->Fill(batch, limit, options_.max_bytes_per_batch));
      const uint64_t taken = batch.records.size() + batch.deadletters.size();
      records_this_file_ += taken;
      position_.records_consumed += taken;
      position_.byte_offset = batch.position.byte_offset;
      position_.next_line = batch.position.next_line;
      const bool hit_sample_limit = options_.max_records_per_partition > 0 &&
                                    records_this_file_ >= options_.max_records_per_partition;
      position_.is_closed = is_done;
      batch.position = position_;
      if (is_done || hit_sample_limit) reader_.reset();
      if (taken == 0 && !is_done) continue;
      return std::optional<SourceBatch>(std::move(batch));
    }
  }

 private:
  // Opens the next file that has something to read; false when none is left.
  Result<bool> OpenNextFile() {
    if (next_file_ >= files_.size()) return false;
    const std::string& path = files_[next_file_++];
    SKIPPR_ASSIGN_OR_RETURN(current_, StatFile(path));
    records_this_file_ = 0;
    position_ = PartitionPosition{current_.size_bytes, current_.mtime_ns};
    auto it = committed_.find(path);
    if (it != committed_.end()) {
      const PartitionPosition& previous = it->second;
      const bool is_unchanged =
          previous.size_bytes == current_.size_bytes && previous.mtime_ns == current_.mtime_ns;
      if (previous.is_closed && is_unchanged) return true;  // nothing new: reader_ stays empty
      if (!previous.is_closed && current_.size_bytes >= previous.size_bytes) {
        position_ = previous;  // carry on where the last run stopped
        position_.size_bytes = current_.size_bytes;
        position_.mtime_ns = current_.mtime_ns;
      } else if (previous.is_closed) {
        spdlog::info("file {} changed after it was read ({} → {} bytes); reading it again", path,
                     previous.size_bytes, current_.size_bytes);
      }
    }
    if (current_.size_bytes == 0) {
      reader_ =
          std::make_unique<UnreadableFileReader>(path, "empty file (0 bytes): nothing to read");
      return true;
    }
    SKIPPR_ASSIGN_OR_RETURN(current_format_, DetectFormat(path, format_));
    switch (current_format_) {
      case FileFormat::kJsonLines: {
        SKIPPR_ASSIGN_OR_RETURN(reader_, JsonLinesReader::Open(path, position_));
        break;
      }
      case FileFormat::kJsonArray: {
        SKIPPR_ASSIGN_OR_RETURN(reader_, JsonArrayReader::Open(path, position_.records_consumed));
        break;
      }
      case FileFormat::kCsv: {
        SKIPPR_ASSIGN_OR_RETURN(reader_, CsvFileReader::Open(path, position_.records_consumed));
        break;
      }
      case FileFormat::kParquet: {
        SKIPPR_ASSIGN_OR_RETURN(
            reader_,
            ParquetReader::Open(duckdb_, path, position_.records_consumed, &declared_types_));
        break;
      }
      case FileFormat::kBinary:
        reader_ = std::make_unique<UnreadableFileReader>(
            path,
            "binary content: not JSON, CSV or Parquet (set File.format if it is one of them)");
        break;
    }
    return true;
  }

  std::string path_;
  std::optional<std::string> format_;
  SourcePositions committed_;
  ReadOptions options_;
  std::vector<std::string> files_;
  size_t next_file_ = 0;
  FileInfo current_;
  FileFormat current_format_ = FileFormat::kJsonLines;
  PartitionPosition position_;
  uint64_t records_this_file_ = 0;
  std::unique_ptr<FileReader> reader_;
  DuckdbConnection duckdb_;
  std::map<std::string, LogicalType> declared_types_;
};

}  // namespace

namespace internal {
Result<std::unique_ptr<Source>> MakeFileSource(const config::ConnectorConfig& connector) {
  std::optional<std::string> format;
  if (connector.Has("format")) format = connector.GetString("format");
  return std::unique_ptr<Source>(std::make_unique<FileSource>(connector.GetString("path"), format));
}
}  // namespace internal

}  // namespace skippr::sources
