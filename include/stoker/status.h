// stoker/status.h — the error type of every layer below the Python binding.
//
// Core code never throws: a fallible call returns Status or Result<T>, both
// [[nodiscard]]. The binding is the only place that turns them into exceptions.
// Messages name what failed where: "shard.tar: member 'a.jpg' at offset 1536: ...".
// Thread-safety: values; safe to copy and move across threads.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>

namespace stoker {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,   // the caller asked for something impossible
  kNotFound,          // a file, member or field does not exist
  kIoError,           // the operating system refused a read or write
  kDataLoss,          // bytes are there but malformed: truncated tar, corrupt JPEG
  kCancelled,         // the loader is shutting down
  kFailedPrecondition,// the call is valid but not in this state
  kDeadlineExceeded,  // a wait ran past its timeout
  kInternal,
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // Returns a copy whose message is "<context>: <message>"; used as an error
  // travels up and each layer adds where it was (shard, member, offset).
  Status WithContext(const std::string& context) const {
    if (ok()) return *this;
    return Status(code_, context + ": " + message_);
  }
  std::string ToString() const {
    return ok() ? "OK" : std::string(StatusCodeName(code_)) + ": " + message_;
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status IoError(std::string m) { return {StatusCode::kIoError, std::move(m)}; }
inline Status DataLoss(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }
inline Status Cancelled(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }
inline Status FailedPrecondition(std::string m) { return {StatusCode::kFailedPrecondition, std::move(m)}; }
inline Status DeadlineExceeded(std::string m) { return {StatusCode::kDeadlineExceeded, std::move(m)}; }
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

// A value or the Status that explains its absence.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}                  // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) { assert(!status_.ok()); }  // NOLINT

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() & { assert(ok()); return *value_; }
  const T& value() const& { assert(ok()); return *value_; }
  T&& value() && { assert(ok()); return std::move(*value_); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace stoker

#define STOKER_CONCAT_INNER_(a, b) a##b
#define STOKER_CONCAT_(a, b) STOKER_CONCAT_INNER_(a, b)

#define STOKER_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    ::stoker::Status stoker_status_ = (expr);        \
    if (!stoker_status_.ok()) return stoker_status_; \
  } while (0)

#define STOKER_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.status();                 \
  lhs = std::move(tmp).value()

#define STOKER_ASSIGN_OR_RETURN(lhs, expr) \
  STOKER_ASSIGN_OR_RETURN_IMPL_(STOKER_CONCAT_(stoker_result_, __LINE__), lhs, expr)
