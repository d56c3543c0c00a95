#include "agent/store_door_service.h"

#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "control/env_names.h"
#include "errors/error.h"
#include "errors/temp_dirs.h"
#include "rendezvous/host/host_store.h"
#include "wire/socket.h"

namespace dl::agent {

namespace {
// How long the door tries to reach the store before its ranks' requests
// fail: the launcher's store is up before any agent starts.
constexpr wire::Millis kUpstreamConnectTimeout{10000};

const std::string* find(const EnvVars& env, const char* name) {
  auto it = env.find(name);
  return it == env.end() ? nullptr : &it->second;
}

std::string make_dir() {
  std::string tmpl = temp_base() + "/" + temp_dir_prefix("store") + "XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) throw_errno("making the store door's directory " + tmpl);
  return tmpl;
}
}  // namespace

StoreDoorService::StoreDoorService(boost::asio::io_context& io) : io_(io) {}

StoreDoorService::~StoreDoorService() { close(); }

void StoreDoorService::close() {
  host_.reset();
  std::error_code ignored;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
  dir_.clear();
}

void StoreDoorService::open_for(EnvVars& env, size_t local_ranks) {
  if (!host_ && !failed_ && find(env, env::kDlStoreAddr) && find(env, env::kDlToken)) {
    try {
      open(env, local_ranks);
    } catch (const Error& e) {
      failed_ = true;
      std::fprintf(stderr, "dlaunch-agent: no store door on this host, its ranks connect to the store directly: %s\n",
                   e.what());
    }
  }
  if (host_) env[env::kDlStoreDoor] = host_->door_path();
}

void StoreDoorService::open(const EnvVars& env, size_t local_ranks) {
  auto [host, port] = wire::split_host_port(*find(env, env::kDlStoreAddr), env::kDlStoreAddr);
  rdzv::ForwarderOptions opt;
  opt.local_ranks = static_cast<int64_t>(local_ranks);
  if (const std::string* w = find(env, env::kDlWorldSize)) opt.world_size = std::atoll(w->c_str());
  if (dir_.empty()) dir_ = make_dir();
  host_ = std::make_unique<rdzv::HostStore>(io_, dir_ + "/store.sock", host, port, *find(env, env::kDlToken), opt,
                                            kUpstreamConnectTimeout);
  host_->upstream().set_on_unreachable([](const std::string& why) {
    std::fprintf(stderr, "dlaunch-agent: the store door's ranks cannot reach the job's store: %s\n", why.c_str());
  });
}

}  // namespace dl::agent
