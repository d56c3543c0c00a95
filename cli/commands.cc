#include "cli/commands.h"

#include <iostream>

#include "cli/completion.h"
#include "errors/error.h"
#include "errors/exit_codes.h"
#include "launcher/options/options.h"
#include "launcher/run.h"
#include "rendezvous/store_command.h"
#include "wire/handshake.h"
// Set by cli/CMakeLists.txt when dl_coll_bench is built and linked (a
// build without the collectives folder must not see the header alone).
#if DLAUNCH_HAVE_BENCH
#include "collectives/bench/bench_command.h"
#endif
#if DLAUNCH_HAVE_DOCTOR
#include "doctor/doctor.h"
#include "doctor/preflight.h"
#endif

namespace dl::cli {

namespace {
int token_command(const std::vector<std::string>& args) {
  if (args.size() == 1 && (args[0] == "--help" || args[0] == "-h")) {
    std::cout << "usage: dlaunch token\n"
                 "  Prints a new random job token (64 hex digits) for jobs started by something else\n"
                 "  (srun, dlaunch store, --rdzv): every node needs the same one, and it never goes on\n"
                 "  a command line: export DLAUNCH_TOKEN=$(dlaunch token), or keep it in a file only\n"
                 "  you may read and pass --token-file FILE.\n";
    return 0;
  }
  if (!args.empty()) throw UsageError("dlaunch token takes no arguments (`dlaunch help token` says what it does)");
  std::cout << wire::new_token() << "\n";
  return 0;
}

int version_command(const std::vector<std::string>&) {
  std::cout << "dlaunch " DLAUNCH_VERSION "\n";
  return 0;
}

}  // namespace

const std::vector<Command>& commands() {
  static const std::vector<Command> table = {
#if DLAUNCH_HAVE_DOCTOR
      // --preflight: the doctor's per-host checks first (doctor/preflight.h).
      {"run", "start a job: dlaunch [run] -n N [--hostfile F] PROGRAM [ARGS] (the default)", doctor::run_with_preflight},
#else
      {"run", "start a job: dlaunch [run] -n N [--hostfile F] PROGRAM [ARGS] (the default)", launcher::run_command},
#endif
      {"store", "serve a rendezvous store for jobs started by something else", rdzv::run_store_command},
#if DLAUNCH_HAVE_BENCH
      {"bench", "measure collective bandwidth (run under dlaunch: dlaunch -n 4 dlaunch bench)", coll::run_bench_command},
#endif
#if DLAUNCH_HAVE_DOCTOR
      {"doctor", "check the hosts of a hostfile and name what is wrong: dlaunch doctor --hostfile H", doctor::run_doctor_command},
#endif
      {"token", "print a new random job token (export DLAUNCH_TOKEN=$(dlaunch token))", token_command},
      {"completion", "print the bash completion script: source <(dlaunch completion bash)", completion_command},
      {"help", "show this list, or `dlaunch help COMMAND`", help_command},
      {"version", "print the version", version_command},
  };
  return table;
}

int help_command(const std::vector<std::string>& args) {
  if (!args.empty() && args[0] == "run") {
    std::cout << launcher::run_options_help();
    return 0;
  }
  if (!args.empty()) {
    for (const auto& c : commands())
      if (args[0] == c.name) return c.main({"--help"});
    throw UsageError("no command '" + args[0] + "'; `dlaunch help` lists them");
  }
  std::cout << "dlaunch " DLAUNCH_VERSION ": start one program as many processes on many machines\n\n"
               "usage: dlaunch [COMMAND] [options] ...\n\ncommands:\n";
  for (const auto& c : commands()) std::printf("  %-9s %s\n", c.name, c.summary);
  std::cout << "\n`dlaunch help run` lists the options of a job; the manual is `man dlaunch`.\n";
  return 0;
}

}  // namespace dl::cli
