// dlaunch-agent: started by the launcher (locally, or over ssh) with the
// command line of control/agent_args.h:
//   dlaunch-agent --connect HOST:PORT --node K [--gpus-per-node N] [--no-gpu-bind] [--no-pmix] [--cpu-topology]
// or, when one srun starts every node's agent, --node-names H1,H2,.. in place
// of --node: the agent's node is where this host's name is in the list.
// The job token arrives as the first line of stdin, never on the command
// line; stdin then stays open, and its EOF means the launcher is gone.
#include "agent/agent_main.h"

int main(int argc, char** argv) { return dl::agent::agent_main(argc, argv); }
