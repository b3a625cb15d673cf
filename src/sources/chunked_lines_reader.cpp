// ChunkedLinesReader (file_reader.hpp): a plain file of lines parsed a chunk per worker thread.
//
// Parsing JSON lines into columns is most of a sync's work on one thread; the lander and the
// committer leave part of the other core idle. Lines are independent, so a file cut after a line
// feed is two files that readers of their own can parse at once. Each chunk's reader numbers its
// lines from 1 and its records from 1; as its batches are handed over, in file order, they are
// renumbered from where the chunks before ended.
#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <future>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "core/check.hpp"
#include "core/thread_priority.hpp"
#include "sources/file_reader.hpp"

namespace skippr::sources::internal {

namespace {

// Bytes per chunk (then up to the next line feed): large enough that a chunk is one batch of
// columns, small enough that the first one is parsed soon after the file is opened.
constexpr uint64_t kChunkBytes = 4 << 20;
// Test seam: SKIPPR_LINE_CHUNK_BYTES=<n> cuts chunks of n bytes (tests cut a file into many).
uint64_t ChunkBytes() {
  const char* bytes = std::getenv("SKIPPR_LINE_CHUNK_BYTES");
  return bytes == nullptr ? kChunkBytes : std::max<uint64_t>(1, std::strtoull(bytes, nullptr, 10));
}

// Parsing threads: one per core (at least two, so that parsing overlaps cutting and handing over
// even on one).
size_t WorkerThreads() {
  constexpr size_t kMinThreads = 2;
  constexpr size_t kMaxThreads = 8;
  return std::clamp<size_t>(std::thread::hardware_concurrency(), kMinThreads, kMaxThreads);
}
// Chunks cut ahead of the one being handed over, per worker: each has the next one at hand.
constexpr size_t kChunksAheadPerWorker = 2;

// One batch of a chunk, numbered as its own reader numbered it, and where its input stood.
struct ChunkBatch {
  SourceBatch batch;
  StreamProgress progress;
  bool is_last = false;  // the chunk's reader reached the chunk's end
};

struct ChunkResult {
  Status failure;
  std::vector<ChunkBatch> batches;  // those that took a record, and the last one
};

struct ChunkTask {
  uint64_t begin = 0;
  uint64_t end = 0;
  bool is_last = false;  // ends at the file's end
  std::shared_ptr<const schema::RecordLayout> layout;
  BatchLimits limits;
};

// Reads one chunk whole with a reader of its own.
ChunkResult ReadChunk(const OpenedFile& file, const ChunkReaderFactory& make_reader,
                      const ChunkTask& task) {
  ChunkResult result;
  // The file's last chunk ends where the file did when it was opened; if it has grown since, its
  // last line may be cut, and its stream holds that line back as a whole-file stream does.
  std::unique_ptr<InputStream> stream;
  if (task.is_last) {
    Result<std::unique_ptr<InputStream>> opened =
        file.OpenStream({task.begin, task.begin}, Compression::kNone);
    if (!opened.ok()) return {opened.status(), {}};
    stream = std::move(opened).value();
  } else {
    stream = file.OpenPlainRange(task.begin, task.end);
  }
  InputStream& input = *stream;
  Result<std::unique_ptr<FileReader>> reader =
      make_reader(std::move(stream), ReaderStart{.reports_empty_file = false});
  if (!reader.ok()) return {reader.status(), {}};
  (*reader)->UseLayout(task.layout);
  while (true) {
    ChunkBatch chunk_batch;
    Result<bool> is_done = (*reader)->Fill(chunk_batch.batch, task.limits);
    if (!is_done.ok()) return {is_done.status(), std::move(result.batches)};
    chunk_batch.progress = StreamProgress::Of(input);
    chunk_batch.is_last = *is_done;
    const SourceBatch& batch = chunk_batch.batch;
    if (batch.record_count() + batch.deadletters.size() > 0 || chunk_batch.is_last) {
      result.batches.push_back(std::move(chunk_batch));
    }
    if (*is_done) return result;
  }
}

// Reads chunks on a few threads of its own, in the order they were posted.
class WorkerPool {
 public:
  explicit WorkerPool(size_t threads) {
    for (size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { Work(); });
  }
  ~WorkerPool() {
    {
      std::lock_guard lock(mutex_);
      is_stopping_ = true;
    }
    changed_.notify_all();
    for (std::thread& thread : threads_) thread.join();
  }
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  std::future<ChunkResult> Post(std::packaged_task<ChunkResult()> task) {
    std::future<ChunkResult> future = task.get_future();
    {
      std::lock_guard lock(mutex_);
      tasks_.push_back(std::move(task));
    }
    changed_.notify_one();
    return future;
  }

