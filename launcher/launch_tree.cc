#include "launcher/launch_tree.h"

#include <algorithm>

namespace dl::launcher {

LaunchTree::LaunchTree(const std::vector<int>& starts, size_t nodes, int fanout)
    : parent_(nodes, -1), pos_(nodes, -1), fanout_(fanout) {
  if (fanout <= 0 || starts.size() <= static_cast<size_t>(fanout)) return;
  place(starts, 0, starts.size(), -1, 1, order_);
}

// Deals group[from, to) to at most `fanout_` heads under `parent`, each head
// followed by its share, which it deals again.
void LaunchTree::place(const std::vector<int>& group, size_t from, size_t to, int parent, int level,
                       std::vector<control::msg::TreeAgent>& out) {
  const size_t n = to - from;
  if (n == 0) return;
  depth_ = std::max(depth_, level);
  const size_t heads = std::min(n, static_cast<size_t>(fanout_));
  size_t at = from;
  for (size_t h = 0; h < heads; ++h) {
    const size_t size = n / heads + (h < n % heads ? 1 : 0);  // this head and its share
    const int head = group[at];
    parent_.at(static_cast<size_t>(head)) = parent;
    pos_.at(static_cast<size_t>(head)) = static_cast<int>(out.size());
    control::msg::TreeAgent a;
    a.node = head;
    a.below = static_cast<int>(size - 1);
    out.push_back(a);
    place(group, at + 1, at + size, head, level + 1, out);
    at += size;
  }
}

int LaunchTree::level(int n) const {
  int l = 1;
  for (int p = parent(n); p >= 0; p = parent(p)) ++l;
  return l;
}

int LaunchTree::rehome(int n) {
  if (pos_.empty() || pos_.at(static_cast<size_t>(n)) < 0) return -1;
  const auto at = static_cast<size_t>(pos_[static_cast<size_t>(n)]);
  const int below = order_[at].below;
  const int up = parent_[static_cast<size_t>(n)];
  // Every node above `n` holds one node fewer beneath it.
  for (int p = up; p >= 0; p = parent_[static_cast<size_t>(p)]) --order_[static_cast<size_t>(pos_[static_cast<size_t>(p)])].below;
  std::vector<int> group;
  for (size_t i = at + 1; i <= at + static_cast<size_t>(below); ++i) group.push_back(order_[i].node);
  std::vector<control::msg::TreeAgent> fresh;
  int head = -1;
  if (!group.empty()) {
    head = group.front();
    parent_[static_cast<size_t>(head)] = up;
    fresh.push_back({});
    fresh.back().node = head, fresh.back().below = below - 1;
    place(group, 1, group.size(), head, level(head) + 1, fresh);
  }
  order_.erase(order_.begin() + static_cast<long>(at), order_.begin() + static_cast<long>(at) + 1 + below);
  order_.insert(order_.begin() + static_cast<long>(at), fresh.begin(), fresh.end());
  parent_[static_cast<size_t>(n)] = -1;
  std::fill(pos_.begin(), pos_.end(), -1);
  for (size_t i = 0; i < order_.size(); ++i) pos_[static_cast<size_t>(order_[i].node)] = static_cast<int>(i);
  depth_ = 1;
  for (const auto& a : order_) depth_ = std::max(depth_, level(a.node));
  return head;
}

std::vector<int> LaunchTree::roots_by_node() const {
  std::vector<int> root(parent_.size(), -1);
  for (size_t n = 0; n < parent_.size(); ++n) {
    if (parent_[n] < 0) continue;
    int r = static_cast<int>(n);
    while (parent_[static_cast<size_t>(r)] >= 0) r = parent_[static_cast<size_t>(r)];
    root[n] = r;
  }
  return root;
}

std::vector<control::msg::TreeAgent> LaunchTree::subtree(int n) const {
  if (pos_.empty() || pos_.at(static_cast<size_t>(n)) < 0) return {};
  const auto at = order_.begin() + pos_[static_cast<size_t>(n)];
  return {at, at + 1 + at->below};
}

std::vector<int> LaunchTree::beneath(int n) const {
  std::vector<int> out;
  const auto all = subtree(n);
  for (size_t i = 1; i < all.size(); ++i) out.push_back(all[i].node);
  return out;
}

bool LaunchTree::has_children(int n) const {
  return !pos_.empty() && pos_.at(static_cast<size_t>(n)) >= 0 && order_[static_cast<size_t>(pos_[static_cast<size_t>(n)])].below > 0;
}

}  // namespace dl::launcher
