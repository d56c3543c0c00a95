// A job's ranks reach its store through their agent's door (agent/
// store_door_service.h): the real dlaunch, agent and dlaunch-hello, whose
// ranks meet at a barrier in the store, and what the store server logs of
// its connections (-v).
#include <sys/stat.h>

#include <catch2/catch.hpp>

#include <set>
#include <sstream>

#include "tests/integration/run_command.h"

using namespace dl::it;

namespace {
size_t count_lines(const std::string& text, const std::string& part) {
  std::istringstream in(text);
  size_t n = 0;
  for (std::string line; std::getline(in, line);) n += line.find(part) != std::string::npos;
  return n;
}
}  // namespace

TEST_CASE("store door: six ranks pass a barrier in the store over one connection from their host",
          "[integration]") {
  RunSpec s;
  s.argv = {bin("dlaunch"), "-v", "-n", "6", "--gpus-per-node", "0", bin("dlaunch-hello")};
  RunResult r = run(s, 60);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK(count_lines(r.out, "passed the barrier with all 6 ranks") == 6);
  CHECK(count_lines(r.err, "is a host's store/2 link") == 1);
  CHECK(count_lines(r.err, "is a store/1 client") == 0);
}

TEST_CASE("store door: each rank is told its host's door and the agent removes it at the end", "[integration]") {
  RunSpec s;
  s.argv = {bin("dlaunch"), "-n", "3", "--gpus-per-node", "0", "/bin/sh", "-c", "echo door=$DLAUNCH_STORE_DOOR"};
  RunResult r = run(s, 60);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  std::set<std::string> doors;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);)
    if (auto at = line.find("door="); at != std::string::npos) doors.insert(line.substr(at + 5));
  REQUIRE(doors.size() == 1);
  const std::string door = *doors.begin();
  CHECK(door.find("/dlaunch-") != std::string::npos);
  CHECK(door.find("-store-") != std::string::npos);
  struct stat st{};
  CHECK(::stat(door.substr(0, door.rfind('/')).c_str(), &st) != 0);  // the agent removed its directory
}
