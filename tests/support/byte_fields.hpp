// Little-endian fields read from and written into a byte string at an offset, for tests that take
// a documented format apart or damage it (segment_test, the wal_segment fuzz target).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

namespace skippr::testing {

template <typename T>
T LoadAt(const std::string& bytes, uint64_t offset) {
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof(T));
  return value;
}

template <typename T>
void StoreAt(std::string& bytes, uint64_t offset, T value) {
  std::memcpy(bytes.data() + offset, &value, sizeof(T));
}

}  // namespace skippr::testing
