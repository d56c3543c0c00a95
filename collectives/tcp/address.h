#pragma once
// Which local address a rank publishes for its peers to connect to.
#include <string>

namespace dl::coll::tcp {

// In order: `explicit_addr` when not empty; the IPv4 address of the interface
// named by `ifname`, else by $DLAUNCH_SOCKET_IFNAME, $NCCL_SOCKET_IFNAME or
// $GLOO_SOCKET_IFNAME (NCCL syntax: comma-separated name prefixes, "^" to
// exclude, "=" for exact names); else the local address that routes to the
// store host ($DLAUNCH_STORE_ADDR, else $MASTER_ADDR; IPv4 or IPv6,
// wire::address_toward); else the first
// non-loopback interface that is up; else 127.0.0.1.
// Throws UsageError when a named interface does not exist or has no IPv4
// address, listing the interfaces there are.
std::string choose_address(const std::string& explicit_addr, const std::string& ifname);

// The IPv4 address of the first interface matching an NCCL-style spec, or ""
// when none matches.
std::string interface_address(const std::string& spec);

}  // namespace dl::coll::tcp
