// MPMD app contexts (launcher/options/app_context.h) and what the launch plan makes
// of them: parsing `A : B` and --app files, ranks to contexts, and each rank's
// program, MPI_APPNUM, -x, --wdir and the PMIx app sizes.
#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>

#include "errors/error.h"
#include "launcher/options/app_context.h"
#include "launcher/launch_plan.h"
#include "launcher/options/options.h"

using namespace dl::launcher;
namespace msg = dl::control::msg;
namespace hf = dl::hostfiles;

namespace {
RunOptions parse(std::vector<std::string> args) {
  bool help = false;
  return parse_run_options(args, &help);
}

std::string usage_error(std::vector<std::string> args) {
  try {
    parse(std::move(args));
  } catch (const dl::UsageError& e) {
    return e.what();
  }
  return "(no error)";
}
}  // namespace

TEST_CASE("app contexts: ':' separates contexts, each with its own -n, -x, --wdir and program", "[launcher][mpmd]") {
  RunOptions o = parse({"-x", "G=1", "-n", "1", "./server", "--port", "7", ":", "-n", "3", "-x", "W=2", "--wdir",
                        "/w", "./worker", "a", ":", "-np", "2", "./third"});
  REQUIRE(o.apps.size() == 3);
  CHECK(o.np == 6);
  CHECK(o.command == std::vector<std::string>{"./server", "--port", "7"});
  // A -x before the first ':' is the first context's, as under mpirun and mpiexec.hydra.
  CHECK(o.exports.empty());
  CHECK(o.apps[0].np == 1);
  CHECK(o.apps[0].exports == std::vector<std::string>{"G=1"});
  CHECK(o.apps[1].np == 3);
  CHECK(o.apps[1].command == std::vector<std::string>{"./worker", "a"});
  CHECK(o.apps[1].exports == std::vector<std::string>{"W=2"});
  CHECK(o.apps[1].wdir == "/w");
  CHECK(o.apps[2].np == 2);
  CHECK(o.apps[2].command == std::vector<std::string>{"./third"});
  std::vector<int> by_rank;
  for (int r = 0; r < 6; ++r) by_rank.push_back(app_of_rank(o.apps, r));
  CHECK(by_rank == std::vector<int>{0, 1, 1, 1, 2, 2});
  CHECK(app_first_rank(o.apps, 2) == 4);
}

TEST_CASE("app contexts: one program stays one program, and '--' keeps ':' as an argument", "[launcher][mpmd]") {
  RunOptions o = parse({"-n", "2", "./app", "x"});
  CHECK(o.apps.empty());
  CHECK(o.np == 2);
  o = parse({"-n", "2", "--", "./app", "a", ":", "-n", "1", "b"});
  CHECK(o.apps.empty());
  CHECK(o.command == std::vector<std::string>{"./app", "a", ":", "-n", "1", "b"});
  // In a later context, '--' makes the rest its program's.
  o = parse({"-n", "1", "./a", ":", "-n", "1", "--", "./b", ":", "c"});
  REQUIRE(o.apps.size() == 2);
  CHECK(o.apps[1].command == std::vector<std::string>{"./b", ":", "c"});
}

TEST_CASE("app contexts: each bad ':' says what was expected", "[launcher][mpmd]") {
  CHECK_THAT(usage_error({"-n", "1", "./a", ":"}), Catch::Contains("expected an app context after the last ':'"));
  CHECK_THAT(usage_error({"-n", "1", "./a", ":", "-n", "2"}),
             Catch::Contains("app context 2: expected a program after its options, got the end of the command line"));
  CHECK_THAT(usage_error({"-n", "1", "./a", ":", ":", "./b"}),
             Catch::Contains("app context 2: expected a program after its options, got ':'"));
  CHECK_THAT(usage_error({"-n", "1", ":", "./b"}), Catch::Contains("app context 1: expected a program before ':'"));
  CHECK_THAT(usage_error({"./a", ":", "-n", "2", "./b"}), Catch::Contains("app context 1 (./a) needs -n N"));
  CHECK_THAT(usage_error({"-n", "1", "./a", ":", "-n", "x", "./b"}),
             Catch::Contains("app context 2: -n needs a positive number of ranks, got 'x'"));
  CHECK_THAT(usage_error({"-n", "1", "./a", ":", "-n", "1", "-H", "h", "./b"}),
             Catch::Contains("app context 2: -H: the hosts are the whole job's"));
  CHECK_THAT(usage_error({"-n", "1", "./a", ":", "-n", "1", "./b", ":", "-x"}),
             Catch::Contains("app context 3: -x needs a value"));
  CHECK_THAT(usage_error({"--app", "/nonexistent/app", "-n", "2"}),
             Catch::Contains("give -n on each line of FILE"));
}

