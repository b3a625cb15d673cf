// Internal to sources/: transactions PostgreSQL streams while they are still in progress
// (pgoutput protocol version 2), held on disk until their Stream Commit.
//
// Each open transaction's changes go to a spill file of its own in the pipeline's scratch
// directory, each with the (sub)transaction it belongs to, so that a Stream Abort of a
// subtransaction drops exactly its changes and one of the whole transaction drops the file. None
// of an uncommitted transaction's changes reach the WAL, and memory holds one write buffer per
// open transaction whatever its size. A crash loses only spill files: the slot is never confirmed
// past a commit the WAL does not hold, so the server streams those transactions again
// (docs/formats/spill.md).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "core/env.hpp"
#include "core/status.hpp"

namespace skippr::sources::postgres {

// A committed transaction's changes read back from its spill file, in the order they arrived,
// those of aborted subtransactions left out. The file is removed when the reader goes.
class SpilledTransaction {
 public:
  ~SpilledTransaction();
  // The next change (a pgoutput message without its transaction id), or nullopt at the end.
  Result<std::optional<std::string>> Next();
  uint64_t changes_read() const { return changes_read_; }

 private:
  friend class SpilledTransactions;
  SpilledTransaction(Env* env, std::string path, std::unique_ptr<SequentialFile> file,
                     std::set<uint32_t> aborted_subxids, uint64_t changes_written);
  Result<bool> Fill(size_t bytes);

  Env* env_;
  std::string path_;
  std::unique_ptr<SequentialFile> file_;
  std::set<uint32_t> aborted_subxids_;
  uint64_t changes_written_ = 0;
  uint64_t changes_read_ = 0;  // records read, aborted ones included
  uint64_t file_offset_ = 0;   // of buffer_[0]
  std::string buffer_;
  size_t at_ = 0;
  bool has_read_header_ = false;
};

class SpilledTransactions {
 public:
  // Spill files live in `directory` (created when missing).
  explicit SpilledTransactions(std::string directory, Env* env = Env::Default());
  ~SpilledTransactions();

  // Creates the directory, or empties it of what an earlier process left: those transactions will
  // be streamed again.
  Status Reset();
  // A Stream Start. The first segment of a transaction starts its file; a later one must find it.
  Status Start(uint32_t xid, bool is_first_segment);
  // A change of subtransaction `subxid` (== xid for the top level) of open transaction `xid`.
  Status Append(uint32_t xid, uint32_t subxid, std::string_view message);
  // A Stream Abort: of the whole transaction (subxid == xid) or of one subtransaction.
  Status Abort(uint32_t xid, uint32_t subxid);
  // A Stream Commit: the transaction's changes, to be applied now.
  Result<std::unique_ptr<SpilledTransaction>> Commit(uint32_t xid);

  size_t open_transactions() const { return open_.size(); }

 private:
  struct Open;
  std::string PathOf(uint32_t xid) const;
  Status Flush(Open& transaction);
  Status Discard(uint32_t xid);

  std::string directory_;
  Env* env_;
  std::map<uint32_t, std::unique_ptr<Open>> open_;
};

}  // namespace skippr::sources::postgres
