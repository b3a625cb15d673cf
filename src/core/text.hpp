// Small facts about text, shared by the readers that validate it and the scans that hand it on.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

namespace skippr {

// Whether every byte is below 0x80 (so the text is valid UTF-8), eight bytes at a time: most
// values are ASCII, and this is cheaper than a UTF-8 validator call.
inline bool IsAscii(std::string_view text) {
  constexpr uint64_t kHighBits = 0x8080808080808080ull;
  size_t at = 0;
  for (; at + 8 <= text.size(); at += 8) {
    uint64_t word;
    std::memcpy(&word, text.data() + at, 8);
    if (word & kHighBits) return false;
  }
  for (; at < text.size(); ++at) {
    if (static_cast<unsigned char>(text[at]) >= 0x80) return false;
  }
  return true;
}

}  // namespace skippr
