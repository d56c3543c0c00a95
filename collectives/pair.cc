#include "collectives/pair.h"

namespace dl::coll {

std::string PeerInfo::describe() const {
  std::string s = "rank " + std::to_string(rank);
  if (!host.empty()) s += " on host " + host;
  if (!addr.empty()) s += " (" + addr + ")";
  return s;
}

}  // namespace dl::coll
