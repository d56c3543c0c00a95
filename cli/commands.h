#pragma once
// The `dlaunch` subcommand table: `dlaunch help` prints it, main() dispatches
// through it. A first word that is no subcommand means `run`. This folder is
// the top layer: it is the only one that knows every command (the launcher's
// run, the store, the doctor, the collectives' bench), so none of those needs
// to know another.
#include <string>
#include <vector>

namespace dl::cli {

struct Command {
  const char* name;
  const char* summary;
  int (*main)(const std::vector<std::string>& args);
};

const std::vector<Command>& commands();
int help_command(const std::vector<std::string>& args);  // dlaunch help

}  // namespace dl::cli
