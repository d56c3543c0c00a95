#include "launcher/mpi/connect_relay.h"

#include <algorithm>

namespace dl::launcher {

namespace msg = control::msg;

ConnectRelay::ConnectRelay(boost::asio::io_context& io, std::chrono::milliseconds timeout, Hooks hooks)
    : io_(io), timeout_(timeout), hooks_(std::move(hooks)) {}

ConnectRelay::~ConnectRelay() = default;

std::string ConnectRelay::describe(const msg::MpiConnect& m) {
  std::vector<std::string> procs = m.procs;
  std::sort(procs.begin(), procs.end());
  std::string out = m.op + " of ";
  for (size_t i = 0; i < procs.size(); ++i) out += (i ? ", " : "") + procs[i];
  return out;
}

void ConnectRelay::join(int node, const msg::MpiConnect& m, const std::vector<int>& nodes) {
  const std::string key = describe(m);
  Set& s = sets_[key];
  if (s.what.empty()) {
    s.what = key;
    s.expected.insert(nodes.begin(), nodes.end());
    s.expected.insert(node);
    s.timer = std::make_unique<boost::asio::steady_timer>(io_);
    s.timer->expires_after(timeout_);
    s.timer->async_wait([this, key](boost::system::error_code ec) {
      if (!ec) expire(key);
    });
  }
  s.asked[node] = m.id;
  s.blobs[node] = m.blob.value_or("");
  if (s.asked.size() < s.expected.size()) return;
  for (int n : s.expected)
    if (!s.asked.count(n)) return;
  Set done = std::move(s);
  sets_.erase(key);
  done.timer->cancel();
  std::string all;
  for (const auto& [n, blob] : done.blobs) all += blob;  // node order
  for (auto [n, id] : done.asked) hooks_.answer(n, id, all, "");
}

void ConnectRelay::expire(const std::string& key) {
  auto it = sets_.find(key);
  if (it == sets_.end()) return;
  Set s = std::move(it->second);
  sets_.erase(it);
  std::vector<int> missing;
  for (int n : s.expected)
    if (!s.asked.count(n)) missing.push_back(n);
  for (auto [n, id] : s.asked) hooks_.answer(n, id, "", "timed out: not every host joined the " + s.what);
  hooks_.timed_out(s.what, missing);
}

}  // namespace dl::launcher
