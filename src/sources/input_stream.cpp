#include "sources/input_stream.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <xxhash.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <vector>

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

int64_t MtimeNs(const struct stat& info) {
  return static_cast<int64_t>(info.st_mtim.tv_sec) * 1'000'000'000 + info.st_mtim.tv_nsec;
}

// Reads exactly `size` bytes at `offset`; fewer only at the end of the file.
Result<size_t> PreadFully(int fd, const std::string& path, uint64_t offset, char* buffer,
                         size_t size) {
  size_t done = 0;
  while (done < size) {
    const ssize_t got = ::pread(fd, buffer + done, std::min<size_t>(size - done, SSIZE_MAX),
                                static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      return Status::IOError(fmt::format("reading {} failed at byte offset {}: {}", path,
                                         offset + done, std::strerror(errno)));
    }
    if (got == 0) break;
    done += static_cast<size_t>(got);
  }
  return done;
}

}  // namespace

// The descriptor of one opened file, shared by the OpenedFile and every stream read from it.
struct FileHandle {
  FileHandle(std::string path_in, int fd_in) : path(std::move(path_in)), fd(fd_in) {}
  ~FileHandle() { ::close(fd); }
  FileHandle(const FileHandle&) = delete;
  FileHandle& operator=(const FileHandle&) = delete;
  const std::string path;
  const int fd;
};

// ----- OpenedFile -------------------------------------------------------------------------------

OpenedFile::OpenedFile(std::shared_ptr<const FileHandle> handle, uint64_t size_bytes,
                       int64_t mtime_ns, uint64_t device, uint64_t inode)
    : handle_(std::move(handle)),
      size_bytes_(size_bytes),
      mtime_ns_(mtime_ns),
      device_(device),
      inode_(inode) {}

OpenedFile::~OpenedFile() = default;

Result<std::unique_ptr<OpenedFile>> OpenedFile::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return OpenError(path, errno);
  return Adopt(fd, path, std::nullopt);
}

