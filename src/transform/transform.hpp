// Transforms (DESIGN.md §3, issue #6): what happens to shaped batches between the shaper and the
// WAL commit (transform.ops), and the aggregates processor over committed rows. The only header
// other modules include from transform/.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "core/batch.hpp"
#include "core/status.hpp"
#include "query/query.hpp"
#include "schema/schema.hpp"

namespace skippr::transform {

// ===== transform.ops (ops.cpp) ================================================================
//
// The ops of one pipeline, run as ONE DuckDB statement per batch: each op is a SELECT over the
// previous one (rename/drop/select/cast/hash/default/derive: a column list; filter: WHERE), so
// DuckDB evaluates them vectorised. An op naming a field the batch does not have is skipped for
// that batch (schemas evolve: the field may arrive later), except that select and drop may not
// leave a batch without fields.
//
// The output schema is what readers see (schema::LoadSchema); the shaper keeps evolving the input
// schema (schema::LoadInputSchema). Output fields keep their ids by name: a field whose type
// changes by an Iceberg promotion keeps its id, one that changes otherwise gets a new id (its old
// values read NULL under the new one), new fields take ids after the namespace's last_field_id.

// Where each row of an input batch came from, parallel to its rows (Shaper keep_origins).
using RowOrigins = std::vector<schema::RecordOrigin>;

class OpsRunner {
 public:
  // `output` is the saved output schema whose field ids and schema ids the outputs continue;
  // `config_path` (skippr.yml) is named in errors beside each op's line.
  static Result<std::unique_ptr<OpsRunner>> Open(const config::PipelineConfig& pipeline,
                                                 schema::PipelineSchema output,
                                                 std::string config_path);
  ~OpsRunner();
  OpsRunner(const OpsRunner&) = delete;
  OpsRunner& operator=(const OpsRunner&) = delete;

  // Evolves the output schema of `input`'s namespace to what the ops make of `input`'s fields,
  // without rows (discover). Returns the change when the output schema changed.
  Result<std::optional<schema::NamespaceChange>> Evolve(const schema::NamespaceSchema& input);

  // Runs the ops over `input` (its namespace's output schema evolves as with Evolve; `change`
  // receives the change when it did). The result carries the output schema's fields and id; it
  // may hold fewer rows (filter), or none. A CDC sidecar is carried over (NotSupported with a
  // filter op, which could drop a change). A failure names the op (index, kind, config place) and,
  // when the op fails on a value, the first record it fails on (from `origins` when given).
  Result<Batch> Apply(Batch input, const RowOrigins* origins,
                      std::optional<schema::NamespaceChange>* change);

  // The output schema as evolved so far (every namespace seen, and those saved before).
  const schema::PipelineSchema& output_schema() const { return output_; }

 private:
  OpsRunner() = default;
  struct Stage;
  Result<std::vector<Stage>> PlanStages(const Batch& input) const;
  Status Register(const std::string& namespace_name, std::shared_ptr<const Batch> batch);
  Status DescribeFailure(const std::vector<Stage>& stages,
                         const std::shared_ptr<const Batch>& input, const RowOrigins* origins,
                         const Status& failure);
  Result<std::optional<schema::NamespaceChange>> ConformOutput(const std::string& namespace_name,
                                                               Batch& output);
  std::string OpPlace(size_t index) const;
  bool HasFilter() const;

  std::string pipeline_name_;
  std::string config_path_;
  std::vector<config::TransformOp> ops_;
  schema::PipelineSchema output_;
  std::unique_ptr<query::Engine> engine_;
};

// ===== end transform.ops ======================================================================

}  // namespace skippr::transform
