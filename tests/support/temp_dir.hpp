// A fresh directory under the system temp dir, removed (with its contents) on destruction.
#pragma once

#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <system_error>

namespace skippr::testing {

class TempDir {
 public:
  TempDir() : TempDir(std::filesystem::temp_directory_path()) {}
  // Under `parent` (for a test that needs a particular file system, such as tmpfs).
  explicit TempDir(const std::filesystem::path& parent) {
    std::string pattern = (parent / "skippr-test-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      throw std::runtime_error(std::string("mkdtemp failed: ") + std::strerror(errno));
    }
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }

  // The path of `name` inside the directory (nothing is created).
  std::string Sub(const std::string& name) const { return path_ + "/" + name; }

  // Writes `contents` (binary) to `relative_path`, creating parent directories; returns the full path.
  std::string Write(const std::string& relative_path, const std::string& contents) const {
    const std::filesystem::path full = std::filesystem::path(path_) / relative_path;
    std::filesystem::create_directories(full.parent_path());
    std::ofstream(full, std::ios::binary) << contents;
    return full.string();
  }

 private:
  std::string path_;
};

}  // namespace skippr::testing
