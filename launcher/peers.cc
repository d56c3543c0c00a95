#include "launcher/peers.h"

namespace dl::launcher {

namespace {
class NoPeers final : public Peers {
 public:
  const PeerIdentity* identity() const override { return nullptr; }
  void publish_failure(int, const std::string&) override {}
  void watch(Failed) override {}
  bool can_restart() const override { return true; }
  void restart(int, int port, double, RestartDone done) override { done(port, ""); }
  void abandon(int, const std::string&) override {}
  void next_attempt(int) override {}
};
}  // namespace

std::unique_ptr<Peers> Peers::none() { return std::make_unique<NoPeers>(); }

}  // namespace dl::launcher
