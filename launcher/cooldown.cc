#include "launcher/cooldown.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace dl::launcher {

double ReturnCooldown::lost(const std::string& host) {
  if (!enabled()) return 0;
  const int n = ++losses_[host];
  return base_s_ * std::ldexp(1.0, std::min(n - 1, kCooldownDoublings));
}

int ReturnCooldown::losses(const std::string& host) const {
  const auto it = losses_.find(host);
  return it == losses_.end() ? 0 : it->second;
}

std::string cooldown_text(double s) {
  char text[32];
  if (s == std::floor(s)) std::snprintf(text, sizeof text, "%.0f s", s);
  else std::snprintf(text, sizeof text, "%.3g s", s);
  return text;
}

std::string back_line(const std::string& host, double cooldown_s, size_t spares) {
  return host + " is back (passed the health gate after a " + cooldown_text(cooldown_s) +
         " cooldown); it is a spare now (" + std::to_string(spares) + (spares == 1 ? " spare)" : " spares)");
}

std::string not_back_line(const std::string& host, const std::string& why, double next_s) {
  return host + " did not come back (" + why + "); it is tried again in " + cooldown_text(next_s);
}

}  // namespace dl::launcher
