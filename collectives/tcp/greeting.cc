#include "collectives/tcp/greeting.h"

#include <algorithm>

#include "wire/coding.h"
#include "wire/frame.h"

namespace dl::coll::tcp {
namespace {

// The peer's own words (a protocol tag it sent) end up in error(): only
// printable ASCII, and not much of it, reaches a message.
std::string printable(std::string_view s) {
  std::string out(s.substr(0, 120));
  for (char& c : out)
    if (c < 0x20 || c > 0x7e) c = '?';
  return out;
}

}  // namespace

Greeting::Greeting(std::string token, int rank, int size)
    : hs_(std::move(token), kHandshakeTag), rank_(rank), size_(size) {}

Greeting::Greeting(std::string token, int rank, int size, std::string nonce)
    : hs_(std::move(token), kHandshakeTag, std::move(nonce)), rank_(rank), size_(size) {}

size_t Greeting::wanted() const {
  switch (state_) {
    case State::kHello:
    case State::kProof:
      if (buf_.size() < wire::kFrameHeaderSize) return wire::kFrameHeaderSize - buf_.size();
      return wire::kFrameHeaderSize + wire::decode_frame_header(buf_.data()).length - buf_.size();
    case State::kRank:
      return 4 - buf_.size();
    default:
      return 0;
  }
}

size_t Greeting::feed(std::string_view in) {
  const size_t n = std::min(in.size(), wanted());
  buf_.append(in.substr(0, n));
  step();
  return n;
}

std::string Greeting::take_reply() { return std::exchange(reply_, {}); }

void Greeting::step() {
  if (state_ == State::kRank) {
    if (buf_.size() < 4) return;
    const uint32_t j = wire::get_be32(buf_.data());
    if (j <= static_cast<uint32_t>(rank_) || j >= static_cast<uint32_t>(size_))
      return refuse("rank " + std::to_string(j) + " does not connect to rank " + std::to_string(rank_) + " of " +
                        std::to_string(size_),
                    true);
    peer_ = static_cast<int>(j);
    state_ = State::kDone;
    return;
  }
  if ((state_ != State::kHello && state_ != State::kProof) || buf_.size() < wire::kFrameHeaderSize) return;
  const wire::FrameHeader h = wire::decode_frame_header(buf_.data());
  if (h.length > wire::kMaxHandshakePayload)
    return refuse("handshake frame of " + std::to_string(h.length) + " bytes, over the limit of " +
                      std::to_string(wire::kMaxHandshakePayload),
                  true);
  if (buf_.size() < wire::kFrameHeaderSize + h.length) return;
  const std::string payload = buf_.substr(wire::kFrameHeaderSize);
  buf_.clear();
  on_frame(h.type, payload);
}

void Greeting::on_frame(uint8_t type, std::string_view payload) {
  if (state_ == State::kHello) {
    if (type != wire::kHandshake) return refuse("unexpected frame before the handshake", true);
    auto answer = hs_.answer(payload);
    if (!answer) return refuse(hs_.error(), true);
    reply_ += wire::encode_frame(wire::kHandshake, *answer);
    state_ = State::kProof;
    return;
  }
  if (type == wire::kErrorText) return refuse("it refused this rank's answer (another job's token?)", false);
  if (type != wire::kHandshake) return refuse("unexpected frame during the handshake", true);
  if (!hs_.verify(payload)) return refuse(hs_.error(), true);
  state_ = State::kRank;
}

void Greeting::refuse(const std::string& why, bool tell) {
  error_ = printable(why);
  if (tell) reply_ = wire::encode_frame(wire::kErrorText, why);
  state_ = State::kRefused;
}

}  // namespace dl::coll::tcp
