// tests/unit/support/temp_dir.hpp — a fresh temporary directory per test, removed afterwards.
// Shared by the unit tests of every module (include it as "../support/temp_dir.hpp").
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace kagi::test_support {

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/kagi-test-XXXXXX";
    if (::mkdtemp(tmpl)) path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

  // Writes `text` to `name` (relative to the directory); returns the file's path.
  std::string write(const std::string& name, const std::string& text) const {
    const std::string p = path_ + "/" + name;
    std::ofstream(p, std::ios::binary | std::ios::trunc) << text;
    return p;
  }

 private:
  std::string path_;
};

}  // namespace kagi::test_support
