#include <cstring>

#include "collectives/algorithms.h"

namespace dl::coll::algo {
namespace {

std::vector<size_t> offsets(const std::vector<size_t>& bytes) {
  std::vector<size_t> off(bytes.size() + 1, 0);
  for (size_t i = 0; i < bytes.size(); ++i) off[i + 1] = off[i] + bytes[i];
  return off;
}

size_t mod(long a, long p) { return static_cast<size_t>(((a % p) + p) % p); }

}  // namespace

// Ring: p-1 steps, each forwarding the block received in the step before.
void all_gather_v(Context& c, const void* in, void* out, const std::vector<size_t>& bytes) {
  const long p = c.size(), me = c.rank();
  auto off = offsets(bytes);
  char* o = static_cast<char*>(out);
  if (o + off[me] != in && bytes[me]) std::memmove(o + off[me], in, bytes[me]);
  const int right = static_cast<int>(mod(me + 1, p)), left = static_cast<int>(mod(me - 1, p));
  for (long s = 0; s < p - 1; ++s) {
    const size_t snd = mod(me - s, p), rcv = mod(me - s - 1, p);
    c.sendrecv(right, o + off[snd], bytes[snd], left, o + off[rcv], bytes[rcv]);
  }
}

// Direct: root receives from every rank at once.
void gather_v(Context& c, const void* in, void* out, const std::vector<size_t>& bytes, int root) {
  const int me = c.rank();
  if (me != root) return c.send(root, in, bytes[me]);
  auto off = offsets(bytes);
  char* o = static_cast<char*>(out);
  if (o + off[me] != in && bytes[me]) std::memmove(o + off[me], in, bytes[me]);
  std::vector<Transfer> x;
  for (int j = 0; j < c.size(); ++j)
    if (j != me) x.push_back(Transfer::receiving(c.pair(j), o + off[j], bytes[j]));
  c.run(x);
}

// Direct: root sends to every rank at once.
void scatter(Context& c, const void* in, void* out, size_t bytes, int root) {
  const int me = c.rank();
  if (me != root) return c.recv(root, out, bytes);
  const char* i = static_cast<const char*>(in);
  if (out != i + me * bytes && bytes) std::memmove(out, i + me * bytes, bytes);
  std::vector<Transfer> x;
  for (int j = 0; j < c.size(); ++j)
    if (j != me) x.push_back(Transfer::sending(c.pair(j), i + j * bytes, bytes));
  c.run(x);
}

// Every pair at once; an in-place call works from a copy of the input.
void all_to_all(Context& c, const void* in, void* out, size_t bytes) {
  const int p = c.size(), me = c.rank();
  const char* src = static_cast<const char*>(in);
  char* o = static_cast<char*>(out);
  if (in == out && p > 1) {
    char* copy = c.temp(1, p * bytes);
    std::memcpy(copy, in, p * bytes);
    src = copy;
  }
  if (o + me * bytes != src + me * bytes && bytes) std::memcpy(o + me * bytes, src + me * bytes, bytes);
  std::vector<Transfer> x;
  for (int j = 0; j < p; ++j) {
    if (j == me) continue;
    x.push_back(Transfer::sending(c.pair(j), src + j * bytes, bytes));
    x.push_back(Transfer::receiving(c.pair(j), o + j * bytes, bytes));
  }
  c.run(x);
}

void barrier(Context& c) {
  const int p = c.size(), me = c.rank();
  char s = 1, r = 0;
  for (int k = 1; k < p; k <<= 1) c.sendrecv((me + k) % p, &s, 1, (me - k + p) % p, &r, 1);
}

}  // namespace dl::coll::algo
