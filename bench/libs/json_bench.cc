// json_bench: the record codec's reading (wire/record.h, its own lexer)
// against nlohmann::json's SAX parser driving the same fields() mapping
// (sax_record.h), on the messages every launch reads. Each row decodes one
// text both ways, checks that both give the same record, and prints the
// median time per decode and the ratio. Two floors beside them:
// nlohmann::json::accept (its lexer and parser, no output at all) and
// nlohmann::json::parse (a document tree). Then what each refuses that the
// other takes.
//
//   json_bench [rounds]    (default 7 rounds of about 30 ms per column)
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/libs/sax_record.h"
#include "control/messages.h"
#include "wire/record.h"

namespace msg = dl::control::msg;
namespace wire = dl::wire;
using namespace dl::bench;

namespace {

// launcher/node_group.h's NodeRecord (per-node mode's record at node/K).
struct NodeRecord {
  int node_rank = 0;
  std::string host, addr;
  int nproc = 1, master_port = 0, pid = 0;
  std::optional<std::string> machine;
  std::optional<bool> torch_store;
  template <class S, class V> static void fields(S& s, V& v) {
    v("node_rank", s.node_rank), v("host", s.host), v("addr", s.addr), v("nproc", s.nproc);
    v("master_port", s.master_port), v("pid", s.pid), v("machine", s.machine), v("torch_store", s.torch_store);
  }
};

template <class M> std::string tagged(const M& m) {
  std::string out = "{\"t\":";
  wire::append_json_string(out, M::kType);
  wire::append_fields(out, m, false);
  return out + "}";
}

msg::Hello hello() {
  msg::Hello h;
  h.version = "0.1.0", h.node = 3, h.host = "gpu-node-017.cluster.example", h.pid = 481516, h.free_port = 41234;
  h.gpus = {"0", "1", "2", "3", "4", "5", "6", "7"}, h.pmix = true, h.gpu_vendor = "nvidia";
  h.gpu_numa = std::vector<int>{0, 0, 0, 0, 1, 1, 1, 1};
  h.machine = "4c4c4544-0042-3510-8053-b4c04f4e4d32";
  msg::CpuReport cpu;
  std::vector<int> n0, n1;
  for (int c = 0; c < 32; ++c) {
    cpu.cores.push_back({c, c + 64});
    (c < 16 ? n0 : n1).insert((c < 16 ? n0 : n1).end(), {c, c + 64});
  }
  cpu.numa = {n0, n1}, cpu.numa_ids = std::vector<int>{0, 1}, cpu.packages = std::vector<std::vector<int>>{n0, n1};
  h.cpu = cpu;
  return h;
}

msg::Launch launch(int ranks) {
  msg::Launch l;
  l.env = {{"MASTER_ADDR", "10.1.0.17"}, {"MASTER_PORT", "41234"}, {"WORLD_SIZE", std::to_string(ranks * 4)}};
  l.wdir = "/home/user/experiments/run-42";
  l.argv = std::vector<std::string>{"python3", "train.py", "--config", "configs/llama-7b.yaml", "--lr", "3e-4"};
  msg::RankIdentity id;
  for (int r = 0; r < ranks; ++r) {
    msg::RankSpec s;
    s.rank = 3 * ranks + r;
    s.env = {{"CUDA_VISIBLE_DEVICES", std::to_string(r % 8)}, {"DLAUNCH_GPUS", std::to_string(r % 8)}};
    s.cpus = std::vector<int>{4 * r, 4 * r + 1, 4 * r + 2, 4 * r + 3};
    l.ranks.push_back(s);
    id.cross_rank.push_back(3), id.cross_size.push_back(4);
  }
  id.node = 3;
  l.identity = id;
  l.stdout_pty = true;
  return l;
}

msg::LaunchEnv launch_env() {
  msg::LaunchEnv e;
  for (int i = 0; i < 60; ++i)
    e.env["VAR_" + std::to_string(i)] = "/usr/local/lib/python3.11/dist-packages/torch/lib:/opt/value/" + std::to_string(i);
  return e;
}

NodeRecord node_record() {
  return NodeRecord{2, "gpu-node-017", "10.1.0.17", 8, 0, 481516, std::string("4c4c4544-0042-3510-8053"), std::nullopt};
}

// This thread's CPU time in nanoseconds: on a shared machine, wall time
// also counts the other processes' turns.
double cpu_ns() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e9 + static_cast<double>(t.tv_nsec);
}

