// Internal to schema/: the name rules (docs/schema.md, "Names"). A field or namespace name is
// decided once, when it is first seen, before anything is committed: DuckDB, Iceberg readers and
// Parquet tools compare column names ignoring case, the store's keys and the warehouse's directory
// names have length limits, and some names are skipprd's own.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "core/types.hpp"

namespace skippr::schema::internal {

// Whether two names are one name to DuckDB (ASCII letters compared without case, as DuckDB does).
bool SameNameIgnoringCase(std::string_view a, std::string_view b);

// The name a new field gets for the key records give it: `key` itself unless a rule applies
// (empty, control characters, reserved prefix, too long, or equal ignoring case to one of
// `siblings`, the fields already in its struct). `position` is the new field's 1-based position in
// its struct (an empty key becomes `column_<position>`). `why` says which rule renamed it, for the
// schema history; empty when the key is the name.
struct DecidedName {
  std::string name;
  std::string why;
};
DecidedName DecideFieldName(std::string_view key, const std::vector<Field>& siblings,
                            size_t position);

// A cleaned namespace name (config::CleanName: lowercase, [a-z0-9_]) after the namespace rules:
// empty, reserved and too long names are renamed.
std::string DecideNamespaceName(const std::string& cleaned);

}  // namespace skippr::schema::internal