Result<std::unique_ptr<OpenedFile>> OpenedFile::Adopt(int fd, const std::string& path,
                                                      std::optional<int64_t> mtime_ns) {
  auto handle = std::make_shared<const FileHandle>(path, fd);  // closes fd from here on
  struct stat info {};
  if (::fstat(fd, &info) != 0) return OpenError(path, errno);
  if (S_ISDIR(info.st_mode)) {
    return Status::IOError(fmt::format(
        "cannot read {}: it is a directory; point the source at files (or a glob of files)", path));
  }
  // Only a hint: the kernel reads ahead more aggressively for a sequential scan.
  (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  // A pipe or character device has no size: it is read to its end.
  const uint64_t size_bytes =
      S_ISREG(info.st_mode) ? static_cast<uint64_t>(info.st_size) : UINT64_MAX;
  return std::unique_ptr<OpenedFile>(new OpenedFile(
      std::move(handle), size_bytes, mtime_ns.value_or(MtimeNs(info)), info.st_dev, info.st_ino));
}

const std::string& OpenedFile::path() const { return handle_->path; }

std::string OpenedFile::DescriptorPath() const {
  return fmt::format("/proc/self/fd/{}", handle_->fd);
}

Result<std::unique_ptr<InputStream>> OpenedFile::OpenStream(
    StreamStart start, std::optional<Compression> expected) const {
  std::unique_ptr<InputStream> stream(new InputStream(handle_, start, size_bytes_));
  if (start.file_offset > 0 && expected == Compression::kNone) {
    // A plain file resumed mid-way stays plain, whatever its bytes there look like (a gzip magic
    // inside a JSON string): only a file's start, or a member/frame boundary, is sniffed.
    SKIPPR_CHECK_MSG(start.byte_offset == start.file_offset,
                     "a plain stream's offsets on disk and in the stream are one");
    return stream;
  }
  SKIPPR_RETURN_IF_ERROR(stream->DetectCompression());
  if (start.file_offset == 0) return stream;
  if (expected && stream->compression_ != *expected) {
    return Status::Corruption(fmt::format(
        "{}: the bytes after compressed offset {} are {}, not another {} {}: the file was not "
        "extended by appending whole {} data; re-create it",
        path(), start.file_offset,
        stream->compression_ == Compression::kNone ? "plain data"
                                                   : CompressionName(stream->compression_),
        CompressionName(*expected), *expected == Compression::kGzip ? "member" : "frame",
        CompressionName(*expected)));
  }
  if (stream->compression_ == Compression::kNone) {
    SKIPPR_CHECK_MSG(start.byte_offset == start.file_offset,
                     "a plain stream's offsets on disk and in the stream are one");
  }
  return stream;
}

std::unique_ptr<InputStream> OpenedFile::OpenPlainRange(uint64_t begin, uint64_t end) const {
  SKIPPR_CHECK(begin <= end && end <= size_bytes_);
  std::unique_ptr<InputStream> stream(new InputStream(handle_, {begin, begin}, end));
  stream->is_range_ = true;
  return stream;
}

Result<uint64_t> OpenedFile::FindByte(char byte, uint64_t from) const {
  constexpr size_t kPieceBytes = 64 << 10;
  std::string piece(kPieceBytes, '\0');
  while (from < size_bytes_) {
    const size_t wanted = std::min<uint64_t>(piece.size(), size_bytes_ - from);
    SKIPPR_ASSIGN_OR_RETURN(const size_t got,
                            PreadFully(handle_->fd, path(), from, piece.data(), wanted));
    if (got == 0) break;  // cut short since it was opened: the reader meets the end there too
    if (const void* found = std::memchr(piece.data(), byte, got); found != nullptr) {
      return from + static_cast<uint64_t>(static_cast<const char*>(found) - piece.data());
    }
    from += got;
  }
  return size_bytes_;
}

Result<std::optional<uint64_t>> OpenedFile::HashRange(uint64_t offset, uint64_t size) const {
  std::string bytes(size, '\0');
  SKIPPR_ASSIGN_OR_RETURN(const size_t got,
                          PreadFully(handle_->fd, path(), offset, bytes.data(), bytes.size()));
  if (got != bytes.size()) return std::optional<uint64_t>();
  return std::optional<uint64_t>(XXH3_64bits(bytes.data(), bytes.size()));
}

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

InputStream::InputStream(std::shared_ptr<const FileHandle> handle, StreamStart start,
                         uint64_t limit_bytes)
    : handle_(std::move(handle)),
      start_byte_offset_(start.byte_offset),
      start_file_offset_(start.file_offset),
      limit_bytes_(limit_bytes),
      input_buffer_(std::make_unique_for_overwrite<char[]>(kFileReadBytes)),
      disk_byte_offset_(start.file_offset),
      consumed_byte_offset_(start.byte_offset) {}

InputStream::~InputStream() {
  if (consumed_hash_ != nullptr) XXH3_freeState(consumed_hash_);
}

const std::string& InputStream::path() const { return handle_->path; }

Result<std::unique_ptr<InputStream>> InputStream::Open(const std::string& path) {
  return OpenAt(path, 0);
}

Result<std::unique_ptr<InputStream>> InputStream::OpenAt(const std::string& path,
                                                         uint64_t byte_offset) {
  SKIPPR_ASSIGN_OR_RETURN(std::unique_ptr<OpenedFile> file, OpenedFile::Open(path));
  if (byte_offset == 0) return file->OpenStream();
  SKIPPR_ASSIGN_OR_RETURN(std::unique_ptr<InputStream> head, file->OpenStream());
  if (head->compression() != Compression::kNone) {
    return Status::NotSupported(fmt::format(
        "cannot resume {} at byte offset {}: it is {}-compressed and compressed files can only be "
        "read from the start; restart it from offset 0",
        path, byte_offset, CompressionName(head->compression())));
  }
  if (byte_offset > file->size_bytes()) {
    return Status::InvalidArgument(fmt::format(
        "cannot resume {} at byte offset {}: the file has only {} bytes, so it was truncated or "
        "replaced since that offset was recorded; re-read it from the start",
        path, byte_offset, file->size_bytes()));
  }
  return file->OpenStream({byte_offset, byte_offset});
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
          fmt::format("cannot start gzip decompression for {}: zlib error {}", path(), rc));
    }
    decoder_->has_zlib = true;
  } else if (StartsWith(data, size_bytes, kZstdMagic, sizeof(kZstdMagic))) {
    compression_ = Compression::kZstd;
    decoder_ = std::make_unique<Decoder>();
    decoder_->zstd = ZSTD_createDStream();
    if (decoder_->zstd == nullptr) {
      return Status::Internal(
          fmt::format("cannot start zstd decompression for {}: out of memory", path()));
    }
  }
  if (compression_ != Compression::kNone) {
    // What the reader consumes of a compressed stream is hashed: a later pass that re-reads the
    // file to skip those records first proves they are the same bytes.
    consumed_hash_ = XXH3_createState();
    if (consumed_hash_ == nullptr || XXH3_64bits_reset(consumed_hash_) != XXH_OK) {
      return Status::Internal(fmt::format("cannot start hashing {}: out of memory", path()));
    }
  }
  return Status::OK();
}

