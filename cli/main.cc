// dlaunch: the command. Dispatches through the subcommand table and turns
// every error into one "dlaunch: error: ..." line and its exit code.
#include <iostream>

#include "errors/error.h"
#include "errors/exit_codes.h"
#include "cli/commands.h"
#include "launcher/run.h"
#include "wire/socket.h"

int main(int argc, char** argv) {
  dl::wire::open_standard_descriptors();
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (!args.empty())
      for (const auto& c : dl::cli::commands())
        if (args[0] == c.name) return c.main({args.begin() + 1, args.end()});
    return dl::launcher::run_command(args);
  } catch (const dl::Error& e) {
    std::cerr << "dlaunch: error: " << e.what() << "\n";
    return dl::exit_code_for(e.kind());
  } catch (const std::exception& e) {
    std::cerr << "dlaunch: error: " << e.what() << "\n";
    return dl::exit_codes::kFailure;
  }
}
