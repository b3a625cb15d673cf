// What the fuzz targets share: the invariant check that turns a broken promise into a crash
// libFuzzer keeps, a scratch file the File source reads, and the WAL round trip every shaped batch
// must survive.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/batch.hpp"
#include "core/status.hpp"

namespace skippr::fuzz {

// Aborts with `what` when `condition` is false. libFuzzer saves the input of an abort like any
// crash; the replay test (tests/fuzz/replay_main.cpp) fails on it too.
#define FUZZ_CHECK(condition, what)                                                     \
  do {                                                                                  \
    if (!(condition)) ::skippr::fuzz::InvariantFailed(#condition, __FILE__, __LINE__, what); \
  } while (0)
[[noreturn]] void InvariantFailed(const char* condition, const char* file, int line,
                                  const std::string& what);

// A file the fuzz target rewrites with each input, in a private directory on tmpfs (/dev/shm, or
// the temp directory where there is none), removed when the process exits.
class ScratchFile {
 public:
  explicit ScratchFile(const std::string& file_name);
  const std::string& path() const { return path_; }
  const std::string& directory() const { return directory_; }
  void Write(const uint8_t* data, size_t size) const;
  // Another file beside it (the config target's .env files); an empty `contents` removes it.
  void WriteBeside(const std::string& file_name, std::string_view contents) const;

 private:
  std::string directory_;
  std::string path_;
};

// True when two columns hold the same type and bytes (validity, fixed, offsets, data, children).
bool SameColumn(const Column& a, const Column& b);
bool SameBatch(const Batch& a, const Batch& b);

// The WAL's own check of what it commits (Wal::Prepare): `batches` encode into a segment that
// verifies, and every slice decodes back to the same batch.
void CheckWalRoundTrip(const std::vector<Batch>& batches);

// A status code is one of `allowed`; aborts naming the code and message otherwise.
void CheckCodeIn(const Status& status, std::initializer_list<StatusCode> allowed,
                 std::string_view context);

}  // namespace skippr::fuzz
