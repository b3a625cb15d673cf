// Internal to config/: strict reading of YAML nodes with positioned, collected errors.
#pragma once

#include <yaml-cpp/yaml.h>

#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.hpp"

namespace skippr::config::internal {

// Collects every error of a load, each already formatted "<file>:<line>:<col>: <path>: <message>".
class Diagnostics {
 public:
  explicit Diagnostics(std::string display_name) : display_name_(std::move(display_name)) {}
  void Error(const SourceMark& mark, const std::string& path, const std::string& message);
  bool has_errors() const { return !errors_.empty(); }
  // The first kMaxErrors errors, then one line counting the rest (a file of garbage yields a
  // readable message, not millions of lines).
  std::vector<std::string> errors() const;
  const std::string& display_name() const { return display_name_; }

  static constexpr size_t kMaxErrors = 100;

 private:
  std::string display_name_;
  std::vector<std::string> errors_;
  size_t errors_not_kept_ = 0;
};

SourceMark ToMark(const YAML::Mark& mark);
// `text` with ASCII control characters written as \n, \t, \r or \xNN (UTF-8 stays as it is), so
// that text from the file keeps every error on one line that starts with its place.
std::string EscapeControlCharacters(std::string_view text);
std::string JoinPath(const std::string& parent, std::string_view key);
std::string IndexPath(const std::string& parent, size_t index);
std::string JoinNames(const std::vector<std::string_view>& names);

// A node with where it sits: its own mark when yaml-cpp has one, else its key's.
struct Located {
  YAML::Node node;
  SourceMark mark;
  std::string path;
};

class Reader {
 public:
  Reader(Diagnostics& diagnostics, const Environment& environment,
         ReferenceMode references = ReferenceMode::kResolve,
         std::vector<std::string> resolved_key_paths = {})
      : diagnostics_(diagnostics),
        environment_(environment),
        references_(references),
        resolved_key_paths_(std::move(resolved_key_paths)) {}

  Diagnostics& diagnostics() { return diagnostics_; }
  const Environment& environment() const { return environment_; }
  void Error(const Located& at, const std::string& message) {
    diagnostics_.Error(at.mark, at.path, message);
  }

  // The entries of a mapping in document order. Duplicate keys are errors; so is any key outside
  // `allowed` (when `allowed` is non-empty). A null node reads as an empty mapping; anything else
  // that is not a mapping is an error and yields nothing.
  std::vector<std::pair<std::string, Located>> Mapping(const Located& at,
                                                       const std::vector<std::string_view>& allowed,
                                                       std::string_view what = "a mapping");
  // Like Mapping(), then looks keys up by name.
  class Fields {
   public:
    std::optional<Located> Get(std::string_view key) const;
    const std::vector<std::pair<std::string, Located>>& entries() const { return entries_; }
    std::vector<std::pair<std::string, Located>> entries_;
  };
  Fields Struct(const Located& at, const std::vector<std::string_view>& allowed);
  std::vector<Located> Sequence(const Located& at, std::string_view what = "a list");

  // Scalars. `${NAME}` as the whole value resolves from the environment (an error when unset or
  // empty); `secret` values must be such a reference. nullopt after reporting an error.
  std::optional<std::string> String(const Located& at, bool secret = false);
  std::optional<std::string> NonEmptyString(const Located& at);
  static constexpr int64_t kNoUpperBound = std::numeric_limits<int64_t>::max();
  std::optional<int64_t> Integer(const Located& at, int64_t min_value, int64_t max_value);
  std::optional<bool> Boolean(const Located& at);
  // A list of non-empty strings; a single string is read as a one-element list when `allow_scalar`.
  std::optional<std::vector<std::string>> StringList(const Located& at, bool allow_scalar = false);
  std::optional<std::string> Choice(const Located& at,
                                    const std::vector<std::string_view>& choices);

  // `text`, at key path `path`, is a `${NAME}` reference kept as written (ReferenceMode::kKeep,
  // or a path outside the resolved ones): a value no rule about its content can judge yet.
  bool KeepsReference(const std::string& path, std::string_view text) const;

  bool IsNull(const Located& at) const { return !at.node || at.node.IsNull(); }
  // Null or `{}`: nothing was written (as opposed to entries that were refused and reported).
  bool IsEmptyMapping(const Located& at) const {
    return IsNull(at) || (at.node.IsMap() && at.node.size() == 0);
  }

 private:
  // The scalar's text after `${NAME}` resolution; nullopt after reporting an error.
  std::optional<std::string> ScalarText(const Located& at, bool secret);
  // ReferenceMode::kKeep: the node is a `${NAME}` reference, kept as written.
  bool IsKeptReference(const Located& at) const;

  Diagnostics& diagnostics_;
  const Environment& environment_;
  ReferenceMode references_;
  std::vector<std::string> resolved_key_paths_;  // empty: every path
};

// Parses one connector entry (`name: {Kind: {...}}`) of a data_sources / data_sinks section.
std::optional<ConnectorEntry> ReadConnectorEntry(Reader& reader, const std::string& name,
                                                 const Located& at, ConnectorRole role);

// A value or key as an error message shows it: at most 80 bytes, cut where a UTF-8 character
// begins, with the full length after it.
std::string ShownText(std::string_view text);

// [A-Za-z_][A-Za-z0-9_]*: environment variable names, measure and aggregate ids. Hand-written (not
// std::regex, whose recursion overflows the stack on long input).
bool IsIdentifier(std::string_view text);

// Bool grammar shared by YAML and environment values: true/t/yes/y/1, false/f/no/n/0, any case.
std::optional<bool> ParseFlag(std::string_view text);

}  // namespace skippr::config::internal
