#include "core/hash.hpp"

#include <openssl/evp.h>

#include "core/check.hpp"

namespace skippr {

std::string Sha256Hex(std::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int digest_length = 0;
  SKIPPR_CHECK(
      EVP_Digest(bytes.data(), bytes.size(), digest, &digest_length, EVP_sha256(), nullptr) == 1);
  return HexEncode(std::string_view(reinterpret_cast<const char*>(digest), digest_length));
}

std::string HexEncode(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(bytes.size() * 2);
  for (const char byte : bytes) {
    const auto value = static_cast<unsigned char>(byte);
    hex.push_back(kHex[value >> 4]);
    hex.push_back(kHex[value & 0xf]);
  }
  return hex;
}

}  // namespace skippr
