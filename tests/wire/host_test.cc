// This machine among hosts (wire/host.h): its name, whether a name is this
// machine, and the address that faces a host, IPv4 and IPv6.
#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "wire/host.h"

using namespace dl::wire;

namespace {
// Whether this machine can route to ::1 (a container may have no IPv6).
bool has_ipv6_loopback() {
  const int fd = ::socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_loopback;
  a.sin6_port = htons(9);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}
}  // namespace

TEST_CASE("host: the host name is gethostname's", "[wire][host]") {
  char name[256] = {};
  REQUIRE(::gethostname(name, sizeof name - 1) == 0);
  CHECK(host_name() == name);
  CHECK_FALSE(host_name().empty());
}

TEST_CASE("host: the address toward a host is the one its route leaves from, IPv4 and IPv6", "[wire][host]") {
  CHECK(address_toward("127.0.0.1") == "127.0.0.1");
  CHECK(address_toward("127.0.0.2") == "127.0.0.1");  // the route to 127/8 leaves from lo's address
  CHECK(address_toward("no-such-host.invalid").empty());
  CHECK(address_toward("").empty());
  if (has_ipv6_loopback()) CHECK(address_toward("::1") == "::1");
  // A name: every address it resolves to is tried, so localhost answers
  // with a loopback address whichever family comes first.
  const std::string local = address_toward("localhost");
  CHECK((local == "127.0.0.1" || local == "::1"));
}

TEST_CASE("host: this machine is local by every name, others are not", "[wire][host]") {
  CHECK(is_local_host("localhost"));
  CHECK(is_local_host("127.0.0.1"));
  CHECK(is_local_host("127.0.1.1"));
  CHECK(is_local_host("::1"));
  CHECK(is_local_host(host_name()));
  if (auto dot = host_name().find('.'); dot != std::string::npos) CHECK(is_local_host(host_name().substr(0, dot)));
  // The address that faces another host is one of this machine's.
  if (const std::string mine = address_toward("192.0.2.1"); !mine.empty()) CHECK(is_local_host(mine));
  CHECK_FALSE(is_local_host("192.0.2.1"));  // TEST-NET-1: nobody's interface
  CHECK_FALSE(is_local_host("no-such-host.invalid"));
  CHECK_FALSE(is_local_host(""));
}

TEST_CASE("host: numeric addresses of IPv4 and IPv6 socket addresses, nothing for others", "[wire][host]") {
  sockaddr_in v4{};
  v4.sin_family = AF_INET;
  v4.sin_addr.s_addr = htonl(0x0a000005);
  CHECK(numeric_address(reinterpret_cast<sockaddr*>(&v4), sizeof v4) == "10.0.0.5");
  sockaddr_in6 v6{};
  v6.sin6_family = AF_INET6;
  v6.sin6_addr = in6addr_loopback;
  CHECK(numeric_address(reinterpret_cast<sockaddr*>(&v6), sizeof v6) == "::1");
  sockaddr unix_like{};
  unix_like.sa_family = AF_UNIX;
  CHECK(numeric_address(&unix_like, sizeof unix_like).empty());
  CHECK(numeric_address(nullptr, 0).empty());
}
