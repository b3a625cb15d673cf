// Internal to sources/: the streaming byte and line layer under the File source. Reads plain,
// gzip and zstd files in fixed-size chunks (never the whole file) and hands out lines in place.
//
// A pass of the File source opens each file once (OpenedFile): every stream, fingerprint and
// reader of that pass reads the same file through one descriptor, no further than the size the
// file had when it was opened, so a file that grows during the pass is read up to that size and the
// next pass picks up the rest.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.hpp"

struct XXH3_state_s;

namespace skippr::sources {

enum class Compression { kNone, kGzip, kZstd };

// Bytes requested from disk per read; also the starting size of the reader windows.
inline constexpr size_t kFileReadBytes = size_t{1} << 20;

// Where a stream starts: a byte on disk and the decompressed stream offset it stands for. Plain
// files start anywhere (both offsets equal); compressed ones at 0 or at a gzip member / zstd frame
// boundary, with the decompressed bytes before it counted in `byte_offset`.
struct StreamStart {
  uint64_t file_offset = 0;
  uint64_t byte_offset = 0;
};

// What the reader above a stream has consumed (InputWindow reports every consumed byte).
struct ConsumedBytes {
  uint64_t byte_offset = 0;  // stream offset just after the last consumed byte
  // XXH3-64 of the bytes consumed since the stream's start (compressed streams only; else 0).
  uint64_t hash = 0;
  std::optional<char> last_byte;  // the last byte consumed, if any was
};

class InputStream;
struct FileHandle;

// One file opened for one pass of the File source.
class OpenedFile {
 public:
  // NotFound when the file is gone; IOError when it cannot be read or is a directory.
  static Result<std::unique_ptr<OpenedFile>> Open(const std::string& path);
  // A file open already (a download spooled to an unlinked temporary file), owned from now on and
  // read as `path` (its s3:// URI) in every message; `mtime_ns` stands for the file's own.
  static Result<std::unique_ptr<OpenedFile>> Adopt(int fd, const std::string& path,
                                                   std::optional<int64_t> mtime_ns);
  ~OpenedFile();
  OpenedFile(const OpenedFile&) = delete;
  OpenedFile& operator=(const OpenedFile&) = delete;

  const std::string& path() const;
  uint64_t size_bytes() const { return size_bytes_; }  // when opened: no stream reads further
  int64_t mtime_ns() const { return mtime_ns_; }
  uint64_t device() const { return device_; }
  uint64_t inode() const { return inode_; }
  // /proc/self/fd/<n>: the opened file, for a reader that opens by name (DuckDB), so that it reads
  // this file even if the path was renamed or replaced since.
  std::string DescriptorPath() const;

  // The file's bytes from `start` to size_bytes(), decompressed. A compressed file started past 0
  // must hold `expected` compression at `start`: otherwise Corruption (the bytes appended after its
  // last member are not another member).
  Result<std::unique_ptr<InputStream>> OpenStream(
      StreamStart start = {}, std::optional<Compression> expected = std::nullopt) const;
  // The plain bytes [begin, end) of the file as a stream of their own, read as a file that ends at
  // `end` (never as one cut by its size limit), at stream offsets equal to the file's.
  std::unique_ptr<InputStream> OpenPlainRange(uint64_t begin, uint64_t end) const;
  // The offset of the first `byte` at or after `from`, or size_bytes() when there is none.
  Result<uint64_t> FindByte(char byte, uint64_t from) const;
  // XXH3-64 of the file's bytes [offset, offset + size); nullopt when the file (cut short since it
  // was opened) no longer has them all.
  Result<std::optional<uint64_t>> HashRange(uint64_t offset, uint64_t size) const;

 private:
  OpenedFile(std::shared_ptr<const FileHandle> handle, uint64_t size_bytes, int64_t mtime_ns,
             uint64_t device, uint64_t inode);
  std::shared_ptr<const FileHandle> handle_;
  uint64_t size_bytes_;
  int64_t mtime_ns_;
  uint64_t device_;
  uint64_t inode_;
};

// Decompressed bytes of one file. Not thread-safe; one reader owns it.
class InputStream {
 public:
  // Detects compression by magic bytes (gzip 1f 8b; zstd 28 b5 2f fd), not by file name. Reads up
  // to the size the file has now.
  static Result<std::unique_ptr<InputStream>> Open(const std::string& path);
  // Plain files only: starts reading at `byte_offset` (for resuming). Compressed files have no
  // seekable decompressed offsets, so any offset but 0 is NotSupported for them.
  static Result<std::unique_ptr<InputStream>> OpenAt(const std::string& path, uint64_t byte_offset);
  ~InputStream();
  InputStream(const InputStream&) = delete;
  InputStream& operator=(const InputStream&) = delete;

