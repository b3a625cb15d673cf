// Builds the command line, parses it, and dispatches to one command. Nothing else happens here.
#include <duckdb.h>
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "cli/cli.hpp"
#include "cli/commands.hpp"
#include "cli/last_resort.hpp"
#include "core/redact.hpp"

namespace skippr::cli {

namespace {

std::string VersionText() {
  std::string duckdb_version = duckdb_library_version();
  if (!duckdb_version.empty() && duckdb_version[0] == 'v') duckdb_version.erase(0, 1);
  return fmt::format("skipprd {} (duckdb {})", SKIPPRD_VERSION, duckdb_version);
}

// `--log` takes an optional level: `--log`, `--log debug` and `--log=debug` all work, and a bare
// `--log` before the command name must not swallow it. CLI11 cannot express "optional value only if
// it is a level", so the flag is normalised to `--log=<level>` before parsing.
std::vector<std::string> NormaliseLogFlag(int argc, char** argv) {
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg != "--log") {
      args.push_back(arg);
      continue;
    }
    if (i + 1 < argc && ParseLogLevel(argv[i + 1]).ok()) {
      args.push_back("--log=" + std::string(argv[++i]));
    } else {
      args.push_back("--log=info");
    }
  }
  std::reverse(args.begin(), args.end());  // CLI11 parses a reversed vector
  return args;
}

int RunCommandLine(int argc, char** argv) {
  CLI::App app{
      "skipprd: reads a source, commits every batch to a write-ahead log, and lands it "
      "exactly once.\nConfigured by skippr.yml; see docs/config.md.",
      "skipprd"};
  app.set_version_flag("-V,--version", VersionText(), "Print the version and exit");
  app.fallthrough();  // global flags are accepted before or after the command
  app.require_subcommand(0, 1);

  GlobalOptions global;
  app.add_option("--config", global.config_path,
                 "Path to skippr.yml (else $SKIPPR_CONFIG_FILE, ./skippr.yml, ./skippr.yaml)")
      ->type_name("PATH");
  app.add_option_function<std::string>(
         "--log", [&global](const std::string& text) { global.log_level = *ParseLogLevel(text); },
         "Log to stderr at LEVEL (trace|debug|info|warn|error; bare --log = info). A log "
         "file DATA_DIR/logs/skipprd.<date>.log is always written")
      ->type_name("[LEVEL]")
      ->check([](const std::string& text) {
        Result<LogLevel> level = ParseLogLevel(text);
        return level.ok() ? std::string() : level.status().message();
      });

  int exit_code = kExitSuccess;
  AddDoctorCommand(app, global, exit_code);
  AddDiscoverCommand(app, global, exit_code);
  AddSchemaCommand(app, global, exit_code);
  AddMetadataCommand(app, global, exit_code);
  AddSyncCommand(app, global, exit_code);
  AddQueryCommand(app, global, exit_code);
  AddStatusCommand(app, global, exit_code);
  AddAggregatesCommand(app, global, exit_code);

  try {
    std::vector<std::string> args = NormaliseLogFlag(argc, argv);
    app.parse(args);
  } catch (const CLI::ParseError& error) {
    if (app.exit(error) == 0) return kExitSuccess;  // app.exit prints help, version, or the error
    fmt::print(stderr, "Run 'skipprd --help' for the commands and flags.\n");
    return kExitUsage;
  }
  if (app.get_subcommands().empty()) {
    fmt::print(stderr, "{}\nskipprd needs a command.\n", app.help());
    return kExitUsage;
  }
  return exit_code;
}

}  // namespace

int RunCli(int argc, char** argv) {
  RedactStandardError();  // before anything prints: no secret reaches stderr in clear
  internal::InstallLastResortHandlers();
  return internal::RunWithLastResort([&] { return RunCommandLine(argc, argv); });
}

}  // namespace skippr::cli
