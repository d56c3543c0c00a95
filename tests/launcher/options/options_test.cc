#include <catch2/catch.hpp>

#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "errors/error.h"
#include "launcher/options/options.h"

using dl::launcher::parse_run_options;
using dl::launcher::RunOptions;

namespace {
RunOptions parse(std::vector<std::string> args) {
  bool help = false;
  return parse_run_options(args, &help);
}
using Args = std::vector<std::string>;
}  // namespace

TEST_CASE("options: -n, -np and --np give the rank count", "[launcher]") {
  CHECK(parse({"-n", "4", "./app"}).np == 4);
  CHECK(parse({"-np", "6", "./app"}).np == 6);
  CHECK(parse({"--np", "3", "./app"}).np == 3);
  CHECK(parse({"-n8", "./app"}).np == 8);
  CHECK(parse({"--np=5", "./app"}).np == 5);
  CHECK(parse({"./app"}).np == 0);
}

TEST_CASE("options: the program's own options stay the program's", "[launcher]") {
  auto o = parse({"-n", "2", "python", "t.py", "--lr", "3", "-n", "7", "--tag-output"});
  CHECK(o.np == 2);
  CHECK_FALSE(o.tag_output);
  CHECK(o.command == Args{"python", "t.py", "--lr", "3", "-n", "7", "--tag-output"});
}

TEST_CASE("options: -- ends dlaunch's options", "[launcher]") {
  auto o = parse({"-n", "2", "--", "--weird-program", "-x"});
  CHECK(o.np == 2);
  CHECK(o.command == Args{"--weird-program", "-x"});
}

TEST_CASE("options: -x and -H, repeated and mpirun-spelled", "[launcher]") {
  auto o = parse({"-x", "A=1", "-x", "B", "-H", "h1:2,h2", "-npernode", "2", "-oversubscribe", "-wdir", "/tmp", "./a"});
  CHECK(o.exports == Args{"A=1", "B"});
  CHECK(o.hosts == "h1:2,h2");
  CHECK(o.per_node == 2);
  CHECK(o.oversubscribe);
  CHECK(o.wdir == "/tmp");
  CHECK(o.command == Args{"./a"});
  CHECK(parse({"--ppn", "3", "./a"}).per_node == 3);
  CHECK(parse({"--nproc-per-node", "4", "./a"}).per_node == 4);
  CHECK(parse({"-hostfile", "hf", "./a"}).hostfile == "hf");
  CHECK(parse({"--machinefile", "mf", "./a"}).hostfile == "mf");
}

TEST_CASE("options: every flag lands in its field", "[launcher]") {
  auto o = parse({"--tag-output", "--timestamp-output", "--output-filename", "out", "--stdin", "none", "--kill-grace",
                  "0.5", "--timeout", "60", "--gpus-per-node", "4", "--gpus-per-rank", "2", "--no-gpu-bind",
                  "--map-by", "node", "--dry-run", "-v", "./app", "x"});
  CHECK(o.tag_output);
  CHECK(o.timestamp_output);
  CHECK(o.output_dir == "out");
  CHECK(o.stdin_rank == dl::launcher::kNoStdin);
  CHECK(o.kill_grace_s == 0.5);
  CHECK(o.timeout_s == 60);
  CHECK(o.gpus_per_node == 4);
  CHECK(o.gpus_per_rank == 2);
  CHECK(o.gpu_bind_mode == dl::hostfiles::GpuBind::kNone);
  CHECK(o.map_by == dl::hostfiles::MapBy::kNode);
  CHECK(o.dry_run);
  CHECK(o.verbose);
  CHECK(o.command == Args{"./app", "x"});
  CHECK(parse({"--display-map", "./a"}).display_map);
  CHECK_FALSE(parse({"--display-map", "./a"}).dry_run);
}

TEST_CASE("options: defaults", "[launcher]") {
  auto o = parse({"./a"});
  CHECK(o.gpu_bind_mode == dl::hostfiles::GpuBind::kVisible);
  CHECK(o.gpus_per_node == -1);
  CHECK(o.gpus_per_rank == 1);
  CHECK(o.map_by == dl::hostfiles::MapBy::kSlot);
  CHECK(o.stdin_rank == 0);
  CHECK(o.kill_grace_s > 0);
  CHECK(o.timeout_s == 0);
  CHECK_FALSE(o.tag_output);
}

TEST_CASE("options: a near miss gets a did-you-mean", "[launcher]") {
  try {
    parse({"--tag-outptu", "./a"});
    FAIL("no error");
  } catch (const dl::UsageError& e) {
    std::string w = e.what();
    CHECK(w.find("--tag-outptu") != std::string::npos);
    CHECK(w.find("did you mean '--tag-output'") != std::string::npos);
  }
  try {
    parse({"--completely-unrelated-thing", "./a"});
    FAIL("no error");
  } catch (const dl::UsageError& e) {
    CHECK(std::string(e.what()).find("did you mean") == std::string::npos);
  }
  CHECK(dl::launcher::did_you_mean("--hostfil", {"--hostfile", "--host"}) == "--hostfile");
  CHECK(dl::launcher::did_you_mean("--zzzzzz", {"--hostfile", "--host"}).empty());
}

