#include "sources/json_values.hpp"

#include <cstring>

#include "core/check.hpp"
#include "schema/schema.hpp"

namespace skippr::sources::internal {

namespace {

bool IsNumberByte(char c) {
  return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
}

// A number token as schema::NumberFromText reads it; `parsed` is simdjson's double when it has one.
Value NumberValue(std::string_view token, std::optional<double> parsed) {
  std::optional<Value> number = schema::NumberFromText(token, parsed);
  // The token comes from a text simdjson accepted, so it is a number literal.
  SKIPPR_CHECK_MSG(number.has_value(), "a JSON number token is not a number literal");
  return std::move(*number);
}

// Converts a parsed DOM to Values, taking the text of a number from its token when the DOM's
// value may not be all of it: a double (which may have rounded), or a number blanked before
// parsing because simdjson cannot hold it.
class ValueBuilder {
 public:
  ValueBuilder(std::string_view text, const std::vector<uint64_t>& blanked_ordinals)
      : tokens_(text), blanked_ordinals_(blanked_ordinals) {}

  Value Build(const simdjson::dom::element& element) {
    using simdjson::dom::element_type;
    switch (element.type()) {
      case element_type::OBJECT: {
        ValueObject object;
        const simdjson::dom::object source = element.get_object().value_unsafe();
        object.reserve(source.size());
        for (auto [key, child] : source) object.emplace_back(std::string(key), Build(child));
        return Value::Object(std::move(object));
      }
      case element_type::ARRAY: {
        ValueList list;
        // A copy, not a reference into the temporary simdjson_result (it dies before the loop).
        const simdjson::dom::array source = element.get_array().value_unsafe();
        list.reserve(source.size());
        for (simdjson::dom::element child : source) list.push_back(Build(child));
        return Value::List(std::move(list));
      }
      case element_type::INT64: {
        const uint64_t ordinal = numbers_seen_++;
        if (next_blanked_ < blanked_ordinals_.size() && blanked_ordinals_[next_blanked_] == ordinal) {
          ++next_blanked_;
          return NumberValue(TokenAt(ordinal), std::nullopt);
        }
        return Value::Int(element.get_int64().value_unsafe());
      }
      case element_type::UINT64:  // 2^63 .. 2^64-1: beyond long, exact as a decimal(38, 0)
        ++numbers_seen_;
        return Value::Decimal(element.get_uint64().value_unsafe(), 38, 0);
      case element_type::DOUBLE: {
        const uint64_t ordinal = numbers_seen_++;
        return NumberValue(TokenAt(ordinal), element.get_double().value_unsafe());
      }
      case element_type::STRING:
        return Value::String(std::string(element.get_string().value_unsafe()));
      case element_type::BOOL:
        return Value::Bool(element.get_bool().value_unsafe());
      case element_type::NULL_VALUE:
        return Value::Null();
    }
    return Value::Null();
  }

 private:
  // Tokens are asked for in increasing order, so one forward scan serves the whole text, and a
  // text without doubles is never scanned.
  std::string_view TokenAt(uint64_t ordinal) {
    while (tokens_taken_ <= ordinal) {
      token_ = tokens_.Next();
      ++tokens_taken_;
    }
    SKIPPR_CHECK_MSG(!token_.empty(), "a JSON number element has no token in its text");
    return token_;
  }

  JsonNumberTokens tokens_;
  std::string_view token_;
  uint64_t tokens_taken_ = 0;
  uint64_t numbers_seen_ = 0;
  const std::vector<uint64_t>& blanked_ordinals_;
  size_t next_blanked_ = 0;
};

}  // namespace

std::string_view JsonNumberTokens::Next(size_t* offset) {
  const size_t size = text_.size();
  while (at_ < size) {
    const char c = text_[at_];
    if (c == '"') {
      // Skip the string: its closing quote is the first one not escaped by an odd run of '\'.
      size_t scan = at_ + 1;
      while (true) {
        const void* found = std::memchr(text_.data() + scan, '"', size - scan);
        if (found == nullptr) return {};  // unterminated: no more tokens
        const size_t quote = static_cast<size_t>(static_cast<const char*>(found) - text_.data());
        size_t backslashes = 0;
        while (quote - backslashes > at_ + 1 && text_[quote - backslashes - 1] == '\\') {
          ++backslashes;
        }
        scan = quote + 1;
        if (backslashes % 2 == 0) break;
      }
      at_ = scan;
      continue;
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
      const size_t begin = at_;
      while (at_ < size && IsNumberByte(text_[at_])) ++at_;
      if (offset != nullptr) *offset = begin;
      return text_.substr(begin, at_ - begin);
    }
    ++at_;
  }
  return {};
}

JsonParser::JsonParser(size_t max_text_bytes)
    : parser_(max_text_bytes + simdjson::SIMDJSON_PADDING) {}

simdjson::error_code JsonParser::Parse(std::string_view text, bool has_padding, Value* value) {
  const char* data = text.data();
  if (!has_padding) {
    copy_.assign(text);
    copy_.append(simdjson::SIMDJSON_PADDING, ' ');
    data = copy_.data();
  }
  auto parsed = parser_.parse(data, text.size(), /*realloc_if_needed=*/false);
  if (parsed.error() == simdjson::NUMBER_ERROR) return ParseWithWideNumbers(text, value);
  if (parsed.error()) return parsed.error();
  static const std::vector<uint64_t> kNoneBlanked;
  *value = ValueBuilder(text, kNoneBlanked).Build(parsed.value_unsafe());
  return simdjson::SUCCESS;
}

simdjson::error_code JsonParser::ParseWithWideNumbers(std::string_view text, Value* value) {
  std::string patched(text);
  patched.append(simdjson::SIMDJSON_PADDING, ' ');
  std::vector<uint64_t> blanked_ordinals;
  JsonNumberTokens tokens(text);
  size_t offset = 0;
  uint64_t ordinal = 0;
  for (std::string_view token = tokens.Next(&offset); !token.empty();
       token = tokens.Next(&offset), ++ordinal) {
    const std::optional<Value> number = schema::NumberFromText(token);
    // Malformed tokens stay for simdjson to reject; int64s and doubles it reads itself.
    if (!number || number->kind() == Value::Kind::kInt ||
        number->kind() == Value::Kind::kDouble) {
      continue;
    }
    patched[offset] = '0';
    std::memset(patched.data() + offset + 1, ' ', token.size() - 1);
    blanked_ordinals.push_back(ordinal);
  }
  if (blanked_ordinals.empty()) return simdjson::NUMBER_ERROR;
  auto parsed = parser_.parse(patched.data(), text.size(), /*realloc_if_needed=*/false);
  if (parsed.error()) return parsed.error();
  *value = ValueBuilder(text, blanked_ordinals).Build(parsed.value_unsafe());
  return simdjson::SUCCESS;
}

}  // namespace skippr::sources::internal
