// Internal to sources/: simdjson elements → Values.
#pragma once

#include <simdjson.h>

#include "core/value.hpp"

namespace skippr::sources::internal {

Value ValueFromJson(const simdjson::dom::element& element);

}  // namespace skippr::sources::internal
