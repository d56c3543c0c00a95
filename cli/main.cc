// dlaunch: the command. Dispatches through the subcommand table and turns
// every error into one "dlaunch: error: ..." line and its exit code.
#include <iostream>

#include "errors/error.h"
#include "errors/exit_codes.h"
#include "cli/commands.h"
#include "launcher/output_sink.h"
#include "launcher/run.h"
#include "wire/socket.h"

int main(int argc, char** argv) {
  dl::wire::open_standard_descriptors();
  std::vector<std::string> args(argv + 1, argv + argc);
  // Whatever a job queued for the console is out before dlaunch says more or exits.
  using dl::launcher::ConsoleWriter;
  try {
    if (!args.empty())
      for (const auto& c : dl::cli::commands())
        if (args[0] == c.name) {
          const int code = c.main({args.begin() + 1, args.end()});
          ConsoleWriter::drain_and_disable();
          return code;
        }
    const int code = dl::launcher::run_command(args);
    ConsoleWriter::drain_and_disable();
    return code;
  } catch (const dl::Error& e) {
    ConsoleWriter::drain_and_disable();
    std::cerr << "dlaunch: error: " << e.what() << "\n";
    return dl::exit_code_for(e.kind());
  } catch (const std::exception& e) {
    ConsoleWriter::drain_and_disable();
    std::cerr << "dlaunch: error: " << e.what() << "\n";
    return dl::exit_codes::kFailure;
  }
}
