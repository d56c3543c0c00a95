#include <catch2/catch.hpp>

#include <map>
#include <random>

#include "errors/error.h"
#include "hostfiles/placement.h"

using namespace dl::hostfiles;

namespace {
// "a a b" : the host name of each rank in rank order.
std::string layout(const Placement& p) {
  std::string s;
  for (const auto& r : p.ranks) s += (s.empty() ? "" : " ") + p.nodes[r.node].host;
  return s;
}
std::string local_ranks(const Placement& p) {
  std::string s;
  for (const auto& r : p.ranks) s += std::to_string(r.local_rank);
  return s;
}
std::string usage_error_of(const std::vector<HostEntry>& hosts, PlacementOptions o) {
  try {
    place(hosts, o);
  } catch (const dl::UsageError& e) {
    return e.what();
  }
  return "(no UsageError)";
}
PlacementOptions opts(int np, MapBy by = MapBy::kSlot, int ppn = 0, bool over = false) {
  return PlacementOptions{np, by, ppn, over};
}
}  // namespace

TEST_CASE("map by slot fills each host before the next", "[hostfiles]") {
  auto hosts = parse_host_list("a:2,b:3");
  auto p = place(hosts, opts(4));
  CHECK(layout(p) == "a a b b");
  CHECK(local_ranks(p) == "0101");
  CHECK(p.local_size == std::vector<int>{2, 2});
  CHECK(layout(place(hosts, opts(0))) == "a a b b b");
  auto two = place(hosts, opts(2));
  REQUIRE(two.nodes.size() == 1);
  CHECK(two.nodes[0].host == "a");
}

TEST_CASE("map by node deals ranks round-robin", "[hostfiles]") {
  auto hosts = parse_host_list("a:2,b:3,c:1");
  auto p = place(hosts, opts(6, MapBy::kNode));
  CHECK(layout(p) == "a b c a b b");
  CHECK(local_ranks(p) == "000112");
  CHECK(p.local_size == std::vector<int>{2, 3, 1});
  CHECK(layout(place(hosts, opts(2, MapBy::kNode))) == "a b");
}

TEST_CASE("per_node caps each host and sets np when np is 0", "[hostfiles]") {
  auto hosts = parse_host_list("a:4,b:4");
  CHECK(layout(place(hosts, opts(3, MapBy::kSlot, 2))) == "a a b");
  CHECK(layout(place(hosts, opts(0, MapBy::kSlot, 2))) == "a a b b");
  CHECK(layout(place(hosts, opts(0, MapBy::kNode, 1))) == "a b");
  // Bare hosts: their one slot was a guess, so --npernode decides.
  auto bare = place(parse_host_list("h1,h2"), opts(0, MapBy::kSlot, 3));
  CHECK(layout(bare) == "h1 h1 h1 h2 h2 h2");
  CHECK(usage_error_of(hosts, opts(5, MapBy::kSlot, 2)) ==
        "5 ranks requested but --npernode 2 on 2 hosts allows at most 4; add hosts, lower -n, or raise --npernode");
  CHECK(usage_error_of(parse_hostfile_text("a slots=2\nb slots=4\n", "hosts"), opts(0, MapBy::kSlot, 3)) ==
        "6 ranks requested but the hostfile 'hosts' gives 5 slots at --npernode 3 (a: 2, b: 3); add hosts, lower "
        "-n, or pass --oversubscribe");
  CHECK(layout(place(parse_hostfile_text("a slots=2\nb slots=4\n", "hosts"), opts(0, MapBy::kSlot, 3, true))) ==
        "a a a b b b");
}

TEST_CASE("too many ranks says how many slots exist and where", "[hostfiles]") {
  auto hosts = parse_hostfile_text("node1 slots=2\nnode2 slots=4\n", "hosts");
  CHECK(usage_error_of(hosts, opts(8)) ==
        "8 ranks requested but the hostfile 'hosts' gives 6 slots (node1: 2, node2: 4); add hosts, lower -n, or "
        "pass --oversubscribe");
  CHECK(usage_error_of(hosts, opts(7, MapBy::kNode)).rfind("7 ranks requested but the hostfile 'hosts'", 0) == 0);
  CHECK(usage_error_of(parse_host_list("h1,h2"), opts(3)) ==
        "3 ranks requested but the -H list gives 2 slots (h1: 1, h2: 1); add hosts, lower -n, or pass "
        "--oversubscribe");
  auto many = parse_host_list("n[1-10]");
  CHECK(usage_error_of(many, opts(11)) ==
        "11 ranks requested but the -H list gives 10 slots (n1: 1, n2: 1, n3: 1, n4: 1, n5: 1, n6: 1, n7: 1, n8: 1, "
        "and 2 more); add hosts, lower -n, or pass --oversubscribe");
}