TEST_CASE("options: bad values are usage errors", "[launcher]") {
  CHECK_THROWS_AS(parse({"-n", "0", "./a"}), dl::UsageError);
  CHECK_THROWS_AS(parse({"-n", "-3", "./a"}), dl::UsageError);
  CHECK_THROWS_AS(parse({"-n", "four", "./a"}), dl::UsageError);
  CHECK_THROWS_AS(parse({"--map-by", "socket", "./a"}), dl::UsageError);
  CHECK_THROWS_AS(parse({"--stdin", "all", "./a"}), dl::UsageError);
  CHECK_THROWS_AS(parse({"--kill-grace", "-1", "./a"}), dl::UsageError);
  CHECK_THROWS_AS(parse({"--timeout", "-1", "./a"}), dl::UsageError);
  CHECK_THROWS_AS(parse({"--gpus-per-rank", "0", "./a"}), dl::UsageError);
  CHECK_THROWS_AS(parse({"--mpi", "slurm", "./a"}), dl::UsageError);
  CHECK_THROWS_WITH(parse({"-n", "2"}), Catch::Contains("no program"));
  CHECK_THROWS_WITH(parse({"--map-by", "socket", "./a"}), Catch::Contains("socket"));
}

TEST_CASE("options: --help needs no program", "[launcher]") {
  bool help = false;
  parse_run_options({"--help"}, &help);
  CHECK(help);
  CHECK(dl::launcher::run_options_help().find("--tag-output") != std::string::npos);
}

TEST_CASE("options: --dry-run needs no program", "[launcher]") {
  auto o = parse({"--dry-run", "-n", "4"});
  CHECK(o.dry_run);
  CHECK(o.command.empty());
}

TEST_CASE("options: torchrun's spellings, underscores included", "[launcher][torchrun]") {
  using dl::UsageError;
  SECTION("--nproc_per_node N, or gpu, cpu, auto for run.cc to count") {
    CHECK(parse({"--nproc_per_node", "4", "t.py"}).per_node == 4);
    CHECK(parse({"--nproc-per-node=3", "t.py"}).per_node == 3);
    CHECK(parse({"--nproc_per_node=2", "t.py"}).per_node == 2);
    auto g = parse({"--nproc_per_node", "gpu", "t.py"});
    CHECK(g.nproc_per_node_kind == dl::launcher::NprocKind::kGpu);
    CHECK(g.command == Args{"t.py"});
    CHECK(parse({"--nproc-per-node", "cpu", "t.py"}).nproc_per_node_kind == dl::launcher::NprocKind::kCpu);
    CHECK(parse({"--nproc-per-node", "auto", "t.py"}).nproc_per_node_kind == dl::launcher::NprocKind::kAuto);
    CHECK(parse({"--nproc-per-node", "3", "t.py"}).nproc_per_node_kind == dl::launcher::NprocKind::kNumber);
    CHECK_THROWS_AS(parse({"--nproc-per-node", "many", "t.py"}), UsageError);
    CHECK_THROWS_AS(parse({"--nproc-per-node", "0", "t.py"}), UsageError);
  }
  SECTION("the program's own underscores stay") {
    auto o = parse({"--nproc_per_node", "2", "t.py", "--batch_size", "8"});
    CHECK(o.command == Args{"t.py", "--batch_size", "8"});
  }
  SECTION("--standalone and --nnodes 1 are one local node") {
    auto o = parse({"--standalone", "--nnodes", "1", "--nproc_per_node", "2", "t.py"});
    CHECK(o.standalone);
    CHECK(o.as_written.rdzv.empty());
    CHECK(parse({"--nnodes=1", "--node_rank=0", "--master_addr", "127.0.0.1", "--master_port", "29500", "t.py"})
              .as_written.rdzv.empty());
    CHECK_THROWS_AS(parse({"--standalone", "--nnodes", "2", "t.py"}), UsageError);
    CHECK_THROWS_AS(parse({"--standalone", "-H", "a,b", "t.py"}), UsageError);
  }
  SECTION("--master_addr/--master_port with --nnodes > 1: the nodes meet there") {
    auto o = parse({"--nnodes", "2", "--node_rank", "1", "--master_addr", "head", "--master_port", "1234", "t.py"});
    CHECK(o.as_written.rdzv == "tcp://head:1234");
    CHECK(o.node_rank == 1);
    CHECK(o.nnodes == 2);
    CHECK(parse({"--nnodes=2", "--node_rank=0", "--master_addr=head", "t.py"}).as_written.rdzv == "tcp://head:29500");
    CHECK(parse({"--nnodes=2", "--node-rank=0", "--master-port=7", "t.py"}).as_written.rdzv == "tcp://127.0.0.1:7");
  }
  SECTION("--rdzv_endpoint, --rdzv_backend, --rdzv_id") {
    auto o = parse({"--nnodes", "2", "--node_rank", "0", "--rdzv_backend", "c10d", "--rdzv_endpoint", "head:29401",
                    "--rdzv_id", "job7", "t.py"});
    CHECK(o.as_written.rdzv == "tcp://head:29401");
    CHECK(o.rdzv_id == "job7");
    CHECK(o.rdzv_backend == "c10d");
    CHECK(parse({"--nnodes=2", "--node_rank=1", "--rdzv_endpoint=head", "t.py"}).as_written.rdzv == "tcp://head:29400");
    CHECK(parse({"--nnodes=2", "--node_rank=1", "--rdzv_endpoint=[::1]:5", "t.py"}).as_written.rdzv == "tcp://[::1]:5");
    CHECK(parse({"--nnodes=2", "--node_rank=1", "--rdzv_backend=static", "--master_addr=h", "t.py"}).as_written.rdzv ==
          "tcp://h:29500");
    CHECK_THROWS_AS(parse({"--rdzv_backend", "etcd", "t.py"}), UsageError);
    // c10d hands node ranks out on arrival; dlaunch's nodes must say theirs.
    try {
      parse({"--nnodes", "2", "--rdzv_endpoint", "head:29400", "t.py"});
      FAIL("no usage error");
    } catch (const UsageError& e) {
      CHECK(std::string(e.what()).find("needs --node-rank K") != std::string::npos);
    }
    CHECK_THROWS_AS(parse({"--nnodes", "2", "--node-rank", "0", "--rdzv", "env", "--master_addr", "h", "t.py"}),
                    UsageError);
  }
  SECTION("-m/--module, --no_python, --version") {
    CHECK(parse({"-m", "pkg.train", "--lr", "1"}).module);
    CHECK(parse({"--module", "pkg.train"}).module);
    CHECK(parse({"--no_python", "t.py"}).no_python);
    CHECK_THROWS_AS(parse({"-m", "--no-python", "pkg"}), UsageError);
    CHECK(parse({"--version"}).version);  // no program needed
  }
}

