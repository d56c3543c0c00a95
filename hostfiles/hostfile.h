#pragma once
// Hostfiles and -H lists: which hosts a job may use and how many ranks each
// may take. Formats (docs/hostfiles.md has the full grammar):
//
//   node1 slots=4 max_slots=8     OpenMPI (also "max-slots="); DeepSpeed's
//                                 "node1 slots=4" is the same format
//   node1:4                       MPICH
//   node1                         one slot, slots_given = false
//   alice@node[01-04] slots=2     ssh user, Slurm ranges
//   [node1]:2222 slots=2          ssh port (or "node1 port=2222 slots=2")
//   [fe80::1]:22                  IPv6 in brackets
//   # comment, also after a line; blank lines are skipped
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace dl::hostfiles {

struct HostEntry {
  std::string host;          // name or address, ranges expanded, no brackets
  std::string user;          // ssh user; empty: ssh's default
  uint16_t port = 0;         // ssh port; 0: ssh's default
  int slots = 1;             // ranks it takes without oversubscribing
  int max_slots = 0;         // hard limit even when oversubscribing; 0: none
  bool slots_given = false;  // false when only a bare name was written
  std::string origin;        // where first seen: "hosts:3" or "-H"
};

// Reads and parses a hostfile. Duplicate hosts (same user, host and port) are
// merged into the first one, in first-appearance order: slots add up, and so
// do max_slots (no max if any of the lines had none); slots_given if any line
// gave slots.
// Throws dl::ParseError "file:line:col: expected X, got Y" on bad syntax,
// "file: no hosts ..." on a file with no host lines, and "cannot read hostfile
// 'file': <OS error>" when it cannot be read.
std::vector<HostEntry> parse_hostfile(const std::string& path);

// The same on text in memory; `filename` prefixes error messages and origins.
std::vector<HostEntry> parse_hostfile_text(std::string_view text, std::string_view filename);

// Parses a -H / --host list: comma-separated items "host", "host:N",
// "user@host", "[host]:port[:N]", each with ranges ("node[1-4]:2,gpu5" is
// fine, commas inside brackets included). Duplicates merge as above; origin is
// "-H". Throws dl::ParseError "-H item 2 ('h2:x'): ..." on a bad item, or on
// an empty list or item.
std::vector<HostEntry> parse_host_list(std::string_view list);

// Merges the entries that name this machine (`is_local` says which:
// wire::is_local_host, i.e. localhost, 127.x, its host name or one of its
// addresses) into the first of them, as duplicates merge above: one host,
// the slots added. `-H localhost:2,$(hostname):2` is one host of 4 slots,
// not two hosts whose ranks would both get LOCAL_RANK 0. Other entries stay
// as they are, in order. Appends "'myhost' into 'localhost'" to `merged`
// (when given) for each entry merged.
std::vector<HostEntry> merge_local(std::vector<HostEntry> hosts,
                                   const std::function<bool(const std::string&)>& is_local,
                                   std::vector<std::string>* merged = nullptr);

// The host as one would write it back: "alice@node1", "[node1]:2222",
// "[::1]". For messages.
std::string describe(const HostEntry& e);

}  // namespace dl::hostfiles
