// The hostfile, -H and Slurm node-list parsers (hostfiles/) on mutated
// OpenMPI, MPICH and DeepSpeed lines, then placement on what they accept.
// A bad file is a user's typo: it must end in a dl::ParseError naming the
// spot, never in a crash, a std::out_of_range or an internal exception
// (HostSyntaxError must not escape the public entry points).
#include <catch2/catch.hpp>

#include "errors/error.h"
#include "hostfiles/hostfile.h"
#include "hostfiles/hostlist.h"
#include "hostfiles/placement.h"
#include "tests/fuzz/fuzz_harness.h"

using namespace dl::fuzz;
namespace hf = dl::hostfiles;

namespace {

const std::vector<std::string> kWords = {
    "slots=", "max_slots=", "max-slots=", "port=", "slots=4", "slots=0", "slots=999999999", "max_slots=2",
    "node", "node1", "gpu-01", "[", "]", "[1-4]", "[01-16,20]", "[0-65535]", "-", ",", ":", ":4", ":2222:8",
    "@", "alice@", "#", " # comment", "\n", " ", "\t", "=", "[::1]", "[fe80::1%eth0]", "1", "0", "65535", "65536",
};

// Places a few ranks on what was accepted: counts that add up past int, a
// zero-slot host or a max below slots must be refused, not wrap.
void place_some(const std::vector<hf::HostEntry>& hosts, size_t salt) {
  for (auto map_by : {hf::MapBy::kSlot, hf::MapBy::kNode}) {
    hf::PlacementOptions o;
    o.np = 1 + static_cast<int>(salt % 7);
    o.map_by = map_by;
    o.per_node = static_cast<int>(salt % 3);
    o.oversubscribe = salt % 2;
    try {
      (void)hf::place(hosts, o);
    } catch (const dl::UsageError&) {
    }
  }
}

bool parse_file(std::string_view text) {
  const auto hosts = hf::parse_hostfile_text(text, "fuzz-hosts");
  if (hosts.empty()) throw FuzzFailure("accepted a hostfile with no hosts");
  for (const auto& e : hosts) (void)hf::describe(e);
  place_some(hosts, text.size());
  return true;
}

bool parse_list(std::string_view text) {
  const auto hosts = hf::parse_host_list(text);
  if (hosts.empty()) throw FuzzFailure("accepted a -H list with no hosts");
  place_some(hosts, text.size());
  return true;
}

}  // namespace

TEST_CASE("fuzz: hostfile parser refuses bad OpenMPI/MPICH/DeepSpeed files with dl::Error", "[fuzz][hostfiles]") {
  const std::vector<std::string> seeds = {
      // OpenMPI
      "# the cluster\nnode1 slots=2 max_slots=4   # first\n\tnode2   slots=4\n\nnode1 slots=1 max-slots=2\nnode3\n",
      "alice@node[01-04] slots=2\nbob@gpu[1-2,7] slots=8 max_slots=16\n",
      "node1 port=2222 slots=2\n[node2]:2222 slots=2\n[fe80::1%eth0]:22 slots=1\n[::1]\n",
      // MPICH
      "n1:4\nn2:1\nn1:2\n",
      "[node1]:2222:4\nrack[1-2]-n[1-2]:2\n",
      // DeepSpeed
      "worker-1 slots=8\nworker-2 slots=8\n",
      "10.0.0.1 slots=4\n10.0.0.2 slots=4\n",
  };
  FuzzOptions opt;
  opt.seed = 0x40575;
  opt.iterations = 80000;
  opt.max_len = 1024;
  opt.dictionary = kWords;
  const FuzzStats st = fuzz_decoder("hostfile", parse_file, seeds, opt);
  CHECK(st.accepted > st.runs / 100);
}

TEST_CASE("fuzz: -H lists and Slurm node lists refuse bad items with dl::Error", "[fuzz][hostfiles]") {
  FuzzOptions opt;
  opt.seed = 0x40576;
  opt.iterations = 40000;
  opt.max_len = 256;
  opt.dictionary = kWords;
  const std::vector<std::string> lists = {
      "node1,node2:4", "node[1-4]:2,gpu5", "alice@node1,[node2]:2222:4,[::1]", "rack[1-2]-n[01-02]", "h:1,h:2,h",
  };
  fuzz_decoder("-H list", parse_list, lists, opt);
  opt.seed = 0x40577;
  auto slurm = [](std::string_view s) { return !hf::expand_hostlist(s, "SLURM_JOB_NODELIST").empty(); };
  fuzz_decoder("Slurm node list", slurm, {"node[01-03],gpu5,c[1-2]", "n1", "a[1-2]b[3-4],z"}, opt);
}
