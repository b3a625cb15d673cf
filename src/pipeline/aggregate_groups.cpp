// An aggregate's stored groups as a query table (`skipprd aggregates verify` compares them with a
// recompute; the Python module's Session.aggregates reads them).
#include <fmt/format.h>

#include <mutex>

#include "pipeline/pipeline.hpp"

namespace skippr::pipeline {

Status RegisterAggregateGroups(query::Engine& engine, const config::AggregateConfig& aggregate,
                               std::shared_ptr<const transform::AggregateGroupChunks> chunks) {
  std::vector<Field> fields;
  int32_t id = 1;
  for (size_t i = 0; i < aggregate.key_fields.size(); ++i) {
    fields.push_back({id++, fmt::format("key_{}", i), LogicalType::String(), true});
  }
  for (size_t j = 0; j < aggregate.measures.size(); ++j) {
    fields.push_back({id++, fmt::format("measure_{}", j), LogicalType::String(), true});
  }
  query::BatchList list;
  list.row_counts = chunks->chunk_sizes();
  auto mutex = std::make_shared<std::mutex>();  // the read transaction serves one thread at a time
  list.read = [chunks, fields, mutex](
                  size_t index, const FieldSelection&) -> Result<std::shared_ptr<const Batch>> {
    std::unique_lock lock(*mutex);
    SKIPPR_ASSIGN_OR_RETURN(std::vector<transform::AggregateGroup> groups, chunks->Read(index));
    lock.unlock();
    auto batch = std::make_shared<Batch>();
    batch->fields = fields;
    for (const Field& field : fields) batch->columns.emplace_back(field.type);
    const auto text = [](const std::optional<std::string>& value) {
      return value ? Value::String(*value) : Value::Null();
    };
    for (const transform::AggregateGroup& group : groups) {
      size_t column = 0;
      for (const auto& key : group.keys) batch->columns[column++].Append(text(key));
      for (const auto& measure : group.measures) batch->columns[column++].Append(text(measure));
    }
    batch->num_rows = static_cast<int64_t>(groups.size());
    return std::shared_ptr<const Batch>(std::move(batch));
  };
  return engine.RegisterTable(
      {std::string(kAggregateGroupsSchema), aggregate.id, std::move(fields), std::move(list)});
}

}  // namespace skippr::pipeline
