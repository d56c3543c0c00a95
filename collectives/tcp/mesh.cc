#include "collectives/tcp/mesh.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

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

wire::Socket listen_any(uint16_t& port) {
  wire::Socket s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s.valid()) throw_errno("collectives: creating the listening socket");
  int one = 1;
  ::setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof a;
  if (::bind(s.fd(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) throw_errno("collectives: bind port 0");
  if (::listen(s.fd(), SOMAXCONN) != 0) throw_errno("collectives: listen");
  ::getsockname(s.fd(), reinterpret_cast<sockaddr*>(&a), &len);
  port = ntohs(a.sin_port);
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

void accept_higher(const MeshConfig& c, const wire::Socket& lsn, std::vector<MeshPeer>& peers,
                   Clock::time_point deadline) {
  int missing = c.size - 1 - c.rank;
  while (missing > 0) {
    pollfd p{lsn.fd(), POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(left(deadline).count()));
    if (r == 0 || Clock::now() >= deadline) {
      std::string who;
      for (int j = c.rank + 1; j < c.size; ++j)
        if (!peers[j].sock.valid()) who += (who.empty() ? "" : ", ") + peers[j].info.describe();
      throw TimeoutError("collectives: rank " + std::to_string(c.rank) + " timed out after " +
                         std::to_string(c.timeout.count()) + " ms waiting for " + who +
                         " to connect; are they running and can they reach this host?");
    }
    if (r < 0) { if (errno == EINTR) continue; throw_errno("collectives: poll on the listening socket"); }
    wire::Socket s(::accept4(lsn.fd(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!s.valid()) continue;
    try {
      wire::server_handshake(s, c.token, kHandshakeTag, "a connecting rank", left(deadline));
      char who_be[4];
      wire::recv_exact(s, who_be, 4, left(deadline), "a connecting rank");
      int j = static_cast<int>(wire::get_be32(who_be));
      if (j <= c.rank || j >= c.size || peers[j].sock.valid())
        throw RemoteError("collectives: unexpected connection from rank " + std::to_string(j));
      peers[j].sock = std::move(s);
      --missing;
    } catch (const AuthError&) {
      continue;  // not one of ours: refused, keep serving the real peers
    }
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
  for (int j = 0; j < c.rank; ++j) {
    auto [host, p] = wire::split_host_port(peers[j].info.addr, "collectives peer address");
    const std::string who = peers[j].info.describe();
    wire::Socket s = wire::connect_tcp(host, p, left(deadline));
    wire::client_handshake(s, c.token, kHandshakeTag, who, left(deadline));
    char me[4];
    wire::put_be32(me, static_cast<uint32_t>(c.rank));
    wire::send_all(s, std::string_view(me, 4), who);
    peers[j].sock = std::move(s);
  }
  accept_higher(c, lsn, peers, deadline);
  return peers;
}

}  // namespace dl::coll::tcp
