// Internal to python/: skippr._engine.Session, one pipeline of a configuration, run in-process.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>
#include <string>

#include "config/config.hpp"
#include "results.hpp"

namespace skippr::python {

class Session {
 public:
  // `yaml_text` is a skippr.yml, `${NAME}` unresolved, and `config_path` where it is (or will be):
  // its .env and .env.local layer over the environment. Only the references the pipeline runs
  // with (the skippr: block, the pipeline, its source and sinks) are resolved: ConfigError names
  // one whose variable is not set. The session keeps only that pipeline and its entries.
  Session(const std::string& yaml_text, const std::string& config_path,
          const std::string& pipeline_name);

  const std::string& pipeline_name() const { return pipeline_name_; }
  pybind11::dict Doctor() const;
  pybind11::dict Discover() const;
  pybind11::dict Sync(bool once) const;
  std::unique_ptr<StreamedResult> Query(const std::string& sql) const;
  // The pipeline's namespaces (tables), sorted; empty before discover or sync.
  std::vector<std::string> Namespaces() const;
  std::unique_ptr<StreamedResult> Aggregates(const std::string& aggregate_id) const;
  // (measure name, "sum" or "count") of an aggregate, in its columns' order.
  std::vector<std::pair<std::string, std::string>> AggregateMeasures(
      const std::string& aggregate_id) const;

 private:
  const config::PipelineConfig& pipeline() const { return config_.pipelines.at(pipeline_name_); }
  const config::AggregateConfig& FindAggregate(const std::string& aggregate_id) const;

  config::Config config_;
  std::string pipeline_name_;
};

void RegisterSession(pybind11::module_& module);

}  // namespace skippr::python
