#include "wire/frame.h"

#include "errors/error.h"

namespace dl::wire {

void append_frame(std::string& out, uint8_t type, std::string_view payload) {
  const auto n = static_cast<uint32_t>(payload.size());
  const char header[kHeaderSize] = {static_cast<char>(n >> 24), static_cast<char>(n >> 16),
                                    static_cast<char>(n >> 8), static_cast<char>(n),
                                    static_cast<char>(type)};
  out.append(header, kHeaderSize);
  out.append(payload);
}

std::string encode_frame(uint8_t type, std::string_view payload) {
  std::string out;
  out.reserve(kHeaderSize + payload.size());
  append_frame(out, type, payload);
  return out;
}

void FrameParser::feed(const char* data, size_t n) {
  // Compact lazily so a long stream of small frames stays O(n).
  if (pos_ > 0 && pos_ >= buf_.size() / 2) {
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  buf_.append(data, n);
}

std::optional<Frame> FrameParser::next() {
  if (buffered() < kHeaderSize) return std::nullopt;
  const auto* p = reinterpret_cast<const unsigned char*>(buf_.data() + pos_);
  const size_t len = (size_t{p[0]} << 24) | (size_t{p[1]} << 16) | (size_t{p[2]} << 8) | p[3];
  if (len > max_payload_) {
    throw RemoteError("peer sent a frame of " + std::to_string(len) + " bytes, over the limit of " +
                      std::to_string(max_payload_) + " bytes");
  }
  if (buffered() < kHeaderSize + len) return std::nullopt;
  Frame f;
  f.type = p[4];
  f.payload.assign(buf_, pos_ + kHeaderSize, len);
  pos_ += kHeaderSize + len;
  if (pos_ == buf_.size()) {
    buf_.clear();
    pos_ = 0;
  }
  return f;
}

}  // namespace dl::wire
