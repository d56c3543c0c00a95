#include <catch2/catch.hpp>

#include "launcher/seats.h"

using namespace dl::launcher;

TEST_CASE("seats: each seat of a lost host takes the next spare, in node-rank order", "[launcher][seats][spares]") {
  std::vector<int> seats{0, 1, 2, 3}, spares{4, 5};
  const auto moves = fill_from_spares(seats, {3, 1}, spares);
  REQUIRE(moves.size() == 2);
  CHECK(moves[0].seat == 1);
  CHECK(moves[0].from == 1);
  CHECK(moves[0].to == 4);
  CHECK(moves[1].seat == 3);
  CHECK(moves[1].to == 5);
  CHECK(seats == std::vector<int>{0, 4, 2, 5});
  CHECK(spares.empty());
}

TEST_CASE("seats: more lost hosts than spares: the first seats are filled, the rest stay", "[launcher][seats][spares]") {
  std::vector<int> seats{0, 1, 2}, spares{3};
  const auto moves = fill_from_spares(seats, {0, 2}, spares);
  REQUIRE(moves.size() == 1);
  CHECK(moves[0].seat == 0);
  CHECK(seats == std::vector<int>{3, 1, 2});
  std::vector<int> none;
  CHECK(fill_from_spares(seats, {1}, none).empty());
  CHECK(seats == std::vector<int>{3, 1, 2});
  std::vector<int> left{7};
  CHECK(fill_from_spares(seats, {}, left).empty());  // nothing lost: nothing moves
  CHECK(left == std::vector<int>{7});
}

TEST_CASE("seats: the lines name the lost host, its ranks as ranges and the spare", "[launcher][seats][spares]") {
  CHECK(moved_line("node3", "no heartbeat for 10 s", {6, 7}, "node5") ==
        "node3 lost (no heartbeat for 10 s); its ranks 6-7 moved to spare node5");
  CHECK(moved_line("n1", "", {4}, "n9") == "n1 lost; its rank 4 moved to spare n9");
  CHECK(moved_line("n1", "reset", {0, 1, 2, 5}, "") == "n1 lost (reset); no spare left: a new agent is started there");
  CHECK(moved_line("n1", "x", {0, 1, 2, 5}, "n2").find("ranks 0-2, 5") != std::string::npos);
  CHECK(spares_left(0) == "; no spare left");
  CHECK(spares_left(1) == "; 1 spare left");
  CHECK(spares_left(3) == "; 3 spares left");
}
