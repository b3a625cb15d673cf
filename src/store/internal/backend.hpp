// The store's backends (LMDB under DATA_DIR, a DynamoDB table) behind one shape: a Backend begins
// pinned snapshots and write sessions; ReadTransaction and WriteTransaction (store.hpp) wrap them
// with the rules every backend shares (a spent transaction stays spent, no writes inside a scan,
// one thread per write transaction).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "store/store.hpp"

namespace skippr::store::internal {

// One consistent view of the families, pinned until destroyed.
class Snapshot {
 public:
  virtual ~Snapshot() = default;
  virtual Result<std::optional<std::string>> Get(Family family, std::string_view key) const = 0;
  // Keys starting with `prefix`, from the first at or after `start` (empty: from the prefix).
  virtual Status Scan(Family family, std::string_view prefix, std::string_view start,
                      const ScanVisitor& visit) const = 0;
  virtual Result<std::optional<std::string>> LastKey(Family family,
                                                     std::string_view prefix) const = 0;
};

// The writes of one transaction, seeing its own writes; discarded on destruction unless committed.
// After an operation fails with `spent()` true nothing of the session can commit anymore.
class WriteSession {
 public:
  virtual ~WriteSession() = default;
  virtual Result<std::optional<std::string>> Get(Family family, std::string_view key) const = 0;
  virtual Status Scan(Family family, std::string_view prefix, const ScanVisitor& visit) const = 0;
  virtual Status Put(Family family, std::string_view key, std::string_view value) = 0;
  virtual Status Delete(Family family, std::string_view key) = 0;
  virtual Status DeletePrefix(Family family, std::string_view prefix) = 0;
  // Durable on OK. The session is finished either way.
  virtual Status Commit() = 0;
  virtual bool spent() const = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Result<std::unique_ptr<Snapshot>> BeginRead() const = 0;
  virtual Result<std::unique_ptr<WriteSession>> BeginWrite() = 0;
  virtual const std::string& directory() const = 0;
  virtual const StoreIdentity& identity() const = 0;
};

}  // namespace skippr::store::internal
