// Internal to schema/: the name rules (docs/schema.md, "Names"). A field or namespace name is
// decided once, when it is first seen, before anything is committed: DuckDB, Iceberg readers and
// Parquet tools compare column names ignoring case, the store's keys and the warehouse's directory
// names have length limits, and some names are skipprd's own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/types.hpp"

namespace skippr::schema::internal {

// Whether two names are one name to DuckDB (ASCII letters compared without case, as DuckDB does).
bool SameNameIgnoringCase(std::string_view a, std::string_view b);

// The names of one struct's fields as DuckDB compares them, for the duplicate rule: a lookup per
// new field instead of a scan, so that a record of 100,000 new columns costs O(n), not O(n²).
// Fields are only ever appended; CatchUp() indexes the ones added since the last call, up to the
// first `field_count`.
class FoldedNames {
 public:
  void CatchUp(const std::vector<Field>& fields, size_t field_count = SIZE_MAX);
  // The field of `fields` (the vector last caught up with) whose name equals `name` ignoring case.
  const Field* Find(const std::vector<Field>& fields, std::string_view name) const;

 private:
  std::unordered_map<std::string, size_t> positions_;  // case-folded name → index in fields
  size_t indexed_fields_ = 0;
};

// The name a new field gets for the key records give it: `key` itself unless a rule applies
// (empty, control characters, reserved prefix, too long, or equal ignoring case to one of
// `siblings`, the fields already in its struct). `position` is the new field's 1-based position in
// its struct (an empty key becomes `column_<position>`). `why` says which rule renamed it, for the
// schema history; empty when the key is the name.
struct DecidedName {
  std::string name;
  std::string why;
};
// `siblings_index` is caught up with `siblings`.
DecidedName DecideFieldName(std::string_view key, const std::vector<Field>& siblings,
                            const FoldedNames& siblings_index, size_t position);

// A cleaned namespace name (config::CleanName: lowercase, [a-z0-9_]) after the namespace rules:
// empty, reserved and too long names are renamed.
std::string DecideNamespaceName(const std::string& cleaned);

}  // namespace skippr::schema::internal
