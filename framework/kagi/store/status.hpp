// store/status.hpp — how the storage layer reports failure: Status (ok or an error code plus
// a message naming the operation and the file) and Result<T> (a value or a Status).
//
//   auto posts = ctx.data.read(board, "bbs/3.dat");   // Result<std::string>
//   if (!posts.ok()) return error_page(posts.status().message());
//
// Handlers that let the pipeline turn a failure into a 500 page and a log line call
// value() / check(), which throw StoreError carrying the same message:
//
//   std::string text = ctx.data.read(board, "bbs/3.dat").value();
//   ctx.data.commit(board, "bbs/3.dat", text).check();
#pragma once

#include <cassert>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>

namespace kagi::store {

// Errors of the storage layer itself (category "kagi.store"). I/O failures keep their errno
// (std::system_category); a refused fence keeps the lock layer's code.
enum class Errc {
  kUnsafePath = 1,     // the path is absolute, has "..", NUL, an empty segment, or a symlink
  kNotHeld,            // the guard does not hold its lock (released, moved-from, default)
  kTooLarge,           // a log record over the size limit
  kCorrupt,            // a file's content failed its check where no recovery is allowed
  kForeignLockDomain,  // data.dir is written under another lock domain (lock_domain_claim.hpp)
  kUnavailable,        // the data server (data.backend = "postgres") cannot be reached now
  kDatabase,           // the data server refused a statement (privileges, schema): see the message
};

const std::error_category& store_category();
std::error_code make_error_code(Errc e);

}  // namespace kagi::store

template <>
struct std::is_error_code_enum<kagi::store::Errc> : std::true_type {};

namespace kagi::store {

// Thrown by Status::check() and Result<T>::value() on failure: the app-facing edge.
class StoreError : public std::runtime_error {
 public:
  StoreError(std::error_code code, const std::string& message)
      : std::runtime_error(message), code_(code) {}
  std::error_code code() const { return code_; }

 private:
  std::error_code code_;
};

// Success, or an error code with a message like
// "commit bbs/3.dat: rename: No space left on device".
class [[nodiscard]] Status {
 public:
  Status() = default;  // ok
  Status(std::error_code code, std::string message) : code_(code), message_(std::move(message)) {}

  // Builds "<op> <path>: <step>: <code's message>" (step may be empty).
  static Status failed(std::error_code code, std::string_view op, std::string_view path,
                       std::string_view step);

  bool ok() const { return !code_; }
  std::error_code code() const { return code_; }
  // Empty when ok().
  const std::string& message() const { return message_; }

  // Throws StoreError if this is an error; for handlers that let the pipeline answer 500.
  void check() const {
    if (!ok()) throw StoreError(code_, message_);
  }

 private:
  std::error_code code_;
  std::string message_;
};

// A value, or the Status saying why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit on purpose
  // `status` must be an error; an ok Status here is a bug and is turned into one, so that
  // value() can never hand out an empty value.
  Result(Status status) : status_(std::move(status)) {  // NOLINT: implicit on purpose
    assert(!status_.ok() && "a Result without a value needs an error");
    if (status_.ok()) status_ = Status(make_error_code(Errc::kCorrupt), "Result without a value");
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }

  // The value; throws StoreError if there is none.
  T& value() & {
    status_.check();
    return *value_;
  }
  const T& value() const& {
    status_.check();
    return *value_;
  }
  // By value, so `for (auto& x : data.read_log(...).value())` is safe: a reference into the
  // temporary Result would dangle before the loop body runs.
  T value() && {
    status_.check();
    return std::move(*value_);
  }

  // Unchecked access: only after ok() returned true.
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace kagi::store
