// The schema family of the Skippr Store: key ("namespace", <name>) → the namespace's JSON document
// (docs/formats/store.md, "schema family").
#include <fmt/format.h>

#include "schema/schema.hpp"

namespace skippr::schema {

namespace {
// Version 2 adds `source_names` (fields the name rules renamed); version 3 `key_fields` (the
// source's key of the namespace). A namespace is written in the oldest version that holds it, so
// one without renames or key is still version 1, which every skipprd reads.
constexpr int kNamespaceFormatVersion = 3;
constexpr int kOldestNamespaceFormatVersion = 1;

// "namespace": the schema readers see. "input_namespace": what the shaper evolves when
// transform.ops reshape records between the shaper and the WAL (absent without ops).
constexpr std::string_view kOutputPrefix = "namespace";
constexpr std::string_view kInputPrefix = "input_namespace";

std::string NamespaceKey(std::string_view prefix, const std::string& namespace_name) {
  return store::KeyBuilder().Text(prefix).Text(namespace_name).key();
}

Result<NamespaceSchema> ParseNamespace(std::string_view prefix, std::string_view key,
                                       std::string_view value) {
  NamespaceSchema ns;
  try {
    const nlohmann::json json = nlohmann::json::parse(value);
    const int version = json.at("format_version").get<int>();
    if (version < kOldestNamespaceFormatVersion || version > kNamespaceFormatVersion) {
      return Status::NotSupported(fmt::format(
          "stored schema document has format version {}, this skipprd reads versions {} to {}; "
          "use the skipprd that wrote it or a newer one",
          version, kOldestNamespaceFormatVersion, kNamespaceFormatVersion));
    }
    ns.name = json.at("name").get<std::string>();
    ns.schema_id = json.at("schema_id").get<int32_t>();
    ns.last_field_id = json.at("last_field_id").get<int32_t>();
    SKIPPR_ASSIGN_OR_RETURN(ns.fields, FieldsFromIcebergJson(json.at("schema")));
    for (const auto& entry : json.at("history")) {
      ns.history.push_back({entry.at("schema_id").get<int32_t>(),
                            entry.at("changes").get<std::vector<std::string>>()});
    }
    if (version >= 2) {
      for (const auto& entry : json.at("source_names")) {
        ns.source_names[entry.at("field_id").get<int32_t>()] = entry.at("name").get<std::string>();
      }
    }
    if (version >= 3) ns.key_fields = json.at("key_fields").get<std::vector<std::string>>();
  } catch (const nlohmann::json::exception& error) {
    return Status::Corruption(fmt::format("schema entry for a namespace is unreadable ({}); the "
                                          "store is damaged: run `skipprd discover` into a new "
                                          "DATA_DIR",
                                          error.what()));
  }
  if (NamespaceKey(prefix, ns.name) != key) {
    return Status::Corruption(fmt::format("schema entry for '{}' is stored under another key", ns.name));
  }
  return ns;
}

template <typename Transaction>
Result<PipelineSchema> LoadFrom(const Transaction& transaction, std::string_view key_prefix) {
  PipelineSchema schema;
  Status failure;
  const std::string prefix = store::KeyBuilder().Text(key_prefix).key();
  SKIPPR_RETURN_IF_ERROR(transaction.Scan(
      store::Family::kSchema, prefix, [&](std::string_view key, std::string_view value) {
        Result<NamespaceSchema> ns = ParseNamespace(key_prefix, key, value);
        if (!ns.ok()) {
          failure = ns.status();
          return false;
        }
        schema.namespaces.emplace(ns->name, std::move(ns).value());
        return true;
      }));
  SKIPPR_RETURN_IF_ERROR(failure);
  return schema;
}

Status SaveUnder(store::WriteTransaction& transaction, std::string_view prefix,
                 const NamespaceSchema& ns) {
  nlohmann::json history = nlohmann::json::array();
  for (const SchemaVersion& version : ns.history) {
    history.push_back({{"schema_id", version.schema_id}, {"changes", version.changes}});
  }
  const int version = !ns.key_fields.empty()     ? 3
                      : !ns.source_names.empty() ? 2
                                                 : kOldestNamespaceFormatVersion;
  nlohmann::json json = {
      {"format_version", version},
      {"name", ns.name},
      {"schema_id", ns.schema_id},
      {"last_field_id", ns.last_field_id},
      {"schema", FieldsToIcebergJson(ns.fields, ns.schema_id)},
      {"history", std::move(history)}};
  if (version >= 3) json["key_fields"] = ns.key_fields;
  if (version >= 2) {
    nlohmann::json source_names = nlohmann::json::array();
    for (const auto& [field_id, name] : ns.source_names) {
      source_names.push_back({{"field_id", field_id}, {"name", name}});
    }
    json["source_names"] = std::move(source_names);
  }
  return transaction.Put(store::Family::kSchema, NamespaceKey(prefix, ns.name), json.dump());
}
}  // namespace

Result<PipelineSchema> LoadSchema(const store::ReadTransaction& transaction) {
  return LoadFrom(transaction, kOutputPrefix);
}

Result<PipelineSchema> LoadSchema(const store::WriteTransaction& transaction) {
  return LoadFrom(transaction, kOutputPrefix);
}

Status SaveNamespace(store::WriteTransaction& transaction, const NamespaceSchema& ns) {
  return SaveUnder(transaction, kOutputPrefix, ns);
}

Result<PipelineSchema> LoadInputSchema(const store::ReadTransaction& transaction) {
  return LoadFrom(transaction, kInputPrefix);
}

Status SaveInputNamespace(store::WriteTransaction& transaction, const NamespaceSchema& ns) {
  return SaveUnder(transaction, kInputPrefix, ns);
}

Status DeleteNamespace(store::WriteTransaction& transaction, const std::string& namespace_name) {
  return transaction.Delete(store::Family::kSchema, NamespaceKey(kOutputPrefix, namespace_name));
}

}  // namespace skippr::schema