Result<size_t> InputStream::ReadDisk(char* buffer, size_t capacity) {
  const uint64_t room = limit_bytes_ - std::min(limit_bytes_, disk_byte_offset_);
  SKIPPR_ASSIGN_OR_RETURN(
      const size_t read_bytes,
      PreadFully(handle_->fd, path(), disk_byte_offset_, buffer, std::min<uint64_t>(capacity, room)));
  disk_byte_offset_ += read_bytes;
  if (read_bytes == 0 && !is_file_exhausted_) {
    is_file_exhausted_ = true;
    // Stopped by the limit, not by the end of the file: has the file grown past it meanwhile?
    struct stat info {};
    is_cut_by_limit_ = room == 0 && !is_range_ && ::fstat(handle_->fd, &info) == 0 &&
                       S_ISREG(info.st_mode) && static_cast<uint64_t>(info.st_size) > limit_bytes_;
  }
  return read_bytes;
}

// Appends one read of compressed (or plain) bytes to input_buffer_.
Status InputStream::Refill() {
  if (input_begin_ == input_end_) input_begin_ = input_end_ = 0;
  size_t free_bytes = kFileReadBytes - input_end_;
  SKIPPR_CHECK(free_bytes > 0);
  SKIPPR_ASSIGN_OR_RETURN(const size_t read_bytes,
                          ReadDisk(input_buffer_.get() + input_end_, free_bytes));
  input_end_ += read_bytes;
  return Status::OK();
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

Result<std::optional<uint64_t>> InputStream::HashNextBytes(uint64_t size) {
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> state(XXH3_createState(),
                                                                 &XXH3_freeState);
  if (state == nullptr || XXH3_64bits_reset(state.get()) != XXH_OK) {
    return Status::Internal(fmt::format("cannot start hashing {}: out of memory", path()));
  }
  std::vector<char> buffer(std::min<uint64_t>(size, kFileReadBytes));
  while (size > 0) {
    SKIPPR_ASSIGN_OR_RETURN(const size_t read_bytes,
                            Read(buffer.data(), std::min<uint64_t>(size, buffer.size())));
    if (read_bytes == 0) return std::optional<uint64_t>();
    SKIPPR_CHECK(XXH3_64bits_update(state.get(), buffer.data(), read_bytes) == XXH_OK);
    size -= read_bytes;
  }
  return std::optional<uint64_t>(XXH3_64bits_digest(state.get()));
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
  SKIPPR_ASSIGN_OR_RETURN(const size_t read_bytes,
                          ReadDisk(buffer, std::min<size_t>(capacity, SSIZE_MAX)));
  file_bytes_consumed_ += read_bytes;
  return read_bytes;
}

Result<size_t> InputStream::EndInsideUnit(std::string_view format_name) {
  if (!is_cut_by_limit_) return Truncated(format_name);
  ended_inside_unit_ = true;  // the writer is still appending it: the next pass reads it whole
  is_inside_compressed_unit_ = false;
  return size_t{0};
}

Status InputStream::Truncated(std::string_view format_name) const {
  return Status::Corruption(fmt::format(
      "{} is truncated: the file ends inside a {} at compressed byte offset {}; the file is "
      "damaged or was still being written: re-copy it (or wait for the writer) and read it again",
      path(), format_name, CompressedOffset()));
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
          path(), CompressedOffset(), zlib.msg != nullptr ? zlib.msg : "no detail"));
    } else if (rc == Z_MEM_ERROR) {
      return Status::Internal(fmt::format("out of memory while decompressing {}", path()));
    }
    if (produced_bytes > 0) return produced_bytes;
    if (rc == Z_STREAM_END || consumed_bytes > 0) continue;
    // No progress: with all input consumed this is the end of the file inside a member.
    if (input_begin_ == input_end_ && is_file_exhausted_) return EndInsideUnit("gzip member");
    return Status::Internal(
        fmt::format("gzip decompression of {} made no progress at compressed byte offset {}", path(),
                    CompressedOffset()));
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
          path(), CompressedOffset(), ZSTD_getErrorName(rc)));
    }
    // 0: the frame is complete and flushed; otherwise more input (or flushing) is needed.
    is_inside_compressed_unit_ = rc != 0;
    if (output.pos > 0) return output.pos;
    if (input.pos > 0 || !is_inside_compressed_unit_) continue;
    if (input_begin_ == input_end_ && is_file_exhausted_) return EndInsideUnit("zstd frame");
    return Status::Internal(
        fmt::format("zstd decompression of {} made no progress at compressed byte offset {}", path(),
                    CompressedOffset()));
  }
}

