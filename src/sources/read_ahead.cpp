// A source that reads ahead on its own thread (see sources.hpp, ReadAhead).
#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "sources/sources.hpp"

namespace skippr::sources {

namespace {

class ReadAheadSource final : public Source {
 public:
  ReadAheadSource(std::unique_ptr<Source> inner, size_t max_batches_ahead)
      : inner_(std::move(inner)), max_batches_ahead_(std::max<size_t>(1, max_batches_ahead)) {}

  ~ReadAheadSource() override {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    changed_.notify_all();
    if (reader_.joinable()) reader_.join();
  }

  Status Open(const SourcePositions& committed, const ReadOptions& options) override {
    SKIPPR_RETURN_IF_ERROR(inner_->Open(committed, options));
    reader_ = std::thread([this] { ReadUntilTheEnd(); });
    return Status::OK();
  }

  void Acknowledge(const SourcePositions& committed) override { inner_->Acknowledge(committed); }

  Result<std::optional<SourceBatch>> Next() override {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [this] { return !ready_.empty() || finished_; });
    if (ready_.empty()) {
      if (!failure_.ok()) return failure_;
      return std::optional<SourceBatch>();
    }
    SourceBatch batch = std::move(ready_.front());
    ready_.pop_front();
    lock.unlock();
    changed_.notify_all();
    return std::optional<SourceBatch>(std::move(batch));
  }

 private:
  // The reader thread: the inner source is used only here once Open has returned.
  void ReadUntilTheEnd() {
    while (true) {
      Result<std::optional<SourceBatch>> batch = inner_->Next();
      std::unique_lock lock(mutex_);
      if (!batch.ok() || !batch->has_value()) {
        if (!batch.ok()) failure_ = batch.status();
        finished_ = true;
        lock.unlock();
        changed_.notify_all();
        return;
      }
      changed_.wait(lock, [this] { return ready_.size() < max_batches_ahead_ || stopping_; });
      if (stopping_) return;
      ready_.push_back(std::move(**batch));
      lock.unlock();
      changed_.notify_all();
    }
  }

  std::unique_ptr<Source> inner_;
  const size_t max_batches_ahead_;
  std::thread reader_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<SourceBatch> ready_;
  Status failure_;
  bool finished_ = false;
  bool stopping_ = false;
};

}  // namespace

std::unique_ptr<Source> ReadAhead(std::unique_ptr<Source> inner, size_t max_batches_ahead) {
  return std::make_unique<ReadAheadSource>(std::move(inner), max_batches_ahead);
}

}  // namespace skippr::sources
