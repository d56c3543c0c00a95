// The agent's PMI server (mpi/pmi/) on mutated PMI-1 and PMI-2 input: a
// rank may send anything on PMI_FD. The parser must take off whole commands
// or refuse them without reading past the input; the handler, fed the same
// bytes in chunks, must answer and never crash; a fence result the launcher
// relays must decode or be refused with a dl::Error.
#include <catch2/catch.hpp>

#include "mpi/pmi/pmi_server.h"
#include "tests/fuzz/fuzz_harness.h"

using namespace dl::fuzz;
using namespace dl::mpi::pmi;

namespace {

const std::vector<std::string> kSeeds = {
    "cmd=init pmi_version=1 pmi_subversion=1\n",
    "cmd=get_maxes\ncmd=get_appnum\ncmd=get_my_kvsname\n",
    "cmd=put kvsname=dl-job key=bc-0 value=abc\ncmd=barrier_in\n",
    "cmd=get kvsname=dl-job key=PMI_process_mapping\n",
    "cmd=abort exitcode=3\n",
    "mcmd=spawn\nnprocs=2\nexecname=a\nendcmd\n",
    "cmd=init pmi_version=2 pmi_subversion=0\n" + encode(2, "fullinit", {{"pmirank", "0"}, {"threaded", "FALSE"}}),
    encode(2, "kvs-put", {{"key", "k"}, {"value", "v;;w"}}) + encode(2, "kvs-fence", {{"thrid", "0x1"}}),
    encode(2, "info-getnodeattr", {{"key", "a"}, {"wait", "TRUE"}}) + encode(2, "info-putnodeattr", {{"key", "a"}, {"value", "b"}}),
    encode(2, "info-getjobattr", {{"key", "PMI_process_mapping"}}),
};

FuzzOptions options() {
  FuzzOptions o;
  o.dictionary = {"cmd=", "mcmd=", " ", "=", "\n", ";", ";;", "endcmd\n", "    ", "65536 ", "000010", "barrier_in",
                  "kvs-fence", "thrid=", "key=", "value="};
  return o;
}

bool parse_all(std::string_view in) {
  bool any = false;
  while (!in.empty()) {
    const Parsed p = next_command(in);
    if (p.kind == Parsed::kNeedMore) break;
    if (p.consumed == 0 || p.consumed > in.size())
      throw FuzzFailure("consumed " + std::to_string(p.consumed) + " of " + std::to_string(in.size()) + " bytes");
    if (p.kind == Parsed::kCommand) {
      any = true;
      if (p.command.name.empty()) throw FuzzFailure("a command without a name");
    }
    if (p.kind == Parsed::kError && p.fatal) break;
    in.remove_prefix(p.consumed);
  }
  return any;
}

bool serve(std::string_view in) {
  PmiJob job;
  job.map.nspace = "dl-job", job.map.world_size = 2, job.map.universe_size = 2;
  job.map.node_hosts = {"h0"}, job.map.node_ranks = {{0, 1}};
  job.process_mapping = "(vector,(0,1,2))";
  size_t replied = 0;
  std::vector<std::pair<uint64_t, std::string>> fences;
  PmiServer s(job, PmiServer::Hooks{[&](int, std::string b) { replied += b.size(); }, [](int) {},
                                    [&](uint64_t id, std::string b) { fences.emplace_back(id, std::move(b)); },
                                    [&](int, int, std::string) { ++replied; }, [](const std::string&) {}});
  // Rank 0 gets it in uneven chunks, rank 1 whole.
  for (size_t i = 0, step = 1; i < in.size(); i += step, step = step * 2 + 1)
    s.on_bytes(0, in.substr(i, std::min(step, in.size() - i)));
  s.on_bytes(1, in);
  for (auto& [id, blob] : fences) s.fence_done(id, blob);
  s.on_closed(0), s.on_closed(1);
  return replied > 0;  // an answer, or an abort (which has none)
}

}  // namespace

TEST_CASE("fuzz: PMI-1/PMI-2 parser takes off whole commands or refuses them", "[fuzz][pmi]") {
  fuzz_decoder("pmi next_command", parse_all, kSeeds, options());
}

TEST_CASE("fuzz: the PMI server answers any byte stream without crashing", "[fuzz][pmi]") {
  auto o = options();
  o.iterations = 4000;
  fuzz_decoder("pmi server", serve, kSeeds, o);
}

TEST_CASE("fuzz: PMI fence data decodes or is refused", "[fuzz][pmi]") {
  fuzz_decoder("pmi decode_puts", [](std::string_view in) { return !decode_puts(in).empty(); },
               {encode_puts({{"a", "1"}, {"bc-0", "xyz"}}), encode_puts({{"k", ""}})}, FuzzOptions{});
}
