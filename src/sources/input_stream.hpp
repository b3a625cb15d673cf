// Internal to sources/: the streaming byte and line layer under the File source. Reads plain,
// gzip and zstd files in fixed-size chunks (never the whole file) and hands out lines in place.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.hpp"

namespace skippr::sources {

enum class Compression { kNone, kGzip, kZstd };

// Bytes requested from disk per read(2); also the starting size of the reader windows.
inline constexpr size_t kFileReadBytes = size_t{1} << 20;

// Decompressed bytes of one file. Not thread-safe; one reader owns it.
class InputStream {
 public:
  // Detects compression by magic bytes (gzip 1f 8b; zstd 28 b5 2f fd), not by file name.
  static Result<std::unique_ptr<InputStream>> Open(const std::string& path);
  // Plain files only: starts reading at `byte_offset` (for resuming). Compressed files have no
  // seekable decompressed offsets, so any offset but 0 is NotSupported for them.
  static Result<std::unique_ptr<InputStream>> OpenAt(const std::string& path, uint64_t byte_offset);
  ~InputStream();
  InputStream(const InputStream&) = delete;
  InputStream& operator=(const InputStream&) = delete;

  // Reads up to `capacity` decompressed bytes; 0 = end of input. Damaged or truncated compressed
  // data is Corruption naming the path and the compressed byte offset.
  Result<size_t> Read(char* buffer, size_t capacity);

  Compression compression() const { return compression_; }
  // Compressed bytes consumed from disk by this stream (for plain files: bytes returned by Read).
  // Excludes the OpenAt start offset.
  uint64_t file_bytes_read() const { return file_bytes_consumed_; }
  // The OpenAt offset: decompressed offset of the first byte Read returns (0 after Open).
  uint64_t start_byte_offset() const { return start_byte_offset_; }
  const std::string& path() const { return path_; }

 private:
  struct Decoder;
  InputStream(std::string path, int fd, uint64_t start_byte_offset);
  Status DetectCompression();
  Status Refill();
  Result<size_t> ReadPlain(char* buffer, size_t capacity);
  Result<size_t> ReadGzip(char* buffer, size_t capacity);
  Result<size_t> ReadZstd(char* buffer, size_t capacity);
  Status Truncated(std::string_view format_name) const;

  std::string path_;
  int fd_ = -1;
  uint64_t start_byte_offset_ = 0;
  Compression compression_ = Compression::kNone;
  // Compressed bytes read from disk but not yet consumed: input_buffer_[input_begin_, input_end_).
  std::unique_ptr<char[]> input_buffer_;
  size_t input_begin_ = 0;
  size_t input_end_ = 0;
  bool is_file_exhausted_ = false;
  uint64_t disk_byte_offset_ = 0;  // where the next read(2) starts, for error messages
  uint64_t file_bytes_consumed_ = 0;
  // A gzip member or zstd frame has started and not ended; hitting end of file now is truncation.
  bool is_inside_compressed_unit_ = false;
  std::unique_ptr<Decoder> decoder_;
};

// Readable bytes guaranteed after every Line::text (simdjson's SIMDJSON_PADDING), so a JSON line
// can be parsed in place without copying. They are initialised but their content is unspecified.
inline constexpr size_t kLinePaddingBytes = 64;

// A growable window over an InputStream's decompressed bytes, which LineReader and CsvReader parse
// in place. The window keeps [begin, end) and kLinePaddingBytes of readable bytes after end.
class InputWindow {
 public:
  explicit InputWindow(std::unique_ptr<InputStream> input);

  const char* begin() const { return data_.get() + begin_index_; }
  const char* end() const { return data_.get() + end_index_; }
  size_t size_bytes() const { return end_index_ - begin_index_; }
  bool is_input_exhausted() const { return is_input_exhausted_; }
  // Decompressed stream offset (including the OpenAt offset) of `position` inside the window.
  uint64_t ByteOffsetOf(const char* position) const {
    return window_byte_offset_ + static_cast<uint64_t>(position - data_.get());
  }
  // Drops the bytes before `position` (which must lie in [begin, end]).
  void ConsumeUntil(const char* position);
  // Reads more input after end, first moving [begin, end) to the front and doubling the window
  // when the kept bytes fill more than half of it, so one long line costs O(length) in total.
  // With `fill_window` it reads until the window is full or the input ends; otherwise one Read.
  // Returns the bytes added; 0 means the input is exhausted. Invalidates pointers into the window.
  Result<size_t> ReadMore(bool fill_window);
  // At the very start of the stream (offset 0), skips a UTF-8 byte order mark.
  Status SkipByteOrderMark();
  const InputStream& input() const { return *input_; }

 private:
  std::unique_ptr<InputStream> input_;
  std::unique_ptr<char[]> data_;  // capacity_bytes_ + kLinePaddingBytes
  size_t capacity_bytes_ = 0;
  size_t begin_index_ = 0;
  size_t end_index_ = 0;
  uint64_t window_byte_offset_ = 0;  // stream offset of data_[0]
  bool is_input_exhausted_ = false;
};

struct Line {
  std::string_view text;  // without the trailing \n or \r\n; valid until the next Next() call;
                          // at least kLinePaddingBytes readable bytes follow text.end()
  uint64_t line_number;   // 1-based
  uint64_t byte_offset;   // of the line's first byte in the decompressed stream (+ the OpenAt
                          // offset)
  uint64_t end_offset;    // just past its \n (or \r\n, or the end of the stream): where the
                          // next line starts
};

// Splits the stream into lines with memchr. The last line needs no trailing newline; an empty
// input yields no lines; a line may be any size (the window grows to hold it).
class LineReader {
 public:
  explicit LineReader(std::unique_ptr<InputStream> input, uint64_t first_line_number = 1);
  Result<std::optional<Line>> Next();  // nullopt at end
  const InputStream& input() const { return window_.input(); }

 private:
  InputWindow window_;
  uint64_t next_line_number_;
  size_t scanned_bytes_ = 0;  // bytes after window_.begin() known to hold no '\n'
  bool has_started_ = false;
};

}  // namespace skippr::sources
