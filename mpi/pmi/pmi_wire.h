#pragma once
// The two PMI wire formats MPICH-family clients (MPICH, Intel MPI, MVAPICH)
// speak to their process manager over the inherited socket PMI_FD: pure
// parsing and encoding, no sockets (docs/mpi.md, "MPICH and Intel MPI").
//
//   PMI-1 ("simple"): one line per command, space-separated key=value:
//     cmd=put kvsname=kvs_1 key=k value=v\n
//   and the multi-line spawn request "mcmd=spawn\n...endcmd\n".
//   PMI-2: a 6-character decimal length, then that many bytes of
//   ';'-terminated key=value pairs, cmd first: "    34cmd=kvs-put;key=k;value=v;"
//   (old clients escape a ';' inside a value as ";;").
// A PMI-2 client opens with a PMI-1 "cmd=init pmi_version=2" line, so one
// connection may carry both; each command says which it is by its first
// bytes ("cmd="/"mcmd=" or a length), as Hydra's proxy tells them apart.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dl::mpi::pmi {

// Longest command accepted: MPICH's PMI-2 limit (PMII_MAX_COMMAND_LEN), far
// above its PMI-1 line (1024 bytes).
inline constexpr size_t kMaxCommand = 64 * 1024;

using Pairs = std::vector<std::pair<std::string, std::string>>;

// One request from a rank.
struct Command {
  int version = 1;   // the wire it came on: 1 (line) or 2 (length-prefixed)
  std::string name;  // the value of cmd= (mcmd=spawn gives "spawn")
  Pairs args;        // every other key=value, in order
  // The value of `key`, or null.
  const std::string* get(std::string_view key) const;
};

// What next_command found at the start of a buffer.
struct Parsed {
  enum Kind { kNeedMore, kCommand, kError } kind = kNeedMore;
  Command command;      // kCommand
  std::string error;    // kError: what was wrong, for the client and the log
  size_t consumed = 0;  // bytes to drop (kCommand, and kError when resync is possible)
  bool fatal = false;   // kError: the stream cannot be resynchronised; close it
};

// Takes the first complete command off `buf`. Never throws: malformed input
// is a kError that names what was expected; an unterminated command longer
// than kMaxCommand is a fatal kError.
Parsed next_command(std::string_view buf);

// A reply in the wire of `version`: "cmd=<cmd> k=v ...\n" (1) or the
// length-prefixed "cmd=<cmd>;k=v;...;" (2). PMI-1 values must not hold
// spaces or newlines (the format has no escape): they are replaced by '_'.
std::string encode(int version, std::string_view cmd, const Pairs& args);

}  // namespace dl::mpi::pmi