  // Reads up to `capacity` decompressed bytes; 0 = end of input. Damaged or truncated compressed
  // data is Corruption naming the path and the compressed byte offset — except a gzip member or
  // zstd frame cut by the stream's size limit while the file has grown past it: still being
  // written, that is the end of this stream's input (ended_inside_unit()).
  Result<size_t> Read(char* buffer, size_t capacity);
  // Reads the next `size` bytes and returns their XXH3-64 (what Consumed().hash would be after a
  // reader consumed them); nullopt when the stream ends first.
  Result<std::optional<uint64_t>> HashNextBytes(uint64_t size);

  Compression compression() const { return compression_; }
  // Compressed bytes consumed from disk by this stream (for plain files: bytes returned by Read).
  // Excludes the start offset.
  uint64_t file_bytes_read() const { return file_bytes_consumed_; }
  // Decompressed offset of the first byte Read returns (0 for a stream from the start).
  uint64_t start_byte_offset() const { return start_byte_offset_; }
  const std::string& path() const;

  // After the end: whether the stream stopped at its size limit while the file had grown past it
  // (its last record may be incomplete).
  bool is_cut_by_limit() const { return is_cut_by_limit_; }
  // After the end: whether it stopped inside a gzip member or zstd frame (cut by the limit).
  bool ended_inside_unit() const { return ended_inside_unit_; }
  // Bytes at the end the reader above held back because the cut may have split them (InputWindow).
  uint64_t held_back_bytes() const { return held_back_bytes_; }
  ConsumedBytes Consumed();

 private:
  friend class OpenedFile;
  friend class InputWindow;
  struct Decoder;
  InputStream(std::shared_ptr<const FileHandle> handle, StreamStart start, uint64_t limit_bytes);
  Status DetectCompression();
  Status Refill();
  Result<size_t> ReadPlain(char* buffer, size_t capacity);
  Result<size_t> ReadGzip(char* buffer, size_t capacity);
  Result<size_t> ReadZstd(char* buffer, size_t capacity);
  // The end of the compressed input inside a unit: truncation, or the cut of a growing file.
  Result<size_t> EndInsideUnit(std::string_view format_name);
  // Reads from disk at disk_byte_offset_, never past the limit; 0 at the limit or end of file.
  Result<size_t> ReadDisk(char* buffer, size_t capacity);
  Status Truncated(std::string_view format_name) const;
  // The file offset decompression has reached, for messages.
  uint64_t CompressedOffset() const { return start_file_offset_ + file_bytes_consumed_; }

  // InputWindow's reports: [begin, end) was consumed, contiguous with what was consumed before and
  // valid until FlushConsumed(); `bytes` at the end were held back.
  void NoteConsumed(const char* begin, const char* end);
  void FlushConsumed();
  void NoteHeldBack(uint64_t bytes) { held_back_bytes_ += bytes; }

  std::shared_ptr<const FileHandle> handle_;
  uint64_t start_byte_offset_ = 0;
  uint64_t start_file_offset_ = 0;
  uint64_t limit_bytes_ = 0;  // no byte at or past this file offset is read
  bool is_range_ = false;     // the limit is where the stream's bytes end, not a cut
  Compression compression_ = Compression::kNone;
  // Compressed bytes read from disk but not yet consumed: input_buffer_[input_begin_, input_end_).
  std::unique_ptr<char[]> input_buffer_;
  size_t input_begin_ = 0;
  size_t input_end_ = 0;
  bool is_file_exhausted_ = false;
  bool is_cut_by_limit_ = false;
  bool ended_inside_unit_ = false;
  uint64_t disk_byte_offset_ = 0;  // where the next read starts
  uint64_t file_bytes_consumed_ = 0;
  // A gzip member or zstd frame has started and not ended; hitting end of file now is truncation.
  bool is_inside_compressed_unit_ = false;
  std::unique_ptr<Decoder> decoder_;

  // What the reader consumed; hashed lazily, in the large pieces the window hands over.
  uint64_t consumed_byte_offset_ = 0;
  std::optional<char> last_consumed_byte_;
  const char* pending_begin_ = nullptr;
  const char* pending_end_ = nullptr;
  XXH3_state_s* consumed_hash_ = nullptr;  // compressed streams only
  uint64_t held_back_bytes_ = 0;
};

// Readable bytes guaranteed after every Line::text (simdjson's SIMDJSON_PADDING), so a JSON line
// can be parsed in place without copying. They are initialised but their content is unspecified.
inline constexpr size_t kLinePaddingBytes = 64;

// A growable window over an InputStream's decompressed bytes, which LineReader and CsvReader parse
// in place. The window keeps [begin, end) and kLinePaddingBytes of readable bytes after end. When
// the stream was cut by its size limit (the file grew while it was read), the window ends after
// the last '\n' of the input: the bytes after it may be half a record, and the next pass reads them
// whole.
class InputWindow {
 public:
  explicit InputWindow(std::unique_ptr<InputStream> input);

