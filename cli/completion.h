#pragma once
// `dlaunch completion`: shell completion generated from the command table and
// the run option table, so it cannot drift from them (docs/install.md).
//
//   dlaunch completion bash         the bash completion script (the .deb
//                                   installs its output, made at build time)
//   dlaunch completion hosts [F]    the hosts of hostfile F (or of the default
//                                   hostfile of the config files), one a line;
//                                   the script runs it to complete -H
#include <string>
#include <vector>

namespace dl::cli {

int completion_command(const std::vector<std::string>& args);

// The bash script for the given command names; options come from
// launcher::run_option_table().
std::string bash_completion_script(const std::vector<std::string>& commands);

}  // namespace dl::cli
