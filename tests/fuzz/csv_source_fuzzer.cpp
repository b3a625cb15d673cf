// The File source with format csv over any bytes (delimiter sniffed, header row, quotes; gzip and
// zstd streams are recognised by their magic bytes). Invariants: tests/fuzz/source_driver.hpp.
#include <cstddef>
#include <cstdint>

#include "fuzz/source_driver.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  skippr::fuzz::FuzzFileSource({"input.csv", "csv"}, data, size);
  return 0;
}
