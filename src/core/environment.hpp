// The process environment behind a seam, so configuration can be tested without setenv().
#pragma once

#include <map>
#include <optional>
#include <string>

namespace skippr {

class Environment {
 public:
  virtual ~Environment() = default;
  // The variable's value, or nullopt when it is not set (an empty value is set).
  virtual std::optional<std::string> Get(const std::string& name) const = 0;
};

// Reads getenv().
class ProcessEnvironment final : public Environment {
 public:
  std::optional<std::string> Get(const std::string& name) const override;
};

// A fixed set of variables (tests, and the layered view built from .env files).
class MapEnvironment final : public Environment {
 public:
  MapEnvironment() = default;
  explicit MapEnvironment(std::map<std::string, std::string> values) : values_(std::move(values)) {}
  std::optional<std::string> Get(const std::string& name) const override;
  void Set(const std::string& name, std::string value) { values_[name] = std::move(value); }
  const std::map<std::string, std::string>& values() const { return values_; }

 private:
  std::map<std::string, std::string> values_;
};

}  // namespace skippr
