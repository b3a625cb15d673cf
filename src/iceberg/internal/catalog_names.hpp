// What every catalog accepts as names and locations: the column sizes of the Iceberg JDBC
// catalog's tables, which the DynamoDB catalog keeps too so that a table can move between them.
#pragma once

#include <fmt/format.h>

#include <string_view>

#include "core/status.hpp"
#include "iceberg/catalog.hpp"

namespace skippr::iceberg::internal {

inline constexpr size_t kMaxNameBytes = 255;       // VARCHAR(255)
inline constexpr size_t kMaxLocationBytes = 1000;  // VARCHAR(1000)

inline Status CheckText(std::string_view what, std::string_view text, size_t max_bytes) {
  if (text.empty() || text.size() > max_bytes) {
    return Status::InvalidArgument(fmt::format(
        "{} '{}' does not fit the catalog: it must be 1 to {} bytes", what, text, max_bytes));
  }
  return Status::OK();
}

inline Status CheckTable(const TableIdentifier& table) {
  SKIPPR_RETURN_IF_ERROR(CheckText("namespace", table.table_namespace, kMaxNameBytes));
  return CheckText("table name", table.table_name, kMaxNameBytes);
}

}  // namespace skippr::iceberg::internal
