// transform.ops: the ops of a pipeline as one DuckDB SELECT per batch, over the batch registered as
// a wal_scan table; the result read back as a Batch whose fields keep their ids by name.
#include <fmt/format.h>

#include <algorithm>

#include "core/check.hpp"
#include "query/query.hpp"
#include "transform/transform.hpp"

namespace skippr::transform {

namespace {

// The DuckDB schema the batches are registered under, as "<schema>"."<namespace>".
constexpr std::string_view kTableSchema = "skippr_ops";

using query::QuoteIdentifier;
using query::QuoteLiteral;

// DuckDB's spelling of a type `cast` accepts (config: primitives only).
std::string DuckTypeName(const LogicalType& type) {
  switch (type.id()) {
    case TypeId::kBoolean:
      return "BOOLEAN";
    case TypeId::kInt:
      return "INTEGER";
    case TypeId::kLong:
      return "BIGINT";
    case TypeId::kFloat:
      return "FLOAT";
    case TypeId::kDouble:
      return "DOUBLE";
    case TypeId::kDecimal:
      return fmt::format("DECIMAL({}, {})", type.decimal_precision(), type.decimal_scale());
    case TypeId::kDate:
      return "DATE";
    case TypeId::kTime:
      return "TIME";
    case TypeId::kTimestamp:
      return "TIMESTAMP";
    case TypeId::kTimestampTz:
      return "TIMESTAMPTZ";
    case TypeId::kString:
      return "VARCHAR";
    case TypeId::kBinary:
      return "BLOB";
    case TypeId::kUuid:
      return "UUID";
    default:
      return type.ToString();  // nested types are not written in skippr.yml
  }
}

bool Contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

const std::string* FindPair(const std::vector<std::pair<std::string, std::string>>& pairs,
                            const std::string& name) {
  for (const auto& [key, value] : pairs) {
    if (key == name) return &value;
  }
  return nullptr;
}

// The column list of a stage: each column's expression, aliased to its name.
std::string SelectList(const std::vector<std::pair<std::string, std::string>>& columns) {
  std::vector<std::string> items;
  for (const auto& [name, expression] : columns) {
    items.push_back(expression == QuoteIdentifier(name)
                        ? expression
                        : fmt::format("{} AS {}", expression, QuoteIdentifier(name)));
  }
  return fmt::format("{}", fmt::join(items, ", "));
}

// (name, expression) of every column passed through unchanged.
std::vector<std::pair<std::string, std::string>> PassThrough(
    const std::vector<std::string>& names) {
  std::vector<std::pair<std::string, std::string>> columns;
  for (const std::string& name : names) columns.emplace_back(name, QuoteIdentifier(name));
  return columns;
}

// The columns after one op, and its expressions; `names` becomes the op's output names.
Result<std::vector<std::pair<std::string, std::string>>> OpColumns(
    const config::TransformOp& op, std::vector<std::string>& names) {
  using config::TransformOpKind;
  std::vector<std::pair<std::string, std::string>> columns;
  switch (op.kind) {
    case TransformOpKind::kRename: {
      for (const auto& [from, to] : op.pairs) {
        if (from != to && Contains(names, from) && Contains(names, to)) {
          return Status::InvalidConfig(fmt::format(
              "renames '{}' to '{}', which the records already have; drop or rename '{}' first",
              from, to, to));
        }
      }
      for (const std::string& name : names) {
        const std::string* to = FindPair(op.pairs, name);
        columns.emplace_back(to ? *to : name, QuoteIdentifier(name));
      }
      break;
    }
    case TransformOpKind::kDrop:
    case TransformOpKind::kSelect: {
      const bool is_select = op.kind == TransformOpKind::kSelect;
      const std::vector<std::string>& listed = is_select ? op.fields : names;
      for (const std::string& name : listed) {
        if (!Contains(names, name)) continue;
        if (!is_select && Contains(op.fields, name)) continue;
        columns.emplace_back(name, QuoteIdentifier(name));
      }
      if (columns.empty()) {
        return Status::InvalidConfig(
            fmt::format("leaves the records without fields (they have: {}); keep at least one",
                        fmt::join(names, ", ")));
      }
      break;
    }
    case TransformOpKind::kCast:
      for (const std::string& name : names) {
        std::string expression = QuoteIdentifier(name);
        for (const auto& [field, type] : op.casts) {
          if (field == name) {
            expression = fmt::format("CAST({} AS {})", expression, DuckTypeName(type));
          }
        }
        columns.emplace_back(name, expression);
      }
      break;
    case TransformOpKind::kHash:
      for (const std::string& name : names) {
        // SHA-256 of the value's text, as 64 lowercase hex digits; NULL stays NULL.
        columns.emplace_back(name,
                             Contains(op.fields, name)
                                 ? fmt::format("sha256(CAST({} AS VARCHAR))", QuoteIdentifier(name))
                                 : QuoteIdentifier(name));
      }
      break;
    case TransformOpKind::kDefault:
      for (const std::string& name : names) {
        // A string literal takes the column's type in coalesce: 'GB' for a string, '0' for a
        // number; a value that does not convert fails the batch like a bad cast.
        const std::string* value = FindPair(op.pairs, name);
        columns.emplace_back(name, value ? fmt::format("coalesce({}, {})", QuoteIdentifier(name),
                                                       QuoteLiteral(*value))
                                         : QuoteIdentifier(name));
      }
      break;
    case TransformOpKind::kDerive:
      columns = PassThrough(names);
      for (const auto& [name, expression] : op.pairs) {
        const std::string derived = fmt::format("({})", expression);
        // A named reference: clang before 16 cannot capture a structured binding in a lambda.
        const std::string& derived_name = name;
        auto existing = std::find_if(columns.begin(), columns.end(), [&](const auto& column) {
          return column.first == derived_name;
        });
        if (existing != columns.end()) {
          existing->second = derived;  // derive over an existing field replaces it in place
        } else {
          columns.emplace_back(name, derived);
        }
      }
      break;
    case TransformOpKind::kFilter:
      columns = PassThrough(names);
      break;
  }
  names.clear();
  for (const auto& column : columns) names.push_back(column.first);
  return columns;
}

// Rows [0, rows) of `batch`, row by row (only on the error path, to find the failing record).
Batch Prefix(const Batch& batch, int64_t rows) {
  Batch prefix;
  prefix.namespace_name = batch.namespace_name;
  prefix.schema_id = batch.schema_id;
  prefix.fields = batch.fields;
  for (const Column& column : batch.columns) {
    Column copy(column.type);
    for (int64_t row = 0; row < rows; ++row) copy.Append(column.ValueAt(row));
    prefix.columns.push_back(std::move(copy));
  }
  prefix.num_rows = rows;
  return prefix;
}

// Types equal apart from field ids.
bool SameShape(const LogicalType& a, const LogicalType& b) {
  if (a.id() != b.id()) return false;
  if (a.id() == TypeId::kDecimal) {
    return a.decimal_precision() == b.decimal_precision() && a.decimal_scale() == b.decimal_scale();
  }
  if (!a.is_nested()) return true;
  const std::vector<Field>& left = a.children();
  const std::vector<Field>& right = b.children();
  if (left.size() != right.size()) return false;
  for (size_t i = 0; i < left.size(); ++i) {
    if (left[i].name != right[i].name || !SameShape(left[i].type, right[i].type)) return false;
  }
  return true;
}

const Field* FindField(const std::vector<Field>* fields, const std::string& name) {
  if (fields == nullptr) return nullptr;
  for (const Field& field : *fields) {
    if (field.name == name) return &field;
  }
  return nullptr;
}

// Gives `fields` ids: by name from `previous`, new ones after `last_field_id` otherwise.
void AssignIds(std::vector<Field>& fields, const std::vector<Field>* previous,
               int32_t& last_field_id) {
  for (Field& field : fields) {
    const Field* before = FindField(previous, field.name);
    if (before != nullptr && SameShape(before->type, field.type)) {
      field.id = before->id;
      field.type = before->type;  // with its nested ids
      continue;
    }
    const bool keeps_id =
        before != nullptr && !field.type.is_nested() && CanPromote(before->type, field.type);
    field.id = keeps_id ? before->id : ++last_field_id;
    if (!field.type.is_nested()) continue;
    const bool same_kind = before != nullptr && before->type.id() == field.type.id();
    AssignIds(field.type.mutable_children(), same_kind ? &before->type.children() : nullptr,
              last_field_id);
  }
}

// Gives `column` (and its children) the types of `type`, which differ from theirs only in ids.
void AdoptType(Column& column, const LogicalType& type) {
  column.type = type;
  for (size_t i = 0; i < column.children.size(); ++i) {
    AdoptType(column.children[i], type.children()[i].type);
  }
}

std::vector<std::string> DescribeChanges(const std::vector<Field>& before,
                                         const std::vector<Field>& after) {
  std::vector<std::string> changes;
  for (const Field& field : after) {
    const Field* previous = FindField(&before, field.name);
    if (previous == nullptr) {
      changes.push_back(fmt::format("added {} ({})", field.name, field.type.ToString()));
    } else if (previous->id != field.id || !SameShape(previous->type, field.type)) {
      changes.push_back(fmt::format("changed {} to {}", field.name, field.type.ToString()));
    }
  }
  for (const Field& field : before) {
    if (FindField(&after, field.name) == nullptr) {
      changes.push_back(fmt::format("removed {}", field.name));
    }
  }
  return changes;
}

// DuckDB's message without the SQL excerpt it appends ("\n\nLINE 1: SELECT ..."): that SQL is
// ours, not the user's, and pointing into it only confuses.
std::string DuckDbReason(const std::string& message) {
  const size_t excerpt = message.find("\n\nLINE ");
  return excerpt == std::string::npos ? message : message.substr(0, excerpt);
}

std::string DescribeOrigin(const schema::RecordOrigin& origin) {
  if (origin.line > 0) return fmt::format("{}:{} (row {})", origin.source, origin.line, origin.row);
  return fmt::format("{} row {}", origin.source, origin.row);
}

}  // namespace

struct OpsRunner::Stage {
  size_t op_index = 0;
  std::string sql;  // the ops up to and including op_index
};

OpsRunner::~OpsRunner() = default;

Result<std::unique_ptr<OpsRunner>> OpsRunner::Open(const config::PipelineConfig& pipeline,
                                                   schema::PipelineSchema output,
                                                   std::string config_path) {
  SKIPPR_CHECK(pipeline.transform.type != config::TransformType::kCopy ||
               pipeline.transform.ops.empty());  // the loader rejects ops with type: copy
  std::unique_ptr<OpsRunner> runner(new OpsRunner());
  runner->pipeline_name_ = pipeline.name;
  runner->config_path_ = std::move(config_path);
  runner->ops_ = pipeline.transform.ops;
  runner->output_ = std::move(output);
  SKIPPR_ASSIGN_OR_RETURN(runner->engine_, query::Engine::Open());
  // One batch at a time on the sync thread: DuckDB's own threads would only compete with the
  // reader and committer threads for the same cores.
  SKIPPR_RETURN_IF_ERROR(runner->engine_->Run("SET threads = 1").status());
  return runner;
}

std::string OpsRunner::OpPlace(size_t index) const {
  const config::TransformOp& op = ops_[index];
  std::string place = fmt::format("pipelines.{}.transform.ops[{}] ({}", pipeline_name_, index,
                                  config::TransformOpName(op.kind));
  if (op.mark.line > 0) {
    place +=
        fmt::format(", {}:{}", config_path_.empty() ? "skippr.yml" : config_path_, op.mark.line);
  }
  return place + ")";
}

Result<std::vector<OpsRunner::Stage>> OpsRunner::PlanStages(const Batch& input) const {
  std::vector<std::string> names;
  for (const Field& field : input.fields) names.push_back(field.name);
  std::string sql = fmt::format("SELECT * FROM {}.{}", QuoteIdentifier(kTableSchema),
                                QuoteIdentifier(input.namespace_name));
  std::vector<Stage> stages;
  for (size_t i = 0; i < ops_.size(); ++i) {
    const config::TransformOp& op = ops_[i];
    Result<std::vector<std::pair<std::string, std::string>>> columns = OpColumns(op, names);
    if (!columns.ok()) {
      return Status::InvalidConfig(fmt::format("{} in namespace '{}' {}; fix the op in skippr.yml",
                                               OpPlace(i), input.namespace_name,
                                               columns.status().message()));
    }
    if (op.kind == config::TransformOpKind::kFilter) {
      sql = fmt::format("SELECT * FROM ({}) AS op{} WHERE ({})", sql, i, op.predicate);
    } else {
      sql = fmt::format("SELECT {} FROM ({}) AS op{}", SelectList(*columns), sql, i);
    }
    stages.push_back({i, sql});
  }
  return stages;
}

Status OpsRunner::Register(const std::string& namespace_name, std::shared_ptr<const Batch> batch) {
  query::TableSource table;
  table.pipeline = std::string(kTableSchema);
  table.namespace_name = namespace_name;
  table.fields = batch->fields;
  table.batches = query::BatchList::InMemory({batch});
  return engine_->RegisterTable(std::move(table));
}

Result<std::optional<schema::NamespaceChange>> OpsRunner::Evolve(
    const schema::NamespaceSchema& input) {
  Batch empty;
  empty.namespace_name = input.name;
  empty.schema_id = input.schema_id;
  empty.fields = input.fields;
  for (const Field& field : input.fields) empty.columns.emplace_back(field.type);
  std::optional<schema::NamespaceChange> change;
  SKIPPR_RETURN_IF_ERROR(Apply(std::move(empty), nullptr, &change).status());
  return change;
}

Result<Batch> OpsRunner::Apply(Batch input, const RowOrigins* origins,
                               std::optional<schema::NamespaceChange>* change) {
  SKIPPR_CHECK(origins == nullptr || static_cast<int64_t>(origins->size()) == input.num_rows);
  const std::string namespace_name = input.namespace_name;
  // CDC rows keep their sidecar only while every row survives in order: one scan thread keeps
  // DuckDB's output in batch order, and only filter removes rows.
  std::optional<CdcSidecar> cdc = std::move(input.cdc);
  input.cdc.reset();
  if (cdc && HasFilter()) {
    return Status::NotSupported(fmt::format(
        "pipelines.{}.transform.ops: filter cannot run on change-data-capture records (namespace "
        "'{}'): a dropped row would lose its change; remove the filter op",
        pipeline_name_, namespace_name));
  }
  auto shared = std::make_shared<const Batch>(std::move(input));
  SKIPPR_ASSIGN_OR_RETURN(std::vector<Stage> stages, PlanStages(*shared));
  SKIPPR_RETURN_IF_ERROR(Register(namespace_name, shared));
  Result<Batch> output = engine_->RunToBatch(stages.back().sql);
  if (!output.ok()) return DescribeFailure(stages, shared, origins, output.status());
  SKIPPR_ASSIGN_OR_RETURN(std::optional<schema::NamespaceChange> evolved,
                          ConformOutput(namespace_name, *output));
  if (change != nullptr) *change = std::move(evolved);
  if (cdc) {
    SKIPPR_CHECK(output->num_rows == shared->num_rows);
    output->cdc = std::move(cdc);
  }
  return output;
}

bool OpsRunner::HasFilter() const {
  return std::any_of(ops_.begin(), ops_.end(), [](const config::TransformOp& op) {
    return op.kind == config::TransformOpKind::kFilter;
  });
}

// The statement failed: find the first op that fails on this batch, then (by halving prefixes of
// the batch) the first record it fails on. Only the error path pays for these extra runs.
Status OpsRunner::DescribeFailure(const std::vector<Stage>& stages,
                                  const std::shared_ptr<const Batch>& input,
                                  const RowOrigins* origins, const Status& failure) {
  const std::string& namespace_name = input->namespace_name;
  size_t failing = stages.size() - 1;
  Status first_failure = failure;
  for (size_t i = 0; i + 1 < stages.size(); ++i) {
    Result<Batch> partial = engine_->RunToBatch(stages[i].sql);
    if (!partial.ok()) {
      failing = i;
      first_failure = partial.status();
      break;
    }
  }
  const std::string& sql = stages[failing].sql;
  const auto fails_on_rows = [&](int64_t rows) -> Result<bool> {
    SKIPPR_RETURN_IF_ERROR(
        Register(namespace_name, std::make_shared<const Batch>(Prefix(*input, rows))));
    return !engine_->RunToBatch(sql).ok();
  };
  SKIPPR_ASSIGN_OR_RETURN(const bool fails_without_rows, fails_on_rows(0));
  if (fails_without_rows || input->num_rows == 0) {
    std::vector<std::string> names;
    for (const Field& field : input->fields) names.push_back(field.name);
    return Status::InvalidConfig(
        fmt::format("{} cannot run over namespace '{}' (fields: {}): {}; fix the op in skippr.yml",
                    OpPlace(stages[failing].op_index), namespace_name, fmt::join(names, ", "),
                    DuckDbReason(first_failure.message())));
  }
  // The smallest prefix that fails ends with the first failing record.
  int64_t low = 1;
  int64_t high = input->num_rows;
  while (low < high) {
    const int64_t middle = low + (high - low) / 2;
    SKIPPR_ASSIGN_OR_RETURN(const bool fails, fails_on_rows(middle));
    if (fails) {
      high = middle;
    } else {
      low = middle + 1;
    }
  }
  const int64_t row = low - 1;
  const std::string record = origins != nullptr ? DescribeOrigin((*origins)[row])
                                                : fmt::format("row {} of the batch", row + 1);
  return Status::InvalidArgument(fmt::format(
      "{} fails on record {} (namespace '{}'): {}; fix the record or the op — nothing of this "
      "batch was committed, so the next sync reads it again",
      OpPlace(stages[failing].op_index), record, namespace_name,
      DuckDbReason(first_failure.message())));
}

Result<std::optional<schema::NamespaceChange>> OpsRunner::ConformOutput(
    const std::string& namespace_name, Batch& output) {
  // The ops name columns themselves (derive, rename): held to the shaper's name rules, or one
  // committed batch with `v` and `V` would break every query and landing of the namespace.
  if (Status names = schema::CheckNames(namespace_name, output.fields); !names.ok()) {
    return Status::InvalidConfig(
        fmt::format("pipelines.{}.transform.ops (namespace '{}'): {}; change the op in skippr.yml",
                    pipeline_name_, namespace_name, names.message()));
  }
  auto [it, is_new] = output_.namespaces.try_emplace(namespace_name);
  schema::NamespaceSchema& ns = it->second;
  ns.name = namespace_name;
  std::vector<Field> fields = output.fields;
  AssignIds(fields, &ns.fields, ns.last_field_id);
  std::optional<schema::NamespaceChange> change;
  if (is_new || fields != ns.fields) {
    std::vector<std::string> changes = DescribeChanges(ns.fields, fields);
    ns.fields = fields;
    ns.schema_id += 1;
    ns.history.push_back({ns.schema_id, changes});
    change = schema::NamespaceChange{namespace_name, is_new, std::move(changes)};
  }
  output.namespace_name = namespace_name;
  output.schema_id = ns.schema_id;
  output.fields = ns.fields;
  for (size_t i = 0; i < output.columns.size(); ++i)
    AdoptType(output.columns[i], ns.fields[i].type);
  return change;
}

}  // namespace skippr::transform
