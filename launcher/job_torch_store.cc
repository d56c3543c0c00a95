// The Job's torch c10d store (launcher/torch_store.h): started with the
// job's own store, cleared between attempts, told at --timeout.
#include "launcher/job.h"
#include "errors/error.h"
#include "launcher/torch_store.h"
#include "wire/socket_owner.h"

namespace dl::launcher {

void Job::start_torch_store(const std::string& bind, uint16_t port) {
  TorchStore::Hooks h;
  h.node_of = [this](const std::string& address) {  // by node rank, as the placement's sizes are
    const int i = node_at(address);
    return i < 0 ? -1 : nodes_.at(static_cast<size_t>(i)).seat;
  };
  // A rank's torch speaks what the store does not serve: its client would
  // wait for a reply until torch's timeout, so the job ends now, saying why.
  h.refused = [this](const std::string& why) {
    if (fate_.on_bad_request(why)) teardown(grace_ms());
  };
  h.log = [this](const std::string& line) { log(line); };
  try {
    torch_store_ = std::make_unique<TorchStore>(io_, bind, port, plan_, seat_hosts(), std::move(h));
  } catch (const IoError& e) {
    if (port == 0) throw;
    throw UsageError("--master-port " + std::to_string(port) + ": " + e.what() +
                     "; choose a free port, or leave --master-port out for one dlaunch picks");
  }
}

std::vector<std::string> Job::seat_hosts() const {
  std::vector<std::string> hosts;
  for (int seat : seats_) hosts.push_back(nodes_.at(static_cast<size_t>(seat)).host);
  return hosts;
}

// Local ranks reach the store over loopback or this host's control address;
// a remote host's ranks from the address its agent connected from (or the
// one it reported reaching us by).
int Job::node_at(const std::string& address) const {
  for (const auto& n : nodes_) {
    if (!n.ours()) continue;
    if (n.local ? wire::is_loopback_host(address) || address == control_host_
                : address == n.reach_addr || (server_ && address == server_->addresses(n.index).remote_address))
      return n.index;
  }
  return -1;
}

}  // namespace dl::launcher
