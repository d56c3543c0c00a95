#pragma once
// One host of the job's store in-process (rendezvous/host/host_store.h): a real
// TcpStoreServer, and a door with its forwarder and link served on a thread
// of their own, for the door's tests (store_forwarder_test.cc,
// store_upstream_test.cc).
#include <future>
#include <memory>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>

#include "rendezvous/host/host_store.h"
#include "tests/rendezvous/store_envs.h"

namespace dl::rdzv::testing {

// Where a host's link goes and how.
struct LinkTo {
  uint16_t port = 0;   // 0: the fixture's server
  std::string token;   // "": the server's; the door's clients use it too
  Millis timeout{5000};
  LinkWhen when = LinkWhen::kFirstRequest;
};

// A server, and one host of `local` ranks behind a door in a private temp dir.
struct HostEnv {
  TcpEnv server;
  TempDir dir;
  std::string token;
  boost::asio::io_context io;
  std::unique_ptr<HostStore> host;
  std::thread thread;

  explicit HostEnv(ForwarderOptions opt, LinkTo link = {}) : token(link.token.empty() ? server.token : link.token) {
    host = std::make_unique<HostStore>(io, dir.path + "/store.sock", "127.0.0.1",
                                       link.port ? link.port : server.server.port(), token, opt, link.timeout, link.when);
    thread = std::thread([this] {
      auto guard = boost::asio::make_work_guard(io);
      io.run();
    });
  }
  ~HostEnv() {
    io.stop();
    thread.join();
    host.reset();
  }
  std::unique_ptr<TcpStore> local(Millis timeout = Millis(5000)) {
    return std::make_unique<TcpStore>(StoreDoorPath{host->door_path()}, token, timeout);
  }
  // fn() on the forwarder's thread.
  template <class F>
  auto on_io(F fn) {
    std::promise<decltype(fn())> p;
    boost::asio::post(io, [&] { p.set_value(fn()); });
    return p.get_future().get();
  }
  // Requests the forwarder sent up.
  uint64_t sent_up() { return on_io([&] { return host->upstream().sent(); }); }
};

// Runs fn(i) on n threads, each with its own door client, and joins them.
template <class F>
void on_ranks(HostEnv& env, int n, F fn) {
  std::vector<std::unique_ptr<TcpStore>> clients;
  for (int i = 0; i < n; ++i) clients.push_back(env.local());
  std::vector<std::thread> ts;
  for (int i = 0; i < n; ++i) ts.emplace_back([&, i] { fn(i, *clients[i]); });
  for (auto& t : ts) t.join();
}

}  // namespace dl::rdzv::testing
