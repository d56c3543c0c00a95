#include "launcher/mpi/fence_relay.h"

#include "errors/error.h"

namespace dl::launcher {

FenceRelay::FenceRelay(boost::asio::io_context& io, std::vector<std::string> hosts,
                       std::vector<std::vector<int>> ranks, std::chrono::milliseconds timeout, Hooks hooks)
    : io_(io), hosts_(std::move(hosts)), ranks_(std::move(ranks)), timeout_(timeout), hooks_(std::move(hooks)) {}

void FenceRelay::contribute(int node, uint64_t id, std::string_view blob) {
  if (node < 0 || static_cast<size_t>(node) >= hosts_.size()) throw RemoteError("fence from an unknown node");
  Fence& f = fences_[id];
  if (f.blobs.empty()) {
    f.blobs.resize(hosts_.size());
    f.timer = std::make_unique<boost::asio::steady_timer>(io_, timeout_);
    f.timer->async_wait([this, id](boost::system::error_code ec) { if (!ec) expire(id); });
  }
  auto& slot = f.blobs[static_cast<size_t>(node)];
  if (slot) throw RemoteError("agent on " + hosts_[static_cast<size_t>(node)] + " contributed twice to fence " +
                              std::to_string(id));
  slot = std::string(blob);
  if (++f.have < hosts_.size()) return;
  std::string all;
  for (auto& b : f.blobs) all += *b;
  f.timer->cancel();
  fences_.erase(id);
  hooks_.complete(id, all);
}

void FenceRelay::expire(uint64_t id) {
  auto it = fences_.find(id);
  if (it == fences_.end()) return;
  std::string missing;
  for (size_t i = 0; i < hosts_.size(); ++i) {
    if (it->second.blobs[i]) continue;
    std::string ranks;
    for (int r : ranks_[i]) ranks += (ranks.empty() ? "" : ",") + std::to_string(r);
    missing += (missing.empty() ? "" : "; ") + hosts_[i] + " (ranks " + ranks + ")";
  }
  fences_.erase(it);
  hooks_.timed_out(id, missing);
}

}  // namespace dl::launcher
