// The real `skipprd` binary, run as a user would: flags, exit codes, doctor's output, the log file.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "e2e/process.hpp"

namespace skippr::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const std::string kExample = std::string(SKIPPRD_SOURCE_DIR) + "/examples/bikehire/skippr.yml";

// Runs skipprd in `dir` with DATA_DIR inside it, and no configuration hints from the test's own
// environment.
ProcessResult Skipprd(const TempDir& dir, const std::vector<std::string>& args,
                      std::map<std::string, std::string> env = {}) {
  ProcessOptions options;
  options.working_dir = dir.path();
  options.unset_env = {"SKIPPR_CONFIG_FILE",      "DATA_DIR",
                       "WORKSPACE_NAME",          "TENANT",
                       "SKIPPR_STORE_TYPE",       "TRANSFORM_NAMESPACE_FIELDS",
                       "TRANSFORM_FLATTEN_EVENTS"};
  options.set_env = std::move(env);
  if (!options.set_env.count("DATA_DIR")) options.set_env["DATA_DIR"] = dir.path() + "/data";
  return RunProcess(SKIPPRD_BINARY, args, options);
}

std::string Today() {
  const std::time_t now = std::time(nullptr);
  char text[16];
  std::strftime(text, sizeof(text), "%Y-%m-%d", std::localtime(&now));
  return text;
}

