// Column statistics of the files SkipprLake writes — Iceberg's value, null and NaN counts and
// lower and upper bounds per top-level primitive column — and the manifest's bounds read back for
// query (lake/ internal: lake.cpp's landings and maintenance).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/batch.hpp"
#include "core/status.hpp"
#include "core/types.hpp"
#include "iceberg/iceberg.hpp"
#include "query/query.hpp"

namespace skippr::lake::internal {

struct FieldStatistics;

// Value, null and NaN counts and bounds of a data file's top-level primitive columns, added batch
// by batch from the batches it is written from (older schemas projected as the scan projects them:
// a missing column is NULL, int/long read as double where the field widened). String bounds point
// into the batches, which must outlive it.
class FileStatistics {
 public:
  explicit FileStatistics(std::vector<Field> fields);
  ~FileStatistics();
  FileStatistics(const FileStatistics&) = delete;
  FileStatistics& operator=(const FileStatistics&) = delete;

  void Add(const Batch& batch);
  // Sets `file`'s counts and bounds; its record count must be the rows added.
  Status WriteTo(iceberg::DataFile& file) const;

 private:
  const std::vector<Field> fields_;
  std::vector<FieldStatistics> statistics_;  // parallel to fields_
};

// FileStatistics of `batches`, all in memory.
Status AddColumnStatisticsFromBatches(const std::vector<Field>& fields,
                                      const std::vector<std::shared_ptr<const Batch>>& batches,
                                      iceberg::DataFile& file);

// The row count in a written file's footer: what readers will see.
Result<int64_t> RowCountOf(query::Engine& engine, const std::string& path);
// RowCountOf checked against the rows handed to DuckDB.
Status CheckRowCount(query::Engine& engine, const std::string& path, int64_t expected_rows);

// Value, null and NaN counts and bounds of the top-level primitive columns, read back from the
// written file: for the files of a merge, whose rows are not the landing's batches.
Status AddColumnStatisticsFromFile(query::Engine& engine, const std::vector<Field>& fields,
                                   const std::string& path, iceberg::DataFile& file);

// What a data file's manifest entry says of each top-level column of the table's current schema,
// by field id: what lets query leave the file out of a statement whose filter it rules out.
std::map<int32_t, query::ColumnStatistics> ColumnStatisticsOf(const iceberg::DataFile& file,
                                                              const iceberg::TableSchema& schema);

}  // namespace skippr::lake::internal
