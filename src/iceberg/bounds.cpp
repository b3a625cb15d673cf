// Iceberg's binary single-value serialization (spec appendix D) and the truncation of string and
// binary bounds (docs/formats/iceberg-manifests.md, "Bounds").
#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <cstring>

#include "iceberg/manifest.hpp"

namespace skippr::iceberg {

namespace {

constexpr size_t kUuidBytes = 16;
constexpr size_t kMaxDecimalBytes = 16;  // precision 38 needs 16 bytes

std::string LittleEndian(uint64_t bits, size_t width_bytes) {
  std::string out(width_bytes, '\0');
  for (size_t i = 0; i < width_bytes; ++i) out[i] = static_cast<char>(bits >> (8 * i));
  return out;
}

uint64_t FromLittleEndian(std::string_view bytes) {
  uint64_t bits = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    bits |= static_cast<uint64_t>(static_cast<uint8_t>(bytes[i])) << (8 * i);
  }
  return bits;
}

// Two's complement, most significant byte first, without the leading bytes that only repeat the
// sign (0 is one 0x00 byte, -1 one 0xff byte, 128 is 00 80).
std::string MinimalBigEndian(const Decimal128& value) {
  std::string bytes(kMaxDecimalBytes, '\0');
  for (size_t i = 0; i < 8; ++i) {
    bytes[7 - i] = static_cast<char>(static_cast<uint64_t>(value.high) >> (8 * i));
    bytes[15 - i] = static_cast<char>(value.low >> (8 * i));
  }
  size_t start = 0;
  while (start + 1 < bytes.size()) {
    const uint8_t byte = static_cast<uint8_t>(bytes[start]);
    const bool next_is_negative = (static_cast<uint8_t>(bytes[start + 1]) & 0x80) != 0;
    if (!((byte == 0x00 && !next_is_negative) || (byte == 0xff && next_is_negative))) break;
    ++start;
  }
  return bytes.substr(start);
}

Decimal128 FromBigEndian(std::string_view bytes) {
  const bool is_negative = (static_cast<uint8_t>(bytes[0]) & 0x80) != 0;
  uint8_t full[kMaxDecimalBytes];
  std::memset(full, is_negative ? 0xff : 0x00, sizeof(full));
  std::memcpy(full + kMaxDecimalBytes - bytes.size(), bytes.data(), bytes.size());
  Decimal128 value;
  uint64_t high = 0;
  for (size_t i = 0; i < 8; ++i) {
    high = high << 8 | full[i];
    value.low = value.low << 8 | full[8 + i];
  }
  value.high = static_cast<int64_t>(high);
  return value;
}

std::string_view AlternativeName(const PrimitiveValue& value) {
  static constexpr std::string_view kNames[] = {"bool",   "int32_t",    "int64_t",    "float",
                                                "double", "Decimal128", "std::string"};
  return kNames[value.index()];
}

template <typename T>
Result<T> Expect(const LogicalType& type, const PrimitiveValue& value, std::string_view expected) {
  if (const T* held = std::get_if<T>(&value)) return *held;
  return Status::InvalidArgument(fmt::format("a {} value must be given as {}, not {}",
                                             type.ToString(), expected, AlternativeName(value)));
}

template <typename Float>
Result<std::string> EncodeFloat(const LogicalType& type, const PrimitiveValue& value,
                                std::string_view expected) {
  SKIPPR_ASSIGN_OR_RETURN(const Float number, Expect<Float>(type, value, expected));
  if (std::isnan(number)) {
    return Status::InvalidArgument(
        fmt::format("NaN is never a bound of a {} column", type.ToString()));
  }
  if constexpr (sizeof(Float) == 4) {
    return LittleEndian(std::bit_cast<uint32_t>(number), 4);
  } else {
    return LittleEndian(std::bit_cast<uint64_t>(number), 8);
  }
}

Status WrongLength(const LogicalType& type, size_t length_bytes, std::string_view expected) {
  return Status::Corruption(fmt::format("a {} single value must be {}, not {} bytes",
                                        type.ToString(), expected, length_bytes));
}

// ----- UTF-8 -------------------------------------------------------------------------------------

bool IsContinuationByte(char byte) { return (static_cast<uint8_t>(byte) & 0xc0) == 0x80; }

// The byte offset where code point `count` starts (the size when there are fewer).
size_t CodePointOffset(std::string_view text, size_t count) {
  size_t seen = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (IsContinuationByte(text[i])) continue;
    if (seen == count) return i;
    ++seen;
  }
  return text.size();
}