TEST_CASE("program_argv: .py and -m run under the interpreter, as torchrun does", "[launcher][torchrun]") {
  using dl::launcher::program_argv;
  RunOptions o;
  o.command = {"train.py", "--lr", "3"};
  CHECK(program_argv(o, "python3") == Args{"python3", "train.py", "--lr", "3"});
  CHECK(program_argv(o, "/usr/bin/python3") == Args{"/usr/bin/python3", "train.py", "--lr", "3"});
  o.no_python = true;
  CHECK(program_argv(o, "python3") == Args{"train.py", "--lr", "3"});
  o.no_python = false;
  o.command = {"./app", "x.py"};
  CHECK(program_argv(o, "python3") == Args{"./app", "x.py"});
  o.command = {"python3", "t.py"};  // already under Python: as it is
  CHECK(program_argv(o, "python3") == Args{"python3", "t.py"});
  o.command = {"pkg.train", "--x"};
  o.module = true;
  CHECK(program_argv(o, "python3") == Args{"python3", "-m", "pkg.train", "--x"});
}

TEST_CASE("resolve_nproc_per_node: gpu, cpu and auto on a host", "[launcher][torchrun]") {
  using dl::launcher::resolve_nproc_per_node;
  using dl::launcher::NprocKind;
  CHECK(resolve_nproc_per_node(NprocKind::kGpu, 8, 64) == 8);
  CHECK_THROWS_AS(resolve_nproc_per_node(NprocKind::kGpu, 0, 64), dl::UsageError);
  CHECK(resolve_nproc_per_node(NprocKind::kCpu, 8, 64) == 64);
  CHECK(resolve_nproc_per_node(NprocKind::kAuto, 8, 64) == 8);
  CHECK(resolve_nproc_per_node(NprocKind::kAuto, 0, 64) == 1);
}

TEST_CASE("options: torchrun's --log_dir, -r/--redirects, -t/--tee and --local_ranks_filter", "[launcher][torchrun]") {
  using dl::UsageError;
  auto o = parse({"--log_dir", "/l", "-r", "1", "--tee=0:3,1:2", "--local_ranks_filter=0,2", "t.py", "-r", "9"});
  CHECK(o.log_dir == "/l");
  CHECK(o.redirects.all == 1);
  CHECK(o.tee.mapped);
  CHECK(o.tee.by_local_rank == std::map<int, int>{{0, 3}, {1, 2}});
  CHECK(o.console_ranks == std::vector<int>{0, 2});
  CHECK(o.command == Args{"t.py", "-r", "9"});  // the program's -r is its own
  CHECK(parse({"-t3", "--log-dir=/l", "t.py"}).tee.all == 3);
  CHECK(parse({"-r", "0", "-t", "0", "t.py"}).log_dir.empty());  // torchrun's defaults need no directory
  try {
    parse({"--redirects", "3", "t.py"});
    FAIL("no usage error");
  } catch (const UsageError& e) {
    CHECK(std::string(e.what()).find("--log-dir") != std::string::npos);
  }
  CHECK_THROWS_AS(parse({"--tee", "0:1", "t.py"}), UsageError);
  CHECK_THROWS_AS(parse({"--log-dir", "/l", "-r", "7", "t.py"}), UsageError);
  CHECK_THROWS_AS(parse({"--local-ranks-filter", "zero", "t.py"}), UsageError);
  CHECK_THROWS_AS(parse({"--log-dir", "/l", "--output-filename", "/o", "t.py"}), UsageError);
}

