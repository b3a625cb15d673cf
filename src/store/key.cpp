// KeyBuilder / KeyReader: the order-preserving key encoding (docs/formats/store.md, "Key
// encoding").
#include <fmt/format.h>

#include <algorithm>

#include "core/check.hpp"
#include "store/store.hpp"

namespace skippr::store {
namespace {

constexpr char kEscape = '\x00';
constexpr char kEscapedZero = '\xFF';  // 0x00 0xFF: a zero byte inside the text
constexpr char kTerminator = '\x01';   // 0x00 0x01: end of the text; sorts below any continuation
constexpr size_t kU64Bytes = 8;
constexpr size_t kMaxHexBytes = 64;  // enough to recognise a key in an error message

std::string Hex(std::string_view bytes) {
  std::string hex;
  const size_t shown_bytes = std::min(bytes.size(), kMaxHexBytes);
  for (size_t i = 0; i < shown_bytes; ++i) {
    hex += fmt::format("{:02x}", static_cast<unsigned char>(bytes[i]));
  }
  if (shown_bytes < bytes.size()) hex += fmt::format("… ({} bytes)", bytes.size());
  return hex;
}

}  // namespace

KeyBuilder& KeyBuilder::Text(std::string_view text) {
  SKIPPR_CHECK_MSG(!has_bytes_, "KeyBuilder: Text after Bytes makes a key that cannot be decoded");
  // Runs between escape bytes are appended whole: a key is built for every row an aggregate reads.
  while (!text.empty()) {
    const size_t escape_at = text.find(kEscape);
    if (escape_at == std::string_view::npos) {
      key_.append(text);
      break;
    }
    key_.append(text.substr(0, escape_at + 1));
    key_.push_back(kEscapedZero);
    text.remove_prefix(escape_at + 1);
  }
  const char terminator[] = {kEscape, kTerminator};
  key_.append(terminator, sizeof(terminator));
  return *this;
}

KeyBuilder& KeyBuilder::U64(uint64_t value) {
  SKIPPR_CHECK_MSG(!has_bytes_, "KeyBuilder: U64 after Bytes makes a key that cannot be decoded");
  char big_endian[8];
  for (int i = 0; i < 8; ++i) big_endian[i] = static_cast<char>(value >> (56 - 8 * i));
  key_.append(big_endian, sizeof(big_endian));
  return *this;
}

KeyBuilder& KeyBuilder::Bytes(std::string_view raw) {
  SKIPPR_CHECK_MSG(!has_bytes_, "KeyBuilder: two Bytes components cannot be told apart");
  key_.append(raw);
  has_bytes_ = true;
  return *this;
}

Status KeyReader::Malformed(std::string_view what) const {
  return Status::Corruption(fmt::format(
      "malformed store key {}: {} at byte {}; the store is damaged, or the key is being decoded "
      "with a layout other than the one that wrote it (a bug: see docs/formats/store.md)",
      Hex(key_), what, offset_));
}

Result<std::string> KeyReader::Text() {
  std::string text;
  size_t position = offset_;
  while (position < key_.size()) {
    const char byte = key_[position];
    if (byte != kEscape) {
      text.push_back(byte);
      ++position;
      continue;
    }
    if (position + 1 >= key_.size()) {
      offset_ = position;
      return Malformed("a text component ends in a lone 0x00");
    }
    const char marker = key_[position + 1];
    if (marker == kTerminator) {
      offset_ = position + 2;
      return text;
    }
    if (marker != kEscapedZero) {
      offset_ = position;
      return Malformed(fmt::format("0x00 is followed by 0x{:02x} (expected 0x01 or 0xff)",
                                   static_cast<unsigned char>(marker)));
    }
    text.push_back(kEscape);
    position += 2;
  }
  return Malformed("a text component has no 0x00 0x01 terminator");
}

Result<uint64_t> KeyReader::U64() {
  if (key_.size() - offset_ < kU64Bytes) {
    return Malformed(
        fmt::format("a u64 component needs 8 bytes but {} remain", key_.size() - offset_));
  }
  uint64_t value = 0;
  for (size_t i = 0; i < kU64Bytes; ++i) {
    value = (value << 8) | static_cast<unsigned char>(key_[offset_ + i]);
  }
  offset_ += kU64Bytes;
  return value;
}

std::string_view KeyReader::Bytes() {
  std::string_view rest = key_.substr(offset_);
  offset_ = key_.size();
  return rest;
}

Status KeyReader::ExpectEnd() const {
  if (at_end()) return Status::OK();
  return Malformed(
      fmt::format("{} bytes remain after the last expected component", key_.size() - offset_));
}

}  // namespace skippr::store
