// Fields ↔ Iceberg's JSON schema form (Iceberg spec, "Schemas" appendix).
#include <fmt/format.h>

#include "schema/schema.hpp"

namespace skippr::schema {

namespace {
nlohmann::json FieldToJson(const Field& field) {
  return {{"id", field.id},
          {"name", field.name},
          {"required", !field.nullable},
          {"type", TypeToIcebergJson(field.type)}};
}

Result<LogicalType> TypeFromJson(const nlohmann::json& json);

Result<Field> FieldFromJson(const nlohmann::json& json) {
  if (!json.is_object() || !json.contains("id") || !json.contains("name") || !json.contains("type")) {
    return Status::Corruption("schema field needs id, name and type: " + json.dump());
  }
  SKIPPR_ASSIGN_OR_RETURN(LogicalType type, TypeFromJson(json["type"]));
  return Field{json["id"].get<int32_t>(), json["name"].get<std::string>(), std::move(type),
               !json.value("required", false)};
}

// Reads with at(), never a const operator[]: a missing key must throw (and become Corruption below),
// not read past the end of the object.
Result<LogicalType> TypeFromJson(const nlohmann::json& json) {
  if (json.is_string()) {
    const std::string name = json.get<std::string>();
    if (name == "string") return LogicalType::String();  // ParseLogicalType would accept aliases too
    return ParseLogicalType(name);
  }
  if (!json.is_object() || !json.contains("type")) {
    return Status::Corruption("schema type is neither a name nor a nested type: " + json.dump());
  }
  const std::string kind = json["type"].get<std::string>();
  if (kind == "struct") {
    std::vector<Field> fields;
    for (const auto& item : json.value("fields", nlohmann::json::array())) {
      SKIPPR_ASSIGN_OR_RETURN(Field field, FieldFromJson(item));
      fields.push_back(std::move(field));
    }
    return LogicalType::Struct(std::move(fields));
  }
  if (kind == "list") {
    SKIPPR_ASSIGN_OR_RETURN(LogicalType element, TypeFromJson(json.at("element")));
    return LogicalType::List(Field{json.at("element-id").get<int32_t>(), "element", std::move(element),
                                   !json.value("element-required", false)});
  }
  if (kind == "map") {
    SKIPPR_ASSIGN_OR_RETURN(LogicalType key, TypeFromJson(json.at("key")));
    SKIPPR_ASSIGN_OR_RETURN(LogicalType value, TypeFromJson(json.at("value")));
    return LogicalType::Map(Field{json.at("key-id").get<int32_t>(), "key", std::move(key), false},
                            Field{json.at("value-id").get<int32_t>(), "value", std::move(value),
                                  !json.value("value-required", false)});
  }
  return Status::Corruption("unknown nested schema type '" + kind + "'");
}
}  // namespace

nlohmann::json TypeToIcebergJson(const LogicalType& type) {
  switch (type.id()) {
    case TypeId::kStruct: {
      nlohmann::json fields = nlohmann::json::array();
      for (const Field& field : type.children()) fields.push_back(FieldToJson(field));
      return {{"type", "struct"}, {"fields", std::move(fields)}};
    }
    case TypeId::kList: {
      const Field& element = type.children()[0];
      return {{"type", "list"},
              {"element-id", element.id},
              {"element", TypeToIcebergJson(element.type)},
              {"element-required", !element.nullable}};
    }
    case TypeId::kMap: {
      const Field& key = type.children()[0];
      const Field& value = type.children()[1];
      return {{"type", "map"},
              {"key-id", key.id},
              {"key", TypeToIcebergJson(key.type)},
              {"value-id", value.id},
              {"value", TypeToIcebergJson(value.type)},
              {"value-required", !value.nullable}};
    }
    case TypeId::kDecimal:
      return fmt::format("decimal({},{})", type.decimal_precision(), type.decimal_scale());
    case TypeId::kUuid: return "uuid";
    default: return type.ToString();
  }
}

nlohmann::json FieldsToIcebergJson(const std::vector<Field>& fields, int32_t schema_id) {
  nlohmann::json json = TypeToIcebergJson(LogicalType::Struct(fields));
  json["schema-id"] = schema_id;
  return json;
}

Result<std::vector<Field>> FieldsFromIcebergJson(const nlohmann::json& schema_json) {
  try {
    SKIPPR_ASSIGN_OR_RETURN(LogicalType type, TypeFromJson(schema_json));
    if (type.id() != TypeId::kStruct) return Status::Corruption("a schema must be a struct");
    return type.children();
  } catch (const nlohmann::json::exception& error) {
    return Status::Corruption(std::string("malformed schema JSON: ") + error.what());
  }
}

}  // namespace skippr::schema
