#pragma once
// The store protocol ("store/1"): the messages between TcpStore clients and a
// TcpStoreServer, in one place. Documented in docs/wire-protocol.md under
// "Store protocol". Every connection opens with the job-token handshake
// (wire/handshake.h) using kStoreTag; then the client sends kRequest frames
// and the server answers each with exactly one kReply frame, in order.
//
// Integers are big-endian. A "str" is u32 length | bytes.
//
//   request payload:  u8 op | fields
//     kSet      str key | str value
//     kGet      i64 timeout_ms | str key          (parked until key exists)
//     kAdd      str key | i64 delta
//     kCas      str key | str expected | str desired
//     kWait     i64 timeout_ms | u32 n | n x str key
//     kCheck    u32 n | n x str key
//     kDelete   str key
//     kNumKeys  (nothing)
//     kBarrier  i64 timeout_ms | str key | i64 count   (add 1, parked until key >= count)
//     kAllGather i64 timeout_ms | str prefix | i64 rank | i64 count | str value
//                                 (parked until all count ranks contributed)
//     kBarrierWeighted i64 timeout_ms | str key | i64 count | i64 weight
//                                 (add weight, parked until key >= count)
//     kAllGatherMany i64 timeout_ms | str prefix | i64 count | u32 n | n x (i64 rank | str value)
//                                 (several ranks' contributions, parked as one)
//   reply payload:    u8 status | body
//     kOk       kSet/kWait: nothing; kGet/kCas: str value; kAdd/kNumKeys: i64;
//               kBarrier: i64 this caller's arrival (the value its add made);
//               kBarrierWeighted: i64 the value its add made (its last arrival);
//               kCheck/kDelete: u8 0/1;
//               kAllGather, kAllGatherMany: the values list (the rest of the payload):
//                 u32 n | n x str value, in rank order
//     kTimeout  u32 n | n x str missing key
//     kError    the message text (rest of the payload)
//
// store/2: the same payloads in kRequest2/kReply2 frames, each led by a u32
// request id the client picks. Replies come in any order, each with its
// request's id, and a request that parks holds up none behind it, so one
// connection carries many waiting callers (a host's forwarder,
// rendezvous/host/store_forwarder.h). Bounded per connection: kMaxParked parked
// requests, and an id is in use until its reply is sent; over either the
// request gets a kError reply. kRequest and kRequest2 frames may be mixed.
//
// A request whose key or value is over the limit gets a kError reply and the
// connection stays usable. A frame over kMaxFramePayload, or a request that
// cannot be decoded, gets a kErrorText frame and the connection is closed.
//
// The decoders take any bytes: they read only within the payload, allocate
// no more than it could hold, and throw RemoteError on anything malformed.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace dl::rdzv::proto {

inline constexpr std::string_view kStoreTag = "store/1";
inline constexpr size_t kMaxKeySize = 4096;                 // bytes per key
inline constexpr size_t kMaxValueSize = 16u << 20;          // 16 MiB per value
inline constexpr size_t kMaxKeysPerRequest = 65536;         // keys in one wait/check
inline constexpr size_t kMaxFramePayload = 2 * kMaxValueSize + 2 * kMaxKeySize + 64;
// An all-gather's bounds: its count, and its values list (every value with
// its 4-byte length, plus 4), which is also the value stored under its
// prefix once complete, so it is bounded as one value is. A contribution
// that would take the list over is refused, so no caller grows the server
// past kMaxValueSize per all-gather, whatever count it names.
inline constexpr int64_t kMaxGatherCount = int64_t{1} << 20;
inline constexpr size_t kMaxGatherBytes = kMaxValueSize;
// Missing ranks named in an all-gather's timeout reply, at most.
inline constexpr size_t kMaxNamedMissing = 64;

// Requests parked at once on one store/2 connection, at most.
inline constexpr size_t kMaxParked = 4096;

// Frame types (wire/frame.h reserves 0-15).
inline constexpr uint8_t kRequest = 16;
inline constexpr uint8_t kReply = 17;
inline constexpr uint8_t kRequest2 = 18;  // u32 id | request payload
inline constexpr uint8_t kReply2 = 19;    // u32 id | reply payload

enum class Op : uint8_t {
  kSet = 1, kGet, kAdd, kCas, kWait, kCheck, kDelete, kNumKeys, kBarrier, kAllGather,
  kBarrierWeighted, kAllGatherMany
};
inline bool is_barrier(Op op) { return op == Op::kBarrier || op == Op::kBarrierWeighted; }
inline bool is_gather(Op op) { return op == Op::kAllGather || op == Op::kAllGatherMany; }

// One rank's value in a kAllGatherMany.
struct Contribution {
  int64_t rank = 0;
  std::string value;
  bool operator==(const Contribution&) const = default;
};
enum class Status : uint8_t { kOk = 0, kTimeout = 1, kError = 2 };

struct Request {
  Op op = Op::kNumKeys;
  std::vector<std::string> keys;  // one key for every op but kWait/kCheck/kNumKeys
  std::string value, desired;     // kSet/kAllGather value; kCas expected (value) and desired
  int64_t number = 0;             // kAdd delta; kGet/kWait/kBarrier/kAllGather timeout in ms
  int64_t count = 0;              // kBarrier: arrivals to wait for; kAllGather: ranks
  int64_t rank = 0;               // kAllGather: the caller's rank, in [0, count)
  int64_t weight = 1;             // kBarrierWeighted: arrivals it stands for
  std::vector<Contribution> parts{};  // kAllGatherMany: the ranks' values
};

struct Reply {
  Status status = Status::kOk;
  std::string value;               // kGet/kCas value, kAllGather values list, kError message
  int64_t number = 0;              // kAdd/kNumKeys/kBarrier result; kCheck/kDelete 0/1
  std::vector<std::string> keys;   // kTimeout: the keys still missing
  // kAllGather kOk from the server's state: the values list, one copy shared
  // by every caller's reply; encode() writes it in place of `value`.
  std::shared_ptr<const std::string> list;
};

std::string encode(const Request& r);
// Decodes a request payload (the bytes after the frame header). Throws
// RemoteError saying what is wrong when it is malformed (truncated, trailing
// bytes, unknown op, too many keys); never reads outside `payload`. This is
// the server's only parser of client bytes, safe to fuzz.
Request decode_request(std::string_view payload);
// Empty when every key and value is within the limits; else the reason.
std::string check_limits(const Request& r);

// A store/2 payload split into its id and the store/1 payload after it.
// Throws RemoteError when it is shorter than the id.
struct Tagged {
  uint32_t id = 0;
  std::string_view payload;
};
Tagged split_id(std::string_view payload);
// The store/2 frame (header included) of a payload under id.
std::string frame_with_id(uint8_t type, uint32_t id, std::string_view payload);

// `op` tells which body kOk carries.
std::string encode(const Reply& r, Op op);
// Decodes a reply payload to a request of `op` (any value). Throws
// RemoteError when it is malformed (as decode_request).
Reply decode_reply(std::string_view payload, Op op);

// An all-gather's values list (see kAllGather above): what its reply carries
// and what is stored under its prefix once complete.
std::string encode_values(const std::vector<std::string>& values);
// Throws RemoteError when `list` is malformed (as decode_reply).
std::vector<std::string> decode_values(std::string_view list);
// The size encode_values gives a list holding values of these sizes.
inline size_t values_list_size(size_t count, size_t value_bytes) { return 4 + 4 * count + value_bytes; }

}  // namespace dl::rdzv::proto
