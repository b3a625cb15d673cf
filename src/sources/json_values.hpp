// Internal to sources/: JSON text → Values, keeping every digit of every number.
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/value.hpp"

namespace skippr::sources::internal {

// The number tokens of a JSON text, in document order — the order in which simdjson's DOM visits
// its number elements — found by a scan that skips strings. Forward only.
class JsonNumberTokens {
 public:
  explicit JsonNumberTokens(std::string_view text) : text_(text) {}
  // The next number token with its byte offset in the text; an empty token at the end.
  std::string_view Next(size_t* offset = nullptr);

 private:
  std::string_view text_;
  size_t at_ = 0;
};

// Parses one JSON text (a JSON line, an array element, a Parquet row) into a Value. Numbers read
// as schema::NumberFromText reads them: integers beyond int64 become decimals (or text beyond 38
// digits) and decimals a double cannot hold exactly stay exact, instead of failing the record
// (simdjson rejects integers beyond 64 bits) or silently rounding it (a double's 17 digits).
// One parser per reader; not thread-safe.
class JsonParser {
 public:
  explicit JsonParser(size_t max_text_bytes);
  // `has_padding`: at least simdjson::SIMDJSON_PADDING readable bytes follow `text` (LineReader
  // and InputWindow guarantee it), so it is parsed in place; otherwise it is copied first.
  // On failure returns simdjson's error (the record is a deadletter) and leaves `value` alone.
  simdjson::error_code Parse(std::string_view text, bool has_padding, Value* value);

 private:
  // simdjson failed on a number: blank every number simdjson cannot hold (replaced by "0" and
  // spaces, so offsets stay) in a copy, parse that, and read those numbers from their tokens.
  simdjson::error_code ParseWithWideNumbers(std::string_view text, Value* value);

  simdjson::dom::parser parser_;
  std::string copy_;  // a padded copy of the text when it had no padding, or was patched
};

}  // namespace skippr::sources::internal
