#pragma once
// The local host's agent, started by fork/exec (agent_starter.h's helpers)
// and watched through a pidfd on the io_context: the part every start method
// shares, whatever reaches the remote hosts. No ssh here.
#include <memory>

#include "remote/agent_starter.h"
#include "remote/early_agent.h"

namespace dl::remote {

// An AgentStarter for local specs only (spec.local). An agent that exits
// before it connected fails its node at once.
// `early`, when given, is the agent forked early (remote/early_agent.h): the
// first start of a local node uses it instead of an exec of dlaunch-agent.
std::unique_ptr<AgentStarter> make_local_starter(boost::asio::io_context& io, AgentStarter::Events ev,
                                                 std::shared_ptr<EarlyAgent> early = nullptr);

// Routes each spec by spec.local: to `local`, else to `remote`; connected()
// and stop() reach both (remote first, so its ssh connections close before
// the local agents are reaped).
std::unique_ptr<AgentStarter> make_split_starter(std::unique_ptr<AgentStarter> local,
                                                 std::unique_ptr<AgentStarter> remote);

}  // namespace dl::remote
