#include <catch2/catch.hpp>

#include "launcher/cooldown.h"

using namespace dl::launcher;

TEST_CASE("cooldown: each loss of a host doubles its cooldown, up to 32 times the base, and hosts count apart",
          "[launcher][cooldown][spares]") {
  ReturnCooldown c(20);
  CHECK(c.enabled());
  CHECK(c.losses("node3") == 0);
  CHECK(c.lost("node3") == 20);
  CHECK(c.lost("node3") == 40);
  CHECK(c.lost("node1") == 20);  // another host starts at the base
  CHECK(c.lost("node3") == 80);
  CHECK(c.lost("node3") == 160);
  CHECK(c.lost("node3") == 320);
  CHECK(c.lost("node3") == 640);  // 32 x 20: the cap
  for (int i = 0; i < 100; ++i) CHECK(c.lost("node3") == 640);
  CHECK(c.losses("node3") == 106);
  CHECK(c.losses("node1") == 1);
}

TEST_CASE("cooldown: 0 (the default) means a lost host never comes back", "[launcher][cooldown][spares]") {
  ReturnCooldown never;
  CHECK_FALSE(never.enabled());
  CHECK(never.lost("node3") == 0);
  CHECK(never.losses("node3") == 0);
  CHECK_FALSE(ReturnCooldown(-1).enabled());
}

TEST_CASE("cooldown: the lines name the host, the cooldown waited, the spares and the check's own words",
          "[launcher][cooldown][spares]") {
  CHECK(back_line("node3", 20, 2) ==
        "node3 is back (passed the health gate after a 20 s cooldown); it is a spare now (2 spares)");
  CHECK(back_line("n1", 0.5, 1) == "n1 is back (passed the health gate after a 0.5 s cooldown); it is a spare now (1 spare)");
  CHECK(not_back_line("node3", "failed the health check: GPU 3: ECC errors", 40) ==
        "node3 did not come back (failed the health check: GPU 3: ECC errors); it is tried again in 40 s");
  CHECK(cooldown_text(1280) == "1280 s");
  CHECK(cooldown_text(0.25) == "0.25 s");
}
