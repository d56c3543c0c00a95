#pragma once
// MPI fences across hosts: each agent's PMIx server sends its host's blob for
// fence `id`; once every host has, the relay sends all of them, concatenated
// in node order, back to every host, in one round per fence. A fence that a
// host has not joined within --fence-timeout fails, naming the hosts and
// ranks that never arrived.
#include <boost/asio.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dl::launcher {

class FenceRelay {
 public:
  struct Hooks {
    std::function<void(uint64_t id, const std::string& all_blobs)> complete;  // send to every host
    std::function<void(uint64_t id, const std::string& missing)> timed_out;   // "host (ranks 2,3); ..."
  };
  // `hosts` and `ranks` by node.
  FenceRelay(boost::asio::io_context& io, std::vector<std::string> hosts, std::vector<std::vector<int>> ranks,
             std::chrono::milliseconds timeout, Hooks hooks);
  // Node `node`'s contribution to fence `id`. Throws RemoteError when the
  // node already contributed to it.
  void contribute(int node, uint64_t id, std::string_view blob);
  size_t pending() const { return fences_.size(); }

 private:
  struct Fence {
    std::vector<std::optional<std::string>> blobs;  // by node
    size_t have = 0;
    std::unique_ptr<boost::asio::steady_timer> timer;
  };
  void expire(uint64_t id);

  boost::asio::io_context& io_;
  std::vector<std::string> hosts_;
  std::vector<std::vector<int>> ranks_;
  std::chrono::milliseconds timeout_;
  Hooks hooks_;
  std::map<uint64_t, Fence> fences_;
};

}  // namespace dl::launcher
