// Internal to python/: Status codes as Python exceptions (skippr.SkipprError and its subclasses).
#pragma once

#include <pybind11/pybind11.h>

#include "core/status.hpp"

namespace skippr::python {

// Creates SkipprError and one subclass per kind of Status on `module`.
void RegisterErrors(pybind11::module_& module);

// Raises `status` (not OK) as its exception, with the CLI's message (secrets masked).
[[noreturn]] void ThrowStatus(const Status& status);

template <typename T>
T ValueOrThrow(Result<T> result) {
  if (!result.ok()) ThrowStatus(result.status());
  return std::move(*result);
}

inline void ThrowIfError(const Status& status) {
  if (!status.ok()) ThrowStatus(status);
}

}  // namespace skippr::python
