#include "config/reader.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <set>

#include "core/redact.hpp"

namespace skippr::config::internal {

namespace {

// `${NAME}` filling the whole value; NAME follows [A-Za-z_][A-Za-z0-9_]*.
std::optional<std::string> WholeReference(const std::string& text) {
  if (text.size() < 4 || text.rfind("${", 0) != 0 || text.back() != '}') return std::nullopt;
  std::string name = text.substr(2, text.size() - 3);
  if (!IsIdentifier(name)) return std::nullopt;
  return name;
}

// "data_sources.pg.Postgres.password" → "PG_PASSWORD": a name to suggest for a secret.
std::string SuggestVariableName(const std::string& path) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t dot = path.find('.'); dot != std::string::npos; dot = path.find('.', start)) {
    parts.push_back(path.substr(start, dot - start));
    start = dot + 1;
  }
  parts.push_back(path.substr(start));
  std::string name = parts.size() > 2 ? parts[1] + "_" + parts.back() : parts.back();
  for (char& c : name) {
    c = std::isalnum(static_cast<unsigned char>(c)) ? static_cast<char>(std::toupper(c)) : '_';
  }
  return name;
}

std::string_view NodeKind(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Scalar:
      return "a single value";
    default:
      return "nothing";
  }
}

}  // namespace

void Diagnostics::Error(const SourceMark& mark, const std::string& path,
                        const std::string& message) {
  if (errors_.size() >= kMaxErrors) {
    ++errors_not_kept_;
    return;
  }
  std::string location = display_name_;
  if (mark.line > 0) location += fmt::format(":{}:{}", mark.line, mark.column);
  errors_.push_back(EscapeControlCharacters(
      path.empty() ? fmt::format("{}: {}", location, message)
                   : fmt::format("{}: {}: {}", location, path, message)));
}

std::string EscapeControlCharacters(std::string_view text) {
  std::string escaped;
  escaped.reserve(text.size());
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte != 0x7f) {
      escaped.push_back(c);
    } else if (c == '\n') {
      escaped += "\\n";
    } else if (c == '\t') {
      escaped += "\\t";
    } else if (c == '\r') {
      escaped += "\\r";
    } else {
      escaped += fmt::format("\\x{:02x}", byte);
    }
  }
  return escaped;
}

std::vector<std::string> Diagnostics::errors() const {
  std::vector<std::string> errors = errors_;
  if (errors_not_kept_ > 0) {
    errors.push_back(fmt::format("{}: {} more problems not listed; fix the ones above first",
                                 display_name_, errors_not_kept_));
  }
  return errors;
}

SourceMark ToMark(const YAML::Mark& mark) {
  if (mark.line < 0) return {};
  return {mark.line + 1, mark.column + 1};
}

std::string JoinPath(const std::string& parent, std::string_view key) {
  return parent.empty() ? std::string(key) : parent + "." + std::string(key);
}

std::string IndexPath(const std::string& parent, size_t index) {
  return fmt::format("{}[{}]", parent, index);
}

std::string JoinNames(const std::vector<std::string_view>& names) {
  std::string text;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i) text += ", ";
    text += names[i];
  }
  return text;
}

std::string ShownText(std::string_view text) {
  constexpr size_t kMaxShownBytes = 80;
  if (text.size() <= kMaxShownBytes) return std::string(text);
  size_t end = kMaxShownBytes;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return fmt::format("{}… ({} bytes)", text.substr(0, end), text.size());
}

bool IsIdentifier(std::string_view text) {
  const auto is_start = [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
  };
  if (text.empty() || !is_start(text[0])) return false;
  return std::all_of(text.begin() + 1, text.end(),
                     [&](char c) { return is_start(c) || (c >= '0' && c <= '9'); });
}

std::optional<bool> ParseFlag(std::string_view text) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lower == "true" || lower == "t" || lower == "yes" || lower == "y" || lower == "1")
    return true;
  if (lower == "false" || lower == "f" || lower == "no" || lower == "n" || lower == "0")
    return false;
  return std::nullopt;
}