TEST_CASE("app contexts: every context takes the first context's spellings of -n, -x and --wdir", "[launcher][mpmd]") {
  using Words = std::vector<std::string>;
  // Each spelling as the first context's option (before ./a) and as the
  // second context's (before ./b), after a first context of -n 1.
  auto first_and_second = [](const Words& spelling, const Words& second_np) {
    Words first = spelling;
    first.push_back("./a");
    Words mpmd = {"-n", "1", "./a", ":"};
    mpmd.insert(mpmd.end(), second_np.begin(), second_np.end());
    mpmd.insert(mpmd.end(), spelling.begin(), spelling.end());
    mpmd.push_back("./b");
    return std::pair{parse(first), parse(mpmd)};
  };
  for (const Words& np : {Words{"-n", "3"}, Words{"-n3"}, Words{"-np", "3"}, Words{"-np=3"}, Words{"--np", "3"},
                          Words{"--np=3"}, Words{"--ntasks", "3"}, Words{"--ntasks=3"}, Words{"-ntasks=3"}}) {
    INFO(np[0]);
    auto [first, mpmd] = first_and_second(np, {});
    CHECK(first.np == 3);
    REQUIRE(mpmd.apps.size() == 2);
    CHECK(mpmd.apps[1].np == 3);
    CHECK(mpmd.np == 4);
  }
  for (const Words& x : {Words{"-x", "V=1"}, Words{"-xV=1"}, Words{"--x=V=1"}, Words{"--x", "V=1"}}) {
    INFO(x[0]);
    auto [first, mpmd] = first_and_second(x, {"-n", "2"});
    CHECK(first.exports == Words{"V=1"});
    REQUIRE(mpmd.apps.size() == 2);
    CHECK(mpmd.apps[1].exports == Words{"V=1"});
  }
  for (const Words& mca : {Words{"-mca", "btl", "tcp"}, Words{"--mca", "btl", "tcp"}}) {
    Words w = {"-n", "1", "./a", ":", "-n", "2"};
    w.insert(w.end(), mca.begin(), mca.end());
    w.push_back("./b");
    const RunOptions o = parse(w);
    REQUIRE(o.apps.size() == 2);
    CHECK(o.apps[1].exports == Words{"OMPI_MCA_btl=tcp"});
  }
  for (const Words& wdir : {Words{"-wdir", "/w"}, Words{"-wdir=/w"}, Words{"-wd", "/w"}, Words{"--wd", "/w"},
                            Words{"--wdir=/w"}, Words{"--wdir", "/w"}}) {
    INFO(wdir[0]);
    auto [first, mpmd] = first_and_second(wdir, {"-n", "2"});
    CHECK(first.wdir == "/w");
    REQUIRE(mpmd.apps.size() == 2);
    CHECK(mpmd.apps[1].wdir == "/w");
  }
  // Hydra's -env NAME VALUE, with mpirun's -np=N, in a third context.
  const RunOptions o = parse({"-np=2", "./a", ":", "-np", "1", "./b", ":", "-np=3", "-env", "E", "v w", "./c", "c1"});
  REQUIRE(o.apps.size() == 3);
  CHECK(o.np == 6);
  CHECK(o.apps[0].np == 2);
  CHECK(o.apps[2].np == 3);
  CHECK(o.apps[2].exports == Words{"E=v w"});
  CHECK(o.apps[2].command == Words{"./c", "c1"});
}

TEST_CASE("app contexts: a whole job's option after ':' is named as one, with its context", "[launcher][mpmd]") {
  CHECK_THAT(usage_error({"-np=1", "./a", ":", "-np=1", "-tag-output", "./b"}),
             Catch::Contains("app context 2: -tag-output (--tag-output) is an option for the whole job: give it "
                             "before the first program"));
  CHECK_THAT(usage_error({"-n", "1", "./a", ":", "-n", "1", "./b", ":", "-n", "1", "--bind-to", "core", "./c"}),
             Catch::Contains("app context 3: --bind-to is an option for the whole job"));
  CHECK_THAT(usage_error({"-n", "1", "./a", ":", "-bynode", "-n", "1", "./b"}),
             Catch::Contains("app context 2: -bynode (--map-by) is an option for the whole job"));
  CHECK_THAT(usage_error({"-n", "1", "./a", ":", "-n", "1", "-host", "h1", "./b"}),
             Catch::Contains("app context 2: -host: the hosts are the whole job's"));
  CHECK_THAT(usage_error({"-n", "1", "./a", ":", "-n", "1", "-Hh1", "./b"}),
             Catch::Contains("app context 2: -Hh1: the hosts are the whole job's"));
  CHECK_THAT(usage_error({"-n", "1", "./a", ":", "-np=0", "./b"}),
             Catch::Contains("app context 2: -n needs a positive number of ranks, got '0'"));
  CHECK_THAT(usage_error({"-n", "1", "./a", ":", "-np", ":", "./b"}), Catch::Contains("app context 2: -np needs a value"));
  CHECK_THAT(usage_error({"-n", "1", "./a", ":", "-n", "1", "-mca", "btl", ":", "./b"}),
             Catch::Contains("app context 2: -mca takes NAME VALUE before the next ':'"));
  CHECK_THAT(usage_error({"-n", "1", "./a", ":", "-n", "1", "-x", "1BAD=2", "./b"}), Catch::Contains("app context 2: -x"));
  CHECK_THAT(usage_error({"-n", "1", "./a", ":", "-n", "1", "-frobnicate", "./b"}),
             Catch::Contains("app context 2: '-frobnicate' is not an app context option"));
}

