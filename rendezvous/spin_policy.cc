#include "rendezvous/spin_policy.h"

#include <cstdlib>

#include "control/env_names.h"

namespace dl::rdzv {

namespace {
std::chrono::microseconds spin_from_env() {
  const char* v = std::getenv(env::kDlStoreSpinUs);
  if (!v || !*v) return kDefaultSpin;
  char* end = nullptr;
  long us = std::strtol(v, &end, 10);
  return *end || us < 0 ? kDefaultSpin : std::chrono::microseconds(std::min<long>(us, kMaxSpin.count()));
}
// Read at start-up, not on first use: no guard variable for a process
// forked afterwards to write (each first write there is a page fault).
const std::chrono::microseconds kSpin = spin_from_env();
}  // namespace

std::chrono::microseconds store_spin() { return kSpin; }

}  // namespace dl::rdzv
