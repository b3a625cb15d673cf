#include "sources/postgres_spill.hpp"

#include <fmt/format.h>
#include <xxhash.h>

#include <cstring>


namespace skippr::sources::postgres {

namespace {

// docs/formats/spill.md: a header, then records of subxid, length, checksum (little-endian
// uint32 each) and the message bytes.
constexpr std::string_view kSpillMagic{"skspill\x01", 8};
constexpr size_t kRecordHeaderBytes = 12;
constexpr size_t kWriteBufferBytes = 1 << 20;
constexpr size_t kReadChunkBytes = 1 << 20;
// pgoutput messages are bounded by PostgreSQL's 1 GB allocation limit.
constexpr uint32_t kMaxMessageBytes = 1u << 30;
constexpr std::string_view kSpillSuffix = ".spill";

void PutUint32(std::string& out, uint32_t value) {
  for (int shift = 0; shift < 32; shift += 8) out.push_back(static_cast<char>(value >> shift));
}
uint32_t GetUint32(const char* bytes) {
  uint32_t value = 0;
  for (int i = 3; i >= 0; --i) value = value << 8 | static_cast<uint8_t>(bytes[i]);
  return value;
}
uint32_t RecordChecksum(uint32_t subxid, std::string_view message) {
  return static_cast<uint32_t>(XXH3_64bits_withSeed(message.data(), message.size(), subxid));
}

}  // namespace

struct SpilledTransactions::Open {
  std::unique_ptr<WritableFile> file;
  uint64_t bytes_written = 0;
  std::string buffer;
  std::set<uint32_t> aborted_subxids;
  uint64_t changes = 0;
};

SpilledTransactions::SpilledTransactions(std::string directory, Env* env)
    : directory_(std::move(directory)), env_(env) {}

SpilledTransactions::~SpilledTransactions() {
  for (const auto& [xid, transaction] : open_) {
    transaction->file.reset();
    (void)env_->RemoveFile(PathOf(xid));  // what is left is removed by the next Reset anyway
  }
}

std::string SpilledTransactions::PathOf(uint32_t xid) const {
  return fmt::format("{}/xid-{}{}", directory_, xid, kSpillSuffix);
}

Status SpilledTransactions::Reset() {
  SKIPPR_ASSIGN_OR_RETURN(bool created, env_->CreateDirectory(directory_, 0700));
  if (created) return Status::OK();
  SKIPPR_ASSIGN_OR_RETURN(std::vector<std::string> names, env_->ListDirectory(directory_));
  for (const std::string& name : names) {
    if (name.ends_with(kSpillSuffix)) SKIPPR_RETURN_IF_ERROR(env_->RemoveFile(directory_ + "/" + name));
  }
  return Status::OK();
}

Status SpilledTransactions::Start(uint32_t xid, bool is_first_segment) {
  const bool is_open = open_.contains(xid);
  if (!is_first_segment) {
    if (is_open) return Status::OK();
    return Status::Corruption(fmt::format(
        "PostgreSQL streamed a later part of transaction {} whose first part this process never "
        "received; run sync again (the server streams the transaction again from its start)",
        xid));
  }
  // A first segment again: the server started the transaction over.
  if (is_open) SKIPPR_RETURN_IF_ERROR(Discard(xid));
  auto transaction = std::make_unique<Open>();
  SKIPPR_ASSIGN_OR_RETURN(transaction->file,
                          env_->OpenWritable(PathOf(xid), {.mode = WritableFileOptions::Mode::kCreateOrOpen,
                                                           .permissions = 0600}));
  SKIPPR_RETURN_IF_ERROR(transaction->file->Truncate(0));
  transaction->buffer.reserve(kWriteBufferBytes);
  transaction->buffer.append(kSpillMagic);
  open_.emplace(xid, std::move(transaction));
  return Status::OK();
}

Status SpilledTransactions::Append(uint32_t xid, uint32_t subxid, std::string_view message) {
  auto found = open_.find(xid);
  if (found == open_.end()) {
    return Status::Corruption(fmt::format(
        "PostgreSQL sent a change of transaction {} outside that transaction's stream", xid));
  }
  if (message.size() > kMaxMessageBytes) {
    return Status::Corruption(fmt::format(
        "a streamed change of transaction {} is {} bytes, more than PostgreSQL sends", xid,
        message.size()));
  }
  Open& transaction = *found->second;
  PutUint32(transaction.buffer, subxid);
  PutUint32(transaction.buffer, static_cast<uint32_t>(message.size()));
  PutUint32(transaction.buffer, RecordChecksum(subxid, message));
  transaction.buffer.append(message);
  transaction.changes += 1;
  if (transaction.buffer.size() >= kWriteBufferBytes) return Flush(transaction);
  return Status::OK();
}

Status SpilledTransactions::Flush(Open& transaction) {
  if (transaction.buffer.empty()) return Status::OK();
  SKIPPR_RETURN_IF_ERROR(transaction.file->WriteAt(transaction.bytes_written, transaction.buffer));
  transaction.bytes_written += transaction.buffer.size();
  transaction.buffer.clear();
  return Status::OK();
}

Status SpilledTransactions::Abort(uint32_t xid, uint32_t subxid) {
  auto found = open_.find(xid);
  // A transaction aborted before anything of it was streamed here has nothing to drop.
  if (found == open_.end()) return Status::OK();
  if (subxid == xid) return Discard(xid);
  found->second->aborted_subxids.insert(subxid);
  return Status::OK();
}

Status SpilledTransactions::Discard(uint32_t xid) {
  auto found = open_.find(xid);
  if (found == open_.end()) return Status::OK();
  found->second->file.reset();
  open_.erase(found);
  return env_->RemoveFile(PathOf(xid));
}

Result<std::unique_ptr<SpilledTransaction>> SpilledTransactions::Commit(uint32_t xid) {
  auto found = open_.find(xid);
  if (found == open_.end()) {
    return Status::Corruption(fmt::format(
        "PostgreSQL committed streamed transaction {}, none of which this process received; run "
        "sync again (the server streams the transaction again from its start)",
        xid));
  }
  std::unique_ptr<Open> transaction = std::move(found->second);
  open_.erase(found);
  SKIPPR_RETURN_IF_ERROR(Flush(*transaction));
  SKIPPR_RETURN_IF_ERROR(transaction->file->Close());
  SKIPPR_ASSIGN_OR_RETURN(std::unique_ptr<SequentialFile> file, env_->OpenSequential(PathOf(xid)));
  return std::unique_ptr<SpilledTransaction>(
      new SpilledTransaction(env_, PathOf(xid), std::move(file),
                             std::move(transaction->aborted_subxids), transaction->changes));
}

// ----- reading back ---------------------------------------------------------------------------

SpilledTransaction::SpilledTransaction(Env* env, std::string path,
                                       std::unique_ptr<SequentialFile> file,
                                       std::set<uint32_t> aborted_subxids, uint64_t changes_written)
    : env_(env),
      path_(std::move(path)),
      file_(std::move(file)),
      aborted_subxids_(std::move(aborted_subxids)),
      changes_written_(changes_written) {}

SpilledTransaction::~SpilledTransaction() {
  file_.reset();
  (void)env_->RemoveFile(path_);
}

// Makes at least `bytes` unread bytes buffered; false when the file ends first.
Result<bool> SpilledTransaction::Fill(size_t bytes) {
  if (buffer_.size() - at_ >= bytes) return true;
  file_offset_ += at_;
  buffer_.erase(0, at_);
  at_ = 0;
  while (buffer_.size() < bytes) {
    const size_t had = buffer_.size();
    buffer_.resize(had + std::max(kReadChunkBytes, bytes - had));
    SKIPPR_ASSIGN_OR_RETURN(size_t read, file_->Read(buffer_.data() + had, buffer_.size() - had));
    buffer_.resize(had + read);
    if (read == 0) return false;
  }
  return true;
}

Result<std::optional<std::string>> SpilledTransaction::Next() {
  if (!has_read_header_) {
    SKIPPR_ASSIGN_OR_RETURN(bool has_header, Fill(kSpillMagic.size()));
    if (!has_header || std::string_view(buffer_).substr(0, kSpillMagic.size()) != kSpillMagic) {
      return Status::Corruption(fmt::format("spill file {} does not start with its header", path_));
    }
    at_ = kSpillMagic.size();
    has_read_header_ = true;
  }
  while (true) {
    SKIPPR_ASSIGN_OR_RETURN(bool has_header, Fill(kRecordHeaderBytes));
    if (!has_header) {
      if (buffer_.size() != at_ || changes_read_ != changes_written_) {
        return Status::Corruption(fmt::format(
            "spill file {} ends at byte {} after {} of the {} changes written to it", path_,
            file_offset_ + buffer_.size(), changes_read_, changes_written_));
      }
      return std::optional<std::string>();
    }
    const char* header = buffer_.data() + at_;
    const uint32_t subxid = GetUint32(header);
    const uint32_t length = GetUint32(header + 4);
    const uint32_t checksum = GetUint32(header + 8);
    const uint64_t record_offset = file_offset_ + at_;
    if (length > kMaxMessageBytes) {
      return Status::Corruption(fmt::format("spill file {}: the record at byte {} claims {} bytes",
                                            path_, record_offset, length));
    }
    SKIPPR_ASSIGN_OR_RETURN(bool is_whole, Fill(kRecordHeaderBytes + length));
    if (!is_whole) {
      return Status::Corruption(fmt::format("spill file {}: the record at byte {} is cut short",
                                            path_, record_offset));
    }
    std::string_view message(buffer_.data() + at_ + kRecordHeaderBytes, length);
    if (RecordChecksum(subxid, message) != checksum) {
      return Status::Corruption(fmt::format(
          "spill file {}: the record at byte {} does not match its checksum", path_,
          record_offset));
    }
    at_ += kRecordHeaderBytes + length;
    changes_read_ += 1;
    if (aborted_subxids_.contains(subxid)) continue;
    return std::optional<std::string>(std::string(message));
  }
}

}  // namespace skippr::sources::postgres
