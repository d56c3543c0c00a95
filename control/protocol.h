#pragma once
// The control protocol between the launcher (server) and its agents
// (clients), one TCP connection per agent. Documented in
// docs/wire-protocol.md. After the token handshake (tag kControlTag), both
// sides exchange frames (wire/frame.h):
//
//   kJson frames: {"t": <type>, ...} control messages (control/messages.h).
//   kData frames: u32 rank (big-endian) | u8 stream | bytes
//       agent -> launcher: output of a rank; stream 1 = stdout, 2 = stderr;
//                          bytes always end on a line boundary, except the
//                          last piece of a stream whose final line had no '\n'.
//       launcher -> agent: stream 0 = stdin bytes for that rank.
//   kFence frames (type 16, MPI jobs): u64 fence id (big-endian) | blob
//       agent -> launcher: this host's contribution to whole-job fence `id`
//                          (its PMIx server's opaque data of its ranks).
//       launcher -> agent: every host's contribution to fence `id`,
//                          concatenated in node order (the fence's result).
//   kRouted frames (type 17, the launch tree): u32 node (big-endian) | u8 type | payload
//       A frame of node `node`, relayed by the agents between it and the
//       launcher (docs/design.md "The launch tree"). Upward, the agent that
//       node connected to wraps each of its frames; agents above pass them
//       on unchanged. Downward, the launcher wraps a frame for a node it
//       reaches through another; each agent on the way passes it towards
//       the node, and the node's parent unwraps it. Node kEveryNode: a
//       broadcast, taken by each agent it reaches and passed to all of its
//       children.
//
// The JSON control messages themselves are typed, one struct each, in
// control/messages.h; this file holds the binary frames and the limits.
#include <cstdint>
#include <string>
#include <string_view>

#include "wire/frame.h"

namespace dl::control {

// Protocol name and version for the handshake: a launcher and an agent of
// different versions refuse each other with a message naming both.
inline constexpr std::string_view kControlTag = "dlaunch-control/" DLAUNCH_VERSION;
// Largest control frame: a launch message carries every rank's environment.
inline constexpr size_t kMaxControlFrame = 64u << 20;
// Largest output chunk an agent sends in one frame.
inline constexpr size_t kMaxOutputChunk = 256u << 10;

enum Stream : uint8_t { kStdin = 0, kStdout = 1, kStderr = 2 };
// The control protocol's own frame type (wire/frame.h reserves 16 and up).
inline constexpr uint8_t kFence = 16;
inline constexpr uint8_t kRouted = 17;
// A kRouted frame's node for "every agent below".
inline constexpr uint32_t kEveryNode = 0xffffffffu;

// A kData frame carrying `bytes` of `rank`'s `stream`.
std::string data_frame(int rank, Stream stream, std::string_view bytes);

struct DataChunk {
  int rank;
  Stream stream;
  std::string_view bytes;
};
// Parses a kData payload; throws RemoteError when it is too short.
DataChunk parse_data(std::string_view payload);

// Fence ids: the PMIx server's count 0, 1, 2, ...; the PMI server's
// (mpi/pmi/) have this bit set, so that both count on in one job.
inline constexpr uint64_t kPmiFenceBit = uint64_t{1} << 63;
// "fence 3" (PMIx) or "PMI fence 3", for logs and verdicts.
std::string fence_name(uint64_t id);
// A kFence frame: fence `id` with `blob` (contribution or result).
std::string fence_frame(uint64_t id, std::string_view blob);
struct FenceChunk {
  uint64_t id;
  std::string_view blob;
};
// Parses a kFence payload; throws RemoteError when it is too short.
FenceChunk parse_fence(std::string_view payload);

// A kRouted frame carrying `inner` (a whole frame: header and payload) for
// or from node `node` (kEveryNode: every agent).
std::string routed_frame(uint32_t node, std::string_view inner);
// The same from the inner frame's type and payload.
std::string routed_frame(uint32_t node, uint8_t type, std::string_view payload);
struct RoutedChunk {
  uint32_t node;
  wire::Frame inner;
};
// Parses a kRouted payload; throws RemoteError when it is malformed.
RoutedChunk parse_routed(std::string_view payload);

}  // namespace dl::control