std::vector<std::pair<std::string, Located>> Reader::Mapping(
    const Located& at, const std::vector<std::string_view>& allowed, std::string_view what) {
  std::vector<std::pair<std::string, Located>> entries;
  if (IsNull(at)) return entries;
  if (!at.node.IsMap()) {
    Error(at, fmt::format("expected {}, found {}", what, NodeKind(at.node)));
    return entries;
  }
  std::set<std::string> seen;
  for (auto it = at.node.begin(); it != at.node.end(); ++it) {
    const SourceMark key_mark = ToMark(it->first.Mark());
    if (!it->first.IsScalar()) {
      diagnostics_.Error(key_mark, at.path, "keys must be plain names");
      continue;
    }
    const std::string key = it->first.Scalar();
    Located child{it->second, key_mark, JoinPath(at.path, key)};
    if (!seen.insert(key).second) {
      Error(child, "appears twice; each key may be given once");
      continue;
    }
    if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      Error(child,
            fmt::format("unknown key '{}'; allowed here: {}", ShownText(key), JoinNames(allowed)));
      continue;
    }
    // A single value is pointed at where it stands; a block (mapping, list) at its key.
    const SourceMark value_mark = ToMark(it->second.Mark());
    if (value_mark.line > 0 && it->second.IsScalar()) child.mark = value_mark;
    entries.emplace_back(key, std::move(child));
  }
  return entries;
}

Reader::Fields Reader::Struct(const Located& at, const std::vector<std::string_view>& allowed) {
  Fields fields;
  fields.entries_ = Mapping(at, allowed);
  return fields;
}

std::optional<Located> Reader::Fields::Get(std::string_view key) const {
  for (const auto& [name, located] : entries_) {
    if (name == key) return located;
  }
  return std::nullopt;
}

std::vector<Located> Reader::Sequence(const Located& at, std::string_view what) {
  std::vector<Located> items;
  if (IsNull(at)) return items;
  if (!at.node.IsSequence()) {
    Error(at, fmt::format("expected {}, found {}", what, NodeKind(at.node)));
    return items;
  }
  size_t index = 0;
  for (const YAML::Node& item : at.node) {
    SourceMark mark = ToMark(item.Mark());
    if (mark.line == 0) mark = at.mark;
    items.push_back(Located{item, mark, IndexPath(at.path, index++)});
  }
  return items;
}

std::optional<std::string> Reader::ScalarText(const Located& at, bool secret) {
  if (IsNull(at)) {
    Error(at, "needs a value");
    return std::nullopt;
  }
  if (!at.node.IsScalar()) {
    Error(at, fmt::format("expected a single value, found {}", NodeKind(at.node)));
    return std::nullopt;
  }
  const std::string& text = at.node.Scalar();
  const std::optional<std::string> reference = WholeReference(text);
  if (!reference) {
    if (secret) {
      Error(at,
            fmt::format("is a secret and refuses plaintext; write it as a ${{NAME}} reference "
                        "(for example '${{{}}}') and set that variable in the environment or in "
                        ".env beside {}",
                        SuggestVariableName(at.path), diagnostics_.display_name()));
      return std::nullopt;
    }
    return text;
  }
  if (KeepsReference(at.path, text)) return text;
  const std::optional<std::string> value = environment_.Get(*reference);
  if (!value || value->empty()) {
    diagnostics_.Error(
        at.mark, "",
        fmt::format(
            "skippr.yml references ${{{}}} at {}, but that environment variable {}; set it in "
            "the shell or in .env beside {}",
            ShownText(*reference), at.path, value ? "is empty" : "is not set",
            diagnostics_.display_name()));
    return std::nullopt;
  }
  // From here on no message, log line or stored error of this process shows it.
  if (secret) RegisterSecret(*value);
  return *value;
}

