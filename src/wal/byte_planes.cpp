#include "wal/byte_planes.hpp"

#include <cstring>
#include <initializer_list>

#include "core/check.hpp"

namespace skippr::wal {
namespace {

// Transposes the 8×8 byte matrix whose row k is rows[k] (byte j of a row is column j): row j then
// holds byte j of every former row. Three rounds of swaps, of 4×4, 2×2 and 1×1 blocks; each round
// exchanges the upper-right block with the lower-left one of every block pair at once.
void Transpose8x8(uint64_t rows[8]) {
  const auto swap = [&](int a, int b, int shift, uint64_t mask) {
    const uint64_t t = ((rows[a] >> shift) ^ rows[b]) & mask;
    rows[a] ^= t << shift;
    rows[b] ^= t;
  };
  for (int i = 0; i < 4; ++i) swap(i, i + 4, 32, 0x00000000ffffffffULL);
  for (int i : {0, 1, 4, 5}) swap(i, i + 2, 16, 0x0000ffff0000ffffULL);
  for (int i : {0, 2, 4, 6}) swap(i, i + 1, 8, 0x00ff00ff00ff00ffULL);
}

// Eight values at a time: each 8-byte half of them (a 16-byte value has two) is an 8×8 byte
// matrix whose transpose is 8 bytes of 8 planes. The values after the last whole eight go a byte
// at a time.
template <size_t kWidth>
void Split(const uint8_t* values, size_t count, uint8_t* planes) {
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    for (size_t half = 0; half < kWidth / 8; ++half) {
      uint64_t rows[8];
      for (size_t k = 0; k < 8; ++k) std::memcpy(&rows[k], values + (i + k) * kWidth + half * 8, 8);
      Transpose8x8(rows);
      for (size_t j = 0; j < 8; ++j) std::memcpy(planes + (half * 8 + j) * count + i, &rows[j], 8);
    }
  }
  for (; i < count; ++i) {
    for (size_t j = 0; j < kWidth; ++j) planes[j * count + i] = values[i * kWidth + j];
  }
}

template <size_t kWidth>
void Join(const uint8_t* planes, size_t count, uint8_t* values) {
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    for (size_t half = 0; half < kWidth / 8; ++half) {
      uint64_t rows[8];
      for (size_t j = 0; j < 8; ++j) std::memcpy(&rows[j], planes + (half * 8 + j) * count + i, 8);
      Transpose8x8(rows);
      for (size_t k = 0; k < 8; ++k) std::memcpy(values + (i + k) * kWidth + half * 8, &rows[k], 8);
    }
  }
  for (; i < count; ++i) {
    for (size_t j = 0; j < kWidth; ++j) values[i * kWidth + j] = planes[j * count + i];
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
