// tests/unit/lock/test_dir.hpp — a fresh temporary directory per test, removed afterwards.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>

namespace kagi::lock::testing {

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/kagi-lock-XXXXXX";
    if (::mkdtemp(tmpl)) path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace kagi::lock::testing