TEST_CASE("env file: NAME=value lines come before -x, comments and blank lines are skipped, bad lines named",
          "[launcher]") {
  char dir[] = "/tmp/dl-envfile-XXXXXX";
  REQUIRE(::mkdtemp(dir));
  const std::string path = std::string(dir) + "/.deepspeed_env";
  {
    std::ofstream f(path);
    f << "# DeepSpeed's format\n\nNCCL_DEBUG=INFO\n  PYTHONPATH=/opt/lib:/x=y\r\nEMPTY=\n";
  }
  CHECK(dl::launcher::read_env_file(path) ==
        std::vector<std::string>{"NCCL_DEBUG=INFO", "PYTHONPATH=/opt/lib:/x=y", "EMPTY="});
  bool help = false;
  auto o = dl::launcher::parse_run_options({"--env-file", path, "-x", "NCCL_DEBUG=WARN", "-n", "1", "true"}, &help);
  CHECK(o.exports == std::vector<std::string>{"NCCL_DEBUG=INFO", "PYTHONPATH=/opt/lib:/x=y", "EMPTY=",
                                              "NCCL_DEBUG=WARN"});
  {
    std::ofstream f(path);
    f << "GOOD=1\nexport BAD=2\n";
  }
  try {
    dl::launcher::read_env_file(path);
    FAIL("a bad line was accepted");
  } catch (const dl::UsageError& e) {
    CHECK(std::string(e.what()) == path + ":2: expected NAME=value (NAME of letters, digits and _), got 'export BAD=2'");
  }
  {
    std::ofstream f(path);
    f << "1ABC=x\n";
  }
  CHECK_THROWS_AS(dl::launcher::read_env_file(path), dl::UsageError);
  CHECK_THROWS_AS(dl::launcher::read_env_file(std::string(dir) + "/missing"), dl::UsageError);
  std::remove(path.c_str());
  ::rmdir(dir);
}

TEST_CASE("help run shows each option's default where it has one, and parsing is not changed by it", "[launcher]") {
  const std::string help = dl::launcher::run_options_help();
  CHECK(help.find("--gpu-bind arg (=visible)") != std::string::npos);
  CHECK(help.find("--kill-grace arg (=3)") != std::string::npos);
  CHECK(help.find("--map-by arg (=slot)") != std::string::npos);
  // "Not set" is no default: -n and --timeout show none.
  CHECK(help.find("--np ] arg (=") == std::string::npos);
  CHECK(help.find("--timeout arg (=") == std::string::npos);
  // Defaults stay out of parsing: an option not given still counts as not given.
  bool h = false;
  auto o = parse_run_options({"-n", "2", "true"}, &h);
  CHECK(o.map_by == dl::hostfiles::MapBy::kSlot);
  CHECK(o.as_written.rdzv.empty());
  CHECK(o.nnodes == RunOptions{}.nnodes);
}

TEST_CASE("options: --max-restarts, torchrun's --max_restarts - with every --mpi (an MPI job restarts in a fresh "
          "namespace)",
          "[launcher][restart]") {
  CHECK(parse({"./app"}).max_restarts == 0);
  CHECK(parse({"./app"}).mpi == dl::launcher::MpiMode::kAuto);
  CHECK(parse({"--max-restarts", "3", "./app"}).max_restarts == 3);
  CHECK(parse({"--max_restarts=2", "./app"}).max_restarts == 2);
  CHECK(parse({"--max-restarts", "3", "./app"}).mpi == dl::launcher::MpiMode::kAuto);
  CHECK(parse({"--max-restarts", "3", "--mpi", "none", "./app"}).mpi == dl::launcher::MpiMode::kNone);
  CHECK(parse({"--max-restarts", "0", "--mpi", "pmix", "./app"}).mpi == dl::launcher::MpiMode::kPmix);
  CHECK_THROWS_WITH(parse({"--max-restarts", "-1", "./app"}), Catch::Contains("--max-restarts takes"));
  CHECK(parse({"--max-restarts", "1", "--mpi", "pmix", "./app"}).mpi == dl::launcher::MpiMode::kPmix);
  CHECK(parse({"--max-restarts", "1", "--mpi", "pmix", "./app"}).max_restarts == 1);
  CHECK(parse({"--max-restarts", "2", "--mpi", "pmi", "./app"}).mpi == dl::launcher::MpiMode::kPmi);
}

TEST_CASE("options: every duration is finite and bounded, from the command line or a default", "[launcher]") {
  for (const char* opt : {"--timeout", "--kill-grace", "--stack-timeout", "--heartbeat-timeout", "--agent-timeout",
                          "--fence-timeout", "--ssh-timeout", "--rdzv-timeout"})
    for (const char* bad : {"nan", "inf", "1e10", "-1"}) {
      INFO(opt << " " << bad);
      CHECK_THROWS_WITH(parse({opt, bad, "./a"}),
                        Catch::StartsWith(std::string(opt) + " takes seconds: a number above 0 and at most ") &&
                            Catch::EndsWith("got '" + std::string(bad) + "'"));
    }
  CHECK(parse({"--timeout", "86400", "./a"}).timeout_s == 86400);
  CHECK(parse({"--timeout", "0", "./a"}).timeout_s == 0);
  CHECK(parse({"--kill-grace", "0", "./a"}).kill_grace_s == 0);
  CHECK_THROWS_AS(parse({"--heartbeat-timeout", "0", "./a"}), dl::UsageError);
  CHECK(parse({"--heartbeat-timeout", "2.5", "./a"}).heartbeat_timeout_s == 2.5);
  // A config file's or DLAUNCH_<OPTION>'s value goes through the same parse, and is named.
  dl::launcher::OptionDefaults d;
  d.settings.push_back({"heartbeat-timeout", "nan", "env DLAUNCH_HEARTBEAT_TIMEOUT"});
  bool help = false;
  CHECK_THROWS_WITH(parse_run_options({"./a"}, &help, d),
                    Catch::Contains("--heartbeat-timeout takes seconds") &&
                        Catch::Contains("heartbeat-timeout = nan from env DLAUNCH_HEARTBEAT_TIMEOUT"));
}

