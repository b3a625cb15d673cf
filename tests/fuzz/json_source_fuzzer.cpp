// The File source with format json over any bytes: JSON lines, or a JSON array when the first
// non-blank byte is '[' (gzip and zstd streams are recognised by their magic bytes, as always).
// Invariants: tests/fuzz/source_driver.hpp.
#include <cstddef>
#include <cstdint>

#include "fuzz/source_driver.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  skippr::fuzz::FuzzFileSource({"input.json", "json"}, data, size);
  return 0;
}
