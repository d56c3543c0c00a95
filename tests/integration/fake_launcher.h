#pragma once
// A launcher played by a test, for tests of the real dlaunch-agent: it
// listens on a loopback port of its own, and the agent started by
// start_agent() connects to it, passes the token handshake and says hello;
// then the test sends what it likes and reads what the agent sends.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "control/messages.h"
#include "control/protocol.h"
#include "tests/integration/run_command.h"
#include "wire/handshake.h"
#include "wire/socket.h"

namespace dl::it {

inline const std::string kToken(64, 'c');

// A TCP socket listening on a loopback port of its own. It accepts only
// when asked: until then a peer's connects complete and wait.
struct LoopbackPort {
  int fd = -1;
  uint16_t port = 0;
  LoopbackPort() {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(fd, 16) == 0);
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
  }
  ~LoopbackPort() { ::close(fd); }
  LoopbackPort(const LoopbackPort&) = delete;
  LoopbackPort& operator=(const LoopbackPort&) = delete;
};

struct FakeLauncher {
  LoopbackPort listener;
  const uint16_t port = listener.port;
  // Accepts the agent, runs the handshake, returns its socket and its hello.
  std::pair<dl::wire::Socket, dl::control::msg::Hello> accept_agent() {
    dl::wire::Socket s(::accept4(listener.fd, nullptr, nullptr, SOCK_CLOEXEC));
    REQUIRE(s.valid());
    dl::wire::server_handshake(s, kToken, dl::control::kControlTag, "the agent", std::chrono::milliseconds(10000));
    auto f = dl::wire::read_frame(s, dl::control::kMaxControlFrame, std::chrono::milliseconds(10000), "the agent");
    auto m = dl::control::decode_from_agent(f.payload);
    REQUIRE(std::holds_alternative<dl::control::msg::Hello>(m));
    return {std::move(s), std::get<dl::control::msg::Hello>(m)};
  }
};

// The agent, told to connect to `port` as node 0, its token on stdin.
inline Child start_agent(uint16_t port) {
  RunSpec spec;
  spec.argv = {bin("dlaunch-agent"), "--connect", "127.0.0.1:" + std::to_string(port), "--node", "0", "--no-pmix"};
  spec.stdin_data = kToken + "\n";
  spec.stdin_devnull = false;
  spec.stdin_hold = true;  // as the launcher holds it: EOF would mean "launcher gone"
  return start(spec);
}

}  // namespace dl::it
