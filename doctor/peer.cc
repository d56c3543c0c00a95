#include "doctor/peer.h"

#include <signal.h>

#include <chrono>
#include <future>
#include <iostream>
#include <memory>
#include <string>

#include "doctor/facts.h"
#include "doctor/net_probe.h"
#include "doctor/records.h"
#include "errors/error.h"
#include "wire/record.h"

namespace dl::doctor {

namespace {
using Millis = std::chrono::milliseconds;

[[noreturn]] void raise_usage(const std::string& what) { throw UsageError(what); }

Endpoint endpoint_of(const EndpointRecord& e) { return {e.ifname, e.addr, e.port}; }

ProbeReply probe_all(const ProbeRequest& req, const std::string& token) {
  const Millis timeout(req.timeout_ms);
  std::vector<std::future<ProbeResult>> futures;
  for (const auto& t : req.targets)
    futures.push_back(std::async(std::launch::async, [t, &token, timeout] {
      const auto t0 = std::chrono::steady_clock::now();
      std::string err = probe(endpoint_of(t), t.name, token, timeout);
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      return ProbeResult{err.empty(), err, ms};
    }));
  ProbeReply reply;
  for (auto& f : futures) reply.results.push_back(f.get());
  return reply;
}

ListenReply listen(const ListenRequest& req, const std::string& token, std::unique_ptr<Listener>& listener) {
  if (!listener) listener = std::make_unique<Listener>(token, req.name);
  ListenReply reply;
  for (const auto& e : listener->endpoints()) reply.endpoints.push_back({"", e.ifname, e.addr, e.port});
  return reply;
}

LinkReply link(const LinkRequest& req, const std::string& token) {
  const LinkResult r = link_test({"", req.addr, req.port}, token, req.seconds, req.pings, Millis(req.timeout_ms));
  return {r.latency_us, r.out_Bps, r.in_Bps};
}

// The request of type Request in `line` (checked JSON).
template <class Request> Request request(const std::string& line) {
  Request r{};
  wire::read_checked_record(line, {"the doctor's '" + std::string(Request::kOp) + "' request", &raise_usage}, r);
  return r;
}

std::string handle(const std::string& line, const std::string& token, std::unique_ptr<Listener>& listener) {
  const std::string op = wire::check_object(line, {"the doctor's request", &raise_usage}, "op").value_or("");
  if (op == FactsRequest::kOp) return wire::encode_record(collect_facts(request<FactsRequest>(line)));
  if (op == ClockRequest::kOp)
    return wire::encode_record(ClockReply{std::chrono::duration_cast<std::chrono::nanoseconds>(
                                              std::chrono::system_clock::now().time_since_epoch()).count()});
  if (op == ListenRequest::kOp) return wire::encode_record(listen(request<ListenRequest>(line), token, listener));
  if (op == ProbeRequest::kOp) return wire::encode_record(probe_all(request<ProbeRequest>(line), token));
  if (op == LinkRequest::kOp) return wire::encode_record(link(request<LinkRequest>(line), token));
  return wire::encode_record(
      ErrorReply{"the doctor's peer knows no request '" + op + "' (is dlaunch there the same version?)"});
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
    std::string reply;
    try {
      reply = handle(line, token, listener);
    } catch (const std::exception& e) {
      reply = wire::encode_record(ErrorReply{e.what()});
    }
    std::cout << reply << "\n" << std::flush;
  }
  return 0;
}

}  // namespace dl::doctor
