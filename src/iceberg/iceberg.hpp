// The iceberg module's public header (DESIGN.md §3): Apache Iceberg v2 tables on a local warehouse.
//   table_metadata.hpp  vN.metadata.json, version-hint.text, schemas, snapshots, expiry
//                       (docs/formats/iceberg-tables.md)
//   catalog.hpp         the catalog in the Iceberg JDBC-catalog table shape (SQLite, PostgreSQL)
//   and
//                       the compare-and-set commit of a new metadata version
//   manifest.hpp        manifests and manifest lists (Avro), column bounds
//                       (docs/formats/iceberg-manifests.md)
// Other modules include this header only.
#pragma once

#include "iceberg/catalog.hpp"
#include "iceberg/manifest.hpp"
#include "iceberg/partition_spec.hpp"
#include "iceberg/table_metadata.hpp"
