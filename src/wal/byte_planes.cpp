#include "wal/byte_planes.hpp"

#include <cstring>
#include <initializer_list>

#include "core/check.hpp"

namespace skippr::wal {
namespace {

// Transposes the 8×8 byte matrix whose row k is rows[k] (byte j of a row is column j): row j then
// holds byte j of every former row. Three rounds of swaps, of 4×4, 2×2 and 1×1 blocks; each round
// exchanges the upper-right block with the lower-left one of every block pair at once.
void Transpose8x8(uint64_t (&rows)[8]) {
  const auto swap = [&](int a, int b, int shift, uint64_t mask) {
    const uint64_t t = ((rows[a] >> shift) ^ rows[b]) & mask;
    rows[a] ^= t << shift;
    rows[b] ^= t;
  };
  for (int i = 0; i < 4; ++i) swap(i, i + 4, 32, 0x00000000ffffffffULL);
  for (int i : {0, 1, 4, 5}) swap(i, i + 2, 16, 0x0000ffff0000ffffULL);
  for (int i : {0, 2, 4, 6}) swap(i, i + 1, 8, 0x00ff00ff00ff00ffULL);
}

// Byte j of value i lies at i × kWidth + j in value order and at j × count + i in plane order;
// this moves every byte from one order to the other. Eight values at a time: each 8-byte half of
// them (a 16-byte value has two) is an 8×8 byte matrix whose transpose is 8 bytes of 8 planes,
// and back. The values after the last whole eight go a byte at a time.
template <size_t kWidth, bool kIntoPlanes>
void Reorder(const uint8_t* from, size_t count, uint8_t* to) {
  const auto value_byte = [](size_t i, size_t j) { return i * kWidth + j; };
  const auto plane_byte = [count](size_t i, size_t j) { return j * count + i; };
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    for (size_t half = 0; half < kWidth / 8; ++half) {
      // Word w: value i + w's half, or plane half × 8 + w's bytes i .. i + 7.
      const auto value_word = [&](size_t w) { return value_byte(i + w, half * 8); };
      const auto plane_word = [&](size_t w) { return plane_byte(i, half * 8 + w); };
      uint64_t words[8];
      for (size_t w = 0; w < 8; ++w) {
        std::memcpy(&words[w], from + (kIntoPlanes ? value_word(w) : plane_word(w)), 8);
      }
      Transpose8x8(words);
      for (size_t w = 0; w < 8; ++w) {
        std::memcpy(to + (kIntoPlanes ? plane_word(w) : value_word(w)), &words[w], 8);
      }
    }
  }
  for (; i < count; ++i) {
    for (size_t j = 0; j < kWidth; ++j) {
      if (kIntoPlanes) {
        to[plane_byte(i, j)] = from[value_byte(i, j)];
      } else {
        to[value_byte(i, j)] = from[plane_byte(i, j)];
      }
    }
  }
}

void CheckBlock(size_t bytes, size_t width) {
  SKIPPR_CHECK(IsSplitIntoPlanes(width) && bytes % width == 0 && bytes <= kBytePlaneBlockBytes);
}

}  // namespace

void SplitIntoPlanes(const uint8_t* values, size_t bytes, size_t width, uint8_t* planes) {
  CheckBlock(bytes, width);
  if (width == 8) return Reorder<8, true>(values, bytes / 8, planes);
  return Reorder<16, true>(values, bytes / 16, planes);
}

void JoinPlanes(const uint8_t* planes, size_t bytes, size_t width, uint8_t* values) {
  CheckBlock(bytes, width);
  if (width == 8) return Reorder<8, false>(planes, bytes / 8, values);
  return Reorder<16, false>(planes, bytes / 16, values);
}

}  // namespace skippr::wal
