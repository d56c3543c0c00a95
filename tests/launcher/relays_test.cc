// The launcher's MPI relays on their own, without agents or sockets: fences
// across hosts (launcher/mpi/fence_relay.h) and PMIx connect/disconnect sets
// (launcher/mpi/connect_relay.h). Timers run on a real io_context.
#include <catch2/catch.hpp>

#include <boost/asio.hpp>
#include <chrono>
#include <string>
#include <tuple>
#include <vector>

#include "errors/error.h"
#include "launcher/mpi/connect_relay.h"
#include "launcher/mpi/fence_relay.h"

using namespace std::chrono_literals;
using dl::launcher::ConnectRelay;
using dl::launcher::FenceRelay;
namespace msg = dl::control::msg;

namespace {
// Runs `io` until it has nothing left to do, or `limit` passed.
void drain(boost::asio::io_context& io, std::chrono::milliseconds limit) {
  io.restart();
  io.run_for(limit);
}

msg::MpiConnect connect_msg(uint64_t id, std::vector<std::string> procs, std::string blob, std::string op = "connect") {
  msg::MpiConnect m;
  m.id = id, m.op = std::move(op), m.procs = std::move(procs), m.blob = std::move(blob);
  return m;
}
}  // namespace

TEST_CASE("fence relay: every host's blob, in node order, to every host once the last one joins",
          "[launcher][mpi]") {
  boost::asio::io_context io;
  std::vector<std::pair<uint64_t, std::string>> done;
  int timeouts = 0;
  FenceRelay relay(io, {"n0", "n1", "n2"}, {{0, 1}, {2}, {3}}, 10s,
                   {[&](uint64_t id, const std::string& all) { done.emplace_back(id, all); },
                    [&](uint64_t, const std::string&) { ++timeouts; }});
  relay.contribute(2, 7, "c");
  relay.contribute(0, 7, "a");
  relay.contribute(1, 9, "x");  // another fence meanwhile
  CHECK(done.empty());
  CHECK(relay.pending() == 2);
  relay.contribute(1, 7, "b");
  REQUIRE(done.size() == 1);
  CHECK(done[0] == std::make_pair(uint64_t{7}, std::string("abc")));  // node order, not arrival order
  CHECK(relay.pending() == 1);
  CHECK_THROWS_AS(relay.contribute(1, 9, "again"), dl::RemoteError);  // a host joins a fence once
  CHECK_THROWS_AS(relay.contribute(3, 9, "?"), dl::RemoteError);      // no node 3
  drain(io, 50ms);
  CHECK(timeouts == 0);  // the completed fence's timer was cancelled
}

TEST_CASE("fence relay: a fence not joined in time names the hosts and ranks that never came", "[launcher][mpi]") {
  boost::asio::io_context io;
  std::vector<std::pair<uint64_t, std::string>> missing;
  bool completed = false;
  FenceRelay relay(io, {"n0", "n1", "n2"}, {{0, 1}, {2, 3}, {4}}, 50ms,
                   {[&](uint64_t, const std::string&) { completed = true; },
                    [&](uint64_t id, const std::string& m) { missing.emplace_back(id, m); }});
  relay.contribute(1, 3, "b");
  drain(io, 2s);
  REQUIRE(missing.size() == 1);
  CHECK(missing[0] == std::make_pair(uint64_t{3}, std::string("n0 (ranks 0,1); n2 (ranks 4)")));
  CHECK_FALSE(completed);
  CHECK(relay.pending() == 0);
  relay.contribute(0, 3, "late");  // a late host starts the fence anew, never completing the expired one
  CHECK_FALSE(completed);
}

TEST_CASE("connect relay: every asker answered with all blobs once each host holding a process asked",
          "[launcher][mpi]") {
  boost::asio::io_context io;
  std::vector<std::tuple<int, uint64_t, std::string, std::string>> answers;
  int timeouts = 0;
  ConnectRelay relay(io, 10s,
                     {[&](int node, uint64_t id, const std::string& blob, const std::string& error) {
                        answers.emplace_back(node, id, blob, error);
                      },
                      [&](const std::string&, const std::vector<int>&) { ++timeouts; }});
  // The same set, its processes listed in another order by each host.
  relay.join(2, connect_msg(41, {"dl-x.spawn1:*", "dl-x:*"}, "C"), {0, 2});
  CHECK(answers.empty());
  relay.join(0, connect_msg(17, {"dl-x:*", "dl-x.spawn1:*"}, "A"), {0, 2});
  REQUIRE(answers.size() == 2);
  CHECK(answers[0] == std::make_tuple(0, uint64_t{17}, std::string("AC"), std::string()));
  CHECK(answers[1] == std::make_tuple(2, uint64_t{41}, std::string("AC"), std::string()));
  CHECK(relay.pending() == 0);
  // A disconnect of the same processes is another set.
  relay.join(0, connect_msg(18, {"dl-x:*"}, "", "disconnect"), {0});
  CHECK(answers.size() == 3);
  CHECK(ConnectRelay::describe(connect_msg(1, {"b:*", "a:*"}, "")) == "connect of a:*, b:*");
  drain(io, 50ms);
  CHECK(timeouts == 0);
}

TEST_CASE("connect relay: a set not complete in time fails its askers and names the hosts not heard from",
          "[launcher][mpi]") {
  boost::asio::io_context io;
  std::vector<std::tuple<int, uint64_t, std::string>> errors;
  std::vector<int> missing;
  std::string what;
  ConnectRelay relay(io, 50ms,
                     {[&](int node, uint64_t id, const std::string&, const std::string& error) {
                        errors.emplace_back(node, id, error);
                      },
                      [&](const std::string& w, const std::vector<int>& m) { what = w, missing = m; }});
  relay.join(1, connect_msg(5, {"dl-y:*", "dl-z:*"}, "B"), {0, 1, 3});
  drain(io, 2s);
  REQUIRE(errors.size() == 1);
  CHECK(std::get<0>(errors[0]) == 1);
  CHECK(std::get<1>(errors[0]) == 5);
  CHECK(std::get<2>(errors[0]) == "timed out: not every host joined the connect of dl-y:*, dl-z:*");
  CHECK(what == "connect of dl-y:*, dl-z:*");
  CHECK(missing == std::vector<int>{0, 3});
  CHECK(relay.pending() == 0);
}