  const char* begin() const { return data_.get() + begin_index_; }
  const char* end() const { return data_.get() + end_index_; }
  size_t size_bytes() const { return end_index_ - begin_index_; }
  bool is_input_exhausted() const { return is_input_exhausted_; }
  // The input ended at the stream's size limit while the file went on (see above).
  bool is_cut_by_limit() const { return is_input_exhausted_ && input_->is_cut_by_limit(); }
  // Decompressed stream offset (including the start offset) of `position` inside the window.
  uint64_t ByteOffsetOf(const char* position) const {
    return window_byte_offset_ + static_cast<uint64_t>(position - data_.get());
  }
  // Drops the bytes before `position` (which must lie in [begin, end]): they are consumed.
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
  // At a cut, drops the bytes after the last '\n' from the window (held back, not consumed).
  void HoldBackCutTail();

  std::unique_ptr<InputStream> input_;
  std::unique_ptr<char[]> data_;  // capacity_bytes_ + kLinePaddingBytes
  size_t capacity_bytes_ = 0;
  size_t begin_index_ = 0;
  size_t end_index_ = 0;
  uint64_t window_byte_offset_ = 0;  // stream offset of data_[0]
  bool is_input_exhausted_ = false;
};

// Finds line ends ('\n' or '\r': LF, CR and CRLF all end a line) in an InputWindow. It remembers
// how far it searched for each byte, as stream offsets that survive the window's moves, so each
// byte is searched about once however the line ends mix (a CR-only file costs no rescans).
class LineEndFinder {
 public:
  // The first '\n' or '\r' at or after `from` (inside the window), or nullptr.
  const char* Find(const InputWindow& window, const char* from);

 private:
  struct Search {
    uint64_t searched_from = 0;
    uint64_t searched_until = 0;  // without a find: none in [searched_from, searched_until)
    bool has_found = false;
    uint64_t found_at = 0;  // with a find: the first one at or after searched_from
  };
  static const char* FindByte(Search& search, char byte, const InputWindow& window,
                              const char* from);
  Search line_feed_;
  Search carriage_return_;
};

// Where a line's line end ends: after "\r\n" or the single '\r' or '\n' at `line_end`; nullptr
// when a '\r' is the window's last byte and more input may bring its '\n'.
const char* PastLineEnd(const InputWindow& window, const char* line_end);

// Bytes of an over-long line kept to show what it was.
inline constexpr size_t kLongLinePrefixBytes = 1024;

struct Line {
  std::string_view text;  // without its line end; valid until the next Next() call; at least
                          // kLinePaddingBytes readable bytes follow text.end(). For a line over
                          // the reader's limit: only its first kLongLinePrefixBytes.
  uint64_t line_number;   // 1-based
  uint64_t byte_offset;   // of the line's first byte in the decompressed stream (+ the start
                          // offset)
  uint64_t next_byte_offset = 0;  // just after its line end
  uint64_t size_bytes = 0;        // of the whole line, without its line end
  bool is_over_limit = false;     // longer than the reader's max_line_bytes: not buffered whole
};

// Splits the stream into lines at LF, CR or CRLF. The last line needs no line end (unless the
// stream was cut by its limit: see InputWindow); an empty input yields no lines. A line up to
// `max_line_bytes` is handed out whole (the window grows to hold it); a longer one is read through
// without being held, and handed out as its first bytes.
class LineReader {
 public:
  explicit LineReader(std::unique_ptr<InputStream> input, uint64_t first_line_number = 1,
                      uint64_t max_line_bytes = UINT64_MAX);
  Result<std::optional<Line>> Next();  // nullopt at end
  // The line Next() returns next, without consuming it: until Next() is called, a batch that
  // ends now leaves the line to the next one. A line over the limit is peeked without its text
  // (is_over_limit); Next() reads through it.
  Result<std::optional<Line>> Peek();
  // After Peek(): the lines held in the window from the peeked one on, up to the last '\n' within
  // `max_bytes` (empty without one), which follows them with kLinePaddingBytes - 1 more readable
  // bytes: a parser that reads a byte past them (simdjson's stage 1 does) reads a line end, as it
  // does past a line. They stay in place while Next() hands them out: each line's end is in the
  // window, so no read moves it.
  std::string_view BufferedLines(size_t max_bytes) const;
  const InputStream& input() const { return window_.input(); }

 private:
  Result<Line> SkipLongLine();
  Line OverLimitLine() const;  // the next line, known to be over the limit, not read yet

  InputWindow window_;
  LineEndFinder line_ends_;
  uint64_t next_line_number_;
  uint64_t max_line_bytes_;
  bool has_started_ = false;
  std::string long_line_prefix_;  // padded
  std::optional<Line> peeked_;     // what Peek() found, until Next() consumes it
  const char* peeked_end_ = nullptr;  // where the peeked line's line end ends
};

}  // namespace skippr::sources
