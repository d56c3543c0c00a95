#pragma once
// Bootstrap: who am I (rank identity from the environment another launcher
// set) and where is the store (torch.distributed-style init URLs). The
// reading order and every variable are documented in docs/rendezvous.md.
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "rendezvous/pmix_client.h"
#include "rendezvous/store.h"

namespace dl::rdzv {

// An environment as a map, so tests inject one instead of the real one.
using Environment = std::map<std::string, std::string>;
// This process's environment (environ).
Environment process_environment();

struct Identity {
  int rank = -1, world_size = -1, local_rank = -1, local_world_size = -1, node_rank = -1;
  std::string master_addr;  // empty when the source does not say
  int master_port = 0;      // 0 when the source does not say
  std::string source;       // "dlaunch", "torchrun", "OpenMPI", "PMI", "Slurm" or "PMIx"
};

// Reads the first source present, in order: dlaunch, torchrun, OpenMPI, PMI
// (Intel MPI/MPICH), Slurm, PMIx (through `pmix`). MASTER_ADDR/MASTER_PORT
// fill master_addr/port for every source; Slurm falls back to the first host
// of SLURM_JOB_NODELIST and port 29500. Throws UsageError when a variable is
// not a number, or when no source is present (listing every variable looked
// for), and what `pmix` throws.
Identity identity_from_env(const Environment& env, const std::function<PmixJobInfo()>& pmix = query_pmix);

// The token tcp:// and env:// use when DLAUNCH_TOKEN is not set: well known,
// so such a store is unauthenticated (anyone who can reach it can use it).
inline constexpr std::string_view kUnauthenticatedToken = "dlaunch-unauthenticated-store";

// Connects to the store named by url and returns it with `timeout` as its
// timeout (also the connect timeout):
//   tcp://host:port  rank 0 hosts a server on port (all interfaces) in a
//                    background thread when host is one of its addresses and
//                    the port is free; everyone connects as a client.
//   file:///path     a FileStore on path.
//   env://           DLAUNCH_STORE_DOOR=/path (the host's store door, set by
//                    the agent: docs/rendezvous.md, "Per-host aggregation"),
//                    else DLAUNCH_STORE_ADDR=host:port (client only, the launcher
//                    hosts it), else tcp://MASTER_ADDR:MASTER_PORT as above.
// The token is DLAUNCH_TOKEN, else kUnauthenticatedToken. Throws UsageError
// for a bad url or missing variables, and what the store throws.
std::unique_ptr<Store> connect_store(std::string_view url, int rank, int world_size, Millis timeout);
std::unique_ptr<Store> connect_store(std::string_view url, int rank, int world_size, Millis timeout,
                                     const Environment& env);


}  // namespace dl::rdzv
