// wire/socket_owner.h: the owner of a socket of this host, from the kernel's
// socket tables (a made-up table, and real sockets of this process).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include <catch2/catch.hpp>

#include "wire/socket.h"
#include "wire/socket_owner.h"

using namespace dl::wire;

namespace {

// A listener on 127.0.0.1, port 0; its port.
int listen_loopback(uint16_t* port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  REQUIRE(::listen(fd, 16) == 0);
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  *port = ntohs(a.sin_port);
  return fd;
}

}  // namespace

TEST_CASE("socket owner: the loopback peer's uid is read from the socket table", "[wire]") {
  char path[] = "/tmp/dl_tcp_table.XXXXXX";
  int fd = ::mkstemp(path);
  REQUIRE(fd >= 0);
  const std::string table =
      "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
      "   0: 0100007F:9C40 0100007F:1F90 01 00000000:00000000 00:00000000 00000000  1000        0 111 1\n"
      "   1: 0100007F:9C41 0100007F:1F90 01 00000000:00000000 00:00000000 00000000     0        0 112 1\n"
      "   2: 0100007F:1F90 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 113 1\n"
      "   3: 00000000:1F91 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1001        0 114 1\n"
      // A client's end after its close(): TIME_WAIT, no process, listed as uid 0 with inode 0.
      "   4: 0100007F:9C43 0100007F:1F90 06 00000000:00000000 03:00000F9F 00000000     0        0 0 3\n";
  REQUIRE(::write(fd, table.data(), table.size()) == static_cast<ssize_t>(table.size()));
  ::close(fd);
  CHECK(loopback_peer_uid(0x9C40, 0x1F90, path) == std::optional<unsigned>(1000));  // the client side, not ours
  CHECK(loopback_peer_uid(0x9C41, 0x1F90, path) == std::optional<unsigned>(0));
  CHECK_FALSE(loopback_peer_uid(0x9C42, 0x1F90, path).has_value());
  CHECK_FALSE(loopback_peer_uid(0x9C43, 0x1F90, path).has_value());  // no owner, not root
  CHECK_FALSE(loopback_peer_uid(0x9C40, 0x1F91, path).has_value());
  // Only a listening row (state 0A) holds a port.
  CHECK(listener_uid(0x1F91, path, "/nonexistent") == std::optional<unsigned>(1001));
  CHECK_FALSE(listener_uid(0x1F90, path, "/nonexistent").has_value());
  ::unlink(path);
}

TEST_CASE("socket owner: accepted loopback peers and a listener are this process's user", "[wire]") {
  uint16_t port = 0;
  const int lsn = listen_loopback(&port);
  Socket a = connect_tcp("127.0.0.1", port, Millis(2000));
  Socket b = connect_tcp("127.0.0.1", port, Millis(2000));
  Socket x(::accept4(lsn, nullptr, nullptr, SOCK_CLOEXEC)), y(::accept4(lsn, nullptr, nullptr, SOCK_CLOEXEC));
  REQUIRE((x.valid() && y.valid()));
  SECTION("asked of the kernel (sock_diag)") {
    const auto owners = local_peer_owners({x.fd(), y.fd(), -1});
    REQUIRE(owners.size() == 3);
    CHECK((owners[0].local && owners[1].local));
    CHECK(owners[0].uid == std::optional<unsigned>(::geteuid()));
    CHECK(owners[1].uid == std::optional<unsigned>(::geteuid()));
    CHECK_FALSE(owners[2].local);  // not a socket: nothing known
    CHECK_FALSE(owners[2].uid.has_value());
  }
  SECTION("read from the tables") {
    // Where sock_diag cannot answer.
    const auto owners = local_peer_owners({x.fd(), y.fd()}, false);
    CHECK((owners[0].local && owners[1].local));
    CHECK(owners[0].uid == std::optional<unsigned>(::geteuid()));
    CHECK(owners[1].uid == std::optional<unsigned>(::geteuid()));
  }
  CHECK(listener_uid(port) == std::optional<unsigned>(::geteuid()));
  // Our own listener is no foreign holder.
  CHECK(foreign_holder("127.0.0.1", port, "store").empty());
  ::close(lsn);
  CHECK_FALSE(listener_uid(port).has_value());
}

// A client that sends and closes leaves its end to the kernel (FIN_WAIT2,
// then TIME_WAIT): no process owns it, and the kernel reports it as uid 0.
// That is nobody, whichever user the server runs as (root included).
TEST_CASE("socket owner: a peer whose client end was closed has no owner", "[wire]") {
  uint16_t port = 0;
  const int lsn = listen_loopback(&port);
  Socket a = connect_tcp("127.0.0.1", port, Millis(2000));
  Socket x(::accept4(lsn, nullptr, nullptr, SOCK_CLOEXEC));
  REQUIRE(x.valid());
  REQUIRE(local_peer_owners({x.fd()}).at(0).uid == std::optional<unsigned>(::geteuid()));
  a = Socket();  // the client's close(): its end is orphaned while ours stays open
  bool kernel_none = false, tables_none = false;
  for (int i = 0; i < 200 && !(kernel_none && tables_none); ++i) {
    const auto k = local_peer_owners({x.fd()}).at(0), t = local_peer_owners({x.fd()}, false).at(0);
    CHECK(k.local);
    kernel_none = !k.uid.has_value(), tables_none = !t.uid.has_value();
    if (!(kernel_none && tables_none)) ::usleep(10000);
  }
  CHECK(kernel_none);
  CHECK(tables_none);
  ::close(lsn);
}

TEST_CASE("socket owner: users are named, loopback hosts recognised", "[wire]") {
  CHECK(describe_uid(0) == "user root (uid 0)");
  CHECK(describe_uid(4000000000u) == "uid 4000000000");
  CHECK(is_loopback_host("127.0.0.1"));
  CHECK(is_loopback_host("127.3.2.1"));
  CHECK(is_loopback_host("localhost"));
  CHECK(is_loopback_host("::1"));
  CHECK_FALSE(is_loopback_host("10.0.0.1"));
  CHECK_FALSE(is_loopback_host("node1"));
}
