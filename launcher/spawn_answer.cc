#include "launcher/spawn_answer.h"

namespace dl::launcher {

namespace {
// "3 x python3 -m mpi4py.futures.server, 1 x ./b": what the rank asked for.
std::string describe(const control::msg::SpawnRequest& r) {
  std::string out;
  for (const auto& app : r.apps) {
    std::string cmd;
    for (const auto& w : app.argv) cmd += (cmd.empty() ? "" : " ") + w;
    out += (out.empty() ? "" : ", ") + std::to_string(app.np) + " x " + (cmd.empty() ? "(no program)" : cmd);
  }
  return out.empty() ? "no programs" : out;
}
}  // namespace

SpawnAnswer answer_spawn(const control::msg::SpawnRequest& request, const std::string& host) {
  SpawnAnswer a;
  a.reply.id = request.id;
  a.reply.error = "dlaunch does not start processes for MPI_Comm_spawn";
  const std::string who = "rank " + std::to_string(request.rank) + " on " + host + " called MPI_Comm_spawn (" +
                          describe(request) + ")";
  a.verdict = who + ", which dlaunch does not support (docs/mpi.md, \"Spawning\")";
  a.line = "dlaunch: " + who + ": " + *a.reply.error +
           ", so the call returns an error (MPI_ERR_SPAWN) and the job ends; start every process with the job "
           "instead: several "
           "programs with 'dlaunch -n 1 ./parent : -n 2 ./child', mpi4py.futures workers with 'dlaunch -n 4 "
           "python3 -m mpi4py.futures script.py' (docs/mpi.md, \"Spawning\")\n";
  return a;
}

}  // namespace dl::launcher
