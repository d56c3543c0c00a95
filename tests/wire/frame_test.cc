#include <catch2/catch.hpp>

#include "errors/error.h"
#include "wire/frame.h"
#include "wire/socket.h"

using namespace dl::wire;

TEST_CASE("frames survive being fed one byte at a time", "[wire]") {
  std::string stream = encode_frame(kJson, "{\"a\":1}") + encode_frame(kData, std::string(1000, 'x')) +
                       encode_frame(kData, "");
  FrameParser p(4096);
  std::vector<Frame> got;
  for (char c : stream) {
    p.feed(&c, 1);
    while (auto f = p.next()) got.push_back(*f);
  }
  REQUIRE(got.size() == 3);
  CHECK(got[0].type == kJson);
  CHECK(got[0].payload == "{\"a\":1}");
  CHECK(got[1].payload == std::string(1000, 'x'));
  CHECK(got[2].payload.empty());
  CHECK(p.buffered() == 0);
}

TEST_CASE("a frame over the limit is refused before its payload arrives", "[wire]") {
  FrameParser p(100);
  std::string header = encode_frame(kData, std::string(101, 'y')).substr(0, kHeaderSize);
  p.feed(header.data(), header.size());
  REQUIRE_THROWS_AS(p.next(), dl::RemoteError);
}

TEST_CASE("split_host_port takes names, v4, v6 and rejects garbage", "[wire]") {
  CHECK(split_host_port("node1:29500", "x") == std::pair<std::string, uint16_t>{"node1", 29500});
  CHECK(split_host_port("[::1]:7", "x") == std::pair<std::string, uint16_t>{"::1", 7});
  CHECK_THROWS_AS(split_host_port("node1", "--rdzv"), dl::UsageError);
  CHECK_THROWS_WITH(split_host_port("node1:99999", "--rdzv"), Catch::Contains("0-65535"));
}
