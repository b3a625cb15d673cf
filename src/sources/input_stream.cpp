#include "sources/input_stream.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include "core/check.hpp"

namespace skippr::sources {
namespace {

constexpr unsigned char kGzipMagic[] = {0x1f, 0x8b};
constexpr unsigned char kZstdMagic[] = {0x28, 0xb5, 0x2f, 0xfd};
constexpr unsigned char kUtf8ByteOrderMark[] = {0xef, 0xbb, 0xbf};
// 15: the largest deflate window; +32: accept gzip (and zlib) headers, detected automatically.
constexpr int kZlibWindowBits = 15 + 32;

bool StartsWith(const char* data, size_t size_bytes, const unsigned char* magic,
                size_t magic_bytes) {
  return size_bytes >= magic_bytes && std::memcmp(data, magic, magic_bytes) == 0;
}

Status OpenError(const std::string& path, int error_number) {
  std::string message =
      fmt::format("cannot open {}: {}; check that the path is right and skipprd may read it", path,
                  std::strerror(error_number));
  if (error_number == ENOENT) return Status::NotFound(std::move(message));
  return Status::IOError(std::move(message));
}

std::string_view CompressionName(Compression compression) {
  switch (compression) {
    case Compression::kNone:
      return "plain";
    case Compression::kGzip:
      return "gzip";
    case Compression::kZstd:
      return "zstd";
  }
  return "unknown";
}

}  // namespace

// The decompressor state, kept here so zlib.h and zstd.h stay out of the header.
struct InputStream::Decoder {
  z_stream zlib{};
  bool has_zlib = false;
  ZSTD_DStream* zstd = nullptr;

  ~Decoder() {
    if (has_zlib) inflateEnd(&zlib);
    if (zstd != nullptr) ZSTD_freeDStream(zstd);
  }
};

InputStream::InputStream(std::string path, int fd, uint64_t start_byte_offset)
    : path_(std::move(path)),
      fd_(fd),
      start_byte_offset_(start_byte_offset),
      input_buffer_(std::make_unique_for_overwrite<char[]>(kFileReadBytes)) {}

InputStream::~InputStream() {
  if (fd_ >= 0) ::close(fd_);
}

Result<std::unique_ptr<InputStream>> InputStream::Open(const std::string& path) {
  return OpenAt(path, 0);
}

Result<std::unique_ptr<InputStream>> InputStream::OpenAt(const std::string& path,
                                                         uint64_t byte_offset) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return OpenError(path, errno);
  // Owns fd from here on, so every early return closes it.
  std::unique_ptr<InputStream> stream(new InputStream(path, fd, byte_offset));

  struct stat file_status {};
  if (::fstat(fd, &file_status) != 0) return OpenError(path, errno);
  if (S_ISDIR(file_status.st_mode)) {
    return Status::IOError(fmt::format(
        "cannot read {}: it is a directory; point the source at files (or a glob of files)", path));
  }
  // Only a hint: the kernel reads ahead more aggressively for a sequential scan.
  (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);

  SKIPPR_RETURN_IF_ERROR(stream->DetectCompression());
  if (byte_offset == 0) return stream;

  if (stream->compression_ != Compression::kNone) {
    return Status::NotSupported(fmt::format(
        "cannot resume {} at byte offset {}: it is {}-compressed and compressed files can only be "
        "read from the start; restart it from offset 0",
        path, byte_offset, CompressionName(stream->compression_)));
  }
  if (S_ISREG(file_status.st_mode) && byte_offset > static_cast<uint64_t>(file_status.st_size)) {
    return Status::InvalidArgument(fmt::format(
        "cannot resume {} at byte offset {}: the file has only {} bytes, so it was truncated or "
        "replaced since that offset was recorded; re-read it from the start",
        path, byte_offset, file_status.st_size));
  }
  if (::lseek(fd, static_cast<off_t>(byte_offset), SEEK_SET) < 0) {
    return Status::IOError(fmt::format("cannot seek {} to byte offset {}: {}", path, byte_offset,
                                       std::strerror(errno)));
  }
  // The bytes read for detection came from offset 0; drop them and read on from byte_offset.
  stream->input_begin_ = 0;
  stream->input_end_ = 0;
  stream->is_file_exhausted_ = false;
  stream->disk_byte_offset_ = byte_offset;
  return stream;
}

