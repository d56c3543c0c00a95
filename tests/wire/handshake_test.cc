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
  // The client finds out first (the server's proof), and tells the server.
  CHECK_THAT(client_err, Catch::Contains("does not hold this job's token"));
  CHECK_THAT(server_err, Catch::Contains("token differs"));
}

TEST_CASE("a protocol or version mismatch names both sides", "[wire]") {
  std::string tok = new_token(), client_err;
  run_pair(tok, tok, "control/2", "control/1", &client_err);
  CHECK_THAT(client_err, Catch::Contains("control/2") && Catch::Contains("control/1"));
}

TEST_CASE("the token never crosses the wire", "[wire]") {
  std::string tok = new_token();
  ClientHandshake c(tok, "t/1", "server");
  ServerHandshake hs(tok, "t/1");
  auto answer = hs.answer(c.hello());
  REQUIRE(answer);
  std::string proof = c.finish(Frame{kHandshake, *answer});
  for (const std::string& sent : {c.hello(), *answer, proof}) {
    CHECK(sent.find(tok) == std::string::npos);
    CHECK(sent.find(tok.substr(0, 16)) == std::string::npos);
  }
  CHECK(hs.verify(proof));
}

TEST_CASE("the server refuses a forged proof, a proof before the hello, and an old handshake", "[wire]") {
  std::string tok = new_token();
  SECTION("forged proof") {
    ServerHandshake hs(tok, "t/1");
    ClientHandshake c(tok, "t/1", "server");
    REQUIRE(hs.answer(c.hello()));
    CHECK_FALSE(hs.verify(std::string(kMacSize, 'z')));
    CHECK_THAT(hs.error(), Catch::Contains("does not hold this job's token"));
  }
  SECTION("a proof replayed from another connection") {
    ClientHandshake c(tok, "t/1", "server");
    ServerHandshake first(tok, "t/1"), second(tok, "t/1");
    std::string proof = c.finish(Frame{kHandshake, *first.answer(c.hello())});
    REQUIRE(second.answer(c.hello()));  // same client nonce, fresh server nonce
    CHECK_FALSE(second.verify(proof));
  }
  SECTION("proof before the hello") {
    ServerHandshake hs(tok, "t/1");
    CHECK_FALSE(hs.verify(std::string(kMacSize, 'z')));
    CHECK_FALSE(hs.answer(std::string(80, 'z')));
    CHECK_THAT(hs.error(), Catch::Contains("malformed"));
  }
  SECTION("the first handshake, from an older dlaunch") {
    ServerHandshake hs(tok, "t/1");
    CHECK_FALSE(hs.answer("DLH1\x03t/1" + std::string(kNonceSize, 'n')));
    CHECK_THAT(hs.error(), Catch::Contains("DLH1") && Catch::Contains("versions"));
    ClientHandshake c(tok, "t/1", "old server");
    CHECK_THROWS_WITH(c.finish(Frame{kHandshake, "DLH1\x03t/1" + std::string(kNonceSize, 'n')}),
                      Catch::Contains("older dlaunch"));
  }
}

TEST_CASE("a server's answer made with another token fails the client at once", "[wire]") {
  ClientHandshake c(new_token(), "t/1", "impostor");
  ServerHandshake hs(new_token(), "t/1");
  CHECK_THROWS_AS(c.finish(Frame{kHandshake, *hs.answer(c.hello())}), dl::AuthError);
}
