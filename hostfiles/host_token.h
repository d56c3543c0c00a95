#pragma once
// One host as written in a hostfile's first column or a -H item, before any
// key=value fields:
//
//   host            one slot, slots not given       node1
//   host:N          N slots (MPICH)                 node1:4
//   user@host...    ssh user                        alice@node1:4
//   [host]:port     ssh port (brackets required)    [node1]:2222
//   [host]:port:N   ssh port and N slots            [node1]:2222:4
//   [v6-address]    IPv6, optionally :port[:N]      [fe80::1%eth0]:22
//
// The rule: a colon after a plain name always gives slots; a colon after a
// bracketed name gives the port. "host" may hold Slurm ranges (hostlist.h).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dl::hostfiles {

struct HostSpec {
  std::vector<std::string> hosts;  // after range expansion; at least one
  std::string user;                // empty: ssh's default
  uint16_t port = 0;               // 0: ssh's default
  int slots = 1;
  bool slots_given = false;        // true when ":N" was written
};

// Parses `text` (no whitespace) as above. Throws HostSyntaxError whose offset
// is relative to the start of `text`.
HostSpec parse_host_spec(std::string_view text);

// Parses a positive int (1..999999999) such as a slot count. Throws
// HostSyntaxError at `at`: "<what> needs a positive number, got '<text>'".
int parse_positive(std::string_view text, std::size_t at, std::string_view what);

// Parses a TCP port 1..65535; throws HostSyntaxError at `at` naming `what`.
uint16_t parse_port(std::string_view text, std::size_t at, std::string_view what);

}  // namespace dl::hostfiles
