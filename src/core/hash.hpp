// Content hashes that must never change across versions: config hashes, landing ids.
#pragma once

#include <string>
#include <string_view>

namespace skippr {

// Lowercase hex SHA-256 of the bytes.
std::string Sha256Hex(std::string_view bytes);

// The bytes in lowercase hex, two digits each.
std::string HexEncode(std::string_view bytes);

}  // namespace skippr
