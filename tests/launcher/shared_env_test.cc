// hoist_shared_env: the launch message's shared variables sent once, every
// rank's resulting environment unchanged.
#include <catch2/catch.hpp>

#include "agent/rank_environment.h"
#include "launcher/shared_env.h"

using namespace dl;
namespace msg = control::msg;

namespace {
// What the agent gives rank `i` (before the PMIx server's variables).
control::EnvVars effective(const msg::Launch& m, size_t i) {
  return agent::compose_rank_env({{"HOME", "/root"}, {"WORLD_SIZE", "inherited"}}, m.env, m.ranks[i].env, {});
}
}  // namespace

TEST_CASE("shared env: what every rank sets alike is sent once, each rank's environment is unchanged",
          "[launcher]") {
  msg::Launch m;
  m.env = {{"OMP_NUM_THREADS", "1"}, {"MASTER_PORT", "stale"}};  // -x exports; a rank's value overrides
  for (int r = 0; r < 64; ++r) {
    msg::RankSpec s;
    s.rank = r;
    s.env = {{"RANK", std::to_string(r)}, {"WORLD_SIZE", "64"}, {"MASTER_ADDR", "10.0.0.1"},
             {"MASTER_PORT", "29500"}, {"DLAUNCH_TOKEN", std::string(64, 'a')}};
    if (r == 5) s.env["ONLY_FIVE"] = "x";                 // one rank only: stays its own
    s.env["CUDA_VISIBLE_DEVICES"] = r == 7 ? "1" : "0";  // differs once: stays with every rank
    m.ranks.push_back(s);
  }
  const msg::Launch before = m;
  launcher::hoist_shared_env(m);
  for (size_t i = 0; i < m.ranks.size(); ++i) CHECK(effective(m, i) == effective(before, i));
  CHECK(m.env.at("WORLD_SIZE") == "64");
  CHECK(m.env.at("MASTER_PORT") == "29500");
  CHECK(m.env.at("OMP_NUM_THREADS") == "1");
  CHECK(m.ranks[0].env == control::EnvVars{{"RANK", "0"}, {"CUDA_VISIBLE_DEVICES", "0"}});
  CHECK(m.ranks[5].env.at("ONLY_FIVE") == "x");
  CHECK(m.ranks[7].env.at("CUDA_VISIBLE_DEVICES") == "1");
  // Smaller on the wire, and it survives encode and decode.
  CHECK(control::encode(m).size() * 2 < control::encode(before).size());
  auto back = std::get<msg::Launch>(control::decode_from_launcher(control::encode(m)));
  for (size_t i = 0; i < m.ranks.size(); ++i) CHECK(effective(back, i) == effective(before, i));
}

TEST_CASE("shared env: one rank's message is left as it is", "[launcher]") {
  msg::Launch m;
  msg::RankSpec s;
  s.env = {{"RANK", "0"}, {"WORLD_SIZE", "1"}};
  m.ranks.push_back(s);
  launcher::hoist_shared_env(m);
  CHECK(m.env.empty());
  CHECK(m.ranks[0].env.size() == 2);
}
