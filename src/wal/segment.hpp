// The WAL segment file (DESIGN.md §5; every byte is documented in docs/formats/wal.md): a header,
// one slice per batch (self-describing fields + compressed column buffers, each slice with its
// own checksum), and a footer with the slice index and a checksum of every byte before it.
// Internal to wal/: other modules include wal/wal.hpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "core/batch.hpp"
#include "core/env.hpp"
#include "core/status.hpp"

namespace skippr::wal {

// Version 2 adds the store's instance id to the header; version 3 compresses each top-level column
// (and the CDC sidecar) as its own checksummed zstd frame, so a reader decodes only the columns it
// needs; version 4 adds the CDC mutation truncate (the same layout as 3); version 5 stores values
// of 8 and 16 bytes and every offsets buffer as byte planes (wal/byte_planes.hpp); version 6
// compresses frames with LZ4 instead of zstd (wal/frame_codec.hpp). Versions 1 to 5 stay readable.
inline constexpr uint32_t kSegmentFormatVersion = 6;
inline constexpr size_t kInstanceIdBytes = 16;  // 128 bits; 32 hex digits in SegmentHeader

// Direct I/O wants buffer, file offset and length aligned to the device's logical block (512 B or
// 4 KiB); 4 KiB suits both.
inline constexpr size_t kDirectIoAlignmentBytes = 4096;

// Allocates on kDirectIoAlignmentBytes boundaries, so a segment's bytes go to the device with
// O_DIRECT straight from where they were encoded, without a copy.
template <typename T>
struct DirectIoAllocator {
  using value_type = T;
  DirectIoAllocator() = default;
  template <typename U>
  DirectIoAllocator(const DirectIoAllocator<U>&) {}
  T* allocate(size_t count) {
    return static_cast<T*>(
        ::operator new(count * sizeof(T), std::align_val_t{kDirectIoAlignmentBytes}));
  }
  void deallocate(T* memory, size_t count) {
    ::operator delete(memory, count * sizeof(T), std::align_val_t{kDirectIoAlignmentBytes});
  }
  friend bool operator==(const DirectIoAllocator&, const DirectIoAllocator&) { return true; }
};

// A whole segment file's bytes (any segment outgrows the short-string buffer, so data() is
// aligned).
using SegmentBytes = std::basic_string<char, std::char_traits<char>, DirectIoAllocator<char>>;

struct SegmentHeader {
  uint32_t format_version = kSegmentFormatVersion;  // as read; EncodeSegment writes the current one
  // The instance id of the store that committed (or was about to commit) the segment, 32 lowercase
  // hex digits; empty in a version 1 segment.
  std::string instance_id;
  std::string pipeline;
  uint64_t segment_id = 0;
  uint64_t sequence = 0;  // commit sequence number, strictly increasing per pipeline
  int64_t created_unix_micros = 0;
  std::string source_positions;  // opaque bytes (JSON) describing the source offsets covered
};

struct SliceInfo {  // from the footer index, without decoding payloads
  uint32_t ordinal = 0;  // position of the slice in its segment, 0-based
  std::string namespace_name;
  int32_t schema_id = 0;
  int64_t row_count = 0;
  bool is_cdc = false;
  uint64_t payload_offset = 0;  // byte offset of the slice record in the file
  uint64_t payload_bytes = 0;   // its length
  uint64_t uncompressed_bytes = 0;
};

// A complete segment file: header, one slice per batch, footer. Every batch must Validate() and
// each column's type must equal its field's type (both SKIPPR_CHECKed: a batch that breaks them is
// a bug upstream, and writing it would commit data no reader could decode).
SegmentBytes EncodeSegment(const SegmentHeader& header, const std::vector<Batch>& batches);

// How much of a segment file SegmentReader::Open checks before it returns.
enum class SegmentVerification {
  // Every byte, streaming the footer checksum through the whole file (and then each read checks
  // what it reads again): what landing, which reads every slice, uses.
  kWholeFile,
  // The magic, version, tail, header and index layout; the footer checksum is not recomputed.
  // Each read still checks the slice header's checksum, its agreement with the index and the
  // checksum of every frame it decodes (the trailing slice checksum before version 3), so no byte
  // a reader uses goes unchecked: what `query`, which may read a few columns of a few slices,
  // and the aggregates, which read their key and measure columns, use. A damaged byte no read
  // needs (a source position in the segment header) goes unseen.
  kEachRead,
};

class SegmentReader {
 public:
  // Opens the file and verifies it (magic, version, footer checksum over every byte before it,
  // index consistency), streaming through it once: memory holds the header and index, never the
  // file. The file stays open for the reader's lifetime and ReadSlice reads each slice from it, so
  // a reader keeps serving a segment that was reclaimed (unlinked) after it opened. A damaged file
  // is Status::Corruption naming the path, what failed (stored vs computed checksum in hex,
  // offsets) and saying it was committed data: restore DATA_DIR or re-read the source. A file
  // from a newer format version is NotSupported. A missing file is NotFound, an unreadable one
  // IOError.
  // With kEachRead, the footer checksum is read, not recomputed (see SegmentVerification).
  static Result<SegmentReader> Open(
      const std::string& path, Env* env = Env::Default(),
      SegmentVerification verification = SegmentVerification::kWholeFile);
  static Result<SegmentReader> FromBytes(std::string bytes, std::string display_name);
  // Verifies `bytes` as FromBytes does but keeps only the header, index and checksum (no copy of
  // the bytes): for the writer's own check before a segment is written. ReadSlice is unavailable.
  static Result<SegmentReader> VerifyBytes(std::string_view bytes, std::string display_name);
  // Cheap check used at recovery: file size, leading and trailing magic, version and footer
  // length only (no checksum).
  static Status CheckTail(const std::string& path, Env* env = Env::Default());
  // Reads only the header (magic, version and the header's fields), without the checksum that
  // would vouch for it: for recovery to tell whose a file is. A file too short or torn to hold a
  // header is Corruption; a newer version NotSupported.
  static Result<SegmentHeader> ReadHeader(const std::string& path, Env* env = Env::Default());

