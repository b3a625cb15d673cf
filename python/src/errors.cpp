#include "errors.hpp"

#include <map>

#include "core/redact.hpp"

namespace skippr::python {

namespace py = pybind11;

namespace {

// Borrowed from the module, which keeps them alive.
PyObject* g_base_error = nullptr;
std::map<StatusCode, PyObject*> g_errors;

struct ErrorClass {
  StatusCode code;
  const char* name;
  PyObject* builtin_base;  // a built-in Python exception the class also derives from, or null
  const char* doc;
};

PyObject* MakeClass(py::module_& module, const char* name, py::tuple bases, const char* doc,
                    std::string_view code) {
  const std::string qualified = std::string("skippr._engine.") + name;
  PyObject* type = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases.ptr(), nullptr);
  if (type == nullptr) throw py::error_already_set();
  py::object owned = py::reinterpret_steal<py::object>(type);
  owned.attr("code") = py::str(std::string(code));
  owned.attr("__module__") = "skippr";
  module.add_object(name, owned);
  return type;
}

}  // namespace

void RegisterErrors(py::module_& module) {
  g_base_error = MakeClass(module, "SkipprError", py::make_tuple(py::handle(PyExc_Exception)),
                           "An error of the skipprd engine; `code` names its kind.", "");
  const ErrorClass classes[] = {
      {StatusCode::kInvalidConfig, "ConfigError", PyExc_ValueError,
       "skippr.yml (or a value it references) is wrong; the message names the place."},
      {StatusCode::kInvalidArgument, "InvalidArgumentError", PyExc_ValueError,
       "An argument (a SQL statement, a name) cannot be used."},
      {StatusCode::kNotFound, "NotFoundError", PyExc_LookupError,
       "Something named does not exist (a pipeline without state, a namespace)."},
      {StatusCode::kIOError, "StorageError", PyExc_OSError, "Reading or writing files failed."},
      {StatusCode::kNoSpace, "NoSpaceError", PyExc_OSError, "The disk is full."},
      {StatusCode::kCorruption, "CorruptionError", nullptr,
       "Committed bytes fail their checks: data damage, never retried silently."},
      {StatusCode::kConflict, "ConflictError", nullptr,
       "Another writer won a compare-and-set or holds the pipeline's lease."},
      {StatusCode::kUnavailable, "UnavailableError", nullptr,
       "Try again later: a lease is held, or a server is not reachable."},
      {StatusCode::kNotSupported, "NotSupportedError", PyExc_NotImplementedError,
       "This build of skipprd does not do that."},
      {StatusCode::kInternal, "InternalError", nullptr,
       "A broken invariant inside skipprd: a bug, please report it."},
  };
  for (const ErrorClass& error : classes) {
    py::tuple bases =
        error.builtin_base == nullptr
            ? py::make_tuple(py::handle(g_base_error))
            : py::make_tuple(py::handle(g_base_error), py::handle(error.builtin_base));
    g_errors[error.code] =
        MakeClass(module, error.name, bases, error.doc, StatusCodeName(error.code));
  }
}

void ThrowStatus(const Status& status) {
  auto found = g_errors.find(status.code());
  PyObject* type = found != g_errors.end() ? found->second : g_base_error;
  PyErr_SetString(type, Redact(status.message()).c_str());
  throw py::error_already_set();
}

}  // namespace skippr::python
