// .env files: NAME=value lines beside skippr.yml (reference §2.6).
#include <fmt/format.h>

#include <cctype>
#include <sstream>

#include "config/config.hpp"
#include "config/reader.hpp"
#include "core/redact.hpp"

namespace skippr::config {

namespace {
std::string TrimText(const std::string& text) {
  size_t begin = 0;
  size_t end = text.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(text[begin]))) ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(text[end - 1]))) --end;
  return text.substr(begin, end - begin);
}
}  // namespace

Result<std::map<std::string, std::string>> ParseDotenv(const std::string& text,
                                                       const std::string& display_name) {
  std::map<std::string, std::string> values;
  std::istringstream lines(text);
  std::string raw;
  int line_number = 0;
  while (std::getline(lines, raw)) {
    ++line_number;
    if (!raw.empty() && raw.back() == '\r') raw.pop_back();
    std::string line = TrimText(raw);
    if (line.empty() || line[0] == '#') continue;
    if (line.rfind("export ", 0) == 0) line = TrimText(line.substr(7));
    const size_t equals = line.find('=');
    const std::string name = TrimText(line.substr(0, equals));
    // Never the line itself: a malformed line may well hold a secret value.
    if (equals == std::string::npos) {
      return Status::InvalidConfig(fmt::format(
          "{}:{}:1: expected NAME=value, found a line without '=' (not shown: it may hold a "
          "secret); NAME is letters, digits and '_'",
          display_name, line_number));
    }
    if (!internal::IsIdentifier(name)) {
      return Status::InvalidConfig(fmt::format(
          "{}:{}:1: '{}' is not a variable name; expected NAME=value with NAME made of letters, "
          "digits and '_', not starting with a digit",
          display_name, line_number, Redact(internal::ShownText(name))));
    }
    std::string value = TrimText(line.substr(equals + 1));
    if (!value.empty() && (value[0] == '"' || value[0] == '\'')) {
      const char quote = value[0];
      // Inside double quotes a backslash escapes the next character, \" included (docs/config.md).
      size_t closing = 1;
      while (closing < value.size() && value[closing] != quote) {
        closing += quote == '"' && value[closing] == '\\' ? 2 : 1;
      }
      if (closing >= value.size()) {
        return Status::InvalidConfig(fmt::format("{}:{}:{}: the quoted value of {} is not closed",
                                                 display_name, line_number, equals + 2,
                                                 internal::ShownText(name)));
      }
      std::string inner = value.substr(1, closing - 1);
      if (quote == '"') {  // the usual escapes inside double quotes
        std::string unescaped;
        for (size_t i = 0; i < inner.size(); ++i) {
          if (inner[i] == '\\' && i + 1 < inner.size()) {
            const char next = inner[++i];
            unescaped.push_back(next == 'n' ? '\n' : next == 't' ? '\t' : next);
          } else {
            unescaped.push_back(inner[i]);
          }
        }
        inner = std::move(unescaped);
      }
      value = std::move(inner);
    } else {
      const size_t comment = value.find(" #");
      if (comment != std::string::npos) value = TrimText(value.substr(0, comment));
    }
    values[name] = std::move(value);
  }
  return values;
}

}  // namespace skippr::config
