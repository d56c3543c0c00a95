#pragma once
// Big-endian integer coding and the frame header: the one home for the byte
// layouts every dlaunch protocol shares (frames, control data and fence
// frames, the store's records, the collectives' bootstrap). Header-only.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace dl::wire {

inline void put_be32(char* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>(v >> (24 - 8 * i));
}
inline void put_be64(char* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(v >> (56 - 8 * i));
}
inline uint32_t get_be32(const char* in) {
  const auto* u = reinterpret_cast<const unsigned char*>(in);
  return (uint32_t{u[0]} << 24) | (uint32_t{u[1]} << 16) | (uint32_t{u[2]} << 8) | uint32_t{u[3]};
}
inline uint64_t get_be64(const char* in) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<unsigned char>(in[i]);
  return v;
}
inline void append_be32(std::string& out, uint32_t v) {
  char b[4];
  put_be32(b, v);
  out.append(b, 4);
}
inline void append_be64(std::string& out, uint64_t v) {
  char b[8];
  put_be64(b, v);
  out.append(b, 8);
}

// The frame header (frame.h): u32 payload length (big-endian) | u8 type.
inline constexpr size_t kFrameHeaderSize = 5;
struct FrameHeader {
  uint32_t length = 0;
  uint8_t type = 0;
};
inline FrameHeader decode_frame_header(const char* h) {
  return {get_be32(h), static_cast<uint8_t>(h[4])};
}
inline void encode_frame_header(char* out, uint32_t length, uint8_t type) {
  put_be32(out, length);
  out[4] = static_cast<char>(type);
}

}  // namespace dl::wire
