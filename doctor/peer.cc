#include "doctor/peer.h"

#include <signal.h>

#include <chrono>
#include <future>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "doctor/facts.h"
#include "doctor/net_probe.h"

namespace dl::doctor {

namespace {
using Millis = std::chrono::milliseconds;

Endpoint endpoint_of(const nlohmann::json& j) {
  return {j.value("ifname", ""), j.value("addr", ""), j.value("port", uint16_t{0})};
}

nlohmann::json probe_all(const nlohmann::json& req, const std::string& token) {
  const Millis timeout(req.value("timeout_ms", 3000));
  std::vector<std::future<nlohmann::json>> futures;
  for (const auto& t : req.value("targets", nlohmann::json::array()))
    futures.push_back(std::async(std::launch::async, [t, &token, timeout] {
      const auto t0 = std::chrono::steady_clock::now();
      std::string err = probe(endpoint_of(t), t.value("name", ""), token, timeout);
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      return nlohmann::json{{"ok", err.empty()}, {"error", err}, {"ms", ms}};
    }));
  nlohmann::json results = nlohmann::json::array();
  for (auto& f : futures) results.push_back(f.get());
  return {{"results", results}};
}

nlohmann::json handle(const nlohmann::json& req, const std::string& token, std::unique_ptr<Listener>& listener) {
  const std::string op = req.value("op", "");
  if (op == "facts") return collect_facts(req);
  if (op == "clock")
    return {{"time_ns", std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::system_clock::now().time_since_epoch()).count()}};
  if (op == "listen") {
    if (!listener) listener = std::make_unique<Listener>(token, req.value("name", ""));
    nlohmann::json eps = nlohmann::json::array();
    for (const auto& e : listener->endpoints()) eps.push_back({{"ifname", e.ifname}, {"addr", e.addr}, {"port", e.port}});
    return {{"endpoints", eps}};
  }
  if (op == "probe") return probe_all(req, token);
  if (op == "link") {
    LinkResult r = link_test(endpoint_of(req), token, req.value("seconds", 0.25), req.value("pings", 20),
                             Millis(req.value("timeout_ms", 5000)));
    return {{"latency_us", r.latency_us}, {"out_Bps", r.out_Bps}, {"in_Bps", r.in_Bps}};
  }
  return {{"error", "the doctor's peer knows no request '" + op + "' (is dlaunch there the same version?)"}};
}
}  // namespace

int run_peer() {
  ::signal(SIGPIPE, SIG_IGN);
  std::string token;
  if (!std::getline(std::cin, token) || token.empty()) {
    std::cerr << "dlaunch doctor --peer: no token on stdin (this mode is started by `dlaunch doctor`)\n";
    return 2;
  }
  std::unique_ptr<Listener> listener;
  for (std::string line; std::getline(std::cin, line);) {
    nlohmann::json reply;
    try {
      auto req = nlohmann::json::parse(line);
      reply = handle(req, token, listener);
    } catch (const std::exception& e) {
      reply = {{"error", e.what()}};
    }
    std::cout << reply.dump() << "\n" << std::flush;
  }
  return 0;
}

}  // namespace dl::doctor
