#include "sources/json_values.hpp"

#include <limits>

namespace skippr::sources::internal {

Value ValueFromJson(const simdjson::dom::element& element) {
  using simdjson::dom::element_type;
  switch (element.type()) {
    case element_type::OBJECT: {
      ValueObject object;
      simdjson::dom::object source = element.get_object().value_unsafe();
      object.reserve(source.size());
      for (auto [key, child] : source) object.emplace_back(std::string(key), ValueFromJson(child));
      return Value::Object(std::move(object));
    }
    case element_type::ARRAY: {
      ValueList list;
      // A copy, not a reference into the temporary simdjson_result (it dies before the loop runs).
      const simdjson::dom::array source = element.get_array().value_unsafe();
      list.reserve(source.size());
      for (simdjson::dom::element child : source) {
        list.push_back(ValueFromJson(child));
      }
      return Value::List(std::move(list));
    }
    case element_type::INT64: return Value::Int(element.get_int64().value_unsafe());
    case element_type::UINT64:  // beyond int64: only a double can hold its magnitude
      return Value::Double(static_cast<double>(element.get_uint64().value_unsafe()));
    case element_type::DOUBLE: return Value::Double(element.get_double().value_unsafe());
    case element_type::STRING: return Value::String(std::string(element.get_string().value_unsafe()));
    case element_type::BOOL: return Value::Bool(element.get_bool().value_unsafe());
    case element_type::NULL_VALUE: return Value::Null();
  }
  return Value::Null();
}

}  // namespace skippr::sources::internal