TEST_CASE("options: -x takes the --env-file name rule", "[launcher]") {
  CHECK(parse({"-x", "A_1=x=y", "-x", "PATH", "-x", "NCCL_*", "-x", "_U=", "./a"}).exports ==
        Args{"A_1=x=y", "PATH", "NCCL_*", "_U="});
  for (const char* bad : {"=foo", "A B=1", "1BAD=2", "A-B", "", "NC CL_*", "A*=1", "1*"})
    CHECK_THROWS_WITH(parse({"-x", bad, "./a"}),
                      "-x: expected VAR, VAR=value or 'PREFIX*', VAR of letters, digits and _ not starting with a "
                      "digit, got '" + std::string(bad) + "'");
  CHECK(dl::launcher::is_env_name("_a1"));
  CHECK_FALSE(dl::launcher::is_env_name("9a"));
}

TEST_CASE("options: values the job cannot use are refused, not ignored", "[launcher]") {
  CHECK_THROWS_WITH(parse({"--stdin", "5", "-n", "2", "./a"}),
                    "--stdin 5: the job has ranks 0 to 1; give one of them, or none");
  CHECK(parse({"--stdin", "1", "-n", "2", "./a"}).stdin_rank == 1);
  CHECK_THROWS_WITH(parse({"--stdin", "99999999999", "./a"}), Catch::Contains("--stdin takes a rank number"));
  CHECK_THROWS_WITH(parse({"--npernode", "0", "./a"}), "--npernode needs at least 1 rank per node, got 0");
  CHECK_THROWS_WITH(parse({"--ppn", "-2", "./a"}), "--npernode needs at least 1 rank per node, got -2");
  CHECK_THROWS_WITH(parse({"--gpus-per-node", "-1", "./a"}), Catch::StartsWith("--gpus-per-node takes a number of GPUs"));
  CHECK(parse({"--gpus-per-node", "0", "./a"}).gpus_per_node == 0);
  CHECK_THROWS_WITH(parse({"-H", "", "./a"}), Catch::StartsWith("-H: expected a comma-separated list of hosts"));
  CHECK_THROWS_WITH(parse({"--hostfile", "", "./a"}), "--hostfile needs a file name, got ''");
  CHECK_THROWS_WITH(parse({"--ssh-config", "/dev/zero", "./a"}),
                    Catch::StartsWith("--ssh-config /dev/zero: is a character device, not a regular file"));
}

TEST_CASE("env file: a directory or a device is refused, not read as empty", "[launcher]") {
  CHECK_THROWS_WITH(dl::launcher::read_env_file("/tmp"), Catch::StartsWith("--env-file /tmp: is a directory"));
  CHECK_THROWS_WITH(dl::launcher::read_env_file("/dev/zero"),
                    Catch::StartsWith("--env-file /dev/zero: is a character device"));
}

namespace {
std::string usage_error_of(std::vector<std::string> args) {
  try {
    parse(std::move(args));
  } catch (const dl::UsageError& e) {
    return e.what();
  }
  return "no error";
}
}  // namespace

TEST_CASE("options: mpirun's flags from job scripts - honoured, or refused naming dlaunch's", "[launcher][habits]") {
  SECTION("--allow-run-as-root changes nothing; --mca/-mca NAME VALUE reach the ranks as OMPI_MCA_NAME") {
    auto o = parse({"--allow-run-as-root", "-mca", "btl", "tcp,self", "--mca", "pml", "ob1", "-x", "A=1", "-n", "2",
                    "./a", "--mca", "x", "y"});
    CHECK(o.exports == Args{"OMPI_MCA_btl=tcp,self", "OMPI_MCA_pml=ob1", "A=1"});
    CHECK(o.np == 2);
    CHECK(o.command == Args{"./a", "--mca", "x", "y"});
    CHECK(parse({"-allow-run-as-root", "./a"}).command == Args{"./a"});
    CHECK_THROWS_WITH(parse({"--mca", "btl"}), Catch::Contains("--mca takes NAME VALUE"));
    CHECK_THROWS_WITH(parse({"--mca", "a-b", "1", "./a"}), Catch::Contains("letters, digits and _"));
  }
  SECTION("-display-map and --display-map print the placement and run the job, as mpirun") {
    CHECK(parse({"-display-map", "./a"}).display_map);
    CHECK_FALSE(parse({"-display-map", "./a"}).dry_run);
    CHECK_THROWS_WITH(parse({"--display-map", "--rdzv", "tcp://127.0.0.1:1", "--nnodes", "2", "--node-rank", "0",
                             "t.py"}),
                      Catch::Contains("--dry-run"));
  }
  SECTION("--map-by ppr:N:node is --npernode N; ppr:N:socket pins to sockets") {
    auto o = parse({"--map-by", "ppr:4:node", "./a"});
    CHECK(o.per_node == 4);
    CHECK(o.map_by == dl::hostfiles::MapBy::kSlot);
    CHECK(o.per_socket == 0);
    auto s = parse({"--map-by", "ppr:2:socket", "./a"});
    CHECK(s.per_socket == 2);
    CHECK(s.bind_to == dl::hostfiles::CpuBind::kSocket);
    CHECK(parse({"--map-by", "ppr:2:socket", "--bind-to", "core", "./a"}).bind_to == dl::hostfiles::CpuBind::kCore);
    CHECK_THROWS_WITH(parse({"--map-by", "ppr:x:node", "./a"}), Catch::Contains("ppr:N:node"));
    CHECK_THROWS_WITH(parse({"--map-by", "ppr:2:board", "./a"}), Catch::Contains("ppr:N:socket"));
    CHECK_THROWS_WITH(parse({"--map-by", "ppr:2:node", "--npernode", "2", "./a"}), Catch::Contains("not both"));
  }
  SECTION("binding, hardware threads, merged streams and rank files as mpirun's") {
    CHECK(parse({"--bind-to", "socket", "./a"}).bind_to == dl::hostfiles::CpuBind::kSocket);
    CHECK(parse({"--bind-to", "hwthread", "--cpus-per-rank", "2", "./a"}).cpus_per_rank == 2);
    CHECK(parse({"--use-hwthread-cpus", "--bind-to", "core", "./a"}).bind_to == dl::hostfiles::CpuBind::kHwthread);
    CHECK(parse({"--use-hwthread-cpus", "./a"}).bind_to == dl::hostfiles::CpuBind::kNone);
    CHECK(parse({"--merge-stderr-to-stdout", "./a"}).merge_stderr);
    auto r = parse({"--rankfile", "rf", "./a"});
    CHECK(r.rankfile == "rf");
    CHECK(r.bind_to == dl::hostfiles::CpuBind::kNone);  // the rankfile's slots pin
    CHECK(dl::launcher::pins_cpus(r));
    CHECK_THROWS_WITH(parse({"--rankfile", "rf", "--bind-to", "core", "./a"}), Catch::Contains("not both"));
    CHECK_THROWS_WITH(parse({"--rankfile", "rf", "--npernode", "2", "./a"}), Catch::Contains("not both"));
    CHECK_THROWS_WITH(parse({"--bind-to", "board", "./a"}), Catch::Contains("hwthread, socket"));
  }
}