// Median CPU nanoseconds per call of `f` over `rounds` rounds of about 30 ms.
double time_ns(const std::function<void()>& f, int rounds) {
  size_t n = 1;
  for (;;) {
    const double t0 = cpu_ns();
    for (size_t i = 0; i < n; ++i) f();
    if (cpu_ns() - t0 > 10e6) break;
    n *= 2;
  }
  n *= 3;
  std::vector<double> per;
  for (int r = 0; r < rounds; ++r) {
    const double t0 = cpu_ns();
    for (size_t i = 0; i < n; ++i) f();
    per.push_back((cpu_ns() - t0) / static_cast<double>(n));
  }
  std::sort(per.begin(), per.end());
  return per[per.size() / 2];
}

int failures = 0;

// One row: `text` decoded as M by the codec and by the SAX tape, compared.
template <class M> void row(const char* label, const std::string& text, const char* tag, int rounds) {
  const wire::RecordName name{label};
  auto hand = [&] {
    (void)wire::check_object(text, name, tag);
    M m{};
    wire::read_checked_record(text, name, m);
    return m;
  };
  Tape tape;
  auto sax = [&] {
    (void)sax_check_object(text, name, tag, tape);
    M m{};
    sax_read_record(tape, name, m);
    return m;
  };
  if (wire::encode_record(hand()) != wire::encode_record(sax())) {
    std::printf("# WRONG: %s decodes differently through the SAX tape\n", label);
    ++failures;
  }
  const double h = time_ns([&] { (void)hand(); }, rounds);
  const double s = time_ns([&] { (void)sax(); }, rounds);
  const double a = time_ns([&] { (void)nlohmann::json::accept(text); }, rounds);
  const double d = time_ns([&] { const auto j = nlohmann::json::parse(text); (void)j; }, rounds);
  std::printf("%-16s %7zu %9.2f %9.2f %7.2f %10.2f %9.2f\n", label, text.size(), h / 1e3, s / 1e3, s / h, a / 1e3,
              d / 1e3);
}

// Whether each side takes `text` as a NodeRecord-like record {s, x}.
struct Probe {
  std::string s;
  std::optional<double> x;
  template <class S, class V> static void fields(S& s, V& v) { v("s", s.s), v("x", s.x); }
};

void semantics(const char* what, const std::string& text) {
  const wire::RecordName name{"probe"};
  auto verdict = [&](auto&& f) -> std::string {
    try {
      f();
      return "accepted";
    } catch (const std::exception& e) {
      return std::string("refused (") + e.what() + ")";
    }
  };
  Tape tape;
  std::printf("# %-38s codec: %s\n#  %38s SAX: %s\n", what,
              verdict([&] { (void)wire::decode_record<Probe>(text, name); }).c_str(), "",
              verdict([&] {
                (void)sax_check_object(text, name, {}, tape);
                Probe p;
                sax_read_record(tape, name, p);
              }).c_str());
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::max(1, std::atoi(argv[1])) : 7;
  std::printf("# decode = check the whole text, then read it into the record (CPU us per decode, median of %d)\n", rounds);
  std::printf("%-16s %7s %9s %9s %7s %10s %9s\n", "#message", "bytes", "codec_us", "sax_us", "ratio", "accept_us",
              "tree_us");
  row<msg::Hello>("hello", tagged(hello()), "t", rounds);
  row<msg::Launch>("launch(8 ranks)", tagged(launch(8)), "t", rounds);
  row<msg::Launch>("launch(64 ranks)", tagged(launch(64)), "t", rounds);
  row<msg::LaunchEnv>("launch_env(60)", tagged(launch_env()), "t", rounds);
  row<NodeRecord>("node record", wire::encode_record(node_record()), "", rounds);
  std::printf("# what the codec's strings carry (bytes) and its range errors, both ways:\n");
  semantics("a Latin-1 value (\"caf\\xe9\"):", std::string("{\"s\":\"caf\xe9\"}"));
  semantics("a double out of range (1e999):", R"({"s":"a","x":1e999})");
  return failures ? 1 : 0;
}