std::string ReadFile(const std::string& path) {
  std::ifstream file(path);
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

// ----- flags and exit codes -------------------------------------------------------------------

TEST(Cli, VersionNamesSkipprdAndDuckdb) {
  TempDir dir;
  for (const char* flag : {"--version", "-V"}) {
    ProcessResult result = Skipprd(dir, {flag});
    EXPECT_EQ(result.exit_code, 0);
    EXPECT_TRUE(
        std::regex_match(result.out, std::regex(R"(skipprd \d+\.\d+\.\d+ \(duckdb 1\.4\.\d+\)\n)")))
        << result.out;
  }
}

TEST(Cli, HelpListsOnlyWorkingCommandsAndGlobalFlags) {
  TempDir dir;
  ProcessResult result = Skipprd(dir, {"--help"});
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_THAT(result.out, HasSubstr("doctor"));
  EXPECT_THAT(result.out, HasSubstr("--config"));
  EXPECT_THAT(result.out, HasSubstr("--log"));
  EXPECT_THAT(result.out, HasSubstr("--version"));
  ProcessResult doctor_help = Skipprd(dir, {"doctor", "--help"});
  EXPECT_EQ(doctor_help.exit_code, 0);
  EXPECT_THAT(doctor_help.out, HasSubstr("--output"));
}

TEST(Cli, BadCommandLinesExitTwo) {
  TempDir dir;
  const std::vector<std::vector<std::string>> bad = {
      {"--no-such-flag"},       {"doctor", "--no-such-flag"},
      {"no-such-command"},      {"doctor", "--output", "xml"},
      {"--log=loud", "doctor"}, {}};
  for (const auto& args : bad) {
    ProcessResult result = Skipprd(dir, args);
    EXPECT_EQ(result.exit_code, 2) << ::testing::PrintToString(args) << "\n" << result.err;
    EXPECT_FALSE(result.err.empty());
  }
  EXPECT_THAT(Skipprd(dir, {"--no-such-flag"}).err,
              HasSubstr("The following argument was not expected: --no-such-flag"));
}

// ----- doctor ---------------------------------------------------------------------------------

TEST(CliDoctor, BundledExamplePassesInText) {
  TempDir dir;
  ProcessResult result = Skipprd(dir, {"doctor", "--config", kExample});
  EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_THAT(result.out,
              HasSubstr("[ok]   config " + kExample + " loaded; every ${NAME} resolved\n"));
  EXPECT_THAT(result.out, HasSubstr("[ok]   1 pipeline(s) configured\n"));
  EXPECT_THAT(result.out, HasSubstr("[ok]   1 data source(s) configured\n"));
  EXPECT_THAT(result.out,
              HasSubstr("[ok]   pipeline 'bikehire' (Sample source 'sample' → WAL-only)\n"));
  EXPECT_THAT(result.out,
              HasSubstr("[ok]   pipeline 'bikehire': no data_sink; WAL is the dataset\n"));
  EXPECT_THAT(result.out,
              HasSubstr("[ok]   pipeline 'bikehire': aggregate 'rides_by_rider_type' by "
                        "[rider_type] with 2 measure(s)\n"));
  EXPECT_THAT(result.out, HasSubstr("[ok]   pipeline 'bikehire': skipprd_el_storage_mode=local\n"));
  EXPECT_THAT(result.out, HasSubstr("[ok]   DATA_DIR " + dir.path() + "/data is writable\n"));
  EXPECT_TRUE(std::regex_search(
      result.out, std::regex(R"(\[ok\]   DATA_DIR \S+: [0-9.]+ [KMGTP]iB free of [0-9.]+ )"
                             R"([KMGTP]iB \(\d+ % used\)\n)")))
      << result.out;
  EXPECT_TRUE(result.out.size() > 20 &&
              result.out.substr(result.out.size() - 19) == "All checks passed.\n");
  EXPECT_EQ(result.err, "");  // without --log, nothing on stderr
}

TEST(CliDoctor, JsonOutputIsOneDocument) {
  TempDir dir;
  ProcessResult result = Skipprd(dir, {"--config", kExample, "doctor", "--output", "json"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  const nlohmann::json document = nlohmann::json::parse(result.out);
  EXPECT_EQ(document["ok"], true);
  ASSERT_TRUE(document["checks"].is_array());
  ASSERT_GE(document["checks"].size(), 8u);
  for (const auto& check : document["checks"]) {
    EXPECT_EQ(check["ok"], true) << check.dump();
    EXPECT_EQ(check["severity"], "info");
    EXPECT_TRUE(check["message"].is_string());
  }
  EXPECT_EQ(document["checks"][1]["message"], "1 pipeline(s) configured");
}

TEST(CliDoctor, EmptyConfigurationFails) {
  TempDir dir;
  ProcessResult result = Skipprd(dir, {"doctor"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.out, HasSubstr("[ok]   no skippr.yml found; using an empty configuration\n"));
  EXPECT_THAT(
      result.out,
      HasSubstr("[FAIL] 0 pipeline(s) configured: add one under 'pipelines:' in skippr.yml\n"));
  EXPECT_THAT(result.out, HasSubstr("[FAIL] 0 data source(s) configured"));
  EXPECT_THAT(result.out, HasSubstr("Some checks failed.\n"));
}

TEST(CliDoctor, BrokenConfigStopsWithThePlace) {
  TempDir dir;
  dir.Write("skippr.yml",
            "data_sources:\n  s:\n    Sample: {}\npipelines:\n  p:\n    data_source: "
            "data_sources.s\n    sync_every: 5\n");
  ProcessResult text = Skipprd(dir, {"doctor"});
  EXPECT_EQ(text.exit_code, 1);
  EXPECT_EQ(text.out, "");
  EXPECT_THAT(text.err, HasSubstr("[skippr] config failed: skippr.yml:7:5: pipelines.p.sync_every: "
                                  "unknown key 'sync_every'; allowed here: data_source"));
  ProcessResult json = Skipprd(dir, {"doctor", "--output", "json"});
  EXPECT_EQ(json.exit_code, 1);
  const nlohmann::json document = nlohmann::json::parse(json.out);
  EXPECT_EQ(document["ok"], false);
  EXPECT_EQ(document["checks"][0]["severity"], "error");
  EXPECT_THAT(document["checks"][0]["message"].get<std::string>(), HasSubstr("sync_every"));
}

TEST(CliDoctor, UnsetVariableFailsTheConfig) {
  TempDir dir;
  dir.Write("skippr.yml", "data_sources:\n  f:\n    File: {path: \"${INPUT_DIR}\"}\n");
  ProcessResult result = Skipprd(dir, {"doctor"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(
      result.err,
      HasSubstr("[skippr] config failed: skippr.yml:3:18: skippr.yml references ${INPUT_DIR} "
                "at data_sources.f.File.path, but that environment variable is not set"));
  // .env beside the file fills it.
  dir.Write(".env", "INPUT_DIR=/srv/input\n");
  ProcessResult with_dotenv = Skipprd(dir, {"doctor"});
  EXPECT_THAT(with_dotenv.err, Not(HasSubstr("config failed")));
}

TEST(CliDoctor, TwoSinksOnOneNamespaceFail) {
  TempDir dir;
  dir.Write("skippr.yml", R"(data_sources:
  s: {Sample: {}}
data_sinks:
  a: {SkipprLake: {warehouse: "file:///srv/wh"}}
  b: {SkipprLake: {warehouse: "file:///srv/wh/"}}
pipelines:
  one: {data_source: data_sources.s, data_sink: data_sinks.a}
  two: {data_source: data_sources.s, data_sink: data_sinks.b}
)");
  ProcessResult result = Skipprd(dir, {"doctor"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.out,
              HasSubstr("[ok]   pipeline 'one' (Sample source 's' → SkipprLake sink 'a')"));
  EXPECT_THAT(result.out,
              HasSubstr("[FAIL] skippr.yml:5:3: data_sinks.b: uses warehouse 'file:///srv/wh' and "
                        "table_namespace 'default' like data_sinks.a"));
}

TEST(CliDoctor, ASinkItCannotReachFailsNamingItAndOthersSayHowTheyLand) {
  TempDir dir;
  dir.Write("skippr.yml", R"(data_sources:
  s: {Sample: {}}
data_sinks:
  pg: {Postgres: {host: 127.0.0.1, port: 9, user: u, database: d, sslmode: disable}}
  duck: {Duckdb: {database: /srv/out.duckdb, write_policy: merge_by_key}}
pipelines:
  one: {data_source: data_sources.s, data_sink: data_sinks.pg}
  two: {data_source: data_sources.s, data_sink: data_sinks.duck}
)");
  ProcessResult result = Skipprd(dir, {"doctor"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.out, HasSubstr("[FAIL] data_sinks.pg.Postgres: cannot connect to PostgreSQL "
                                    "u@127.0.0.1:9/d, schema public"));
  EXPECT_THAT(result.out, HasSubstr("[ok]   pipeline 'one': Postgres sink 'pg' lands with write "
                                    "policy append; query reads the live WAL only"));
  EXPECT_THAT(result.out, HasSubstr("[ok]   pipeline 'two': Duckdb sink 'duck' lands with write "
                                    "policy merge_by_key; query reads what it landed"));
}

TEST(CliDoctor, UnwritableDataDirFailsWithAFix) {
  TempDir dir;
  dir.Write("skippr.yml",
            "data_sources:\n  s: {Sample: {}}\npipelines:\n  p: {data_source: data_sources.s}\n");
  const std::string blocker = dir.Write("not-a-directory", "a file where DATA_DIR should be");
  // Runs as root in CI, so permissions cannot make a directory unwritable; a file in the way can.
  ProcessResult result =
      Skipprd(dir, {"doctor", "--output", "json"}, {{"DATA_DIR", blocker + "/data"}});
  EXPECT_EQ(result.exit_code, 1);
  const nlohmann::json document = nlohmann::json::parse(result.out);
  bool found = false;
  for (const auto& check : document["checks"]) {
    if (check["message"].get<std::string>().find("is not writable") == std::string::npos) continue;
    found = true;
    EXPECT_EQ(check["ok"], false);
    EXPECT_EQ(check["severity"], "error");
    EXPECT_EQ(check["suggested_fix_command"],
              "mkdir -p '" + blocker + "/data' && chmod u+rwx '" + blocker + "/data'");
  }
  EXPECT_TRUE(found) << result.out;
}

// ----- config discovery, global flags, logging -----------------------------------------------

TEST(CliConfig, FoundThroughEnvironmentAndWorkingDirectory) {
  TempDir dir;
  ProcessResult from_env = Skipprd(dir, {"doctor"}, {{"SKIPPR_CONFIG_FILE", kExample}});
  EXPECT_EQ(from_env.exit_code, 0) << from_env.out;
  dir.Write("skippr.yaml", ReadFile(kExample));
  ProcessResult from_cwd = Skipprd(dir, {"doctor"});
  EXPECT_EQ(from_cwd.exit_code, 0) << from_cwd.out;
  EXPECT_THAT(from_cwd.out, HasSubstr("config skippr.yaml loaded"));
}

TEST(CliConfig, MissingExplicitFileWarnsAndFallsBack) {
  TempDir dir;
  dir.Write("skippr.yml", ReadFile(kExample));
  ProcessResult result = Skipprd(dir, {"doctor", "--config", "typo.yml"});
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_THAT(result.err,
              HasSubstr("skipprd: warning: config file 'typo.yml' not found; using 'skippr.yml'"));
}

TEST(CliLogging, AlwaysWritesTheDailyFileAndStderrOnlyWithLog) {
  TempDir dir;
  ProcessResult quiet = Skipprd(dir, {"doctor", "--config", kExample});
  EXPECT_EQ(quiet.err, "");
  const std::string log_path = dir.path() + "/data/logs/skipprd." + Today() + ".log";
  ASSERT_TRUE(std::filesystem::exists(log_path)) << log_path;
  EXPECT_THAT(ReadFile(log_path), HasSubstr("doctor: "));

  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"--log", "doctor", "--config", kExample},
                                             {"doctor", "--config", kExample, "--log"},
                                             {"--log", "debug", "doctor", "--config", kExample},
                                             {"doctor", "--log=info", "--config", kExample}}) {
    ProcessResult loud = Skipprd(dir, args);
    EXPECT_EQ(loud.exit_code, 0) << ::testing::PrintToString(args) << loud.err;
    EXPECT_THAT(loud.err, HasSubstr("loaded configuration from " + kExample))
        << ::testing::PrintToString(args);
  }
  ProcessResult errors_only = Skipprd(dir, {"--log", "error", "doctor", "--config", kExample});
  EXPECT_EQ(errors_only.err, "");
}

TEST(CliLogging, DotenvDataDirMovesTheLog) {
  TempDir dir;
  dir.Write("skippr.yml", ReadFile(kExample));
  dir.Write(".env", "DATA_DIR=" + dir.path() + "/from-dotenv\n");
  ProcessOptions options;
  options.working_dir = dir.path();
  options.unset_env = {"DATA_DIR", "SKIPPR_CONFIG_FILE"};
  ProcessResult result = RunProcess(SKIPPRD_BINARY, {"doctor"}, options);
  EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_TRUE(
      std::filesystem::exists(dir.path() + "/from-dotenv/logs/skipprd." + Today() + ".log"));
  EXPECT_THAT(result.out, HasSubstr("DATA_DIR " + dir.path() + "/from-dotenv is writable"));
}

// ----- hostile input: nothing aborts, segfaults, hangs or throws out of main ------------------

// Each of these used to kill every command: std::regex overflowed the stack on a long `${NAME}`
// or .env line (SIGSEGV).
TEST(CliHostile, ALongReferenceOrDotenvLineIsAConfigErrorNotACrash) {
  TempDir dir;
  const std::string name(50000, 'A');
  dir.Write("skippr.yml", "data_sources:\n  s:\n    Sample: {rows: \"${" + name + "}\"}\n");
  ProcessResult result = Skipprd(dir, {"doctor"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, HasSubstr("[skippr] config failed: skippr.yml:3:20: skippr.yml "
                                    "references ${" + name.substr(0, 80) + "… (50000 bytes)}"));
  EXPECT_THAT(result.err, Not(HasSubstr("internal error")));

  dir.Write(".env", std::string(200000, 'X') + "=1\n");
  result = Skipprd(dir, {"doctor"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, HasSubstr("references ${" + name.substr(0, 80)));
  dir.Write(".env", std::string(200000, '-') + "=1\n");
  result = Skipprd(dir, {"doctor"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, HasSubstr(".env:1:1: '" + std::string(80, '-') +
                                    "… (200000 bytes)' is not a variable name"));
  EXPECT_THAT(result.err, Not(HasSubstr("internal error")));
}

// A key that is not UTF-8 made doctor's JSON output throw (nlohmann's dump: abort).
TEST(CliHostile, DoctorJsonNamesAKeyThatIsNotUtf8) {
  TempDir dir;
  dir.Write("skippr.yml", "ab\xff" "c: 1\n");
  ProcessResult result = Skipprd(dir, {"doctor", "--output", "json"});
  EXPECT_EQ(result.exit_code, 1) << result.err;
  const nlohmann::json document = nlohmann::json::parse(result.out);
  EXPECT_EQ(document["ok"], false);
  EXPECT_THAT(document["checks"][0]["message"].get<std::string>(),
              HasSubstr("skippr.yml:1:1: ab\xef\xbf\xbd" "c: unknown key 'ab\xef\xbf\xbd" "c'"));
}

// A FIFO named .env used to block every command forever; a directory named skippr.yml, given
// explicitly, is not taken for a configuration.
TEST(CliHostile, ADotenvThatIsAFifoIsRefusedNotWaitedOn) {
  TempDir dir;
  dir.Write("skippr.yml", "skippr: {}\n");
  ASSERT_EQ(::mkfifo(dir.Sub(".env").c_str(), 0600), 0);
  ProcessResult result = Skipprd(dir, {"doctor"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err,
              HasSubstr("[skippr] config failed: '.env' is a FIFO, not a configuration file"));
}

// A metadata field whose "nullable" is not a boolean threw out of the command (abort).
TEST(CliHostile, MetadataApplyRefusesANonBooleanNullableAndNamesThatBreakTheRules) {
  TempDir dir;
  dir.Write("skippr.yml", "data_sources:\n  s: {Sample: {rows: 10}}\npipelines:\n  p: "
                          "{data_source: data_sources.s}\n");
  const auto apply = [&](const std::string& schema_json) {
    ProcessResult result = Skipprd(
        dir, {"metadata", "apply", "-p", "p", "--namespace", "p", "--schema-json", schema_json});
    EXPECT_EQ(result.exit_code, 1) << schema_json;
    EXPECT_THAT(result.err, Not(HasSubstr("internal error")));
    return nlohmann::json::parse(result.out)["error"].get<std::string>();
  };
  EXPECT_EQ(apply(R"({"fields":[{"name":"a","type":"string","nullable":"yes"}]})"),
            "field 'a': \"nullable\" must be true or false, found \"yes\"");
  EXPECT_EQ(apply(R"({"fields":[{"name":"v","type":"int"},{"name":"V","type":"int"}]})"),
            "field 'V' breaks the name rules ('v' is already a field (names are compared "
            "ignoring case)); name it 'V_2' or another that does not (docs/schema.md, \"Names\")");
  ProcessResult reserved = Skipprd(dir, {"metadata", "apply", "-p", "p", "--namespace",
                                         "deadletters", "--schema-json",
                                         R"({"fields":[{"name":"a","type":"int"}]})"});
  EXPECT_EQ(reserved.exit_code, 1);
  EXPECT_THAT(reserved.out, HasSubstr("namespace 'deadletters' breaks the name rules; the shaper "
                                      "would name it 'deadletters_data'"));
}

}  // namespace
}  // namespace skippr::testing