TEST_CASE("options: srun's spellings", "[launcher][habits]") {
  CHECK(parse({"--ntasks", "3", "./a"}).np == 3);
  CHECK(parse({"--ntasks=5", "./a"}).np == 5);
  CHECK(parse({"-l", "./a"}).tag_output);
  CHECK(parse({"--label", "./a"}).tag_output);
  CHECK(parse({"--cpu-bind=cores", "./a"}).bind_to == dl::hostfiles::CpuBind::kCore);
  CHECK(parse({"--cpu-bind", "none", "./a"}).bind_to == dl::hostfiles::CpuBind::kNone);
  CHECK(parse({"--cpu-bind=sockets", "./a"}).bind_to == dl::hostfiles::CpuBind::kSocket);
  CHECK(parse({"--cpu-bind=threads", "./a"}).bind_to == dl::hostfiles::CpuBind::kHwthread);
  CHECK(parse({"--cpu-bind=ldoms", "./a"}).bind_to == dl::hostfiles::CpuBind::kNuma);
  CHECK_THROWS_WITH(parse({"--cpu-bind=map_cpu:1,2", "./a"}), Catch::Contains("--bind-to core"));
  CHECK(parse({"--mpi=pmi2", "./a"}).mpi == dl::launcher::MpiMode::kPmi);
  CHECK(parse({"--mpi=pmix", "./a"}).mpi == dl::launcher::MpiMode::kPmix);
}

TEST_CASE("options: MPIEXEC_TIMEOUT bounds the job as mpirun and hydra do, below --timeout", "[launcher][habits]") {
  struct Restore {
    ~Restore() { ::unsetenv("MPIEXEC_TIMEOUT"); }
  } restore;
  ::setenv("MPIEXEC_TIMEOUT", "30", 1);
  CHECK(parse({"./a"}).timeout_s == 30);
  CHECK(parse({"./a"}).timeout_from == "MPIEXEC_TIMEOUT");
  CHECK(parse({"--timeout", "5", "./a"}).timeout_s == 5);
  ::setenv("MPIEXEC_TIMEOUT", "soon", 1);
  CHECK_THROWS_WITH(parse({"./a"}), Catch::Contains("MPIEXEC_TIMEOUT"));
}

TEST_CASE("options: a suggestion is likely or absent", "[launcher][habits]") {
  for (const auto& letter : {"-c", "-N", "-q", "-V"}) {
    INFO(letter);
    const std::string w = usage_error_of({letter, "1", "./a"});
    CHECK(w.find("unknown option") != std::string::npos);
    CHECK(w.find("did you mean") == std::string::npos);
  }
  CHECK(usage_error_of({"--mca", "btl", "tcp", "./a"}) == "no error");
  CHECK(dl::launcher::did_you_mean("--mcb", {"--mpi", "--mca"}) == "--mca");
  CHECK(dl::launcher::did_you_mean("--mxx", {"--mpi"}).empty());  // 2 edits in 3 letters is another word
  CHECK(dl::launcher::did_you_mean("-x", {"--x"}).empty());
  CHECK(usage_error_of({"--nprocs-per-node", "2", "./a"}).find("did you mean '--nproc-per-node'") != std::string::npos);
}