void InputStream::NoteConsumed(const char* begin, const char* end) {
  if (begin == end) return;
  if (begin != pending_end_) {
    FlushConsumed();
    pending_begin_ = begin;
  }
  pending_end_ = end;
  consumed_byte_offset_ += static_cast<uint64_t>(end - begin);
  last_consumed_byte_ = end[-1];
}

void InputStream::FlushConsumed() {
  if (consumed_hash_ != nullptr && pending_begin_ != pending_end_) {
    SKIPPR_CHECK(XXH3_64bits_update(consumed_hash_, pending_begin_,
                                    static_cast<size_t>(pending_end_ - pending_begin_)) == XXH_OK);
  }
  pending_begin_ = pending_end_ = nullptr;
}

ConsumedBytes InputStream::Consumed() {
  FlushConsumed();
  return {consumed_byte_offset_,
          consumed_hash_ != nullptr ? XXH3_64bits_digest(consumed_hash_) : uint64_t{0},
          last_consumed_byte_};
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
  input_->NoteConsumed(begin(), position);
  begin_index_ = static_cast<size_t>(position - data_.get());
}

void InputWindow::HoldBackCutTail() {
  const char* first = begin();
  const char* last = end();
  // A line ends after '\n', or after a '\r' that a byte other than '\n' follows (a '\r' at the end
  // may be the first half of a CRLF the file goes on with).
  while (last > first && last[-1] != '\n' && !(last[-1] == '\r' && last < end())) --last;
  input_->NoteHeldBack(static_cast<uint64_t>(end() - last));
  end_index_ = static_cast<size_t>(last - data_.get());
}

Result<size_t> InputWindow::ReadMore(bool fill_window) {
  if (is_input_exhausted_) return size_t{0};
  input_->FlushConsumed();  // the consumed bytes are about to move
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
      if (input_->is_cut_by_limit()) HoldBackCutTail();
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
    ConsumeUntil(begin() + sizeof(kUtf8ByteOrderMark));
  }
  return Status::OK();
}

// ----- line ends ----------------------------------------------------------------------------

const char* LineEndFinder::FindByte(Search& search, char byte, const InputWindow& window,
                                    const char* from) {
  const uint64_t window_offset = window.ByteOffsetOf(window.begin());
  const uint64_t from_offset = window.ByteOffsetOf(from);
  const uint64_t end_offset = window.ByteOffsetOf(window.end());
  const auto at = [&](uint64_t offset) { return window.begin() + (offset - window_offset); };
  // What a search found stays true while `from` does not move back before where it started and
  // the window keeps what it searched (a cut input holds back its tail: InputWindow).
  if (search.searched_until > end_offset || (search.has_found && search.found_at >= end_offset)) {
    search = Search{};
  }
  const bool is_known = search.searched_from <= from_offset;
  if (is_known && search.has_found && from_offset <= search.found_at) return at(search.found_at);
  uint64_t search_offset = from_offset;
  if (is_known && !search.has_found && from_offset <= search.searched_until) {
    search_offset = search.searched_until;  // [from, searched_until) holds none
  } else {
    search.searched_from = from_offset;
  }
  const void* found = std::memchr(at(search_offset), byte, end_offset - search_offset);
  search.has_found = found != nullptr;
  if (found == nullptr) {
    search.searched_until = end_offset;
    return nullptr;
  }
  search.found_at = window.ByteOffsetOf(static_cast<const char*>(found));
  return static_cast<const char*>(found);
}

const char* LineEndFinder::Find(const InputWindow& window, const char* from) {
  const char* line_feed = FindByte(line_feed_, '\n', window, from);
  const char* carriage_return = FindByte(carriage_return_, '\r', window, from);
  if (line_feed == nullptr) return carriage_return;
  if (carriage_return == nullptr) return line_feed;
  return std::min(line_feed, carriage_return);
}

