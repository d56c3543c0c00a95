#include "launcher/seats.h"

#include <algorithm>

#include "launcher/stacks/stack_report.h"

namespace dl::launcher {

std::vector<SeatMove> fill_from_spares(std::vector<int>& seats, const std::vector<int>& gone, std::vector<int>& spares) {
  std::vector<SeatMove> moves;
  for (size_t s = 0; s < seats.size() && !spares.empty(); ++s) {
    if (std::find(gone.begin(), gone.end(), seats[s]) == gone.end()) continue;
    moves.push_back({static_cast<int>(s), seats[s], spares.front()});
    seats[s] = spares.front();
    spares.erase(spares.begin());
  }
  return moves;
}

std::string moved_line(const std::string& lost_host, const std::string& why, const std::vector<int>& ranks,
                       const std::string& spare_host) {
  std::string line = lost_host + " lost" + (why.empty() ? "" : " (" + why + ")");
  const std::string who = ranks.size() == 1 ? "its rank " : "its ranks ";
  if (!spare_host.empty()) return line + "; " + who + rank_ranges(ranks) + " moved to spare " + spare_host;
  return line + "; no spare left: a new agent is started there";
}

std::string spares_left(size_t left) {
  return left == 0 ? "; no spare left" : "; " + std::to_string(left) + (left == 1 ? " spare left" : " spares left");
}

}  // namespace dl::launcher