TEST_CASE("options: torchrun's elastic sizes and harmless flags, named as typed", "[launcher][torchrun][habits]") {
  // MIN:MAX is a launch from one dlaunch that shrinks to MIN hosts and runs ranks on at most MAX.
  const auto elastic = parse({"--nnodes", "1:2", "t.py"});
  CHECK(elastic.min_hosts == 1);
  CHECK(elastic.max_hosts == 2);
  CHECK(elastic.nnodes == 0);  // not per-node mode
  const std::string w = usage_error_of({"--nnodes", "1:2", "--rdzv", "tcp://h:29400", "--node-rank", "0", "t.py"});
  CHECK(w.find("elastic sizes (--nnodes MIN:MAX") != std::string::npos);
  CHECK(w.find("give --nnodes N") != std::string::npos);
  CHECK(usage_error_of({"--nnodes", "3:2", "t.py"}).find("the minimum is above the maximum") != std::string::npos);
  CHECK(parse({"--nnodes=1:1", "t.py"}).nnodes == 1);
  auto o = parse({"--monitor_interval", "0.1", "--rdzv_conf", "timeout=900", "--role", "trainer", "--start_method",
                  "spawn", "--run_path", "--nproc_per_node", "2", "t.py"});
  CHECK(o.per_node == 2);
  CHECK(o.role == "trainer");
  CHECK(parse({"t.py"}).role == "default");
  CHECK(o.command == Args{"t.py"});
  CHECK(usage_error_of({"--start_method", "thread", "t.py"}).find("--start_method takes") != std::string::npos);
  CHECK(usage_error_of({"--max_restarts", "-1", "t.py"}).find("--max_restarts takes") != std::string::npos);
}

TEST_CASE("options: --spares and --min-hosts are refused where no host can be held back or dropped",
          "[launcher][spares]") {
  CHECK(parse({"--spares", "2", "t.py"}).max_restarts == 2);  // one restart per spare, unless given
  CHECK(parse({"--spares", "2", "--max-restarts", "5", "t.py"}).max_restarts == 5);
  CHECK(usage_error_of({"--spares", "1", "--max-restarts", "0", "t.py"}).find("a spare takes over only at a restart") !=
        std::string::npos);
  CHECK(usage_error_of({"--spares", "-1", "t.py"}).find("--spares takes a number") != std::string::npos);
  // An MPI job restarts in a fresh namespace: spares and a shrinking world serve it too.
  CHECK(parse({"--spares", "1", "--mpi", "pmix", "./a"}).spares == 1);
  CHECK(parse({"--spares", "1", "--mpi", "pmi", "./a"}).max_restarts == 1);
  CHECK(parse({"--min-hosts", "2", "--mpi", "pmix", "./a"}).min_hosts == 2);
  CHECK(usage_error_of({"--spares", "1", "--rdzv", "tcp://h:29400", "--nnodes", "2", "--node-rank", "0", "t.py"})
            .find("per-node mode") != std::string::npos);
  CHECK(usage_error_of({"--min-hosts", "2", "-n", "2", "./a", ":", "-n", "2", "./b"}).find("app contexts") !=
        std::string::npos);
}

TEST_CASE("options: a near miss typed with underscores is answered with underscores", "[launcher][torchrun][habits]") {
  CHECK(usage_error_of({"--monitr_interval", "1", "t.py"}) ==
        "unknown option '--monitr_interval'; did you mean '--monitor_interval'?");
}

TEST_CASE("options: mpirun's single-dash long options are those options, before short ones are read",
          "[launcher][habits]") {
  // Each was read as a short option with the rest as its value (-t ag-output, -r eport-bindings).
  CHECK(parse({"-np", "2", "-tag-output", "./a"}).tag_output);
  CHECK(parse({"-timestamp-output", "./a"}).timestamp_output);
  CHECK(parse({"-report-bindings", "./a"}).report_bindings);
  CHECK(parse({"-merge-stderr-to-stdout", "./a"}).merge_stderr);
  CHECK(parse({"-output-filename", "out", "./a"}).output_dir == "out");
  CHECK(parse({"-bind-to", "core", "./a"}).bind_to == dl::hostfiles::CpuBind::kCore);
  CHECK(parse({"-map-by", "node", "./a"}).map_by == dl::hostfiles::MapBy::kNode);
  CHECK(parse({"-rf", "rankfile", "./a"}).rankfile == "rankfile");
  CHECK(parse({"-wd", "/tmp", "./a"}).wdir == "/tmp");
  CHECK(parse({"-np=2", "./a"}).np == 2);
  CHECK(parse({"-x", "A=1", "-npernode", "2", "./a"}).per_node == 2);
  CHECK(parse({"-bynode", "./a"}).map_by == dl::hostfiles::MapBy::kNode);
  CHECK(parse({"-pernode", "./a"}).per_node == 1);
  // Short options and their attached values stay short.
  CHECK(parse({"-n4", "./a"}).np == 4);
  CHECK(parse({"-xA=1", "./a"}).exports == Args{"A=1"});
  CHECK(parse({"-v", "./a"}).verbose);
  // A slip of a long option is named as one, not read as -t with a value.
  CHECK(usage_error_of({"-tag-outpt", "./a"}) == "unknown option '-tag-outpt'; did you mean '--tag-output'?");
  CHECK(usage_error_of({"-report-binding", "./a"}).find("did you mean '--report-bindings'") != std::string::npos);
  CHECK(parse({"-xNP", "./a"}).exports == Args{"NP"});
  CHECK(parse({"-r0:3", "--log-dir", "d", "./a"}).log_dir == "d");
  // Past the options, a single-dash word is the program's.
  CHECK(parse({"./a", "-tag-output"}).command == Args{"./a", "-tag-output"});
  CHECK_FALSE(parse({"./a", "-tag-output"}).tag_output);
}

