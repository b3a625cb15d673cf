// .env parsing over any text (config::ParseDotenv). Invariants:
//   * a failure is InvalidConfig whose message starts with "<file>:<line>:" for a line that exists;
//   * every parsed name is a NAME ([A-Za-z_][A-Za-z0-9_]*);
//   * what parsed can be written back (single quotes, or double quotes with the escapes
//     docs/config.md documents: \n, \" and \\) and parses to the same variables.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdlib>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "config/config.hpp"
#include "fuzz/fuzz_support.hpp"

namespace skippr::fuzz {
namespace {

using Variables = std::map<std::string, std::string>;

bool IsName(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  for (unsigned char c : name) {
    if (!(std::isalnum(c) || c == '_') || c >= 0x80) return false;
  }
  return true;
}

// NAME='value' when the value holds no quote or line break, else NAME="value" with the escapes
// docs/config.md promises inside double quotes (\n, \", \\).
std::string WrittenBack(const std::string& name, const std::string& value) {
  if (value.find_first_of("'\"\\\n\r") == std::string::npos) return name + "='" + value + "'\n";
  std::string escaped;
  for (char c : value) {
    if (c == '\n') {
      escaped += "\\n";
    } else if (c == '\\' || c == '"') {
      escaped.push_back('\\');
      escaped.push_back(c);
    } else {
      escaped.push_back(c);
    }
  }
  return name + "=\"" + escaped + "\"\n";
}

void FuzzDotenv(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  Result<Variables> parsed = config::ParseDotenv(text, ".env");
  if (!parsed.ok()) {
    CheckCodeIn(parsed.status(), {StatusCode::kInvalidConfig}, "ParseDotenv");
    const std::string& message = parsed.status().message();
    FUZZ_CHECK(message.rfind(".env:", 0) == 0, message);
    const uint64_t line = std::strtoull(message.c_str() + 5, nullptr, 10);
    const uint64_t lines = std::count(text.begin(), text.end(), '\n') + 1;
    FUZZ_CHECK(line >= 1 && line <= lines, fmt::format("line {} of {}: {}", line, lines, message));
    return;
  }
  std::string written;
  for (const auto& [name, value] : *parsed) {
    FUZZ_CHECK(IsName(name), "parsed name '" + name + "'");
    written += WrittenBack(name, value);
  }
  Result<Variables> again = config::ParseDotenv(written, ".env");
  FUZZ_CHECK(again.ok(), again.status().ToString() + "\n" + written);
  FUZZ_CHECK(*again == *parsed, "written back, the variables parse differently:\n" + written);
}

}  // namespace
}  // namespace skippr::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  skippr::fuzz::FuzzDotenv(data, size);
  return 0;
}