Status InputStream::DetectCompression() {
  // read(2) may return short; the longest magic is 4 bytes.
  while (input_end_ - input_begin_ < sizeof(kZstdMagic) && !is_file_exhausted_) {
    SKIPPR_RETURN_IF_ERROR(Refill());
  }
  const char* data = input_buffer_.get() + input_begin_;
  size_t size_bytes = input_end_ - input_begin_;
  if (StartsWith(data, size_bytes, kGzipMagic, sizeof(kGzipMagic))) {
    compression_ = Compression::kGzip;
    decoder_ = std::make_unique<Decoder>();
    int rc = inflateInit2(&decoder_->zlib, kZlibWindowBits);
    if (rc != Z_OK) {
      return Status::Internal(
          fmt::format("cannot start gzip decompression for {}: zlib error {}", path_, rc));
    }
    decoder_->has_zlib = true;
  } else if (StartsWith(data, size_bytes, kZstdMagic, sizeof(kZstdMagic))) {
    compression_ = Compression::kZstd;
    decoder_ = std::make_unique<Decoder>();
    decoder_->zstd = ZSTD_createDStream();
    if (decoder_->zstd == nullptr) {
      return Status::Internal(
          fmt::format("cannot start zstd decompression for {}: out of memory", path_));
    }
  }
  return Status::OK();
}

// Appends one read(2) of compressed (or plain) bytes to input_buffer_.
Status InputStream::Refill() {
  if (input_begin_ == input_end_) input_begin_ = input_end_ = 0;
  size_t free_bytes = kFileReadBytes - input_end_;
  SKIPPR_CHECK(free_bytes > 0);
  while (true) {
    ssize_t read_bytes = ::read(fd_, input_buffer_.get() + input_end_, free_bytes);
    if (read_bytes < 0 && errno == EINTR) continue;
    if (read_bytes < 0) {
      return Status::IOError(fmt::format("reading {} failed at byte offset {}: {}", path_,
                                         disk_byte_offset_, std::strerror(errno)));
    }
    if (read_bytes == 0) is_file_exhausted_ = true;
    input_end_ += static_cast<size_t>(read_bytes);
    disk_byte_offset_ += static_cast<uint64_t>(read_bytes);
    return Status::OK();
  }
}

Result<size_t> InputStream::Read(char* buffer, size_t capacity) {
  if (capacity == 0) return size_t{0};
  switch (compression_) {
    case Compression::kNone:
      return ReadPlain(buffer, capacity);
    case Compression::kGzip:
      return ReadGzip(buffer, capacity);
    case Compression::kZstd:
      return ReadZstd(buffer, capacity);
  }
  return Status::Internal("unknown compression");
}

Result<size_t> InputStream::ReadPlain(char* buffer, size_t capacity) {
  size_t buffered_bytes = input_end_ - input_begin_;
  if (buffered_bytes > 0) {  // left over from detecting the compression
    size_t copied_bytes = std::min(buffered_bytes, capacity);
    std::memcpy(buffer, input_buffer_.get() + input_begin_, copied_bytes);
    input_begin_ += copied_bytes;
    file_bytes_consumed_ += copied_bytes;
    return copied_bytes;
  }
  if (is_file_exhausted_) return size_t{0};
  // Straight into the caller's buffer: no copy for plain files.
  while (true) {
    ssize_t read_bytes = ::read(fd_, buffer, std::min<size_t>(capacity, SSIZE_MAX));
    if (read_bytes < 0 && errno == EINTR) continue;
    if (read_bytes < 0) {
      return Status::IOError(fmt::format("reading {} failed at byte offset {}: {}", path_,
                                         disk_byte_offset_, std::strerror(errno)));
    }
    if (read_bytes == 0) is_file_exhausted_ = true;
    disk_byte_offset_ += static_cast<uint64_t>(read_bytes);
    file_bytes_consumed_ += static_cast<uint64_t>(read_bytes);
    return static_cast<size_t>(read_bytes);
  }
}

Status InputStream::Truncated(std::string_view format_name) const {
  return Status::Corruption(fmt::format(
      "{} is truncated: the file ends inside a {} at compressed byte offset {}; the file is "
      "damaged or was still being written: re-copy it (or wait for the writer) and read it again",
      path_, format_name, file_bytes_consumed_));
}

