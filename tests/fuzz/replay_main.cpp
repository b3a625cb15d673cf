// Replays a fuzz target's committed inputs — its seeds and the regressions (inputs that once broke
// an invariant) — through LLVMFuzzerTestOneInput in the ordinary build, so `make test` checks every
// one of them on every run. FUZZ_TARGET_DIR names tests/fuzz/<target>/.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

namespace fs = std::filesystem;

std::vector<fs::path> FilesUnder(const fs::path& directory) {
  std::vector<fs::path> files;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(directory, error)) {
    if (entry.is_regular_file()) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

size_t ReplayAll(const std::string& subdirectory) {
  const std::vector<fs::path> files = FilesUnder(fs::path(FUZZ_TARGET_DIR) / subdirectory);
  for (const fs::path& file : files) {
    // Printed first: an invariant failure aborts the process, and this names the input that did.
    std::fprintf(stderr, "replaying %s\n", file.c_str());
    std::ifstream in(file, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }
  return files.size();
}

TEST(FuzzReplay, Seeds) { EXPECT_GT(ReplayAll("seeds"), 0u) << "no seeds under " << FUZZ_TARGET_DIR; }

TEST(FuzzReplay, Regressions) { ReplayAll("regressions"); }

}  // namespace