bool IsValidUtf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const uint8_t lead = static_cast<uint8_t>(text[i]);
    const size_t length = lead < 0x80         ? 1
                          : lead >> 5 == 0x6  ? 2
                          : lead >> 4 == 0xe  ? 3
                          : lead >> 3 == 0x1e ? 4
                                              : 0;
    if (length == 0 || i + length > text.size()) return false;
    for (size_t k = 1; k < length; ++k) {
      if (!IsContinuationByte(text[i + k])) return false;
    }
    i += length;
  }
  return true;
}

// Decodes the code point of valid UTF-8 at `text`.
char32_t DecodeCodePoint(std::string_view text) {
  const uint8_t lead = static_cast<uint8_t>(text[0]);
  if (text.size() == 1) return lead;
  char32_t code_point = lead & (0x7f >> text.size());
  for (size_t i = 1; i < text.size(); ++i) code_point = code_point << 6 | (text[i] & 0x3f);
  return code_point;
}

std::string EncodeCodePoint(char32_t code_point) {
  std::string out;
  if (code_point < 0x80) {
    out += static_cast<char>(code_point);
  } else if (code_point < 0x800) {
    out += static_cast<char>(0xc0 | code_point >> 6);
    out += static_cast<char>(0x80 | (code_point & 0x3f));
  } else if (code_point < 0x10000) {
    out += static_cast<char>(0xe0 | code_point >> 12);
    out += static_cast<char>(0x80 | (code_point >> 6 & 0x3f));
    out += static_cast<char>(0x80 | (code_point & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | code_point >> 18);
    out += static_cast<char>(0x80 | (code_point >> 12 & 0x3f));
    out += static_cast<char>(0x80 | (code_point >> 6 & 0x3f));
    out += static_cast<char>(0x80 | (code_point & 0x3f));
  }
  return out;
}

// The smallest string above every string starting with `prefix` (valid UTF-8): the last code point
// that can be incremented is, skipping the surrogate range, which UTF-8 cannot hold.
std::optional<std::string> IncrementUtf8(std::string prefix) {
  while (!prefix.empty()) {
    size_t start = prefix.size() - 1;
    while (start > 0 && IsContinuationByte(prefix[start])) --start;
    char32_t next = DecodeCodePoint(std::string_view(prefix).substr(start)) + 1;
    if (next >= 0xd800 && next <= 0xdfff) next = 0xe000;
    prefix.resize(start);
    if (next <= 0x10ffff) return prefix + EncodeCodePoint(next);
  }
  return std::nullopt;
}

std::optional<std::string> IncrementBytes(std::string prefix) {
  while (!prefix.empty()) {
    const uint8_t last = static_cast<uint8_t>(prefix.back());
    prefix.pop_back();
    if (last != 0xff) return prefix + static_cast<char>(last + 1);
  }
  return std::nullopt;
}

}  // namespace

namespace {
Status NoSingleValueForm(const LogicalType& type) {
  return Status::NotSupported(fmt::format(
      "{} has no single-value serialization (only primitive types do)", type.ToString()));
}
}  // namespace

Result<std::string> EncodeSingleValue(const LogicalType& type, const PrimitiveValue& value) {
  switch (type.id()) {
    case TypeId::kBoolean: {
      SKIPPR_ASSIGN_OR_RETURN(const bool flag, Expect<bool>(type, value, "bool"));
      return std::string(1, flag ? '\x01' : '\x00');
    }
    case TypeId::kInt:
    case TypeId::kDate: {
      SKIPPR_ASSIGN_OR_RETURN(const int32_t number, Expect<int32_t>(type, value, "int32_t"));
      return LittleEndian(static_cast<uint32_t>(number), 4);
    }
    case TypeId::kLong:
    case TypeId::kTime:
    case TypeId::kTimestamp:
    case TypeId::kTimestampTz: {
      SKIPPR_ASSIGN_OR_RETURN(const int64_t number, Expect<int64_t>(type, value, "int64_t"));
      return LittleEndian(static_cast<uint64_t>(number), 8);
    }
    case TypeId::kFloat:
      return EncodeFloat<float>(type, value, "float");
    case TypeId::kDouble:
      return EncodeFloat<double>(type, value, "double");
    case TypeId::kDecimal: {
      SKIPPR_ASSIGN_OR_RETURN(const Decimal128 unscaled,
                              Expect<Decimal128>(type, value, "Decimal128"));
      return MinimalBigEndian(unscaled);
    }
    case TypeId::kString:
    case TypeId::kBinary:
      return Expect<std::string>(type, value, "std::string");
    case TypeId::kUuid: {
      SKIPPR_ASSIGN_OR_RETURN(std::string bytes, Expect<std::string>(type, value, "std::string"));
      if (bytes.size() != kUuidBytes) {
        return Status::InvalidArgument(fmt::format("a uuid is 16 bytes, not {}", bytes.size()));
      }
      return bytes;
    }
    case TypeId::kStruct:
    case TypeId::kList:
    case TypeId::kMap:
      break;
  }
  return NoSingleValueForm(type);
}

