// wire::free_tcp_port: a port below the ephemeral range (which every outgoing
// connection draws from) and below Kubernetes' NodePorts, free when returned.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <set>

#include <catch2/catch.hpp>

#include "wire/socket.h"

using dl::wire::free_tcp_port;
using dl::wire::named_port_range;

TEST_CASE("named_port_range: below the ephemeral range and below 30000, from 10000", "[wire]") {
  CHECK(named_port_range(32768) == std::make_pair<uint16_t, uint16_t>(10000, 29999));
  CHECK(named_port_range(20000) == std::make_pair<uint16_t, uint16_t>(10000, 19999));
  // Too little room below a low ephemeral range: the kernel's choice instead.
  CHECK(named_port_range(10500) == std::make_pair<uint16_t, uint16_t>(0, 0));
  CHECK(named_port_range(1024) == std::make_pair<uint16_t, uint16_t>(0, 0));
}

TEST_CASE("free_tcp_port: outside this host's ephemeral range, distinct, and bindable with a listener", "[wire]") {
  int first = 32768, last = 60999;
  if (FILE* f = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    REQUIRE(std::fscanf(f, "%d %d", &first, &last) == 2);
    std::fclose(f);
  }
  const auto [lo, hi] = named_port_range(first);
  std::set<uint16_t> seen;
  for (int i = 0; i < 20; ++i) {
    for (bool loopback : {true, false}) {
      const uint16_t p = free_tcp_port(loopback);
      INFO("port " << p << ", ephemeral range from " << first);
      if (lo != 0) {
        CHECK(p >= lo);
        CHECK(p <= hi);
        CHECK(p < first);
      }
      seen.insert(p);
      // It is free: a listener binds it (as torch's TCPStore will, with SO_REUSEADDR).
      int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      REQUIRE(fd >= 0);
      int one = 1;
      ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(loopback ? INADDR_LOOPBACK : INADDR_ANY);
      a.sin_port = htons(p);
      CHECK(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
      CHECK(::listen(fd, 1) == 0);
      ::close(fd);
    }
  }
  // Drawn at random: 40 draws from ~20000 ports are not all one port.
  CHECK(seen.size() > 30);
}

TEST_CASE("free_tcp_port: a port held by a listener is never returned", "[wire]") {
  // Hold many ports of the range: none of them may come back.
  std::set<uint16_t> held;
  std::vector<int> fds;
  int first = 32768, last = 60999;
  if (FILE* f = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    REQUIRE(std::fscanf(f, "%d %d", &first, &last) == 2);
    std::fclose(f);
  }
  const auto [lo, hi] = named_port_range(first);
  if (lo == 0) return;
  for (int p = lo; p <= std::min<int>(hi, lo + 2000); ++p) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    a.sin_port = htons(static_cast<uint16_t>(p));
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && ::listen(fd, 1) == 0) {
      held.insert(static_cast<uint16_t>(p));
      fds.push_back(fd);
    } else {
      ::close(fd);
    }
  }
  for (int i = 0; i < 200; ++i) CHECK(held.count(free_tcp_port(false)) == 0);
  for (int fd : fds) ::close(fd);
}
