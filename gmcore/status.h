// Errors as values (STYLE.md §4): a Status carries the exact cause of a
// failure; Expected<T> carries a value or that cause. Neither throws.
#ifndef GOLDMINER_GMCORE_STATUS_H_
#define GOLDMINER_GMCORE_STATUS_H_

#include <optional>
#include <string>
#include <utility>

namespace goldminer {

// Value type; thread-compatible.
class Status {
 public:
  Status() = default;  // success
  static Status error(std::string message) { return Status(std::move(message)); }
  // A failure of the environment the work ran in, not of its input or of
  // the request: a process killed (say by the kernel's OOM killer), an I/O
  // error of the OS, memory exhausted. The same work may succeed again or
  // elsewhere: the data plane re-runs a split that failed so on another
  // worker (dw_daemon/worker.h), where any other error ends the run.
  static Status environment_error(std::string message) {
    Status s(std::move(message));
    s.environment_ = true;
    return s;
  }

  bool ok() const { return !message_.has_value(); }
  bool is_environment_error() const { return environment_; }
  // The cause, or "" on success.
  const std::string& message() const {
    static const std::string kEmpty;
    return message_ ? *message_ : kEmpty;
  }

 private:
  explicit Status(std::string message) : message_(std::move(message)) {}
  std::optional<std::string> message_;
  bool environment_ = false;
};

// A value or the Status that explains why there is none.
template <typename T>
class Expected {
 public:
  Expected(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  Expected(Status status) : status_(std::move(status)) {}  // NOLINT

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  const T* operator->() const { return &*value_; }
  T* operator->() { return &*value_; }
  const T& operator*() const& { return *value_; }
  T& operator*() & { return *value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace goldminer

#endif  // GOLDMINER_GMCORE_STATUS_H_
