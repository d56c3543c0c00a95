#pragma once
// --spares: which host runs which node rank. A job's node ranks (its
// NODE_RANK values, each with its ranks, LOCAL_RANKs and GPU binding) are
// seats; the placement gives seat i to host i, and the hosts after them
// (the last --spares K of the hostfile) hold none. When a seated host is
// lost, its seat goes to a free spare at the next attempt: the world and
// its numbering stay as they were, so a checkpoint taken before fits.
//
// Pure: the Job (launcher/job_restart.cc) asks, and sends; unit-tested in
// tests/launcher/seats_test.cc. docs/failures.md says what the user sees.
#include <string>
#include <vector>

namespace dl::launcher {

struct SeatMove {
  int seat = -1;  // the node rank
  int from = -1;  // the host that was lost (a node index)
  int to = -1;    // the spare that takes it over
};

// Seats (by node rank: the host index that runs it) whose host is in `gone`
// take, in node-rank order, the first of `spares` (host indices, in the
// order they are to be used); a seat left without a spare is not moved.
// Returns the moves; `seats` is updated and the spares used are taken off.
std::vector<SeatMove> fill_from_spares(std::vector<int>& seats, const std::vector<int>& gone, std::vector<int>& spares);

// The line for one membership change: "node3 lost (no heartbeat for 10 s);
// its ranks 6-7 moved to spare node5", or, with no spare for it, "...; no
// spare left: a new agent is started there". `ranks` are its global ranks.
std::string moved_line(const std::string& lost_host, const std::string& why, const std::vector<int>& ranks,
                       const std::string& spare_host);

// "; 1 spare left" / "; no spare left" for a line that used one.
std::string spares_left(size_t left);

}  // namespace dl::launcher
