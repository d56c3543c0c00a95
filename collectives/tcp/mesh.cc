#include "collectives/tcp/mesh.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "collectives/tcp/acceptor.h"
#include "errors/error.h"
#include "wire/coding.h"
#include "wire/handshake.h"

namespace dl::coll::tcp {
namespace {

using Clock = std::chrono::steady_clock;

Millis left(Clock::time_point deadline) {
  auto l = std::chrono::duration_cast<Millis>(deadline - Clock::now());
  return l.count() > 0 ? l : Millis(1);
}

// Every address of this host, IPv4 and IPv6 (one dual-stack socket; IPv4
// alone where the kernel has no IPv6): a rank publishes the address that
// faces the store, which may be either.
wire::Socket listen_any(uint16_t& port) {
  wire::Socket s(::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  const bool v6 = s.valid();
  if (!v6) s = wire::Socket(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!s.valid()) throw_errno("collectives: creating the listening socket");
  int one = 1, zero = 0;
  ::setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_storage a{};
  socklen_t len = v6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  if (v6) {
    ::setsockopt(s.fd(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    reinterpret_cast<sockaddr_in6&>(a) = sockaddr_in6{.sin6_family = AF_INET6, .sin6_addr = in6addr_any};
  } else {
    reinterpret_cast<sockaddr_in&>(a) = sockaddr_in{.sin_family = AF_INET, .sin_addr = {htonl(INADDR_ANY)}};
  }
  if (::bind(s.fd(), reinterpret_cast<sockaddr*>(&a), len) != 0) throw_errno("collectives: bind port 0");
  if (::listen(s.fd(), SOMAXCONN) != 0) throw_errno("collectives: listen");
  ::getsockname(s.fd(), reinterpret_cast<sockaddr*>(&a), &len);
  port = ntohs(v6 ? reinterpret_cast<sockaddr_in6&>(a).sin6_port : reinterpret_cast<sockaddr_in&>(a).sin_port);
  return s;
}

std::string key(const MeshConfig& c, int r) { return c.prefix + "/peer/" + std::to_string(r); }

std::vector<MeshPeer> read_directory(const MeshConfig& c) {
  std::vector<std::string> keys;
  for (int r = 0; r < c.size; ++r) keys.push_back(key(c, r));
  c.store->wait(keys, c.timeout);
  std::vector<MeshPeer> peers(c.size);
  for (int r = 0; r < c.size; ++r) {
    std::string v = c.store->get(keys[r]);
    auto nl = v.find('\n');
    if (nl == std::string::npos) throw RemoteError("collectives: malformed store entry " + keys[r] + ": '" + v + "'");
    peers[r].info = PeerInfo{r, v.substr(0, nl), v.substr(nl + 1)};
  }
  return peers;
}

// Runs `io` on a connection that the peer may drop before its welcome (it
// took this rank for an intruder: a greeting slower than greeting_timeout):
// false when it did (closed or reset), so the caller dials again.
template <class Io>
bool kept(Io&& io) {
  try {
    io();
    return true;
  } catch (const AuthError&) {
    throw;
  } catch (const TimeoutError&) {
    throw;
  } catch (const Error&) {
    return false;
  }
}

// One attempt at `peer`: connect, handshake, this rank's number. The welcome
// is read later (welcomed()), so that dialing the next rank does not wait for
// it. Empty when the peer dropped the connection.
wire::Socket try_dial(const MeshConfig& c, const PeerInfo& peer, Clock::time_point deadline) {
  auto [host, p] = wire::split_host_port(peer.addr, "collectives peer address");
  const std::string who = peer.describe();
  wire::Socket s = wire::connect_tcp(host, p, left(deadline));
  const bool ok = kept([&] {
    wire::client_handshake(s, c.token, kHandshakeTag, who, left(deadline));
    char me[4];
    wire::put_be32(me, static_cast<uint32_t>(c.rank));
    wire::send_all(s, std::string_view(me, 4), who);
  });
  return ok ? std::move(s) : wire::Socket();
}

// Reads `peer`'s verdict on this rank's greeting: false when it dropped the
// connection instead. Throws RemoteError when it refused this rank's number.
bool welcomed(const MeshConfig& c, const wire::Socket& s, const PeerInfo& peer, Clock::time_point deadline) {
  const std::string who = peer.describe();
  wire::Frame v;
  if (!kept([&] { v = wire::read_frame(s, wire::kMaxHandshakePayload, left(deadline), who); })) return false;
  if (v.type == wire::kData && v.payload == kWelcome) return true;
  throw RemoteError("collectives: " + who + " refused rank " + std::to_string(c.rank) + ": " +
                    (v.type == wire::kErrorText ? v.payload : "unexpected answer to its number"));
}

wire::Socket dial(const MeshConfig& c, const PeerInfo& peer, Clock::time_point deadline) {
  for (Millis pause{5};; pause = std::min(pause * 2, Millis(200))) {
    if (wire::Socket s = try_dial(c, peer, deadline); s.valid()) return s;
    if (Clock::now() + pause >= deadline)
      throw TimeoutError("collectives: rank " + std::to_string(c.rank) + " timed out after " +
                         std::to_string(c.timeout.count()) + " ms connecting to " + peer.describe() +
                         ", which kept closing the connection during the handshake");
    std::this_thread::sleep_for(pause);
  }
}

}  // namespace

std::vector<MeshPeer> connect_mesh(const MeshConfig& c) {
  const auto deadline = Clock::now() + c.timeout;
  uint16_t port = 0;
  wire::Socket lsn = listen_any(port);
  std::string addr = c.address.find(':') != std::string::npos ? "[" + c.address + "]" : c.address;
  c.store->set(key(c, c.rank), c.host_id + "\n" + addr + ":" + std::to_string(port));
  auto peers = read_directory(c);
  for (int j = 0; j < c.rank; ++j) peers[j].sock = dial(c, peers[j].info, deadline);
  accept_ranks(c, lsn, peers, deadline);
  // The welcomes came while this rank dialed and accepted the others.
  for (int j = 0; j < c.rank; ++j)
    while (!welcomed(c, peers[j].sock, peers[j].info, deadline)) peers[j].sock = dial(c, peers[j].info, deadline);
  return peers;
}

}  // namespace dl::coll::tcp
