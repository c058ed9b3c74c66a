// lock/errors.hpp — the exceptions of the app-facing lock API (LockContext). The layers below
// report std::error_code values; these carry the same code plus what to tell the user.
//
//   LockBusy       a wait hit its deadline → the pipeline answers 503 + Retry-After
//   LockNameError  a name failed validation → 500 and a log line (a bug in the app)
//   LockOrderError taken out of canonical order with order_check = "fail", or a name this
//                  request already holds → 500 (a bug in the app)
//   LockError      the backend failed (I/O, connection) → 500
#pragma once

#include <chrono>
#include <stdexcept>
#include <string>
#include <system_error>

namespace kagi::lock {

class LockBusy : public std::runtime_error {
 public:
  LockBusy(std::string name, std::chrono::milliseconds waited);
  const std::string& name() const { return name_; }
  std::chrono::milliseconds waited() const { return waited_; }

 private:
  std::string name_;
  std::chrono::milliseconds waited_;
};

class LockNameError : public std::invalid_argument {
 public:
  LockNameError(std::string name, const std::string& reason);
  const std::string& name() const { return name_; }

 private:
  std::string name_;
};

class LockOrderError : public std::logic_error {
 public:
  LockOrderError(std::error_code code, const std::string& message)
      : std::logic_error(message), code_(code) {}
  std::error_code code() const { return code_; }

 private:
  std::error_code code_;
};

class LockError : public std::runtime_error {
 public:
  LockError(std::error_code code, const std::string& message)
      : std::runtime_error(message), code_(code) {}
  std::error_code code() const { return code_; }

 private:
  std::error_code code_;
};

}  // namespace kagi::lock
