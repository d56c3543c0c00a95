#pragma once
// Length-prefixed frames, the unit of every dlaunch protocol (control, store,
// collectives bootstrap). Layout, documented in docs/wire-protocol.md:
//
//   u32 payload length (big-endian) | u8 frame type | payload bytes
//
// Each protocol picks its own hard maximum payload size; a frame that claims
// more is a protocol error and the connection is closed.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dl::wire {

inline constexpr size_t kHeaderSize = 5;  // wire/coding.h decodes it (kFrameHeaderSize)

// Frame types shared by all protocols; a protocol may add its own from 16 up.
enum FrameType : uint8_t {
  kHandshake = 0,  // token handshake messages (handshake.h)
  kJson = 1,       // a UTF-8 JSON control message
  kData = 2,       // raw bytes (output, bulk data)
  kErrorText = 3,  // a human-readable refusal, sent just before closing
};

struct Frame {
  uint8_t type = 0;
  std::string payload;
};

// Appends one frame (header and payload) to `out`.
void append_frame(std::string& out, uint8_t type, std::string_view payload);
std::string encode_frame(uint8_t type, std::string_view payload);

// Incremental, pure frame parser: feed it bytes as they arrive, take whole
// frames out. Throws RemoteError when a header announces more than
// `max_payload` bytes; after that the parser must not be used.
class FrameParser {
 public:
  explicit FrameParser(size_t max_payload) : max_payload_(max_payload) {}
  void feed(const char* data, size_t n);
  std::optional<Frame> next();
  // Bytes received but not yet returned as a frame.
  size_t buffered() const { return buf_.size() - pos_; }

 private:
  size_t max_payload_;
  std::string buf_;
  size_t pos_ = 0;
};

}  // namespace dl::wire
