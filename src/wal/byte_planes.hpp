// Byte planes: how a WAL segment (format version 5 on) stores fixed-width values before it
// compresses them. A block of n values of `width` bytes is stored as `width` planes of n bytes:
// plane j holds byte j of every value, in value order. Integers, timestamps and offsets differ
// mostly in their low bytes, so their high planes are long runs that compress in few matches: on
// bench/lake's rides a slice compresses about twice as fast and no worse (docs/formats/wal.md,
// "Byte planes").
#pragma once

#include <cstddef>
#include <cstdint>

namespace skippr::wal {

// Buffers are split into blocks of this many bytes from their start; the last may be shorter. A
// multiple of every width, so a block holds whole values; small enough to stay in the L2 cache.
inline constexpr size_t kBytePlaneBlockBytes = 64 * 1024;

// Whether values of `width` bytes are stored as byte planes: the 8-byte numbers and offsets and
// the 16-byte decimals of a Batch (booleans, 1 byte, are not).
constexpr bool IsSplitIntoPlanes(size_t width) { return width == 8 || width == 16; }

// Writes the `bytes` bytes at `values` (a whole number of `width`-byte values, at most one block;
// a width IsSplitIntoPlanes accepts) to `planes` as byte planes.
void SplitIntoPlanes(const uint8_t* values, size_t bytes, size_t width, uint8_t* planes);

// The inverse: writes the values whose byte planes are the `bytes` bytes at `planes` to `values`.
void JoinPlanes(const uint8_t* planes, size_t bytes, size_t width, uint8_t* values);

}  // namespace skippr::wal
