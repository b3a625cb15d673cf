// Partition specs (Iceberg spec, "Partitioning"), shared by table metadata and manifests.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace skippr::iceberg {

// One field of a partition spec (spec appendix C).
struct PartitionField {
  int32_t source_id = 0;  // the table field the value is derived from
  int32_t field_id = 0;   // the partition field's own id, 1000 and up
  std::string name;
  std::string transform;  // "identity", "day", "bucket[16]", ...

  friend bool operator==(const PartitionField&, const PartitionField&) = default;
};

// Spec 0 without fields is an unpartitioned table. Only unpartitioned tables are written and read
// today (NotSupported otherwise); the model already carries partitions so they can be added.
struct PartitionSpec {
  int32_t spec_id = 0;
  std::vector<PartitionField> fields;  // empty: unpartitioned

  friend bool operator==(const PartitionSpec&, const PartitionSpec&) = default;
};

}  // namespace skippr::iceberg
