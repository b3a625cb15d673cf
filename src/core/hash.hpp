// Content hashes that must never change across versions: config hashes, landing ids.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace skippr {

// Lowercase hex SHA-256 of the bytes.
std::string Sha256Hex(std::string_view bytes);

// The bytes in lowercase hex, two digits each.
std::string HexEncode(std::string_view bytes);
// The bytes of lowercase or uppercase hex; nullopt for an odd length or a non-hex digit.
std::optional<std::string> HexDecode(std::string_view hex);

// Standard base64 (RFC 4648, with padding): how JSON APIs carry bytes (DynamoDB's "B").
std::string Base64Encode(std::string_view bytes);
// nullopt when `text` is not padded base64.
std::optional<std::string> Base64Decode(std::string_view text);

}  // namespace skippr
