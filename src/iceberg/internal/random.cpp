#include "iceberg/internal/random.hpp"

#include <fmt/format.h>

#include <array>
#include <cctype>
#include <cstring>

#include "core/random.hpp"

namespace skippr::iceberg::internal {

Result<uint64_t> RandomU64() {
  std::array<uint8_t, 8> bytes{};
  SKIPPR_RETURN_IF_ERROR(FillRandom(bytes.data(), bytes.size()));
  uint64_t value = 0;
  std::memcpy(&value, bytes.data(), bytes.size());
  return value;
}

Result<std::string> RandomUuid() {
  std::array<uint8_t, 16> bytes{};
  SKIPPR_RETURN_IF_ERROR(FillRandom(bytes.data(), bytes.size()));
  bytes[6] = static_cast<uint8_t>((bytes[6] & 0x0f) | 0x40);  // version 4
  bytes[8] = static_cast<uint8_t>((bytes[8] & 0x3f) | 0x80);  // RFC 4122 variant
  std::string text;
  text.reserve(36);
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) text += '-';
    text += fmt::format("{:02x}", bytes[i]);
  }
  return text;
}

bool IsUuid(std::string_view text) {
  if (text.size() != 36) return false;
  for (size_t i = 0; i < text.size(); ++i) {
    const bool is_dash_position = i == 8 || i == 13 || i == 18 || i == 23;
    const bool ok =
        is_dash_position ? text[i] == '-' : std::isxdigit(static_cast<unsigned char>(text[i])) != 0;
    if (!ok) return false;
  }
  return true;
}

}  // namespace skippr::iceberg::internal