  const SegmentHeader& header() const { return header_; }
  const std::vector<SliceInfo>& slices() const { return slices_; }
  uint64_t file_bytes() const { return file_bytes_; }
  uint64_t checksum() const { return checksum_; }  // the footer checksum

  // Decodes one slice: fields (with ids and types, nested), the columns `selection` includes, and the
  // CDC sidecar. In a version 3 segment only the slice header and the selected columns' frames are
  // read, checked (their checksums) and decompressed, and the batch holds only those columns; a
  // version 1 or 2 slice is one frame, decoded whole, then cut to the selection. Checks that
  // decoded row counts match the index, and Batch::Validate. Damage is Corruption; an ordinal past
  // the last slice is InvalidArgument. Safe to call from several threads at once.
  Result<Batch> ReadSlice(uint32_t ordinal,
                          const FieldSelection& selection = FieldSelection::All()) const;

 private:
  using ReadRange = std::function<Result<std::string>(uint64_t offset, uint64_t length)>;
  SegmentReader() = default;
  Status Verify(std::string_view bytes);
  Status VerifyFile(SegmentVerification verification);
  Status CheckChecksum(uint64_t stored, uint64_t computed);
  Status ParseLayout(const ReadRange& read, uint32_t version, uint64_t footer_offset);

  std::shared_ptr<const RandomAccessFile> file_;  // from Open: the slices are read from it
  std::string bytes_;  // from FromBytes; empty from Open and VerifyBytes
  uint64_t file_bytes_ = 0;
  std::string display_name_;
  SegmentHeader header_;
  std::vector<SliceInfo> slices_;
  uint64_t checksum_ = 0;
};

}  // namespace skippr::wal