TEST_CASE("oversubscribe wraps round but never past max_slots", "[hostfiles]") {
  auto even = parse_host_list("a:2,b:2");
  CHECK(layout(place(even, opts(6, MapBy::kSlot, 0, true))) == "a a a b b b");
  CHECK(layout(place(even, opts(7, MapBy::kSlot, 0, true))) == "a a a a b b b");
  CHECK(layout(place(parse_host_list("a:1,b:2"), opts(5, MapBy::kNode, 0, true))) == "a b b a b");
  auto capped = parse_hostfile_text("a slots=2 max_slots=3\nb slots=2\n", "hosts");
  CHECK(layout(place(capped, opts(8, MapBy::kSlot, 0, true))) == "a a a b b b b b");
  CHECK(layout(place(capped, opts(7, MapBy::kNode, 0, true))) == "a b a b a b b");
  auto tight = parse_hostfile_text("a slots=2 max_slots=3\nb max_slots=2\n", "hosts");
  CHECK(usage_error_of(tight, opts(6, MapBy::kSlot, 0, true)) ==
        "6 ranks requested but max_slots in the hostfile 'hosts' allows at most 5 even with --oversubscribe (a: 3, "
        "b: 2); add hosts or lower -n");
  CHECK(layout(place(tight, opts(5, MapBy::kSlot, 0, true))) == "a a a b b");
}

TEST_CASE("bad placement requests are usage errors", "[hostfiles]") {
  auto hosts = parse_host_list("a:2");
  CHECK(usage_error_of({}, opts(1)) ==
        "no hosts to place ranks on; give --hostfile or -H, or neither to run on this host");
  CHECK(usage_error_of(hosts, opts(-1)) == "-n must be a positive number of ranks, got -1");
  CHECK(usage_error_of(hosts, opts(1, MapBy::kSlot, -2)) == "--npernode must be positive, got -2");
  CHECK_THROWS_AS(place_local(0, 1), dl::UsageError);
}

TEST_CASE("place_local puts every rank on localhost, its slots the CPUs however many ranks", "[hostfiles]") {
  auto p = place_local(4, 2);
  REQUIRE(p.nodes.size() == 1);
  CHECK(p.nodes[0].host == "localhost");
  CHECK(p.nodes[0].slots == 2);  // 4 ranks on 2 slots: no oversubscription error
  CHECK(p.nodes[0].origin == kLocalCpusOrigin);
  CHECK(place_local(1, 0).nodes[0].slots == 1);
  CHECK(p.local_size == std::vector<int>{4});
  CHECK(layout(p) == "localhost localhost localhost localhost");
  CHECK(local_ranks(p) == "0123");
}

TEST_CASE("placements keep their invariants over random host lists", "[hostfiles]") {
  std::mt19937 rng(12345);
  for (int trial = 0; trial < 500; ++trial) {
    std::vector<HostEntry> hosts;
    int n_hosts = 1 + static_cast<int>(rng() % 6);
    for (int i = 0; i < n_hosts; ++i) {
      HostEntry h;
      h.host = "h" + std::to_string(i);
      h.slots = 1 + static_cast<int>(rng() % 4);
      h.slots_given = rng() % 4 != 0;
      h.max_slots = rng() % 3 == 0 ? h.slots + static_cast<int>(rng() % 3) : 0;
      hosts.push_back(h);
    }
    PlacementOptions o{static_cast<int>(rng() % 20), rng() % 2 ? MapBy::kSlot : MapBy::kNode,
                       rng() % 3 == 0 ? 1 + static_cast<int>(rng() % 4) : 0, rng() % 2 == 0};
    Placement p;
    try {
      p = place(hosts, o);
    } catch (const dl::UsageError&) {
      continue;
    }
    INFO("trial " << trial);
    if (o.np > 0) CHECK(static_cast<int>(p.ranks.size()) == o.np);
    std::map<std::string, const HostEntry*> by_name;
    for (const auto& h : hosts) by_name[h.host] = &h;
    std::vector<int> seen(p.nodes.size(), 0);
    for (std::size_t r = 0; r < p.ranks.size(); ++r) {
      const auto& rp = p.ranks[r];
      CHECK(rp.rank == static_cast<int>(r));
      REQUIRE(rp.node >= 0);
      REQUIRE(rp.node < static_cast<int>(p.nodes.size()));
      CHECK(rp.local_rank == seen[rp.node]++);  // dense, in global rank order
    }
    std::size_t last = 0;
    for (std::size_t n = 0; n < p.nodes.size(); ++n) {
      const HostEntry& h = *by_name.at(p.nodes[n].host);
      std::size_t index = static_cast<std::size_t>(&h - hosts.data());
      if (n > 0) CHECK(index > last);  // hostfile order
      last = index;
      CHECK(seen[n] > 0);
      CHECK(p.local_size[n] == seen[n]);
      if (h.max_slots) CHECK(seen[n] <= h.max_slots);
      if (o.per_node) CHECK(seen[n] <= o.per_node);
      if (!o.oversubscribe && (h.slots_given || !o.per_node)) CHECK(seen[n] <= h.slots);
    }
  }
}

TEST_CASE("the worked example in docs/hostfiles.md holds", "[hostfiles]") {
  auto hosts = parse_hostfile_text("a slots=2 max_slots=3\nb slots=2\n", "hosts");
  CHECK(layout(place(hosts, opts(4))) == "a a b b");
  CHECK(local_ranks(place(hosts, opts(4))) == "0101");
  CHECK(layout(place(hosts, opts(3, MapBy::kNode))) == "a b a");
  CHECK(local_ranks(place(hosts, opts(3, MapBy::kNode))) == "001");
  CHECK(layout(place(hosts, opts(2, MapBy::kSlot, 1))) == "a b");
  CHECK_THROWS_AS(place(hosts, opts(5)), dl::UsageError);
  CHECK(local_ranks(place(hosts, opts(8, MapBy::kSlot, 0, true))) == "01201234");
  CHECK(local_ranks(place(hosts, opts(7, MapBy::kNode, 0, true))) == "0011223");
}