TEST_CASE("options: hydra's -genv, -genvall and -prepend-rank - --export-all is -x '*'", "[launcher][habits]") {
  auto o = parse({"-genv", "NCCL_DEBUG", "INFO", "-prepend-rank", "-hosts", "localhost:2", "./a"});
  CHECK(o.exports == Args{"NCCL_DEBUG=INFO"});
  CHECK(o.tag_output);
  CHECK(o.hosts == "localhost:2");
  CHECK(parse({"-genvall", "./a"}).exports == Args{"*"});
  // Below --env-file and -x: a named value wins over the shell's.
  CHECK(parse({"-x", "A=1", "--export-all", "./a"}).exports == Args{"*", "A=1"});
  // Every context's, as --env-file (a -x before ':' is the first context's only).
  auto m = parse({"--export-all", "-n", "1", "./a", ":", "-n", "1", "./b"});
  CHECK(m.exports == Args{"*"});
  CHECK_THROWS_WITH(parse({"-genv", "A"}), Catch::Contains("-genv takes NAME VALUE"));
}

TEST_CASE("options: mpirun's --map-by objects and modifiers that dlaunch's placement makes", "[launcher][habits]") {
  using dl::hostfiles::CpuBind;
  using dl::hostfiles::MapBy;
  SECTION("core and hwthread fill each host's slots, as slot does, and bind nothing by themselves") {
    for (const char* spec : {"core", "hwthread", "CORE", "slot"}) {
      INFO(spec);
      auto o = parse({"-np", "2", "--map-by", spec, "./a"});
      CHECK(o.map_by == MapBy::kSlot);
      CHECK(o.bind_to == CpuBind::kNone);
    }
  }
  SECTION(":PE=N is --bind-to core --cpus-per-rank N") {
    for (const char* spec : {"slot:PE=2", "core:pe=2", "ppr:1:node:PE=2"}) {
      INFO(spec);
      auto o = parse({"--map-by", spec, "./a"});
      CHECK(o.bind_to == CpuBind::kCore);
      CHECK(o.cpus_per_rank == 2);
    }
    CHECK(parse({"--map-by", "ppr:1:node:PE=2", "./a"}).per_node == 1);
    CHECK(parse({"--map-by", "node:PE=3", "./a"}).map_by == MapBy::kNode);
    CHECK(parse({"--map-by", "slot:PE=2", "--use-hwthread-cpus", "./a"}).bind_to == CpuBind::kHwthread);
    CHECK(parse({"--map-by", "slot:PE=2", "--bind-to", "hwthread", "./a"}).bind_to == CpuBind::kHwthread);
    CHECK_THROWS_WITH(parse({"--map-by", "slot:PE=2", "--bind-to", "socket", "./a"}),
                      Catch::Contains("drop --bind-to socket"));
    CHECK_THROWS_WITH(parse({"--map-by", "slot:PE=2", "--cpus-per-rank", "4", "./a"}), Catch::Contains("give one"));
    CHECK_THROWS_WITH(parse({"--map-by", "slot:PE=0", "./a"}), Catch::Contains(":PE= takes a number"));
    CHECK_THROWS_WITH(parse({"--map-by", "ppr:2:socket:PE=2", "./a"}), Catch::Contains("ppr:N:node:PE=N"));
  }
  SECTION(":OVERSUBSCRIBE is --oversubscribe; other modifiers are refused by name") {
    CHECK(parse({"--map-by", "core:OVERSUBSCRIBE", "./a"}).oversubscribe);
    CHECK_FALSE(parse({"--map-by", "slot:NOOVERSUBSCRIBE", "./a"}).oversubscribe);
    CHECK_THROWS_WITH(parse({"--map-by", "slot:SPAN", "./a"}), Catch::Contains("no :SPAN"));
  }
  SECTION("round-robin over sockets or NUMA nodes is refused, naming what to write") {
    const std::string w = usage_error_of({"--map-by", "socket", "./a"});
    CHECK(w.find("--map-by socket: mpirun deals each host's ranks round-robin over its sockets") != std::string::npos);
    CHECK(w.find("--map-by ppr:N:socket") != std::string::npos);
    CHECK(usage_error_of({"--map-by", "numa", "./a"}).find("over its NUMA nodes") != std::string::npos);
    CHECK(usage_error_of({"--map-by", "seq", "./a"}).find("takes slot, core or hwthread") != std::string::npos);
  }
}

TEST_CASE("options: mpirun's --rank-by is taken where it is the order dlaunch numbers ranks in", "[launcher][habits]") {
  CHECK(parse({"--rank-by", "core", "./a"}).np == 0);
  CHECK(parse({"-rank-by", "slot", "--map-by", "core", "./a"}).np == 0);
  CHECK(parse({"--rank-by", "node", "--map-by", "node", "./a"}).map_by == dl::hostfiles::MapBy::kNode);
  CHECK(parse({"--rank-by", "core", "--map-by", "ppr:2:node", "./a"}).per_node == 2);
  CHECK(usage_error_of({"--rank-by", "socket", "./a"}).find("--rank-by socket: dlaunch numbers ranks in the order") !=
        std::string::npos);
  CHECK(usage_error_of({"--rank-by", "node", "./a"}).find("write --map-by node") != std::string::npos);
  CHECK(usage_error_of({"--rank-by", "slot", "--map-by", "node", "./a"}).find("write --map-by slot") !=
        std::string::npos);
}
