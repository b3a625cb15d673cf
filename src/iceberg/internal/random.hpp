// Random identifiers for iceberg/: table UUIDs, snapshot ids, temporary file names.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.hpp"

namespace skippr::iceberg::internal {

// 64 bits from the kernel's CSPRNG (getrandom). IOError only if the kernel refuses.
Result<uint64_t> RandomU64();

// A random (version 4, RFC 4122 variant) UUID in its 36-character lowercase form.
Result<std::string> RandomUuid();

// Whether `text` has the 8-4-4-4-12 hex-digit form of a UUID (any case).
bool IsUuid(std::string_view text);

}  // namespace skippr::iceberg::internal
