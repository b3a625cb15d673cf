// skippr._engine: the C++ half of the Python module `skippr` (docs/python.md). The pure-Python
// package (python/skippr/) builds Config, Pipeline and the connector classes on what this
// exports: the connector registry, the loader's checks, Session and its results.
#include <fmt/format.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "config/config.hpp"
#include "core/environment.hpp"
#include "errors.hpp"
#include "session.hpp"

namespace skippr::python {

namespace py = pybind11;

namespace {

py::object SettingValueObject(const config::SettingValue& value) {
  return std::visit([](const auto& held) -> py::object { return py::cast(held); }, value);
}

py::list ConnectorSpecs() {
  py::list specs;
  for (const config::ConnectorRole role :
       {config::ConnectorRole::kSource, config::ConnectorRole::kSink}) {
    for (const std::string& kind : config::ConnectorKinds(role)) {
      py::list settings;
      for (const config::SettingDescription& setting : config::DescribeSettings(role, kind)) {
        py::dict item;
        item["name"] = setting.name;
        item["type"] = setting.type;
        item["required"] = setting.required;
        item["secret"] = setting.secret;
        item["default"] = setting.default_value ? SettingValueObject(*setting.default_value)
                                                : py::object(py::none());
        item["choices"] = setting.choices;
        item["min"] = setting.min_value;
        item["max"] = setting.max_value == std::numeric_limits<int64_t>::max()
                          ? py::object(py::none())
                          : py::object(py::int_(setting.max_value));
        settings.append(item);
      }
      py::dict spec;
      spec["kind"] = kind;
      spec["role"] = role == config::ConnectorRole::kSource ? "source" : "sink";
      spec["settings"] = settings;
      specs.append(spec);
    }
  }
  return specs;
}

// The loader's checks (and the whole-configuration rules) over text that is loaded or about to be
// saved. The file belongs to the machine that will run it, so this process's environment plays
// no part: `${NAME}` references are kept, and no setting falls back to a variable.
void CheckConfig(const std::string& yaml_text, const std::string& display_name, bool whole_config) {
  const MapEnvironment no_variables;
  config::Config config = ValueOrThrow(
      config::ParseConfig(yaml_text, display_name, no_variables, config::ReferenceMode::kKeep));
  if (!whole_config) return;
  std::vector<std::string> problems;
  for (const config::ConfigProblem& problem : config::CheckWholeConfig(config)) {
    problems.push_back(problem.message);
  }
  if (!problems.empty()) {
    ThrowStatus(Status::InvalidConfig(fmt::format("{}", fmt::join(problems, "\n"))));
  }
}

}  // namespace

PYBIND11_MODULE(_engine, module) {
  module.doc() = "The skipprd engine (the C++ half of the skippr module).";
  module.attr("version") = SKIPPRD_VERSION;
  RegisterErrors(module);
  module.def("connector_specs", &ConnectorSpecs,
             "Every connector kind this build runs, with its settings (the registry).");
  module.def("check_config", &CheckConfig, py::arg("yaml_text"), py::arg("display_name"),
             py::arg("whole_config") = true,
             "Raises ConfigError with the CLI's messages when skipprd would refuse the text "
             "(with whole_config, also the rules across entries); ${NAME} references are kept "
             "unresolved and the environment is not read.");
  RegisterResults(module);
  RegisterSession(module);
}

}  // namespace skippr::python
