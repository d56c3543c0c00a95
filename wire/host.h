#pragma once
// This machine among hosts: its name, whether a host name is this machine,
// and which of its addresses faces a given host. One home for what the
// launcher, the agent, the starters, the collectives and the doctor each
// ask, so that they answer alike (IPv4 and IPv6, every address a name has).
#include <sys/socket.h>

#include <string>

namespace dl::wire {

// This machine's host name as gethostname(2) gives it ("" when it has none).
std::string host_name();

// `addr` as a numeric address, "10.0.0.5" or "fd00::5" (no port); "" when
// it is neither IPv4 nor IPv6.
std::string numeric_address(const sockaddr* addr, socklen_t len);

// The local address the kernel would send from to reach `host` (a name or a
// numeric address, IPv4 or IPv6): what `host`, and so every host that
// reaches this one the same way, sees this machine as. Each address `host`
// resolves to is tried in order until one routes; no packet is sent (a UDP
// socket's connect only picks the route). "" when `host` does not resolve
// or no route leads there.
std::string address_toward(const std::string& host);

// True when `host` names this machine: localhost, a loopback address, this
// machine's host name (or its first label), or one of its interface
// addresses. The names and addresses are read once per process: a hostfile
// of 1,024 hosts asks about each host several times, and each read of the
// interfaces is a netlink dump of every one.
bool is_local_host(const std::string& host);

}  // namespace dl::wire
