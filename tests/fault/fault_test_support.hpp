// What the in-process fault tests share: rows with a known checksum, and crashes at skipprd's
// named crash points simulated in-process (the power cut under a FaultInjectionEnv, then the code
// under test stopped by an exception) instead of a SIGKILL.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/batch.hpp"
#include "core/crash.hpp"
#include "support/fault_env.hpp"

namespace skippr::testing {

// The e2e tests' row content (tests/e2e/skipprd_runner.cpp): id, name, amount.
inline int64_t AmountOf(int64_t id) { return (id * 7919) % 100000; }
inline int64_t ChecksumOf(int64_t id) { return id * 31 + AmountOf(id); }

inline std::vector<Field> RowFields() {
  return {{1, "id", LogicalType::Long(), true},
          {2, "name", LogicalType::String(), true},
          {3, "amount", LogicalType::Long(), true}};
}

// A name per id that zstd cannot shrink much (16 hex digits of a mixed id), so that a commit's
// segment spans several 4 KiB blocks whatever the WAL's encoding.
inline std::string NameOf(int64_t id) {
  uint64_t mixed = static_cast<uint64_t>(id) * 0x9e3779b97f4a7c15ULL;
  mixed = (mixed ^ (mixed >> 31)) * 0xbf58476d1ce4e5b9ULL;
  return fmt::format("rider-{:016x}", mixed ^ (mixed >> 29));
}

// Rows with ids first_id .. first_id + rows - 1.
inline Batch RowsBatch(const std::string& namespace_name, int64_t first_id, int64_t rows) {
  Batch batch;
  batch.namespace_name = namespace_name;
  batch.schema_id = 1;
  batch.fields = RowFields();
  for (const Field& field : batch.fields) batch.columns.emplace_back(field.type);
  for (int64_t id = first_id; id < first_id + rows; ++id) {
    batch.columns[0].Append(Value::Int(id));
    batch.columns[1].Append(Value::String(NameOf(id)));
    batch.columns[2].Append(Value::Int(AmountOf(id)));
  }
  batch.num_rows = rows;
  return batch;
}

// Crashes (power cut, then SimulatedCrash thrown) at the `occurrence`-th crash point reached
// (counting from 0), or at the first one named `name`, while it is in scope; or only records the
// points reached. One at a time per process.
class CrashPointCrasher {
 public:
  CrashPointCrasher(FaultInjectionEnv& env, std::optional<size_t> occurrence)
      : env_(env), occurrence_(occurrence) {
    active_ = this;
    SetCrashPointObserver(&Observe);
  }
  CrashPointCrasher(FaultInjectionEnv& env, std::string name)
      : CrashPointCrasher(env, std::nullopt) {
    name_ = std::move(name);
  }
  ~CrashPointCrasher() {
    SetCrashPointObserver(nullptr);
    active_ = nullptr;
  }
  CrashPointCrasher(const CrashPointCrasher&) = delete;
  CrashPointCrasher& operator=(const CrashPointCrasher&) = delete;

  // The crash points reached so far, in order.
  const std::vector<std::string>& reached() const { return reached_; }

 private:
  static void Observe(std::string_view name) {
    CrashPointCrasher& self = *active_;
    self.reached_.emplace_back(name);
    if ((self.occurrence_ && self.reached_.size() == *self.occurrence_ + 1) ||
        (!self.name_.empty() && name == self.name_)) {
      self.env_.CutPower();
      throw SimulatedCrash{std::string(name)};
    }
  }

  static inline CrashPointCrasher* active_ = nullptr;
  FaultInjectionEnv& env_;
  std::optional<size_t> occurrence_;
  std::string name_;
  std::vector<std::string> reached_;
};

inline void ThrowCrash(const std::string& where) { throw SimulatedCrash{where}; }

}  // namespace skippr::testing