const char* PastLineEnd(const InputWindow& window, const char* line_end) {
  if (*line_end == '\n') return line_end + 1;
  if (line_end + 1 < window.end()) return line_end[1] == '\n' ? line_end + 2 : line_end + 1;
  return window.is_input_exhausted() ? line_end + 1 : nullptr;
}

// ----- LineReader -------------------------------------------------------------------------------

LineReader::LineReader(std::unique_ptr<InputStream> input, uint64_t first_line_number,
                       uint64_t max_line_bytes)
    : window_(std::move(input)),
      next_line_number_(first_line_number),
      max_line_bytes_(max_line_bytes) {}

Result<std::optional<Line>> LineReader::Peek() {
  using MaybeLine = std::optional<Line>;
  if (peeked_) return peeked_;
  if (!has_started_) {
    has_started_ = true;
    SKIPPR_RETURN_IF_ERROR(window_.SkipByteOrderMark());
  }
  while (true) {
    const char* line_begin = window_.begin();
    const char* line_end = line_ends_.Find(window_, line_begin);
    const char* next_line = line_end != nullptr ? PastLineEnd(window_, line_end) : nullptr;
    if (line_end == nullptr && window_.is_input_exhausted()) {
      if (window_.size_bytes() == 0) return MaybeLine();
      line_end = next_line = window_.end();  // the last line, without a line end
    }
    if (next_line != nullptr) {
      const size_t size_bytes = static_cast<size_t>(line_end - line_begin);
      if (size_bytes > max_line_bytes_) return MaybeLine(OverLimitLine());
      peeked_ = Line{std::string_view(line_begin, size_bytes), next_line_number_,
                     window_.ByteOffsetOf(line_begin), window_.ByteOffsetOf(next_line),
                     size_bytes};
      peeked_end_ = next_line;
      return peeked_;
    }
    if (window_.size_bytes() > max_line_bytes_) return MaybeLine(OverLimitLine());
    SKIPPR_RETURN_IF_ERROR(window_.ReadMore(/*fill_window=*/false).status());
  }
}

Result<std::optional<Line>> LineReader::Next() {
  SKIPPR_ASSIGN_OR_RETURN(std::optional<Line> line, Peek());
  if (!line) return line;
  if (line->is_over_limit) {
    SKIPPR_ASSIGN_OR_RETURN(Line skipped, SkipLongLine());
    return std::optional<Line>(std::move(skipped));
  }
  window_.ConsumeUntil(peeked_end_);
  ++next_line_number_;
  peeked_.reset();
  return line;
}

std::string_view LineReader::BufferedLines(size_t max_bytes) const {
  SKIPPR_DCHECK(peeked_.has_value());
  const char* begin = window_.begin();
  const void* last_line_feed = memrchr(begin, '\n', std::min(window_.size_bytes(), max_bytes));
  if (last_line_feed == nullptr) return {};
  return {begin, static_cast<size_t>(static_cast<const char*>(last_line_feed) - begin)};
}

Line LineReader::OverLimitLine() const {
  Line line{{}, next_line_number_, window_.ByteOffsetOf(window_.begin())};
  line.is_over_limit = true;
  return line;
}

Result<Line> LineReader::SkipLongLine() {
  Line line{{}, next_line_number_++, window_.ByteOffsetOf(window_.begin())};
  line.is_over_limit = true;
  long_line_prefix_.assign(window_.begin(), std::min(window_.size_bytes(), kLongLinePrefixBytes));
  const size_t prefix_bytes = long_line_prefix_.size();
  long_line_prefix_.append(kLinePaddingBytes, '\0');
  line.text = std::string_view(long_line_prefix_.data(), prefix_bytes);
  while (true) {
    const char* line_end = line_ends_.Find(window_, window_.begin());
    const char* next_line = line_end != nullptr ? PastLineEnd(window_, line_end) : nullptr;
    if (line_end == nullptr && window_.is_input_exhausted()) line_end = next_line = window_.end();
    if (next_line != nullptr) {
      line.size_bytes = window_.ByteOffsetOf(line_end) - line.byte_offset;
      line.next_byte_offset = window_.ByteOffsetOf(next_line);
      window_.ConsumeUntil(next_line);
      return line;
    }
    // Not held: what was searched is dropped (a '\r' at the end waits for its possible '\n').
    const char* keep = line_end != nullptr ? line_end : window_.end();
    window_.ConsumeUntil(keep);
    SKIPPR_RETURN_IF_ERROR(window_.ReadMore(/*fill_window=*/true).status());
  }
}

}  // namespace skippr::sources