Result<PrimitiveValue> DecodeSingleValue(const LogicalType& type, std::string_view bytes) {
  switch (type.id()) {
    case TypeId::kBoolean:
      if (bytes.size() != 1) return WrongLength(type, bytes.size(), "1 byte");
      return PrimitiveValue(bytes[0] != 0);
    case TypeId::kInt:
    case TypeId::kDate:
      if (bytes.size() != 4) return WrongLength(type, bytes.size(), "4 bytes");
      return PrimitiveValue(static_cast<int32_t>(FromLittleEndian(bytes)));
    case TypeId::kLong:
    case TypeId::kTime:
    case TypeId::kTimestamp:
    case TypeId::kTimestampTz:
      // 4 bytes: written while the column was an int, before Iceberg's int → long promotion.
      if (type.id() == TypeId::kLong && bytes.size() == 4) {
        return PrimitiveValue(int64_t{static_cast<int32_t>(FromLittleEndian(bytes))});
      }
      if (bytes.size() != 8) return WrongLength(type, bytes.size(), "8 bytes");
      return PrimitiveValue(static_cast<int64_t>(FromLittleEndian(bytes)));
    case TypeId::kFloat:
      if (bytes.size() != 4) return WrongLength(type, bytes.size(), "4 bytes");
      return PrimitiveValue(std::bit_cast<float>(static_cast<uint32_t>(FromLittleEndian(bytes))));
    case TypeId::kDouble:
      // 4 bytes: written while the column was a float, before the float → double promotion.
      if (bytes.size() == 4) {
        return PrimitiveValue(static_cast<double>(
            std::bit_cast<float>(static_cast<uint32_t>(FromLittleEndian(bytes)))));
      }
      if (bytes.size() != 8) return WrongLength(type, bytes.size(), "8 bytes");
      return PrimitiveValue(std::bit_cast<double>(FromLittleEndian(bytes)));
    case TypeId::kDecimal:
      if (bytes.empty() || bytes.size() > kMaxDecimalBytes) {
        return WrongLength(type, bytes.size(), "1 to 16 bytes");
      }
      return PrimitiveValue(FromBigEndian(bytes));
    case TypeId::kString:
    case TypeId::kBinary:
      return PrimitiveValue(std::string(bytes));
    case TypeId::kUuid:
      if (bytes.size() != kUuidBytes) return WrongLength(type, bytes.size(), "16 bytes");
      return PrimitiveValue(std::string(bytes));
    case TypeId::kStruct:
    case TypeId::kList:
    case TypeId::kMap:
      break;
  }
  return NoSingleValueForm(type);
}

std::string TruncateLowerBound(const LogicalType& type, std::string encoded_min, size_t length) {
  if (type.id() == TypeId::kString) encoded_min.resize(CodePointOffset(encoded_min, length));
  if (type.id() == TypeId::kBinary && encoded_min.size() > length) encoded_min.resize(length);
  return encoded_min;
}

std::optional<std::string> TruncateUpperBound(const LogicalType& type, std::string encoded_max,
                                              size_t length) {
  if (type.id() == TypeId::kString) {
    const size_t cut = CodePointOffset(encoded_max, length);
    if (cut == encoded_max.size()) return encoded_max;
    encoded_max.resize(cut);
    // Not UTF-8 (only possible for bytes that never went through a source's decoder): comparing
    // bytes, the byte rule still gives a bound above every value with this prefix.
    return IsValidUtf8(encoded_max) ? IncrementUtf8(std::move(encoded_max))
                                    : IncrementBytes(std::move(encoded_max));
  }
  if (type.id() == TypeId::kBinary && encoded_max.size() > length) {
    encoded_max.resize(length);
    return IncrementBytes(std::move(encoded_max));
  }
  return encoded_max;
}

}  // namespace skippr::iceberg
