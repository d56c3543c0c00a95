#pragma once
// The `dlaunch` subcommand table: `dlaunch help` prints it, main() dispatches
// through it. A first word that is no subcommand means `run`.
#include <string>
#include <vector>

namespace dl::launcher {

struct Command {
  const char* name;
  const char* summary;
  int (*main)(const std::vector<std::string>& args);
};

const std::vector<Command>& commands();
int run_command(const std::vector<std::string>& args);   // dlaunch [run]
int help_command(const std::vector<std::string>& args);  // dlaunch help

}  // namespace dl::launcher
