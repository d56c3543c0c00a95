#include <algorithm>

#include "collectives/algorithms.h"

namespace dl::coll::algo {
namespace {

int real(int vr, int root, int p) { return (vr + root) % p; }

// Binomial tree: log2(p) rounds; each rank receives once and sends to its
// children in the tree rooted at `root`.
void bcast_tree(Context& c, void* buf, size_t bytes, int root) {
  const int p = c.size(), vr = (c.rank() - root + p) % p;
  int mask = 1;
  while (mask < p) {
    if (vr & mask) {
      c.recv(real(vr - mask, root, p), buf, bytes);
      break;
    }
    mask <<= 1;
  }
  std::vector<Transfer> sends;
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (vr + mask < p) sends.push_back(Transfer::sending(c.pair(real(vr + mask, root, p)), buf, bytes));
  c.run(sends);
}

// Chain root -> root+1 -> ..., in chunks: step i receives chunk i and
// forwards chunk i-1, so all links carry data at once.
void bcast_chain(Context& c, void* buf, size_t bytes, int root) {
  const int p = c.size(), vr = (c.rank() - root + p) % p;
  const size_t chunk = c.tuning().chunk_bytes, n = (bytes + chunk - 1) / chunk;
  char* b = static_cast<char*>(buf);
  auto len = [&](size_t i) { return std::min(chunk, bytes - i * chunk); };
  const int prev = vr > 0 ? real(vr - 1, root, p) : -1, next = vr + 1 < p ? real(vr + 1, root, p) : -1;
  for (size_t i = 0; i <= n; ++i) {
    Transfer x[2];
    int k = 0;
    if (prev < 0) {  // root: no lag
      if (i < n) x[k++] = Transfer::sending(c.pair(next), b + i * chunk, len(i));
    } else {
      if (i < n) x[k++] = Transfer::receiving(c.pair(prev), b + i * chunk, len(i));
      if (next >= 0 && i >= 1) x[k++] = Transfer::sending(c.pair(next), b + (i - 1) * chunk, len(i - 1));
    }
    c.run(std::span<Transfer>(x, k));
  }
}

}  // namespace

void broadcast(Context& c, void* buf, size_t bytes, int root) {
  if (c.size() == 1 || bytes == 0) return;
  if (bytes < c.tuning().bcast_chain_bytes || c.size() == 2) bcast_tree(c, buf, bytes, root);
  else bcast_chain(c, buf, bytes, root);
}

}  // namespace dl::coll::algo
