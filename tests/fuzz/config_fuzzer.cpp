// skippr.yml loading over any text: the input is written as skippr.yml beside a fixed .env and
// .env.local and loaded with config::LoadConfigFile, as every command does. Invariants:
//   * a failure is InvalidConfig (never a crash, an exception or another code) and every line of
//     its message names the file (the place of each problem);
//   * a loaded config's references resolve: each pipeline's data_source, data_sink and
//     deadletter_sink name entries of their sections, and `${NAME}` values came from the layered
//     environment; CheckWholeConfig's problems name the file too.
#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <optional>
#include <string>
#include <string_view>

#include "config/config.hpp"
#include "fuzz/fuzz_support.hpp"

namespace skippr::fuzz {
namespace {

// Variables the seeds reference, so that `${NAME}` resolution is reached past "not set".
const char kDotenv[] = "PG_PASSWORD=from-dotenv\nROWS=100\nexport WAREHOUSE='./lake'\n";
const char kDotenvLocal[] = "PG_PASSWORD=\"from local\"\nEMPTY=\n";

void CheckEveryLineNamesTheFile(std::string_view message, const std::string& path) {
  size_t begin = 0;
  while (begin <= message.size()) {
    const size_t end = std::min(message.find('\n', begin), message.size());
    const std::string_view line = message.substr(begin, end - begin);
    FUZZ_CHECK(line.substr(0, path.size()) == path,
               "a message line without the file: '" + std::string(line) + "' in:\n" +
                   std::string(message));
    begin = end + 1;
  }
}

template <typename Entries>
void CheckNames(const Entries& entries, const std::optional<std::string>& name,
                const std::string& what) {
  if (name) FUZZ_CHECK(entries.count(*name) == 1, what + " '" + *name + "' is not an entry");
}

void FuzzConfig(const uint8_t* data, size_t size) {
  static const ScratchFile scratch = [] {
    ScratchFile file("skippr.yml");
    file.WriteBeside(".env", kDotenv);
    file.WriteBeside(".env.local", kDotenvLocal);
    return file;
  }();
  scratch.Write(data, size);
  const MapEnvironment shell({{"DATA_DIR", "/nonexistent/data"}, {"ROWS", ""}});
  Result<config::Config> loaded = config::LoadConfigFile(scratch.path(), shell);
  if (!loaded.ok()) {
    CheckCodeIn(loaded.status(), {StatusCode::kInvalidConfig}, "LoadConfigFile");
    CheckEveryLineNamesTheFile(loaded.status().message(), scratch.path());
    return;
  }
  const config::Config& config = *loaded;
  FUZZ_CHECK(config.path == scratch.path(), config.path);
  for (const auto& [name, pipeline] : config.pipelines) {
    FUZZ_CHECK(pipeline.name == name, "pipeline name " + pipeline.name + " under key " + name);
    FUZZ_CHECK(config.FindPipeline(name) == &pipeline, "FindPipeline " + name);
    CheckNames(config.data_sources, std::optional<std::string>(pipeline.data_source), "data_source");
    CheckNames(config.data_sinks, pipeline.data_sink, "data_sink");
    CheckNames(config.deadletter_sinks, pipeline.deadletter_sink, "deadletter_sink");
  }
  for (const config::ConfigProblem& problem : config::CheckWholeConfig(config)) {
    CheckEveryLineNamesTheFile(problem.message, scratch.path());
  }
}

}  // namespace
}  // namespace skippr::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  skippr::fuzz::FuzzConfig(data, size);
  return 0;
}
