// dlaunch-agent: the agent as a program of its own, for remote hosts and
// wherever dlaunch execs it (agent/agent_main.cc has its command line).
#include "agent/agent_main.h"

int main(int argc, char** argv) { return dl::agent::agent_main(argc, argv); }
