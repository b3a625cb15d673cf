// `skipprd schema`: the discovered contract — namespaces (one becomes one table), fields, types,
// nesting as a tree, nullability, field ids.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "cli/cli.hpp"
#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "pipeline/pipeline.hpp"

namespace skippr::cli {

namespace {

struct SchemaFlags {
  std::string pipeline;
  std::string output = "text";
};

// A type as the tree shows it: nested types by kind, their parts on the lines below.
std::string TypeLabel(const LogicalType& type) {
  switch (type.id()) {
    case TypeId::kStruct: return "struct";
    case TypeId::kList:
      return type.children()[0].type.is_nested() ? "list" : "list<" + type.children()[0].type.ToString() + ">";
    case TypeId::kMap: return "map<" + type.children()[0].type.ToString() + ", " + type.children()[1].type.ToString() + ">";
    default: return type.ToString();
  }
}

void PrintFields(const std::vector<Field>& fields, int depth) {
  for (const Field& field : fields) {
    const std::string indent(2 * depth, ' ');
    fmt::print("{}{}: {}{} (id {})\n", indent, field.name, TypeLabel(field.type),
               field.nullable ? "" : " not null", field.id);
    if (field.type.id() == TypeId::kStruct) PrintFields(field.type.children(), depth + 1);
    if (field.type.id() == TypeId::kList && field.type.children()[0].type.is_nested()) {
      PrintFields(field.type.children(), depth + 1);
    }
  }
}

int RunSchema(const GlobalOptions& global, const SchemaFlags& flags) {
  Result<config::Config> config = LoadConfigForCommand(global);
  if (!config.ok()) return kExitFailure;  // reported by LoadConfigForCommand
  Result<const config::PipelineConfig*> pipeline = ResolvePipeline(*config, flags.pipeline, false);
  if (!pipeline.ok()) {
    fmt::print(stderr, "schema failed: {}\n", pipeline.status().message());
    return kExitFailure;
  }
  Result<schema::PipelineSchema> saved = pipeline::ReadSchema(**pipeline);
  if (!saved.ok()) {
    fmt::print(stderr, "schema failed: {}\n", saved.status().message());
    return kExitFailure;
  }
  const std::string& name = (*pipeline)->name;
  if (saved->namespaces.empty()) {
    fmt::print(stderr, "pipeline '{}' has no discovered schema yet; run `skipprd discover --pipeline {}`\n",
               name, name);
    return kExitFailure;
  }
  if (flags.output == "json") {
    nlohmann::ordered_json namespaces = nlohmann::ordered_json::array();
    for (const auto& [ns_name, ns] : saved->namespaces) {
      nlohmann::ordered_json history = nlohmann::ordered_json::array();
      for (const schema::SchemaVersion& version : ns.history) {
        history.push_back({{"schema_id", version.schema_id}, {"changes", version.changes}});
      }
      namespaces.push_back({{"namespace", ns_name},
                            {"table", name + "." + ns_name},
                            {"schema_id", ns.schema_id},
                            {"last_field_id", ns.last_field_id},
                            {"schema", schema::FieldsToIcebergJson(ns.fields, ns.schema_id)},
                            {"history", std::move(history)}});
    }
    fmt::print("{}\n", JsonText(nlohmann::ordered_json{{"pipeline", name}, {"namespaces", std::move(namespaces)}}));
    return kExitSuccess;
  }
  fmt::print("Pipeline {}: {} namespace(s)\n", name, saved->namespaces.size());
  for (const auto& [ns_name, ns] : saved->namespaces) {
    fmt::print("\nNamespace {} → table {}.{} (schema {}, {} fields)\n", ns_name, name, ns_name,
               ns.schema_id, ns.CountFields());
    PrintFields(ns.fields, 1);
  }
  return kExitSuccess;
}

}  // namespace

void AddSchemaCommand(CLI::App& app, const GlobalOptions& global, int& exit_code) {
  auto* command = app.add_subcommand("schema", "Show a pipeline's discovered schema");
  auto flags = std::make_shared<SchemaFlags>();
  command->add_option("-p,--pipeline", flags->pipeline, "Pipeline name")->required();
  command->add_option("--output", flags->output, "text or json")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  command->callback([&global, &exit_code, flags] { exit_code = RunSchema(global, *flags); });
}

}  // namespace skippr::cli
