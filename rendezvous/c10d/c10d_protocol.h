#pragma once
// torch's c10d TCPStore wire protocol, as the client in libtorch speaks it
// (docs/rendezvous.md, "torch's c10d store"): the queries a rank's TCPStore
// sends and the replies it expects, in the two dialects torch has had.
//
//   legacy     torch 1.x and 2.0 (Debian's 1.13): the first byte of a query
//              is its type, SET = 0 ... CANCEL_WAIT = 12.
//   validated  later 2.x: every connection opens with VALIDATE (type 0 and
//              the magic 0x3C85F7CE), the other types one higher, PING = 13.
//
// A query is its type byte, then fields in the client's byte order
// (little-endian on every machine torch runs on): a string or value is a
// u64 length and its bytes, a count a u64 (MULTI_SET's an i64), a number an
// i64, PING's nonce and VALIDATE's magic a u32. Replies carry no type.
//
// Pure: no I/O. parse() reads one whole query from a buffer and says how
// many bytes it used, so a server feeds it what it has read so far.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dl::rdzv::c10d {

enum class Dialect { kUnknown, kLegacy, kValidated };

enum class Op { kValidate, kSet, kCompareSet, kGet, kAdd, kCheck, kWait, kNumKeys, kDelete, kAppend, kMultiGet,
                kMultiSet, kCancelWait, kPing };

inline constexpr uint32_t kValidationMagic = 0x3C85F7CE;
// CHECK's reply, and WAIT's (STOP_WAITING when the keys are there,
// WAIT_CANCELED after CANCEL_WAIT).
inline constexpr uint8_t kReady = 0, kNotReady = 1;
inline constexpr uint8_t kStopWaiting = 0, kWaitCanceled = 1;

// What one query may carry. torch's own libuv server allows keys of 8 KiB,
// values of 8 MiB and 128 Ki keys in one query; gloo's and NCCL's
// rendezvous use keys under 100 bytes and values under 1 KiB.
struct Limits {
  size_t max_key = 8 * 1024;
  size_t max_value = 8u << 20;
  size_t max_keys_per_query = 128 * 1024;
};

struct Query {
  Op op = Op::kPing;
  std::vector<std::string> keys;
  std::vector<std::string> values;  // SET/APPEND: 1; COMPARE_SET: expected, desired; MULTI_SET: one per key
  int64_t number = 0;               // ADD's delta, PING's nonce, VALIDATE's magic
};

struct Parsed {
  enum class Status { kNeedMore, kQuery, kRefused };
  Status status = Status::kNeedMore;
  Query query;
  size_t used = 0;   // bytes of the buffer the query took (kQuery)
  std::string why;   // kRefused: the query type or field, and the dialect, for the user
};

// Reads the first query in `in`. `dialect` is the connection's: kUnknown
// before its first query, which decides it (and sets it). Refuses a type
// the dialect does not know or dlaunch does not serve (legacy WATCH_KEY,
// the validated dialect's queues and anything newer), a second VALIDATE
// with another magic, and fields over `limits`; the reason names them.
Parsed parse(std::string_view in, Dialect& dialect, const Limits& limits);
Parsed parse(std::string_view in, Dialect& dialect);  // with the default Limits

// "torch 1.x or 2.0, legacy" or "torch 2.x, validated".
std::string dialect_name(Dialect d);

// Replies.
void put_u8(std::string& out, uint8_t v);
void put_u32(std::string& out, uint32_t v);
void put_i64(std::string& out, int64_t v);
void put_bytes(std::string& out, std::string_view v);  // u64 length, then the bytes

// Encodes `q` as torch's client of `dialect` sends it (tests and benchmarks
// use it as a client).
std::string encode(const Query& q, Dialect dialect);

}  // namespace dl::rdzv::c10d
