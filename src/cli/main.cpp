#include "cli/cli.hpp"

int main(int argc, char** argv) { return skippr::cli::RunCli(argc, argv); }
