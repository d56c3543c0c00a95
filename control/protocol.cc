#include "control/protocol.h"

#include "errors/error.h"

namespace dl::control {

std::string json_frame(const nlohmann::json& msg) { return wire::encode_frame(wire::kJson, msg.dump()); }

std::string data_frame(int rank, Stream stream, std::string_view bytes) {
  std::string payload;
  payload.reserve(5 + bytes.size());
  const auto r = static_cast<uint32_t>(rank);
  const char head[5] = {static_cast<char>(r >> 24), static_cast<char>(r >> 16), static_cast<char>(r >> 8),
                        static_cast<char>(r), static_cast<char>(stream)};
  payload.append(head, 5).append(bytes);
  return wire::encode_frame(wire::kData, payload);
}

DataChunk parse_data(std::string_view p) {
  if (p.size() < 5) throw RemoteError("malformed data frame from agent (" + std::to_string(p.size()) + " bytes)");
  const auto* u = reinterpret_cast<const unsigned char*>(p.data());
  const uint32_t r = (uint32_t{u[0]} << 24) | (uint32_t{u[1]} << 16) | (uint32_t{u[2]} << 8) | u[3];
  return {static_cast<int>(r), static_cast<Stream>(u[4]), p.substr(5)};
}

std::string fence_frame(uint64_t id, std::string_view blob) {
  std::string payload(8, '\0');
  for (int i = 0; i < 8; ++i) payload[static_cast<size_t>(i)] = static_cast<char>(id >> (56 - 8 * i));
  payload.append(blob);
  return wire::encode_frame(kFence, payload);
}

FenceChunk parse_fence(std::string_view p) {
  if (p.size() < 8) throw RemoteError("malformed fence frame (" + std::to_string(p.size()) + " bytes)");
  uint64_t id = 0;
  for (size_t i = 0; i < 8; ++i) id = (id << 8) | static_cast<unsigned char>(p[i]);
  return {id, p.substr(8)};
}

}  // namespace dl::control
