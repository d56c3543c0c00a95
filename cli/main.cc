// dlaunch: the command. Dispatches through the subcommand table and turns
// every error into one "dlaunch: error: ..." line and its exit code.
#include <signal.h>

#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "errors/error.h"
#include "errors/exit_codes.h"
#include "cli/commands.h"
#include "launcher/output/output_sink.h"
#include "launcher/run.h"
#include "wire/socket.h"
#if DLAUNCH_IN_PROCESS_AGENT
#include "agent/agent_main.h"
#include "remote/early_agent.h"
#endif

namespace {
int dispatch(const std::vector<std::string>& args) {
  if (!args.empty())
    for (const auto& c : dl::cli::commands())
      if (args[0] == c.name) return c.main({args.begin() + 1, args.end()});
  for (const auto& c : dl::cli::commands())
    if (std::string(c.name) == "run") return c.main(args);  // the default, --preflight and all
  return dl::launcher::run_command(args);
}
}  // namespace

int main(int argc, char** argv) {
  dl::wire::open_standard_descriptors();
  dl::wire::raise_descriptor_limit();
  // Under `ulimit -f`, a write past the limit would kill dlaunch (SIGXFSZ's
  // default) mid-job; ignored, it fails with EFBIG, and an output file that
  // cannot grow is said and its output shown instead (launcher/output/output_sink.h).
  // Ranks start with every signal at its default (agent/rank_process.cc).
  ::signal(SIGXFSZ, SIG_IGN);
#if DLAUNCH_IN_PROCESS_AGENT
  // A local job's agent is forked from dlaunch and runs this (remote/early_agent.h).
  dl::remote::set_in_process_agent(&dl::agent::agent_main, argv, &dl::agent::agent_get_ready);
#endif
  std::vector<std::string> args(argv + 1, argv + argc);
  int code = 0;
  std::optional<std::string> error;
  try {
    code = dispatch(args);
  } catch (const dl::Error& e) {
    error = e.what(), code = dl::exit_code_for(e.kind());
  } catch (const std::exception& e) {
    error = e.what(), code = dl::exit_codes::kFailure;
  }
  // Whatever a job queued for the console is out before dlaunch says more or exits.
  dl::launcher::ConsoleWriter::drain_and_disable();
  if (error) std::cerr << "dlaunch: error: " << *error << "\n";
  return code;
}
