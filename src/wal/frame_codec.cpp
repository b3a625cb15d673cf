// LZ4 frames written, LZ4 and zstd frames read: see frame_codec.hpp and docs/formats/wal.md.
#include "wal/frame_codec.hpp"

#include <lz4frame.h>
#include <zstd.h>

#include <algorithm>

#include "core/check.hpp"

namespace skippr::wal {

namespace {

// An LZ4 block holds at most this much content; Write hands LZ4 at most this much at a time, so
// one scratch buffer of the block's bound takes any call's output.
constexpr size_t kLz4BlockBytes = size_t{1} << 20;
constexpr LZ4F_blockSizeID_t kLz4BlockSizeId = LZ4F_max1MB;

// One context per thread, reused by every frame it writes or reads (LZ4 keeps its buffers there).
template <typename Context, LZ4F_errorCode_t (*kCreate)(Context**, unsigned),
          LZ4F_errorCode_t (*kFree)(Context*)>
Context* ThreadLz4Context() {
  thread_local std::unique_ptr<Context, LZ4F_errorCode_t (*)(Context*)> context(
      [] {
        Context* created = nullptr;
        SKIPPR_CHECK(!LZ4F_isError(kCreate(&created, LZ4F_VERSION)));
        return created;
      }(),
      kFree);
  return context.get();
}

LZ4F_cctx* Lz4CompressionContext() {
  return ThreadLz4Context<LZ4F_cctx, LZ4F_createCompressionContext,
                          LZ4F_freeCompressionContext>();
}

LZ4F_dctx* Lz4DecompressionContext() {
  return ThreadLz4Context<LZ4F_dctx, LZ4F_createDecompressionContext,
                          LZ4F_freeDecompressionContext>();
}

LZ4F_preferences_t Lz4Preferences(uint64_t content_bytes) {
  LZ4F_preferences_t preferences{};
  preferences.frameInfo.blockSizeID = kLz4BlockSizeId;
  preferences.frameInfo.blockMode = LZ4F_blockIndependent;
  preferences.frameInfo.contentSize = content_bytes;
  // Each call's input is compressed at once, from where it lies: nothing is staged in LZ4's
  // buffer.
  preferences.autoFlush = 1;
  return preferences;
}

// The most one call to LZ4 writes: a frame header, or the output of a block of kLz4BlockBytes.
size_t Lz4ScratchBytes() {
  static const size_t bytes = [] {
    const LZ4F_preferences_t preferences = Lz4Preferences(kLz4BlockBytes);
    return std::max(LZ4F_compressBound(kLz4BlockBytes, &preferences),
                    size_t{LZ4F_HEADER_SIZE_MAX});
  }();
  return bytes;
}

// Where LZ4 writes before the output is appended to the segment: appending only what was produced
// spares the segment's buffer a zero-fill of each block's bound.
char* Lz4Scratch() {
  thread_local const std::unique_ptr<char[]> scratch(new char[Lz4ScratchBytes()]);
  return scratch.get();
}

class ZstdFrameReader final : public FrameReader {
 public:
  explicit ZstdFrameReader(std::string_view frame)
      : context_(Context()), input_{frame.data(), frame.size(), 0} {
    SKIPPR_CHECK(!ZSTD_isError(ZSTD_DCtx_reset(context_, ZSTD_reset_session_only)));
  }

  std::optional<uint64_t> Open() override {
    const unsigned long long content_bytes =
        ZSTD_getFrameContentSize(input_.src, input_.size);
    if (content_bytes == ZSTD_CONTENTSIZE_UNKNOWN || content_bytes == ZSTD_CONTENTSIZE_ERROR) {
      Failed("the frame header declares no content length");
      return std::nullopt;
    }
    return content_bytes;
  }

  bool Read(void* out, size_t size) override {
    ZSTD_outBuffer output{out, size, 0};
    while (output.pos < output.size) {
      if (is_frame_done_) return Failed("the frame ends early");
      if (!Step(output)) return false;
    }
    return true;
  }

  bool Finish() override {
    char extra;
    while (!is_frame_done_) {
      ZSTD_outBuffer output{&extra, 1, 0};
      if (!Step(output)) return false;
      if (output.pos != 0) return Failed("the frame holds more bytes than described");
    }
    if (input_.pos != input_.size) return Failed("bytes follow the end of the frame");
    return true;
  }

 private:
  static ZSTD_DCtx* Context() {
    thread_local std::unique_ptr<ZSTD_DCtx, size_t (*)(ZSTD_DCtx*)> context(ZSTD_createDCtx(),
                                                                            ZSTD_freeDCtx);
    SKIPPR_CHECK(context != nullptr);
    return context.get();
  }

  bool Step(ZSTD_outBuffer& output) {
    const size_t input_before = input_.pos;
    const size_t output_before = output.pos;
    const size_t hint = ZSTD_decompressStream(context_, &output, &input_);
    if (ZSTD_isError(hint)) return Failed(ZSTD_getErrorName(hint));
    if (hint == 0) {
      is_frame_done_ = true;
    } else if (input_.pos == input_before && output.pos == output_before) {
      return Failed("the frame is cut short");
    }
    return true;
  }

