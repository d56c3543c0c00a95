#include "wire/frame.h"

#include "errors/error.h"
#include "wire/coding.h"

namespace dl::wire {

void append_frame(std::string& out, uint8_t type, std::string_view payload) {
  char header[kHeaderSize];
  encode_frame_header(header, static_cast<uint32_t>(payload.size()), type);
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
  const FrameHeader h = decode_frame_header(buf_.data() + pos_);
  const size_t len = h.length;
  if (len > max_payload_) {
    throw RemoteError("peer sent a frame of " + std::to_string(len) + " bytes, over the limit of " +
                      std::to_string(max_payload_) + " bytes");
  }
  if (buffered() < kHeaderSize + len) return std::nullopt;
  Frame f;
  f.type = h.type;
  f.payload.assign(buf_, pos_ + kHeaderSize, len);
  pos_ += kHeaderSize + len;
  if (pos_ == buf_.size()) {
    buf_.clear();
    pos_ = 0;
  }
  return f;
}

}  // namespace dl::wire
