#pragma once
// The agent's program: what dlaunch-agent runs, and what a local agent that
// dlaunch forked from itself runs without an exec (remote/early_agent.h).
namespace dl::agent {

// dlaunch-agent's main: its command line (control/agent_args.h), the job
// token as the first line of stdin. Returns the exit code when it returns.
int agent_main(int argc, char** argv);

// For a forked local agent still waiting for its command line: gets ready
// for a launch of about `ranks` ranks (RankSupervisor::get_ready_for).
void agent_get_ready(int ranks);

}  // namespace dl::agent
