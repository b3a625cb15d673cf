// Internal to sources/: how the File source reads one file (FileReader), and the reader that
// reads a plain file of lines as chunks on worker threads (ChunkedLinesReader).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "core/status.hpp"
#include "schema/schema.hpp"
#include "sources/input_stream.hpp"
#include "sources/sources.hpp"

namespace skippr::sources::internal {

// Where a reader starts in its stream (which the File source opened at the matching byte): the
// stream's first byte is on line `line` and starts record `records` + 1; the first `skip_records`
// records read are dropped (already consumed by an earlier pass, which the File source verified).
struct ReaderStart {
  uint64_t line = 1;
  uint64_t records = 0;
  uint64_t skip_records = 0;
  // A reader of a whole file says so when the file holds no record (one deadletter); a reader of
  // a part of one leaves that to whoever reads the rest.
  bool reports_empty_file = true;
};

// How much one Fill may take: records and input bytes, and more of both for typed rows.
struct BatchLimits {
  uint64_t max_records = 0;
  uint64_t max_bytes = 0;
  uint64_t max_typed_records = 0;
  uint64_t max_typed_bytes = 0;
};

// Where a streamed reader's input stood when a batch ended (what InputStream tells the File
// source about its position).
struct StreamProgress {
  ConsumedBytes consumed;
  uint64_t held_back_bytes = 0;
  bool ended_inside_unit = false;
  static StreamProgress Of(InputStream& stream) {
    return {stream.Consumed(), stream.held_back_bytes(), stream.ended_inside_unit()};
  }
};

class FileReader {
 public:
  virtual ~FileReader() = default;
  // Adds records to `batch` until a limit is hit or the file ends; true when the file ended.
  virtual Result<bool> Fill(SourceBatch& batch, const BatchLimits& limits) = 0;
  // The layout the next Fill may decode records into (null: none); readers that cannot, ignore it.
  virtual void UseLayout(std::shared_ptr<const schema::RecordLayout> layout) {}
  // In a sample (ReadOptions::max_records_per_partition), true once the reader has read all it
  // will of the file, which may be fewer records than asked for: a reader that needs no values
  // to infer the file's schema reads fewer.
  virtual bool HasReadSample() const { return false; }
  // Where the input stood at the end of the last Fill's batch, for a reader whose stream is not
  // the one the File source opened (nullopt: ask that stream).
  virtual std::optional<StreamProgress> LastBatchProgress() const { return std::nullopt; }
};

// Reads the `stream` of one chunk of a file from `start` (a reader of the chunk's format).
using ChunkReaderFactory = std::function<Result<std::unique_ptr<FileReader>>(
    std::unique_ptr<InputStream> stream, const ReaderStart& start)>;

// Reads the plain (uncompressed) text file `file` from stream offset `begin_offset`, where
// `start` says the reading starts (nothing to skip), as chunks of whole lines (LF-ended) that
// readers made by `make_reader` parse on worker threads, several at once. Fill hands their batches
// over in file order, with lines and record numbers as one reader of the whole file would have
// given them, and LastBatchProgress where each batch ended. `no_records_reason`: the deadletter's
// reason when the file holds no record. `file` must outlive the reader.
std::unique_ptr<FileReader> MakeChunkedLinesReader(const OpenedFile& file, uint64_t begin_offset,
                                                   const ReaderStart& start,
                                                   ChunkReaderFactory make_reader,
                                                   std::string no_records_reason);

}  // namespace skippr::sources::internal
