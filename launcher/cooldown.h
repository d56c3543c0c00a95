#pragma once
// --return-cooldown: when a lost host may come back. A host the job stopped
// using (its agent lost, swapped out for failing twice in a row, failed the
// health gate) is tried again after a cooldown that doubles with each of its
// losses, a failed try included: base, 2 x base, 4 x base, ... and at most
// 32 x base. One that comes back and passes the health gate again is a
// spare (launcher/job_return.cc does the trying; docs/failures.md, "A lost
// host comes back").
//
// Pure: unit-tested in tests/launcher/cooldown_test.cc.
#include <map>
#include <string>

namespace dl::launcher {

// The cooldown grows by doubling this many times at most (x32).
inline constexpr int kCooldownDoublings = 5;

class ReturnCooldown {
 public:
  // `base_s`: the cooldown after a host's first loss; 0: a lost host never comes back.
  explicit ReturnCooldown(double base_s = 0) : base_s_(base_s > 0 ? base_s : 0) {}
  bool enabled() const { return base_s_ > 0; }
  // One more loss of `host`: returns the seconds to wait before it is tried
  // again, base x 2^(losses - 1), at most base x 2^kCooldownDoublings (0
  // when not enabled). Holds one count per host the job has.
  double lost(const std::string& host);
  // How often `host` was lost so far.
  int losses(const std::string& host) const;

 private:
  double base_s_;
  std::map<std::string, int> losses_;
};

// "20 s", "0.5 s": a cooldown as the lines give it.
std::string cooldown_text(double s);
// The line for a host that came back: "node3 is back (passed the health
// gate after a 20 s cooldown); it is a spare now (2 spares)".
std::string back_line(const std::string& host, double cooldown_s, size_t spares);
// The line for a try that failed: "node3 did not come back (failed the
// health check: ...); it is tried again in 40 s".
std::string not_back_line(const std::string& host, const std::string& why, double next_s);

}  // namespace dl::launcher
