// The catalog in a DynamoDB table (docs/formats/iceberg-tables.md, "The DynamoDB catalog").
#pragma once

#include <memory>

#include "iceberg/catalog.hpp"

namespace skippr::iceberg::internal {

// Opens the catalog in options.dynamodb_table (created when absent) for options.warehouse.
Result<std::unique_ptr<Catalog>> OpenDynamoCatalog(const CatalogOptions& options);

}  // namespace skippr::iceberg::internal
