#include "wal/byte_planes.hpp"

#include "core/check.hpp"

namespace skippr::wal {
namespace {

// A fixed width the compiler unrolls: plane j is byte j of every value.
template <size_t kWidth>
void Split(const uint8_t* values, size_t count, uint8_t* planes) {
  for (size_t i = 0; i < count; ++i) {
    const uint8_t* value = values + i * kWidth;
    for (size_t j = 0; j < kWidth; ++j) planes[j * count + i] = value[j];
  }
}

template <size_t kWidth>
void Join(const uint8_t* planes, size_t count, uint8_t* values) {
  for (size_t i = 0; i < count; ++i) {
    uint8_t* value = values + i * kWidth;
    for (size_t j = 0; j < kWidth; ++j) value[j] = planes[j * count + i];
  }
}

void CheckBlock(size_t bytes, size_t width) {
  SKIPPR_CHECK(IsSplitIntoPlanes(width) && bytes % width == 0 && bytes <= kBytePlaneBlockBytes);
}

}  // namespace

void SplitIntoPlanes(const uint8_t* values, size_t bytes, size_t width, uint8_t* planes) {
  CheckBlock(bytes, width);
  if (width == 8) return Split<8>(values, bytes / 8, planes);
  return Split<16>(values, bytes / 16, planes);
}

void JoinPlanes(const uint8_t* planes, size_t bytes, size_t width, uint8_t* values) {
  CheckBlock(bytes, width);
  if (width == 8) return Join<8>(planes, bytes / 8, values);
  return Join<16>(planes, bytes / 16, values);
}

}  // namespace skippr::wal
