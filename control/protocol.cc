#include "control/protocol.h"

#include "errors/error.h"
#include "wire/coding.h"

namespace dl::control {

std::string data_frame(int rank, Stream stream, std::string_view bytes) {
  std::string payload;
  payload.reserve(5 + bytes.size());
  wire::append_be32(payload, static_cast<uint32_t>(rank));
  payload.push_back(static_cast<char>(stream));
  payload.append(bytes);
  return wire::encode_frame(wire::kData, payload);
}

DataChunk parse_data(std::string_view p) {
  if (p.size() < 5) throw RemoteError("malformed data frame from agent (" + std::to_string(p.size()) + " bytes)");
  const uint32_t r = wire::get_be32(p.data());
  const auto stream = static_cast<uint8_t>(p[4]);
  if (r > static_cast<uint32_t>(INT32_MAX) || stream > kStderr)
    throw RemoteError("malformed data frame (rank " + std::to_string(r) + ", stream " + std::to_string(stream) + ")");
  return {static_cast<int>(r), static_cast<Stream>(stream), p.substr(5)};
}

std::string fence_name(uint64_t id) {
  if (id & kPmiFenceBit) return "PMI fence " + std::to_string(id & ~kPmiFenceBit);
  return "fence " + std::to_string(id);
}

std::string fence_frame(uint64_t id, std::string_view blob) {
  std::string payload;
  payload.reserve(8 + blob.size());
  wire::append_be64(payload, id);
  payload.append(blob);
  return wire::encode_frame(kFence, payload);
}

FenceChunk parse_fence(std::string_view p) {
  if (p.size() < 8) throw RemoteError("malformed fence frame (" + std::to_string(p.size()) + " bytes)");
  return {wire::get_be64(p.data()), p.substr(8)};
}

std::string routed_frame(uint32_t node, uint8_t type, std::string_view payload) {
  std::string out;
  out.reserve(wire::kHeaderSize + 5 + payload.size());
  wire::append_be32(out, static_cast<uint32_t>(5 + payload.size()));
  out.push_back(static_cast<char>(kRouted));
  wire::append_be32(out, node);
  out.push_back(static_cast<char>(type));
  out.append(payload);
  return out;
}

std::string routed_frame(uint32_t node, std::string_view inner) {
  // The inner frame less its length (the outer one's length covers it).
  return routed_frame(node, static_cast<uint8_t>(inner.at(4)), inner.substr(wire::kHeaderSize));
}

RoutedChunk parse_routed(std::string_view p) {
  if (p.size() < 5) throw RemoteError("malformed routed frame (" + std::to_string(p.size()) + " bytes)");
  RoutedChunk c{wire::get_be32(p.data()), {}};
  c.inner.type = static_cast<uint8_t>(p[4]);
  if (c.inner.type == kRouted || c.inner.type == wire::kHandshake)
    throw RemoteError("malformed routed frame (inner frame type " + std::to_string(c.inner.type) + ")");
  c.inner.payload.assign(p.substr(5));
  return c;
}

}  // namespace dl::control
