#pragma once
// The launch tree's words for hosts lost or never started, in one place: the
// relaying agents and the launcher say them alike, and the tests and the
// chaos run read them (docs/design.md "The launch tree").
#include <string>
#include <vector>

namespace dl::control {

// `why`, then "; the 3 hosts beneath it (h5, h6, h7) were lost with it"
// (at most 8 named); `why` alone when `beneath` is empty.
std::string lost_with_beneath(const std::string& why, const std::vector<std::string>& beneath);
// A node lost because the agent on `relay`, through which it spoke, was:
// "lost with the agent on RELAY, which relayed for it (WHY)".
std::string lost_with_relay(const std::string& relay, const std::string& why);
// `why`, then "; the 2 hosts it was to start (h2, h3) were not started".
std::string not_started_beneath(const std::string& why, const std::vector<std::string>& beneath);

}  // namespace dl::control