Result<size_t> InputStream::ReadGzip(char* buffer, size_t capacity) {
  z_stream& zlib = decoder_->zlib;
  size_t output_capacity = std::min<size_t>(capacity, UINT_MAX);
  while (true) {
    if (input_begin_ == input_end_ && !is_file_exhausted_) SKIPPR_RETURN_IF_ERROR(Refill());
    size_t available_bytes = input_end_ - input_begin_;
    if (available_bytes == 0 && !is_inside_compressed_unit_) return size_t{0};
    if (available_bytes > 0) is_inside_compressed_unit_ = true;

    zlib.next_in = reinterpret_cast<Bytef*>(input_buffer_.get() + input_begin_);
    zlib.avail_in = static_cast<uInt>(available_bytes);
    zlib.next_out = reinterpret_cast<Bytef*>(buffer);
    zlib.avail_out = static_cast<uInt>(output_capacity);
    int rc = inflate(&zlib, Z_NO_FLUSH);
    size_t consumed_bytes = available_bytes - zlib.avail_in;
    size_t produced_bytes = output_capacity - zlib.avail_out;
    input_begin_ += consumed_bytes;
    file_bytes_consumed_ += consumed_bytes;

    if (rc == Z_STREAM_END) {
      // One member done; a multi-member file (cat a.gz b.gz) continues with the next header.
      inflateReset(&zlib);
      is_inside_compressed_unit_ = false;
    } else if (rc == Z_DATA_ERROR || rc == Z_NEED_DICT || rc == Z_STREAM_ERROR) {
      return Status::Corruption(fmt::format(
          "{} is damaged: its gzip data is invalid near compressed byte offset {} ({}); re-copy "
          "or re-create the file",
          path_, file_bytes_consumed_, zlib.msg != nullptr ? zlib.msg : "no detail"));
    } else if (rc == Z_MEM_ERROR) {
      return Status::Internal(fmt::format("out of memory while decompressing {}", path_));
    }
    if (produced_bytes > 0) return produced_bytes;
    if (rc == Z_STREAM_END || consumed_bytes > 0) continue;
    // No progress: with all input consumed this is the end of the file inside a member.
    if (input_begin_ == input_end_ && is_file_exhausted_) return Truncated("gzip member");
    return Status::Internal(
        fmt::format("gzip decompression of {} made no progress at compressed byte offset {}", path_,
                    file_bytes_consumed_));
  }
}

Result<size_t> InputStream::ReadZstd(char* buffer, size_t capacity) {
  while (true) {
    if (input_begin_ == input_end_ && !is_file_exhausted_) SKIPPR_RETURN_IF_ERROR(Refill());
    size_t available_bytes = input_end_ - input_begin_;
    if (available_bytes == 0 && !is_inside_compressed_unit_) return size_t{0};

    ZSTD_inBuffer input{input_buffer_.get() + input_begin_, available_bytes, 0};
    ZSTD_outBuffer output{buffer, capacity, 0};
    // Concatenated frames are decoded one after another by the same stream.
    size_t rc = ZSTD_decompressStream(decoder_->zstd, &output, &input);
    input_begin_ += input.pos;
    file_bytes_consumed_ += input.pos;
    if (ZSTD_isError(rc)) {
      return Status::Corruption(fmt::format(
          "{} is damaged: its zstd data is invalid near compressed byte offset {} ({}); re-copy "
          "or re-create the file",
          path_, file_bytes_consumed_, ZSTD_getErrorName(rc)));
    }
    // 0: the frame is complete and flushed; otherwise more input (or flushing) is needed.
    is_inside_compressed_unit_ = rc != 0;
    if (output.pos > 0) return output.pos;
    if (input.pos > 0 || !is_inside_compressed_unit_) continue;
    if (input_begin_ == input_end_ && is_file_exhausted_) return Truncated("zstd frame");
    return Status::Internal(
        fmt::format("zstd decompression of {} made no progress at compressed byte offset {}", path_,
                    file_bytes_consumed_));
  }
}

// ----- InputWindow ------------------------------------------------------------------------------

InputWindow::InputWindow(std::unique_ptr<InputStream> input)
    : input_(std::move(input)),
      data_(std::make_unique_for_overwrite<char[]>(kFileReadBytes + kLinePaddingBytes)),
      capacity_bytes_(kFileReadBytes) {
  SKIPPR_CHECK(input_ != nullptr);
  window_byte_offset_ = input_->start_byte_offset();
  std::memset(data_.get(), 0, kLinePaddingBytes);
}

