#pragma once
// --launcher: how a job's agents are started (docs/slurm.md, docs/ssh.md).
//   libssh  the local host's agent by fork/exec, the others over libssh (process_starter.cc)
//   slurm   the local host's by fork/exec, the others by one srun step (slurm_starter.h)
//   ssh     the others by the ssh program (openssh_starter.h)
//   auto    slurm inside a Slurm job, else libssh
// One table in start_method.cc maps each name to its starter's factory, so a
// new method is one line there.
#include <boost/asio/io_context.hpp>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "remote/agent_starter.h"

namespace dl::remote {

// A resolved start method: "auto" is a word of --launcher, never a method.
enum class StartMethod { kLibssh, kSsh, kSlurm, kSim };

// The method's word ("libssh", "ssh", "slurm", "sim"): --launcher's, and
// StartAgents::method's on the wire.
const char* word(StartMethod m);
// The method named `word`, nullopt for any other word (auto included).
std::optional<StartMethod> start_method_named(std::string_view word);

// Every value --launcher takes, in the order help lists them.
std::vector<std::string> start_method_names();

// The method `asked` (a --launcher value) stands for: auto becomes slurm when
// `slurm_job_id` is set (dlaunch runs inside a Slurm job), else libssh.
// Throws UsageError for a name that is not a method ("did you mean"), for a
// method this build has not got, for slurm outside a Slurm job, and for
// `launcher_exec` given to a method that runs no program (libssh).
StartMethod resolve_start_method(const std::string& asked, const std::string& slurm_job_id,
                                 const std::vector<std::string>& launcher_exec = {});

// The starter of `method`. Throws UsageError for one this build has not got.
std::unique_ptr<AgentStarter> make_agent_starter(StartMethod method, boost::asio::io_context& io,
                                                 StarterOptions o, AgentStarter::Events ev);

// Whether agents on other hosts started with `method` start with dlaunch's
// own environment: srun's (its default --export=ALL), and the test bed's
// simulated hosts; not ssh's, whose agents have the login's.
bool passes_environment(StartMethod method);

// --launcher-exec's text split at blanks: "/opt/slurm/bin/srun --reservation=r" -> two words.
std::vector<std::string> split_launcher_exec(const std::string& text);

// Whether `method` starts the local node's agent as dlaunch's own child,
// which can then be the agent forked early (remote/early_agent.h); slurm's
// srun starts every agent.
bool forks_local_agent(StartMethod method);

// Whether agents started with `method` can start agents in turn with it: a
// launch tree (--fanout). Not slurm: one srun step starts every agent, and
// Slurm's own tree (TreeWidth) carries it.
bool starts_tree(StartMethod method);

// Whether `method` simulates hosts on this machine (the test bed's), so no
// real host's network is involved.
bool simulates_hosts(StartMethod method);

}  // namespace dl::remote
