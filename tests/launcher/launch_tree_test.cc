// The launch tree's shape (launcher/launch_tree.h), pure: who starts whom at
// the sizes the design names, and the lists the agents are sent.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <numeric>

#include "launcher/launch_tree.h"

using dl::launcher::LaunchTree;

namespace {
std::vector<int> all(int n) {
  std::vector<int> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

// Children per node (the launcher as -1).
std::map<int, int> children(const LaunchTree& t, int n) {
  std::map<int, int> c;
  for (int i = 0; i < n; ++i) ++c[t.parent(i)];
  return c;
}
}  // namespace

TEST_CASE("launch tree: no more hosts than the fanout, or fanout 0, is flat", "[launcher][tree]") {
  for (auto t : {LaunchTree(all(32), 32, 32), LaunchTree(all(1000), 1000, 0)}) {
    CHECK(t.flat());
    CHECK(t.depth() == 1);
    CHECK(t.parent(5) == -1);
    CHECK(t.subtree(5).empty());
  }
}

TEST_CASE("launch tree: 1,024 hosts at fanout 32 are 32 roots of 31 leaves, depth 2", "[launcher][tree]") {
  LaunchTree t(all(1024), 1024, 32);
  CHECK(t.depth() == 2);
  auto c = children(t, 1024);
  CHECK(c[-1] == 32);
  for (int r = 0; r < 1024; r += 32) {
    CHECK(t.parent(r) == -1);
    CHECK(c[r] == 31);
    CHECK(t.parent(r + 31) == r);
  }
  const auto roots = t.roots_by_node();
  CHECK(roots[0] == -1);
  CHECK(roots[33] == 32);
  // A root's list: itself, then its 31 leaves.
  const auto sub = t.subtree(32);
  REQUIRE(sub.size() == 32);
  CHECK(sub[0].node == 32);
  CHECK(sub[0].below == 31);
  CHECK(sub[31].node == 63);
  CHECK(sub[31].below == 0);
}

TEST_CASE("launch tree: 8,192 hosts at fanout 32 are depth 3 and no agent starts more than 32", "[launcher][tree]") {
  LaunchTree t(all(8192), 8192, 32);
  CHECK(t.depth() == 3);
  for (auto [parent, count] : children(t, 8192)) CHECK(count <= 32);
  // Every node's root is an ancestor, and every node is beneath its root.
  const auto roots = t.roots_by_node();
  for (int n : {1, 100, 8191}) {
    const int r = roots[static_cast<size_t>(n)];
    REQUIRE(r >= 0);
    const auto under = t.beneath(r);
    CHECK(std::find(under.begin(), under.end(), n) != under.end());
  }
  // Each entry's `below` spans exactly its subtree.
  const auto sub = t.subtree(0);
  REQUIRE(sub.size() == 256);
  for (size_t i = 1; i < sub.size(); i += 1 + static_cast<size_t>(sub[i].below))
    CHECK(t.parent(sub[i].node) == 0);
}

TEST_CASE("launch tree: only the listed nodes are placed and the others stay the launcher's", "[launcher][tree]") {
  // Node 0 is the local one, forked by the launcher: not in the tree.
  std::vector<int> remote(all(10));
  remote.erase(remote.begin());
  LaunchTree t(remote, 10, 3);
  CHECK(t.parent(0) == -1);
  CHECK(t.roots_by_node()[0] == -1);
  CHECK(t.subtree(0).empty());
  CHECK(t.depth() == 2);
  CHECK(children(t, 10)[-1] == 1 + 3);  // node 0 and the three roots
}

TEST_CASE("launch tree: a node that leaves gives its place to the first node beneath it, which starts the rest",
          "[launcher][tree]") {
  SECTION("a root: the first host beneath it is a root now") {
    LaunchTree t(all(7), 7, 2);  // roots 0 and 4; 0 starts 1 (which starts 2) and 3; 4 starts 5 and 6
    REQUIRE(t.parent(2) == 1);
    CHECK(t.rehome(0) == 1);
    CHECK(t.parent(1) == -1);
    CHECK(t.parent(2) == 1);
    CHECK(t.parent(3) == 1);
    CHECK(t.parent(0) == -1);
    CHECK(!t.has_children(0));
    CHECK(t.subtree(0).empty());
    const auto sub = t.subtree(1);
    REQUIRE(sub.size() == 3);
    CHECK(sub[0].below == 2);
    CHECK(t.roots_by_node() == std::vector<int>{-1, -1, 1, 1, -1, 4, 4});
    CHECK(t.subtree(4).size() == 3);  // the other root's part is as it was
    CHECK(t.depth() == 2);
  }
  SECTION("an interior node beneath a root: its parent starts the new head") {
    LaunchTree t(all(8), 8, 2);  // 4 starts 5 (which starts 6) and 7
    REQUIRE(t.parent(6) == 5);
    REQUIRE(t.depth() == 3);
    CHECK(t.rehome(5) == 6);
    CHECK(t.parent(6) == 4);
    CHECK(!t.has_children(6));
    const auto sub = t.subtree(4);
    REQUIRE(sub.size() == 3);
    CHECK(sub[0].below == 2);
    CHECK(sub[1].node == 6);
    CHECK(sub[2].node == 7);
    CHECK(t.roots_by_node()[6] == 4);
    CHECK(t.subtree(0).size() == 4);  // the other root's part is as it was
  }
  SECTION("a leaf: nothing takes its place, its parent holds one fewer") {
    LaunchTree t(all(8), 8, 2);
    CHECK(t.rehome(7) == -1);
    CHECK(t.subtree(4).size() == 3);
    CHECK(t.beneath(4) == std::vector<int>{5, 6});
  }
  SECTION("a subtree of 7 beneath the node that leaves is dealt again by the fanout") {
    LaunchTree t(all(16), 16, 2);  // roots 0 and 8, each over 7
    REQUIRE(t.beneath(8).size() == 7);
    const int head = t.rehome(8);
    CHECK(head == 9);
    CHECK(t.beneath(9).size() == 6);
    auto c = children(t, 16);
    for (int n = 0; n < 16; ++n) CHECK(c[n] <= 2);
  }
}
