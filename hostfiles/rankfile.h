#pragma once
// mpirun's --rankfile: every rank's host, and the CPUs it is pinned to there.
//
//   # comments and blank lines are skipped
//   rank 0=node1 slot=0-3        logical CPUs 0..3 of node1
//   rank 1=node1 slot=1:0-1      socket 1, its cores 0 and 1 (all their threads)
//   rank 2=node2                 node2, not pinned
//
// Ranks 0..N-1 each appear once. The hosts are the rankfile's own, in the
// order they first appear, unless a hostfile, -H or an allocation names the
// hosts: then every rankfile host must be one of them, and theirs is the
// order (NODE_RANK) and the ssh user and port. The CPUs of a `slot=` are
// checked against what the host's agent reports (rankfile_cpus) before any
// rank starts.
#include <string>
#include <vector>

#include "hostfiles/binding.h"
#include "hostfiles/hostfile.h"
#include "hostfiles/placement.h"

namespace dl::hostfiles {

struct RankfileLine {
  int rank = 0;
  std::string host;
  std::string slot;    // as written after "slot=", "" when none
  std::string origin;  // "FILE:LINE"
};

// Parses a rankfile's text; `file` names it in errors. Throws ParseError
// "FILE:LINE: ..." saying what was expected, and for a rank given twice or
// missing, or relative hosts (+n0), which name no host.
std::vector<RankfileLine> parse_rankfile(const std::string& text, const std::string& file);
// Reads and parses the rankfile at `path` (errors/user_file.h's rules).
std::vector<RankfileLine> read_rankfile(const std::string& path);

// The placement of the rankfile's ranks (see the top of this file); `hosts`
// are the hostfile's, -H's or the allocation's, or empty. `np` (0: the
// rankfile's count) must be the rankfile's count. Each RankPlace carries its
// line's slot in `cpus`. Throws UsageError naming the line and the fix.
Placement place_by_rankfile(const std::vector<RankfileLine>& lines, const std::vector<HostEntry>& hosts, int np);

// The CPUs `slot` names on a host of topology `topo` (its usable CPUs):
// a CPU list, or SOCKET:CORES (the socket's cores by their index in it).
// Throws std::runtime_error naming `origin`, `host` and what it has.
std::vector<int> rankfile_cpus(const std::string& slot, const CpuTopology& topo, const std::string& host,
                               const std::string& origin);

}  // namespace dl::hostfiles
