// dlaunch-agent: started by the launcher (locally, or over ssh) with
//   dlaunch-agent --connect HOST:PORT --node K [--gpus-per-node N] [--no-gpu-bind] [--no-pmix] [--cpu-topology]
// --no-pmix: the launcher knows the job does not use MPI (--mpi none); the
// agent then does not start its PMIx server ahead of the launch message.
// The job token arrives as the first line of stdin, never on the command
// line; stdin then stays open, and its EOF means the launcher is gone.
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <iostream>

#include "agent/agent.h"
#include "errors/error.h"
#include "wire/socket.h"

namespace {
std::string read_token_line() {
  std::string tok;
  char c;
  while (tok.size() < 256) {
    ssize_t n = ::read(0, &c, 1);
    if (n <= 0 || c == '\n') break;
    tok.push_back(c);
  }
  return tok;
}

int usage(const std::string& why) {
  std::cerr << "dlaunch-agent: error: " << why
            << "\nusage: dlaunch-agent --connect HOST:PORT --node K [--gpus-per-node N] [--no-gpu-bind] [--no-pmix] [--cpu-topology]\n"
               "(the job token is read from stdin; dlaunch starts this program, you do not)\n";
  return 2;
}
}  // namespace

int main(int argc, char** argv) {
  dl::agent::AgentOptions o;
  bool have_connect = false;
  try {
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      auto value = [&]() -> std::string {
        if (i + 1 >= argc) throw dl::UsageError(a + " needs a value");
        return argv[++i];
      };
      if (a == "--connect") {
        auto [h, p] = dl::wire::split_host_port(value(), "--connect");
        o.launcher_host = h, o.launcher_port = p, have_connect = true;
      } else if (a == "--node") o.node = std::stoi(value());
      else if (a == "--gpus-per-node") o.gpus_per_node = std::stoi(value());
      else if (a == "--no-gpu-bind") o.detect_gpus = false;
      else if (a == "--no-pmix") o.prepare_pmix = false;
      else if (a == "--cpu-topology") o.cpu_topology = true;
      else if (a == "--version") { std::cout << "dlaunch-agent " DLAUNCH_VERSION "\n"; return 0; }
      else throw dl::UsageError("unknown option '" + a + "'");
    }
  } catch (const std::exception& e) {
    return usage(e.what());
  }
  if (!have_connect) return usage("--connect is required");
  o.token = read_token_line();
  if (o.token.empty()) return usage("no job token on stdin");
  try {
    boost::asio::io_context io;
    dl::agent::Agent agent(io, o);
    const int code = agent.run();
    // The agent leaves its PMIx server to the exit (Agent::finish_if_done):
    // libpmix's thread still runs, so no destructors, no exit().
    std::cout.flush();
    std::fflush(nullptr);
    ::_exit(code);
  } catch (const dl::Error& e) {
    std::cerr << "dlaunch-agent: error: " << e.what() << "\n";
    return 1;
  }
}
