// The name rules of docs/schema.md ("Names"): see names.hpp.
#include "schema/names.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>

#include "config/config.hpp"
#include "core/check.hpp"
#include "core/hash.hpp"
#include "schema/schema.hpp"

namespace skippr::schema::internal {

namespace {

constexpr std::string_view kReservedPrefix = "__skippr_";
constexpr size_t kHashSuffixBytes = 9;  // "_" and 8 hex digits

char LowerAscii(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

// The start of `text`, at most `max_bytes` long, ending where a UTF-8 character begins.
std::string_view CutAtCharacter(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  size_t end = max_bytes;
  while (end > 0 && (static_cast<uint8_t>(text[end]) & 0xC0) == 0x80) --end;
  return text.substr(0, end);
}

// A name over `max_bytes` keeps its start and ends in 8 hex digits of the SHA-256 of `full` (what
// records call it), so distinct long names stay distinct.
std::string Shorten(const std::string& name, std::string_view full, size_t max_bytes) {
  if (name.size() <= max_bytes) return name;
  return fmt::format("{}_{}", CutAtCharacter(name, max_bytes - kHashSuffixBytes),
                     Sha256Hex(full).substr(0, 8));
}

// `name` with `_<number>`, cut first where the suffix would pass `max_bytes`.
std::string Numbered(const std::string& name, size_t number, size_t max_bytes) {
  const std::string suffix = fmt::format("_{}", number);
  return std::string(CutAtCharacter(name, max_bytes - suffix.size())) + suffix;
}

std::string FoldCase(std::string_view name) {
  std::string folded(name);
  for (char& c : folded) c = LowerAscii(c);
  return folded;
}

// Control characters (U+0000–U+001F, U+007F) cannot reach a column name: a NUL ends a name in
// DuckDB's C API, and the rest break SQL text, logs and terminals.
bool ReplaceControlCharacters(std::string& name) {
  bool replaced = false;
  for (char& c : name) {
    const auto byte = static_cast<uint8_t>(c);
    if (byte < 0x20 || byte == 0x7F) {
      c = '_';
      replaced = true;
    }
  }
  return replaced;
}

}  // namespace

bool SameNameIgnoringCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (LowerAscii(a[i]) != LowerAscii(b[i])) return false;
  }
  return true;
}

void FoldedNames::CatchUp(const std::vector<Field>& fields, size_t field_count) {
  field_count = std::min(field_count, fields.size());
  if (indexed_fields_ > field_count) *this = FoldedNames{};  // another vector: index it afresh
  for (; indexed_fields_ < field_count; ++indexed_fields_) {
    positions_.emplace(FoldCase(fields[indexed_fields_].name), indexed_fields_);
  }
}

const Field* FoldedNames::Find(const std::vector<Field>& fields, std::string_view name) const {
  auto it = positions_.find(FoldCase(name));
  if (it == positions_.end() || it->second >= fields.size()) return nullptr;
  const Field& field = fields[it->second];
  return SameNameIgnoringCase(field.name, name) ? &field : nullptr;
}

DecidedName DecideFieldName(std::string_view key, const std::vector<Field>& siblings,
                            const FoldedNames& siblings_index, size_t position) {
  const auto taken_by = [&](std::string_view name) { return siblings_index.Find(siblings, name); };
  DecidedName decided{std::string(key), ""};
  std::vector<std::string> reasons;
  if (key.empty()) {
    decided.name = fmt::format("column_{}", position);
    reasons.push_back("records give it an empty name");
  }
  if (ReplaceControlCharacters(decided.name)) reasons.push_back("control characters became '_'");
  if (decided.name.starts_with(kReservedPrefix)) {
    decided.name.erase(0, 2);
    reasons.push_back(fmt::format("names starting with '{}' are reserved", kReservedPrefix));
  }
  if (decided.name.size() > kMaxFieldNameBytes) {
    decided.name = Shorten(decided.name, key, kMaxFieldNameBytes);
    reasons.push_back(fmt::format("names are at most {} bytes", kMaxFieldNameBytes));
  }
  if (const Field* taken = taken_by(decided.name)) {
    reasons.push_back(fmt::format("'{}' is already a field (names are compared ignoring case)",
                                  taken->name));
    const std::string base = decided.name;
    // Each sibling takes at most one number, so one of the first siblings.size() + 1 is free.
    for (size_t number = 2; number <= siblings.size() + 2; ++number) {
      decided.name = Numbered(base, number, kMaxFieldNameBytes);
      if (taken_by(decided.name) == nullptr) break;
    }
    SKIPPR_CHECK(taken_by(decided.name) == nullptr);
  }
  if (!reasons.empty()) decided.why = fmt::format("{}", fmt::join(reasons, "; "));
  return decided;
}

std::string DecideNamespaceName(const std::string& cleaned) {
  if (cleaned.empty()) return std::string(kUnnamedNamespace);
  if (cleaned == kDeadlettersNamespace) return fmt::format("{}_data", kDeadlettersNamespace);
  std::string name = cleaned;
  if (name.starts_with(kReservedPrefix)) name.erase(0, 2);
  return Shorten(name, cleaned, kMaxNamespaceNameBytes);
}

}  // namespace skippr::schema::internal

namespace skippr::schema {

namespace {
Status CheckFieldNames(const std::vector<Field>& fields, const std::string& parent) {
  internal::FoldedNames earlier;  // fields[0, i)
  for (size_t i = 0; i < fields.size(); ++i) {
    const Field& field = fields[i];
    const std::string path = parent.empty() ? field.name : parent + "." + field.name;
    const internal::DecidedName decided =
        internal::DecideFieldName(field.name, fields, earlier, i + 1);
    if (!decided.why.empty()) {
      return Status::InvalidArgument(
          fmt::format("field '{}' breaks the name rules ({}); name it '{}' or another that does "
                      "not (docs/schema.md, \"Names\")",
                      path, decided.why, decided.name));
    }
    if (field.type.id() == TypeId::kStruct) {
      SKIPPR_RETURN_IF_ERROR(CheckFieldNames(field.type.children(), path));
    }
    earlier.CatchUp(fields, i + 1);
  }
  return Status::OK();
}
}  // namespace

Status CheckNames(const std::string& namespace_name, const std::vector<Field>& fields) {
  const std::string decided = internal::DecideNamespaceName(config::CleanName(namespace_name));
  if (decided != namespace_name) {
    return Status::InvalidArgument(fmt::format(
        "namespace '{}' breaks the name rules; the shaper would name it '{}' (docs/schema.md, "
        "\"Names\")",
        namespace_name, decided));
  }
  return CheckFieldNames(fields, "");
}

}  // namespace skippr::schema