 private:
  void Work() {
    // At the lander's priority: what is parsed ahead has as much slack as what waits to land, and
    // a lander starved by parsing leaves a backlog that ends the sync on one core. The sync and
    // committer threads between them keep theirs: they must not wait for a core.
    LowerThisThreadsPriority();
    while (true) {
      std::packaged_task<ChunkResult()> task;
      {
        std::unique_lock lock(mutex_);
        changed_.wait(lock, [this] { return is_stopping_ || !tasks_.empty(); });
        if (is_stopping_) return;  // a task not started is dropped: its future is abandoned
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
    }
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::packaged_task<ChunkResult()>> tasks_;
  bool is_stopping_ = false;
  std::vector<std::thread> threads_;
};

class ChunkedLinesReader final : public FileReader {
 public:
  ChunkedLinesReader(const OpenedFile& file, uint64_t begin_offset, const ReaderStart& start,
                     ChunkReaderFactory make_reader, std::string no_records_reason)
      : file_(file),
        make_reader_(std::move(make_reader)),
        no_records_reason_(std::move(no_records_reason)),
        next_chunk_begin_(begin_offset),
        next_line_(start.line),
        records_(start.records),
        chunk_bytes_(ChunkBytes()),
        chunks_ahead_(kChunksAheadPerWorker * WorkerThreads()),
        pool_(WorkerThreads()) {
    SKIPPR_CHECK_MSG(start.skip_records == 0, "a chunked reader starts where nothing is skipped");
  }

  void UseLayout(std::shared_ptr<const schema::RecordLayout> layout) override {
    layout_ = std::move(layout);
  }

  Result<bool> Fill(SourceBatch& batch, const BatchLimits& limits) override {
    SKIPPR_RETURN_IF_ERROR(CutChunksAhead(limits));
    if (!current_) {
      SKIPPR_CHECK_MSG(!in_flight_.empty(), "Fill is not called again after the end");
      current_ = in_flight_.front().get();
      in_flight_.pop_front();
      next_batch_ = 0;
      if (!current_->failure.ok()) return std::exchange(current_, std::nullopt)->failure;
      SKIPPR_CHECK(!current_->batches.empty() && current_->batches.back().is_last);
    }
    ChunkBatch& taken = current_->batches[next_batch_++];
    HandOver(taken, batch);
    last_progress_ = taken.progress;
    if (!taken.is_last) return false;
    current_.reset();
    const bool is_file_end = in_flight_.empty() && next_chunk_begin_ >= file_.size_bytes();
    if (is_file_end) AddNoRecordsDeadletter(batch);
    return is_file_end;
  }

  std::optional<StreamProgress> LastBatchProgress() const override { return last_progress_; }

 private:
  // Keeps chunks_ahead_ chunks posted, each cut after the first line feed past chunk_bytes_.
  Status CutChunksAhead(const BatchLimits& limits) {
    while (in_flight_.size() < chunks_ahead_ && next_chunk_begin_ < file_.size_bytes()) {
      ChunkTask task{.begin = next_chunk_begin_, .layout = layout_, .limits = limits};
      const uint64_t target = task.begin + chunk_bytes_;
      uint64_t line_feed = file_.size_bytes();
      if (target < file_.size_bytes()) {
        SKIPPR_ASSIGN_OR_RETURN(line_feed, file_.FindByte('\n', target - 1));
      }
      task.is_last = line_feed + 1 >= file_.size_bytes();
      task.end = task.is_last ? file_.size_bytes() : line_feed + 1;
      next_chunk_begin_ = task.end;
      Post(std::move(task));
    }
    // An empty file, or one started at its end: a chunk with nothing in it ends the reading.
    if (in_flight_.empty() && !current_ && !has_started_) {
      Post({.begin = next_chunk_begin_, .end = file_.size_bytes(), .is_last = true,
            .layout = layout_, .limits = limits});
    }
    has_started_ = true;
    return Status::OK();
  }

  void Post(ChunkTask task) {
    in_flight_.push_back(pool_.Post(std::packaged_task<ChunkResult()>(
        [&file = file_, &make_reader = make_reader_, task = std::move(task)] {
          return ReadChunk(file, make_reader, task);
        })));
  }

  // Moves `from` into `to` (which has the File source's partition and context), its lines and
  // record numbers counted on from the chunks before.
  void HandOver(ChunkBatch& from, SourceBatch& to) {
    // A chunk's reader numbered its lines and records from 1: shifted by those before the chunk.
    const uint64_t line_shift = next_line_ - 1;
    const uint64_t record_shift = records_;
    SourceBatch& batch = from.batch;
    records_in_chunk_ += batch.record_count() + batch.deadletters.size();
    for (SourceRecord& record : batch.records) {
      record.line += line_shift;
      record.row += record_shift;
      to.records.push_back(std::move(record));
    }
    for (schema::Deadletter& deadletter : batch.deadletters) {
      deadletter.origin.line += line_shift;
      deadletter.origin.row += record_shift;
      to.deadletters.push_back(std::move(deadletter));
    }
    if (batch.columns) {
      batch.columns->first_row += record_shift;
      for (uint64_t& line : batch.columns->lines) line += line_shift;
      to.columns = std::move(batch.columns);
    }
    to.bytes_read += batch.bytes_read;
    to.position.next_line = batch.position.next_line + line_shift;
    if (from.is_last) {
      next_line_ = to.position.next_line;
      records_ += std::exchange(records_in_chunk_, 0);
    }
  }

  // At the end of a file that held no record at all, one deadletter that says so, as a reader of
  // the whole file would have added (not while the file grows: its first record is coming).
  void AddNoRecordsDeadletter(SourceBatch& batch) {
    const bool is_whole_file =
        last_progress_->held_back_bytes == 0 && !last_progress_->ended_inside_unit;
    if (records_ > 0 || !is_whole_file) return;
    ++records_;
    batch.deadletters.push_back(schema::MakeDeadletter({batch.partition, next_line_, records_},
                                                       schema::FailureCode::kUnreadableFile,
                                                       no_records_reason_, ""));
  }

  const OpenedFile& file_;
  const ChunkReaderFactory make_reader_;
  const std::string no_records_reason_;
  std::shared_ptr<const schema::RecordLayout> layout_;
  uint64_t next_chunk_begin_;
  bool has_started_ = false;
  uint64_t next_line_;  // of the next chunk's first line
  uint64_t records_;    // in the chunks before the current one, and in earlier passes
  uint64_t records_in_chunk_ = 0;  // handed over from the current chunk
  const uint64_t chunk_bytes_;
  const size_t chunks_ahead_;
  std::deque<std::future<ChunkResult>> in_flight_;
  std::optional<ChunkResult> current_;  // the chunk whose batches are being handed over
  size_t next_batch_ = 0;
  std::optional<StreamProgress> last_progress_;
  WorkerPool pool_;  // last: destroyed first, so no worker outlives what it uses
};

}  // namespace

std::unique_ptr<FileReader> MakeChunkedLinesReader(const OpenedFile& file, uint64_t begin_offset,
                                                   const ReaderStart& start,
                                                   ChunkReaderFactory make_reader,
                                                   std::string no_records_reason) {
  return std::make_unique<ChunkedLinesReader>(file, begin_offset, start, std::move(make_reader),
                                              std::move(no_records_reason));
}

}  // namespace skippr::sources::internal
