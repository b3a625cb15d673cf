// Internal to cli/: one Add<Command> per command file. Each registers its subcommand on `app`;
// its callback runs the command and stores the exit code in `exit_code`.
#pragma once

#include <CLI/CLI.hpp>

#include "cli/context.hpp"

namespace skippr::cli {

void AddDoctorCommand(CLI::App& app, const GlobalOptions& global, int& exit_code);
void AddDiscoverCommand(CLI::App& app, const GlobalOptions& global, int& exit_code);
void AddSchemaCommand(CLI::App& app, const GlobalOptions& global, int& exit_code);
void AddMetadataCommand(CLI::App& app, const GlobalOptions& global, int& exit_code);
void AddSyncCommand(CLI::App& app, const GlobalOptions& global, int& exit_code);
void AddQueryCommand(CLI::App& app, const GlobalOptions& global, int& exit_code);
void AddStatusCommand(CLI::App& app, const GlobalOptions& global, int& exit_code);
void AddAggregatesCommand(CLI::App& app, const GlobalOptions& global, int& exit_code);

}  // namespace skippr::cli
