// Random bytes from the kernel's CSPRNG, for identifiers that must never collide: table UUIDs,
// snapshot ids, the store's pipeline-instance id.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/status.hpp"

namespace skippr {

// Fills `size` bytes with getrandom(2); IOError only if the kernel refuses.
Status FillRandom(uint8_t* bytes, size_t size);

// `byte_count` random bytes as 2 × byte_count lowercase hex digits.
Result<std::string> RandomHex(size_t byte_count);

}  // namespace skippr
