// Status and Result<T>: how every I/O, parse and commit path reports failure (RocksDB/Arrow style).
// Callers branch on StatusCode, never on message text; messages are for people and say what to do.
#pragma once

#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace skippr {

enum class StatusCode {
  kOk = 0,
  kInvalidConfig,    // skippr.yml (or a value referenced from it) is wrong; the message names the
                     // place
  kInvalidArgument,  // a caller passed something unusable (command-line values, API arguments)
  kNotFound,
  kIOError,
  kCorruption,  // committed bytes fail their checks: data damage, never retried silently
  kNoSpace,
  kConflict,     // a compare-and-set or lease lost to another writer
  kUnavailable,  // try again later (lease held, backpressure)
  kNotSupported,
  kInternal,  // a broken invariant inside skipprd: a bug
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status OK() { return {}; }
  static Status InvalidConfig(std::string m) { return {StatusCode::kInvalidConfig, std::move(m)}; }
  static Status InvalidArgument(std::string m) {
    return {StatusCode::kInvalidArgument, std::move(m)};
  }
  static Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
  static Status IOError(std::string m) { return {StatusCode::kIOError, std::move(m)}; }
  static Status Corruption(std::string m) { return {StatusCode::kCorruption, std::move(m)}; }
  static Status NoSpace(std::string m) { return {StatusCode::kNoSpace, std::move(m)}; }
  static Status Conflict(std::string m) { return {StatusCode::kConflict, std::move(m)}; }
  static Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
  static Status NotSupported(std::string m) { return {StatusCode::kNotSupported, std::move(m)}; }
  static Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "InvalidConfig: skippr.yml:3:5: ..." — for logs; user-facing output prints message() alone.
  std::string ToString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// A value or the Status explaining why there is none. Accessing the value of a failed Result
// aborts: that is a programming error, not a runtime condition.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::move(value)) {}        // NOLINT: implicit, like arrow::Result
  Result(Status status) : state_(std::move(status)) {  // NOLINT
    if (std::get<Status>(state_).ok()) std::abort();   // an OK Status carries no value
  }

  bool ok() const { return std::holds_alternative<T>(state_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(state_);
  }
  T& value() & { return Checked(); }
  const T& value() const& { return const_cast<Result*>(this)->Checked(); }
  T&& value() && { return std::move(Checked()); }
  T* operator->() { return &Checked(); }
  const T* operator->() const { return &const_cast<Result*>(this)->Checked(); }
  T& operator*() & { return Checked(); }
  const T& operator*() const& { return const_cast<Result*>(this)->Checked(); }

 private:
  T& Checked() {
    if (!ok()) std::abort();
    return std::get<T>(state_);
  }
  std::variant<T, Status> state_;
};

}  // namespace skippr

#define SKIPPR_CONCAT_INNER(a, b) a##b
#define SKIPPR_CONCAT(a, b) SKIPPR_CONCAT_INNER(a, b)

#define SKIPPR_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    ::skippr::Status _skippr_status = (expr);        \
    if (!_skippr_status.ok()) return _skippr_status; \
  } while (0)

#define SKIPPR_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()

#define SKIPPR_ASSIGN_OR_RETURN(lhs, expr) \
  SKIPPR_ASSIGN_OR_RETURN_IMPL(SKIPPR_CONCAT(_skippr_result_, __LINE__), lhs, expr)
