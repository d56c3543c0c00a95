#include "doctor/peer.h"

#include <signal.h>

#include <chrono>
#include <future>
#include <iostream>
#include <memory>
#include <string>

#include "doctor/facts.h"
#include "doctor/net_probe.h"
#include "doctor/peer_fan.h"
#include "doctor/peer_start.h"
#include "doctor/records.h"
#include "doctor/tree_records.h"
#include "errors/error.h"
#include "remote/sim_starter.h"
#include "wire/record.h"

namespace dl::doctor {

namespace {
using Millis = std::chrono::milliseconds;

[[noreturn]] void raise_usage(const std::string& what) { throw UsageError(what); }

Endpoint endpoint_of(const EndpointRecord& e) { return {e.ifname, e.addr, e.port}; }

// What one peer holds for the doctor's run: who it is (from its `tree`
// request), its listener once asked to listen, the peers it started.
struct PeerState {
  std::string token;
  std::string name;          // as the doctor's hostfile names this host
  std::string sim_address;   // the test bed's: this simulated host's own loopback address
  std::unique_ptr<Listener> listener;
  std::unique_ptr<PeerFan> fan;
};

ProbeReply probe_all(const ProbeRequest& req, const PeerState& st) {
  const Millis timeout(req.timeout_ms);
  std::vector<std::future<ProbeResult>> futures;
  for (const auto& t : req.targets)
    futures.push_back(std::async(std::launch::async, [t, &st, timeout] {
      const auto t0 = std::chrono::steady_clock::now();
      std::string err = probe(endpoint_of(t), t.name, st.token, timeout, st.sim_address);
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      return ProbeResult{err.empty(), err, ms};
    }));
  ProbeReply reply;
  for (auto& f : futures) reply.results.push_back(f.get());
  return reply;
}

ListenReply listen(const ListenRequest& req, PeerState& st) {
  if (!st.listener) {
    std::vector<Endpoint> only;
    if (!st.sim_address.empty()) only.push_back({"lo", st.sim_address, 0});
    st.listener = std::make_unique<Listener>(st.token, req.name.empty() ? st.name : req.name, only);
  }
  ListenReply reply;
  for (const auto& e : st.listener->endpoints()) reply.endpoints.push_back({"", e.ifname, e.addr, e.port});
  return reply;
}

LinkReply link(const LinkRequest& req, const PeerState& st) {
  const auto t0 = std::chrono::steady_clock::now();
  const LinkResult r =
      link_test({"", req.addr, req.port}, st.token, req.seconds, req.pings, Millis(req.timeout_ms), st.sim_address);
  return {r.latency_us, r.out_Bps, r.in_Bps, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()};
}

HostFacts facts(const FactsRequest& req, const PeerState& st) {
  HostFacts f = collect_facts(req);
  if (st.sim_address.empty()) return f;
  f.hostname = st.name;  // a simulated host is named as the hostfile names it
  if (const char* plants = std::getenv(kSimHostEnv))
    for (const auto& e : sim_environment({}, plants, st.name)) {
      const std::string var = e.substr(0, e.find('='));
      if (f.env.count(var)) f.env[var] = e.substr(var.size() + 1);
    }
  return f;
}

// The request of type Request in `line` (checked JSON).
template <class Request> Request request(const std::string& line) {
  Request r{};
  wire::read_checked_record(line, {"the doctor's '" + std::string(Request::kOp) + "' request", &raise_usage}, r);
  return r;
}

TreeReply tree(const TreeRequest& req, PeerState& st) {
  if (st.fan) throw UsageError("this peer was given its place in the doctor's tree already");
  st.name = req.self.name;
  if (req.sim) st.sim_address = remote::sim_address(req.self.node);
  st.fan = std::make_unique<PeerFan>(st.token, st.name);
  return {st.fan->start(req.below, req.how, req.sim)};
}

std::string handle(const std::string& line, PeerState& st);

// This peer's own answer, in a route: its reply, or the error it gave.
RouteAnswer own_answer(int node, const std::string& line, PeerState& st) {
  std::string reply;
  try {
    reply = handle(line, st);
  } catch (const std::exception& e) {
    reply = wire::encode_record(ErrorReply{e.what()});
  }
  if (auto error = wire::check_object(reply, {"a reply"}, "error")) return {{node}, "", st.name + ": " + *error};
  return {{node}, std::move(reply), ""};
}

RouteReply route(RouteRequest below, int self, PeerState& st) {
  // This peer's own request runs here, beside the children's.
  std::string own;
  std::erase_if(below.calls, [&](RouteCall& c) { return c.node == self && (own = std::move(c.line), true); });
  if (std::erase(below.nodes, self)) own = below.every;
  const bool relays = st.fan && (!below.calls.empty() || !below.nodes.empty());
  std::vector<RouteAnswer> answers;
  if (!relays) {  // a leaf, or nothing beneath this time: no thread to make
    if (!own.empty()) answers.push_back(own_answer(self, own, st));
    return {merge_answers(std::move(answers))};
  }
  std::future<RouteAnswer> mine;
  if (!own.empty() && below.at_once == 1) {
    // One at a time: its own first, then the children's in turn.
    answers.push_back(own_answer(self, own, st));
    own.clear();
  } else if (!own.empty()) {
    if (below.at_once > 1) --below.at_once;  // its own takes one of them
    mine = std::async(std::launch::async, [&] { return own_answer(self, own, st); });
  }
  auto beneath = st.fan->route(std::move(below));
  answers.insert(answers.end(), std::make_move_iterator(beneath.begin()), std::make_move_iterator(beneath.end()));
  if (mine.valid()) answers.push_back(mine.get());
  return {merge_answers(std::move(answers))};
}

std::string handle(const std::string& line, PeerState& st) {
  const std::string op = wire::check_object(line, {"the doctor's request", &raise_usage}, "op").value_or("");
  if (op == FactsRequest::kOp) return wire::encode_record(facts(request<FactsRequest>(line), st));
  if (op == ClockRequest::kOp)
    return wire::encode_record(ClockReply{std::chrono::duration_cast<std::chrono::nanoseconds>(
                                              std::chrono::system_clock::now().time_since_epoch()).count()});
  if (op == ListenRequest::kOp) return wire::encode_record(listen(request<ListenRequest>(line), st));
  if (op == ProbeRequest::kOp) return wire::encode_record(probe_all(request<ProbeRequest>(line), st));
  if (op == LinkRequest::kOp) return wire::encode_record(link(request<LinkRequest>(line), st));
  if (op == TreeRequest::kOp) return wire::encode_record(tree(request<TreeRequest>(line), st));
  if (op == ClocksRequest::kOp) return wire::encode_record(ClocksReply{st.fan ? st.fan->clocks() : std::vector<ClockNote>{}});
  return wire::encode_record(
      ErrorReply{"the doctor's peer knows no request '" + op + "' (is dlaunch there the same version?)"});
}
}  // namespace

int run_peer() {
  ::signal(SIGPIPE, SIG_IGN);
  PeerState st;
  if (!std::getline(std::cin, st.token) || st.token.empty()) {
    std::cerr << "dlaunch doctor --peer: no token on stdin (this mode is started by `dlaunch doctor`)\n";
    return 2;
  }
  int self = -1;
  for (std::string line; std::getline(std::cin, line);) {
    std::string reply;
    try {
      const std::string op = wire::check_object(line, {"the doctor's request", &raise_usage}, "op").value_or("");
      if (op == RouteRequest::kOp) {
        reply = wire::encode_record(route(request<RouteRequest>(line), self, st));
      } else {
        if (op == TreeRequest::kOp) self = request<TreeRequest>(line).self.node;
        reply = handle(line, st);
      }
    } catch (const std::exception& e) {
      reply = wire::encode_record(ErrorReply{e.what()});
    }
    std::cout << reply << "\n" << std::flush;
  }
  // EOF: the doctor (or this peer's parent) is gone; the peers beneath go too.
  st.fan.reset();
  st.listener.reset();
  return 0;
}

}  // namespace dl::doctor