TEST_CASE("app contexts: --app FILE, one context per line, errors at FILE:LINE", "[launcher][mpmd]") {
  char path[] = "/tmp/dl_appfile_XXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  close(fd);
  struct Remove {  // also when a REQUIRE or an exception leaves the test early
    const char* p;
    ~Remove() { std::remove(p); }
  } remove_file{path};
  {
    std::ofstream f(path);
    f << "# comment\n\n-n 2 -x 'A=x y' ./a \"one arg\" ':'\r\n  -np 1 --wdir /tmp ./b\n";
  }
  auto apps = read_app_file(path);
  REQUIRE(apps.size() == 2);
  CHECK(apps[0].np == 2);
  CHECK(apps[0].exports == std::vector<std::string>{"A=x y"});
  CHECK(apps[0].command == std::vector<std::string>{"./a", "one arg", ":"});
  CHECK(apps[1].wdir == "/tmp");
  RunOptions o = parse({"--app", path});
  CHECK(o.np == 3);
  CHECK(o.command == std::vector<std::string>{"./a", "one arg", ":"});
  {
    std::ofstream f(path);
    f << "-n 1 ./a\n-n 1 --oversubscribe ./b\n";
  }
  CHECK_THAT(usage_error({"--app", path}),
             Catch::Contains(std::string(path) + ":2: app context 2: --oversubscribe is an option for the whole job"));
  {
    std::ofstream f(path);
    f << "-np=1 ./a\n-wd /w -ntasks=2 -xA=1 ./b\n";
  }
  apps = read_app_file(path);
  REQUIRE(apps.size() == 2);
  CHECK(apps[0].np == 1);
  CHECK(apps[1].np == 2);
  CHECK(apps[1].wdir == "/w");
  CHECK(apps[1].exports == std::vector<std::string>{"A=1"});
  {
    std::ofstream f(path);
    f << "-n 1 ./a 'open\n";
  }
  CHECK_THAT(usage_error({"--app", path}), Catch::Contains(std::string(path) + ":1: unterminated ' quote"));
}

TEST_CASE("launch plan: MPMD ranks get their context's program, MPI_APPNUM, -x and --wdir", "[launcher][mpmd]") {
  RunOptions o = parse({"-x", "G=1", "-n", "1", "./server", ":", "-n", "2", "-x", "W=2", "--wdir", "/w", "./worker"});
  o.heartbeat_timeout_s = 7;
  hf::Placement p = hf::place({hf::HostEntry{.host = "n0", .slots = 3}}, hf::PlacementOptions{});
  PlanInput in;
  in.placement = &p;
  in.opts = &o;
  msg::Hello h;
  h.host = "n0";
  h.pmix = true;
  in.nodes.push_back(PlanNode{"n0", true, false, {0, 1, 2}, h, "127.0.0.1"});
  in.job_id = "dl-test";
  in.token = std::string(64, 't');
  in.store_port = 1;
  in.wdir = "/job";
  in.exports = resolve_exports(o.exports, {});
  LaunchPlan plan = plan_launch(in);
  REQUIRE(plan.refusal == LaunchPlan::Refusal::kNone);
  const msg::Launch& m = *plan.launches.at(0);
  CHECK(m.env.count("G") == 0);  // the first context's, not the job's
  CHECK(m.wdir == "/job");
  REQUIRE(m.ranks.size() == 3);
  CHECK(m.ranks[0].argv == std::vector<std::string>{"./server"});
  CHECK(m.ranks[0].env.at("MPI_APPNUM") == "0");
  CHECK(m.ranks[0].env.at("PMIX_APPNUM") == "0");
  CHECK(m.ranks[0].env.count("W") == 0);
  CHECK(m.ranks[0].env.at("G") == "1");
  CHECK_FALSE(m.ranks[0].wdir);
  for (int r : {1, 2}) {
    CHECK(m.ranks[r].argv == std::vector<std::string>{"./worker"});
    CHECK(m.ranks[r].env.at("MPI_APPNUM") == "1");
    CHECK(m.ranks[r].env.at("W") == "2");
    CHECK(m.ranks[r].env.count("G") == 0);
    CHECK(m.ranks[r].wdir == std::optional<std::string>("/w"));
  }
  REQUIRE(m.mpi);
  CHECK(m.mpi->app_sizes == std::optional<std::vector<int>>(std::vector<int>{1, 2}));
}
