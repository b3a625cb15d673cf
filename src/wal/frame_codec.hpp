// The compression of a WAL slice's frames (docs/formats/wal.md, "Compression"): version 6 writes
// each frame as an LZ4 frame; versions 1 to 5 wrote zstd frames, which stay readable. Both
// stream: the writer compresses the buffers it is handed without staging the payload, the reader
// decompresses straight into the column buffers. Internal to wal/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "wal/segment.hpp"

namespace skippr::wal {

// The codec of a segment's frames, fixed by its format version.
enum class FrameCodec { kZstd, kLz4 };
constexpr FrameCodec FrameCodecOf(uint32_t format_version) {
  return format_version >= 6 ? FrameCodec::kLz4 : FrameCodec::kZstd;
}
std::string_view FrameCodecName(FrameCodec codec);

// Writes one LZ4 frame at the end of a SegmentBytes: Begin, any number of Write, End. The frame
// declares its content length, which the Writes must add up to (End checks); its blocks are
// independent (linked ones compress a slice's bytes no smaller).
class Lz4FrameWriter {
 public:
  void Begin(SegmentBytes* out, uint64_t content_bytes);
  void Write(const void* data, size_t size);
  // Ends the frame; returns its length in bytes.
  uint64_t End();

 private:
  void Append(size_t produced_bytes);

  SegmentBytes* out_ = nullptr;
  uint64_t written_ = 0;
};

// Reads one frame's content in order. Open first, then Read the content piece by piece, then
// Finish. Hostile bytes fail with a reason (error()); they never read or write out of bounds.
class FrameReader {
 public:
  virtual ~FrameReader() = default;

  // Reads the frame's header: the content length it declares, or nullopt when it declares none
  // or the header is damaged.
  virtual std::optional<uint64_t> Open() = 0;
  // Fills exactly `size` bytes; false when the frame is damaged or ends first.
  virtual bool Read(void* out, size_t size) = 0;
  // True when the frame ended exactly after the last byte read and no input is left over.
  virtual bool Finish() = 0;

  const std::string& error() const { return error_; }

 protected:
  bool Failed(std::string_view what) {
    error_ = what;
    return false;
  }

 private:
  std::string error_;
};

// A reader of `frame` (which must outlive it) in `codec`'s format.
std::unique_ptr<FrameReader> NewFrameReader(FrameCodec codec, std::string_view frame);

}  // namespace skippr::wal
