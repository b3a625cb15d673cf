// `skipprd metadata show|apply` (reference §1.6): the discovered top-level fields as JSON, and
// replacing one namespace's fields by hand.
#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/cli.hpp"
#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "core/redact.hpp"
#include "pipeline/pipeline.hpp"

namespace skippr::cli {

namespace {

using Json = nlohmann::ordered_json;

struct MetadataFlags {
  std::string pipeline;
  std::string output = "json";
  std::string namespace_name;
  std::string schema_path;
  std::string schema_json;
  bool evolved = true;
};

std::string FieldTypeName(const LogicalType& type) {
  switch (type.id()) {
    case TypeId::kStruct: return "struct";
    case TypeId::kList: return "array";
    case TypeId::kMap: return "map";
    default: return type.ToString();
  }
}

// The lowercase type names metadata apply accepts (the public product's list, plus ours).
Result<LogicalType> FieldTypeFromName(const std::string& name) {
  if (name == "short" || name == "smallint" || name == "byte" || name == "tinyint") return LogicalType::Int();
  if (name == "decimal" || name == "numeric") return LogicalType::Decimal(38, 10);
  if (name == "timestamp_milli") return LogicalType::Timestamp();
  if (name == "fixed") return LogicalType::Binary();
  if (name == "json" || name == "null") return LogicalType::String();
  if (name == "record" || name == "struct") return LogicalType::Struct({});
  if (name == "map") return LogicalType::Map(Field{0, "key", LogicalType::String()}, Field{0, "value", LogicalType::String()});
  if (name == "array") return LogicalType::List(Field{0, "element", LogicalType::String()});
  if (name.rfind("numeric(", 0) == 0) return ParseLogicalType("decimal" + name.substr(7));
  return ParseLogicalType(name);
}

int Fail(const std::string& error) {
  fmt::print("{}\n", Redact(JsonText(Json{{"ok", false}, {"error", error}})));
  return kExitFailure;
}

Result<const config::PipelineConfig*> LoadPipeline(const GlobalOptions& global, const std::string& name,
                                                   config::Config& config) {
  Result<config::Config> loaded = LoadConfigForCommand(global);
  if (!loaded.ok()) return loaded.status();  // reported by LoadConfigForCommand
  config = std::move(loaded).value();
  return ResolvePipeline(config, name, false);
}

int RunShow(const GlobalOptions& global, const MetadataFlags& flags) {
  config::Config config;
  Result<const config::PipelineConfig*> pipeline = LoadPipeline(global, flags.pipeline, config);
  if (!pipeline.ok()) return Fail(pipeline.status().message());
  Result<schema::PipelineSchema> saved = pipeline::ReadSchema(**pipeline);
  if (!saved.ok()) return Fail(saved.status().message());
  Json namespaces = Json::array();
  for (const auto& [ns_name, ns] : saved->namespaces) {
    std::vector<const Field*> fields;
    for (const Field& field : ns.fields) fields.push_back(&field);
    std::sort(fields.begin(), fields.end(), [](const Field* a, const Field* b) { return a->name < b->name; });
    Json list = Json::array();
    for (const Field* field : fields) {
      list.push_back({{"field_type", FieldTypeName(field->type)}, {"name", field->name}, {"nullable", field->nullable}});
    }
    namespaces.push_back({{"namespace", ns_name}, {"fields", std::move(list)}});
  }
  fmt::print("{}\n", JsonText(Json{{"ok", true}, {"pipeline", (*pipeline)->name}, {"namespaces", std::move(namespaces)}}));
  return kExitSuccess;
}

int RunApply(const GlobalOptions& global, const MetadataFlags& flags) {
  config::Config config;
  Result<const config::PipelineConfig*> pipeline = LoadPipeline(global, flags.pipeline, config);
  if (!pipeline.ok()) return Fail(pipeline.status().message());
  std::string text = flags.schema_json;
  if (text.empty()) {
    if (flags.schema_path.empty()) return Fail("one of --schema or --schema-json is required");
    std::stringstream contents;
    if (flags.schema_path == "-") {
      contents << std::cin.rdbuf();
    } else {
      std::ifstream file(flags.schema_path);
      if (!file) return Fail(fmt::format("failed to read schema file '{}'", flags.schema_path));
      contents << file.rdbuf();
    }
    text = contents.str();
  }
  nlohmann::json document;
  try {
    document = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& error) {
    return Fail(fmt::format("invalid schema JSON: {}", error.what()));
  }
  const nlohmann::json* list = &document;
  if (document.is_object()) {
    if (!document.contains("fields") || !document["fields"].is_array()) {
      return Fail("schema JSON must contain a \"fields\" array");
    }
    list = &document["fields"];
  } else if (!document.is_array()) {
    return Fail("schema JSON must contain a \"fields\" array");
  }
  std::vector<Field> fields;
  for (const nlohmann::json& item : *list) {
    if (!item.is_object() || !item.contains("name") || !item["name"].is_string()) {
      return Fail("every field needs a \"name\"");
    }
    const std::string name = item["name"].get<std::string>();
    const nlohmann::json* type = item.contains("field_type") ? &item["field_type"]
                                 : item.contains("type")     ? &item["type"]
                                                             : nullptr;
    if (type == nullptr || !type->is_string()) return Fail(fmt::format("field '{}' must have \"field_type\"", name));
    Result<LogicalType> logical = FieldTypeFromName(type->get<std::string>());
    if (!logical.ok()) {
      return Fail(fmt::format("unknown field type '{}' for field '{}'", type->get<std::string>(), name));
    }
    const auto nullable = item.find("nullable");
    if (nullable != item.end() && !nullable->is_boolean()) {
      return Fail(fmt::format("field '{}': \"nullable\" must be true or false, found {}", name,
                              JsonText(*nullable)));
    }
    fields.push_back(Field{0, name, *logical, nullable == item.end() || nullable->get<bool>()});
  }
  const size_t written = fields.size();
  Result<schema::NamespaceSchema> applied =
      pipeline::ApplyNamespaceFields(**pipeline, flags.namespace_name, std::move(fields));
  if (!applied.ok()) return Fail(applied.status().message());
  fmt::print("{}\n", JsonText(Json{{"ok", true}, {"namespace", flags.namespace_name}, {"fields_written", written}, {"evolved", true}}));
  return kExitSuccess;
}

}  // namespace

void AddMetadataCommand(CLI::App& app, const GlobalOptions& global, int& exit_code) {
  auto* command = app.add_subcommand("metadata", "Show or replace the discovered fields as JSON");
  command->require_subcommand(1);
  auto flags = std::make_shared<MetadataFlags>();

  auto* show = command->add_subcommand("show", "Print every namespace's top-level fields as JSON");
  show->add_option("-p,--pipeline", flags->pipeline, "Pipeline name")->required();
  show->add_option("--output", flags->output, "json or text (both print JSON)")
      ->check(CLI::IsMember({"json", "text"}));
  show->callback([&global, &exit_code, flags] { exit_code = RunShow(global, *flags); });

  auto* apply = command->add_subcommand("apply", "Replace one namespace's top-level fields");
  apply->add_option("-p,--pipeline", flags->pipeline, "Pipeline name")->required();
  apply->add_option("--namespace", flags->namespace_name, "Namespace to replace (created if absent)")->required();
  apply->add_option("--schema", flags->schema_path, "JSON file with the fields, or - for stdin");
  apply->add_option("--schema-json", flags->schema_json, "The fields as JSON text (wins over --schema)");
  apply->add_flag("--evolved", flags->evolved,
                  "Accepted for compatibility: applying always marks the schema evolved");
  apply->callback([&global, &exit_code, flags] { exit_code = RunApply(global, *flags); });
}

}  // namespace skippr::cli