void InputWindow::ConsumeUntil(const char* position) {
  SKIPPR_DCHECK(position >= begin() && position <= end());
  begin_index_ = static_cast<size_t>(position - data_.get());
}

Result<size_t> InputWindow::ReadMore(bool fill_window) {
  if (is_input_exhausted_) return size_t{0};
  size_t kept_bytes = end_index_ - begin_index_;
  if (kept_bytes > capacity_bytes_ / 2) {
    // Doubling keeps the total copying of one long line linear in its length.
    size_t new_capacity_bytes = capacity_bytes_ * 2;
    auto new_data = std::make_unique_for_overwrite<char[]>(new_capacity_bytes + kLinePaddingBytes);
    std::memcpy(new_data.get(), data_.get() + begin_index_, kept_bytes);
    data_ = std::move(new_data);
    capacity_bytes_ = new_capacity_bytes;
  } else if (begin_index_ > 0) {
    std::memmove(data_.get(), data_.get() + begin_index_, kept_bytes);
  }
  window_byte_offset_ += begin_index_;
  begin_index_ = 0;
  end_index_ = kept_bytes;

  size_t added_bytes = 0;
  while (end_index_ < capacity_bytes_) {
    SKIPPR_ASSIGN_OR_RETURN(size_t read_bytes,
                            input_->Read(data_.get() + end_index_, capacity_bytes_ - end_index_));
    if (read_bytes == 0) {
      is_input_exhausted_ = true;
      break;
    }
    end_index_ += read_bytes;
    added_bytes += read_bytes;
    if (!fill_window) break;
  }
  // Initialised padding, so reading past a line's end never touches indeterminate bytes.
  std::memset(data_.get() + end_index_, 0, kLinePaddingBytes);
  return added_bytes;
}

Status InputWindow::SkipByteOrderMark() {
  if (ByteOffsetOf(begin()) != 0) return Status::OK();
  while (size_bytes() < sizeof(kUtf8ByteOrderMark) && !is_input_exhausted_) {
    SKIPPR_RETURN_IF_ERROR(ReadMore(/*fill_window=*/false).status());
  }
  if (StartsWith(begin(), size_bytes(), kUtf8ByteOrderMark, sizeof(kUtf8ByteOrderMark))) {
    begin_index_ += sizeof(kUtf8ByteOrderMark);
  }
  return Status::OK();
}

// ----- LineReader -------------------------------------------------------------------------------

LineReader::LineReader(std::unique_ptr<InputStream> input, uint64_t first_line_number)
    : window_(std::move(input)), next_line_number_(first_line_number) {}

Result<std::optional<Line>> LineReader::Next() {
  using MaybeLine = std::optional<Line>;
  if (!has_started_) {
    has_started_ = true;
    SKIPPR_RETURN_IF_ERROR(window_.SkipByteOrderMark());
  }
  while (true) {
    const char* line_begin = window_.begin();
    size_t window_bytes = window_.size_bytes();
    const void* newline =
        std::memchr(line_begin + scanned_bytes_, '\n', window_bytes - scanned_bytes_);
    if (newline != nullptr) {
      const char* line_end = static_cast<const char*>(newline);
      const char* text_end = line_end;
      if (text_end > line_begin && text_end[-1] == '\r') --text_end;
      Line line{std::string_view(line_begin, static_cast<size_t>(text_end - line_begin)),
                next_line_number_++, window_.ByteOffsetOf(line_begin),
                window_.ByteOffsetOf(line_end + 1)};
      window_.ConsumeUntil(line_end + 1);
      scanned_bytes_ = 0;
      return MaybeLine(line);
    }
    // Never rescan: a long line is searched once in total, not once per refill.
    scanned_bytes_ = window_bytes;
    if (window_.is_input_exhausted()) {
      if (window_bytes == 0) return MaybeLine();
      Line line{std::string_view(line_begin, window_bytes), next_line_number_++,
                window_.ByteOffsetOf(line_begin), window_.ByteOffsetOf(window_.end())};
      window_.ConsumeUntil(window_.end());
      scanned_bytes_ = 0;
      return MaybeLine(line);
    }
    SKIPPR_RETURN_IF_ERROR(window_.ReadMore(/*fill_window=*/false).status());
  }
}

}  // namespace skippr::sources