  ZSTD_DCtx* context_;
  ZSTD_inBuffer input_;
  bool is_frame_done_ = false;
};

class Lz4FrameReader final : public FrameReader {
 public:
  explicit Lz4FrameReader(std::string_view frame)
      : context_(Lz4DecompressionContext()), input_(frame) {
    // A previous frame that failed leaves the context mid-frame.
    LZ4F_resetDecompressionContext(context_);
  }

  std::optional<uint64_t> Open() override {
    LZ4F_frameInfo_t info{};
    size_t consumed = input_.size();
    const size_t hint = LZ4F_getFrameInfo(context_, &info, input_.data(), &consumed);
    if (LZ4F_isError(hint)) {
      Failed(LZ4F_getErrorName(hint));
      return std::nullopt;
    }
    input_.remove_prefix(consumed);
    if (info.frameType != LZ4F_frame) {
      Failed("a skippable frame where a frame of content belongs");
      return std::nullopt;
    }
    // A frame without a content length declares 0: the writer declares every length, and an empty
    // frame's is 0 either way.
    is_frame_done_ = hint == 0;
    return info.contentSize;
  }

  bool Read(void* out, size_t size) override {
    auto* at = static_cast<char*>(out);
    while (size > 0) {
      if (is_frame_done_) return Failed("the frame ends early");
      size_t produced = size;
      if (!Step(at, produced)) return false;
      at += produced;
      size -= produced;
    }
    return true;
  }

  bool Finish() override {
    while (!is_frame_done_) {
      char extra;
      size_t produced = 1;
      if (!Step(&extra, produced)) return false;
      if (produced != 0) return Failed("the frame holds more bytes than described");
    }
    if (!input_.empty()) return Failed("bytes follow the end of the frame");
    return true;
  }

 private:
  // Decompresses into `out`, whose capacity `produced` gives and then says what was written.
  bool Step(char* out, size_t& produced) {
    const size_t capacity = produced;
    size_t consumed = input_.size();
    const size_t hint =
        LZ4F_decompress(context_, out, &produced, input_.data(), &consumed, nullptr);
    if (LZ4F_isError(hint)) return Failed(LZ4F_getErrorName(hint));
    SKIPPR_CHECK(consumed <= input_.size() && produced <= capacity);
    input_.remove_prefix(consumed);
    if (hint == 0) {
      is_frame_done_ = true;
    } else if (consumed == 0 && produced == 0) {
      return Failed("the frame is cut short");
    }
    return true;
  }

  LZ4F_dctx* context_;
  std::string_view input_;
  bool is_frame_done_ = false;
};

}  // namespace

std::string_view FrameCodecName(FrameCodec codec) {
  return codec == FrameCodec::kLz4 ? "LZ4" : "zstd";
}

void Lz4FrameWriter::Begin(SegmentBytes* out, uint64_t content_bytes) {
  out_ = out;
  const LZ4F_preferences_t preferences = Lz4Preferences(content_bytes);
  const size_t header_bytes = LZ4F_compressBegin(
      Lz4CompressionContext(), Lz4Scratch(), LZ4F_HEADER_SIZE_MAX, &preferences);
  SKIPPR_CHECK_MSG(!LZ4F_isError(header_bytes), LZ4F_getErrorName(header_bytes));
  written_ = 0;
  Append(header_bytes);
}

void Lz4FrameWriter::Write(const void* data, size_t size) {
  const auto* at = static_cast<const char*>(data);
  while (size > 0) {
    const size_t piece = std::min(size, kLz4BlockBytes);
    const size_t produced = LZ4F_compressUpdate(Lz4CompressionContext(), Lz4Scratch(),
                                                Lz4ScratchBytes(), at, piece, nullptr);
    SKIPPR_CHECK_MSG(!LZ4F_isError(produced), LZ4F_getErrorName(produced));
    Append(produced);
    at += piece;
    size -= piece;
  }
}

uint64_t Lz4FrameWriter::End() {
  const size_t produced = LZ4F_compressEnd(
      Lz4CompressionContext(), Lz4Scratch(), Lz4ScratchBytes(), nullptr);
  SKIPPR_CHECK_MSG(!LZ4F_isError(produced), LZ4F_getErrorName(produced));
  Append(produced);
  return written_;
}

void Lz4FrameWriter::Append(size_t produced_bytes) {
  out_->append(Lz4Scratch(), produced_bytes);
  written_ += produced_bytes;
}

std::unique_ptr<FrameReader> NewFrameReader(FrameCodec codec, std::string_view frame) {
  if (codec == FrameCodec::kLz4) return std::make_unique<Lz4FrameReader>(frame);
  return std::make_unique<ZstdFrameReader>(frame);
}

}  // namespace skippr::wal
