#pragma once
// The launch tree's shape (docs/design.md "The launch tree"), pure: which
// agents the launcher starts itself and which each agent starts in turn.
// With more hosts to start than the fanout F, the launcher starts F agents
// (the roots), and the remaining hosts are dealt to them in contiguous,
// balanced groups; each agent does the same with its own group, so no
// agent starts more than F others and the depth grows as log_F(hosts):
// 1,024 hosts at F = 32 are 32 roots of 31 leaves each (depth 2), 8,192
// are depth 3.
#include <cstddef>
#include <vector>

#include "control/messages.h"

namespace dl::launcher {

class LaunchTree {
 public:
  // Flat: every node started by the launcher.
  LaunchTree() = default;
  // `starts`: the nodes the launcher would start through a start method
  // that can be relayed, in node order; `nodes`: how many nodes the job
  // has; `fanout` F (0: flat). With no more than F nodes to start the tree
  // is flat.
  LaunchTree(const std::vector<int>& starts, size_t nodes, int fanout);

  // The agent that starts node `n`: -1 for the launcher.
  int parent(int n) const { return parent_.empty() ? -1 : parent_.at(static_cast<size_t>(n)); }
  // The node whose connection to the launcher carries `n`'s traffic (its
  // root), or -1 when `n` connects to the launcher itself. By node.
  std::vector<int> roots_by_node() const;
  // Node `n` and every node beneath it, in the StartAgents order: each
  // node followed by its subtree (TreeAgent::below); host, user and port
  // left for the caller to fill.
  std::vector<control::msg::TreeAgent> subtree(int n) const;
  // The nodes beneath `n` (not `n`).
  std::vector<int> beneath(int n) const;
  bool has_children(int n) const;
  // Node `n` leaves the tree (its host was lost and its seat went to a
  // spare, or the world shrank without it): the first node beneath it takes
  // its place, started by `n`'s parent (or the launcher), and the rest of
  // `n`'s subtree is dealt beneath that one as the tree deals a group.
  // Returns the new head, or -1 when nothing was beneath `n` (nothing
  // changes then but `n` leaving).
  int rehome(int n);
  // 1 for a flat launch; 2 when the roots start the rest; ...
  int depth() const { return depth_; }
  bool flat() const { return depth_ <= 1; }

 private:
  // Deals group[from, to) beneath `parent` into `out` (each head followed by its subtree).
  void place(const std::vector<int>& group, size_t from, size_t to, int parent, int level,
             std::vector<control::msg::TreeAgent>& out);
  int level(int n) const;

  std::vector<int> parent_;                   // by node
  std::vector<control::msg::TreeAgent> order_;  // every placed node, each followed by its subtree
  std::vector<int> pos_;                      // by node: its index in order_, -1 if not placed
  int depth_ = 1;
  int fanout_ = 0;
};

}  // namespace dl::launcher