std::optional<std::string> Reader::String(const Located& at, bool secret) {
  return ScalarText(at, secret);
}

std::optional<std::string> Reader::NonEmptyString(const Located& at) {
  std::optional<std::string> text = ScalarText(at, false);
  if (text && text->empty()) {
    Error(at, "must not be empty");
    return std::nullopt;
  }
  return text;
}

bool Reader::KeepsReference(const std::string& path, std::string_view text) const {
  if (!WholeReference(std::string(text))) return false;
  if (references_ == ReferenceMode::kKeep) return true;
  if (resolved_key_paths_.empty()) return false;
  const auto is_under = [&](const std::string& resolved) {
    return path.rfind(resolved, 0) == 0 &&
           (path.size() == resolved.size() || path[resolved.size()] == '.' ||
            path[resolved.size()] == '[');
  };
  return std::none_of(resolved_key_paths_.begin(), resolved_key_paths_.end(), is_under);
}

bool Reader::IsKeptReference(const Located& at) const {
  return !IsNull(at) && at.node.IsScalar() && KeepsReference(at.path, at.node.Scalar());
}

std::optional<int64_t> Reader::Integer(const Located& at, int64_t min_value, int64_t max_value) {
  if (IsKeptReference(at)) return min_value;
  std::optional<std::string> text = ScalarText(at, false);
  if (!text) return std::nullopt;
  int64_t value = 0;
  auto [end, error] = std::from_chars(text->data(), text->data() + text->size(), value);
  if (error == std::errc::result_out_of_range && end == text->data() + text->size()) {
    Error(at, fmt::format("{} is out of range; allowed: {} to {}", ShownText(*text), min_value,
                          max_value));
    return std::nullopt;
  }
  if (error != std::errc() || end != text->data() + text->size()) {
    Error(at, fmt::format("expected a whole number, found '{}'", ShownText(*text)));
    return std::nullopt;
  }
  if (value < min_value || value > max_value) {
    Error(at, fmt::format("{} is out of range; allowed: {} to {}", value, min_value, max_value));
    return std::nullopt;
  }
  return value;
}

std::optional<bool> Reader::Boolean(const Located& at) {
  if (IsKeptReference(at)) return false;
  std::optional<std::string> text = ScalarText(at, false);
  if (!text) return std::nullopt;
  std::optional<bool> value = ParseFlag(*text);
  if (!value) {
    Error(at, fmt::format("expected true or false (also yes/no, 1/0), found '{}'",
                          ShownText(*text)));
  }
  return value;
}

std::optional<std::vector<std::string>> Reader::StringList(const Located& at, bool allow_scalar) {
  if (allow_scalar && at.node && at.node.IsScalar()) {
    std::optional<std::string> text = NonEmptyString(at);
    if (!text) return std::nullopt;
    return std::vector<std::string>{*text};
  }
  if (!IsNull(at) && !at.node.IsSequence()) {
    Error(at, fmt::format("expected a list of names, found {}", NodeKind(at.node)));
    return std::nullopt;
  }
  std::vector<std::string> values;
  bool ok = true;
  for (const Located& item : Sequence(at)) {
    std::optional<std::string> text = NonEmptyString(item);
    if (text) {
      values.push_back(*text);
    } else {
      ok = false;
    }
  }
  if (!ok) return std::nullopt;
  return values;
}

std::optional<std::string> Reader::Choice(const Located& at,
                                          const std::vector<std::string_view>& choices) {
  if (IsKeptReference(at)) return std::string(choices.front());
  std::optional<std::string> text = ScalarText(at, false);
  if (!text) return std::nullopt;
  if (std::find(choices.begin(), choices.end(), *text) == choices.end()) {
    Error(at, fmt::format("'{}' is not allowed; choose one of: {}", ShownText(*text),
                          JoinNames(choices)));
    return std::nullopt;
  }
  return text;
}

}  // namespace skippr::config::internal
