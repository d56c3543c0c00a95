#include <sys/socket.h>

#include <catch2/catch.hpp>
#include <thread>

#include "errors/error.h"
#include "wire/handshake.h"

using namespace dl::wire;

namespace {
std::pair<Socket, Socket> socket_pair() {
  int fds[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0);
  return {Socket(fds[0]), Socket(fds[1])};
}

// Runs the server side in a thread; returns what it threw ("" on success).
std::string run_pair(const std::string& server_token, const std::string& client_token,
                     const std::string& server_tag, const std::string& client_tag, std::string* client_err) {
  auto [a, b] = socket_pair();
  std::string server_err;
  std::thread t([&, s = std::move(a)]() mutable {
    try { server_handshake(s, server_token, server_tag, "client"); } catch (const dl::Error& e) { server_err = e.what(); }
  });
  try { client_handshake(b, client_token, client_tag, "server"); } catch (const dl::Error& e) { *client_err = e.what(); }
  b.close();
  t.join();
  return server_err;
}
}  // namespace

TEST_CASE("peers holding the same token authenticate each other", "[wire]") {
  std::string tok = new_token(), client_err;
  CHECK(tok.size() == 64);
  CHECK(run_pair(tok, tok, "store/1", "store/1", &client_err).empty());
  CHECK(client_err.empty());
}

TEST_CASE("a wrong token is refused on both sides", "[wire]") {
  std::string client_err;
  std::string server_err = run_pair(new_token(), new_token(), "store/1", "store/1", &client_err);
  CHECK_THAT(server_err, Catch::Contains("does not hold this job's token"));
  CHECK_THAT(client_err, Catch::Contains("refused"));
}

TEST_CASE("a protocol or version mismatch names both sides", "[wire]") {
  std::string tok = new_token(), client_err;
  run_pair(tok, tok, "control/2", "control/1", &client_err);
  CHECK_THAT(client_err, Catch::Contains("control/2") && Catch::Contains("control/1"));
}

TEST_CASE("the token never crosses the wire", "[wire]") {
  std::string tok = new_token();
  ServerHandshake hs(tok, "t/1");
  CHECK(hs.hello().find(tok) == std::string::npos);
  CHECK(hs.hello().find(tok.substr(0, 16)) == std::string::npos);
  CHECK_FALSE(hs.verify(std::string(80, 'z')).has_value());
}
