// The .deb: `cpack -G DEB` of this build dir into a temp dir, unpacked with
// `dpkg -x` into a scratch root (no root rights, no container), then used from
// there as a user of the installed package would: the demo from the root's
// bin with a PATH that reaches nothing, the man page through `man -l`, bash
// completion driven in a bash subprocess, and a C++ program built against
// the installed header and library through pkg-config and through CMake's
// find_package(dlaunch), run under the installed dlaunch. One case, so the
// package is built once; everything lives in its temp dir, removed at its end.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "tests/install/installed_tree.h"
#include "tests/integration/run_command.h"

using namespace dl::it;
namespace fs = std::filesystem;

namespace {

const std::string kBuildDir = DLAUNCH_BUILD_DIR;

RunResult must_run(RunSpec s, double timeout_s, const std::string& what) {
  RunResult r = run(s, timeout_s);
  INFO(what << ":\nstdout:\n" << r.out << "stderr:\n" << r.err);
  REQUIRE_FALSE(r.timed_out);
  REQUIRE(r.code == 0);
  return r;
}

RunSpec spec(std::vector<std::string> argv, std::map<std::string, std::string> env = {}, std::string cwd = "") {
  RunSpec s;
  s.argv = std::move(argv);
  s.set_env = std::move(env);
  s.cwd = std::move(cwd);
  return s;
}

// The one file named `name` under dir (REQUIREs exactly one).
std::string find_one(const std::string& dir, const std::string& name) {
  std::vector<std::string> hits;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.path().filename() == name) hits.push_back(e.path().string());
  INFO("files named " << name << " under " << dir << ": " << hits.size());
  REQUIRE(hits.size() == 1);
  return hits[0];
}

std::vector<std::string> words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// A program of the collectives' C API: every rank adds rank+1 in an
// all_reduce and prints the sum (3 for 2 ranks).
constexpr const char* kProgram = R"(#include <dlcoll.h>
#include <cstdio>
int main() {
  dlcoll_comm_t c;
  if (dlcoll_init("env://", 60000, &c) != DLCOLL_OK) { std::printf("init: %s\n", dlcoll_last_error()); return 1; }
  int rank = -1, size = -1;
  dlcoll_rank(c, &rank);
  dlcoll_size(c, &size);
  double mine = rank + 1, sum = 0;
  if (dlcoll_all_reduce(c, &mine, &sum, 1, DLCOLL_FLOAT64, DLCOLL_SUM) != DLCOLL_OK) {
    std::printf("all_reduce: %s\n", dlcoll_last_error());
    return 1;
  }
  std::printf("rank %d of %d: sum %g\n", rank, size, sum);
  return dlcoll_free(c) == DLCOLL_OK ? 0 : 1;
}
)";

struct Root {
  std::string dir, bin, dlaunch, libdir;
  std::map<std::string, std::string> env;  // isolates dlaunch from this machine's config files
};

// `dlaunch -n 2 program` from the root; both ranks must print sum 3.
void check_program_runs(const Root& root, const std::string& program, const std::string& cwd) {
  RunSpec s = spec({root.dlaunch, "-n", "2", program}, root.env, cwd);
  s.set_env["PATH"] = cwd;
  s.unset_env = {"LD_LIBRARY_PATH"};
  RunResult r = must_run(s, 60, program + " under the installed dlaunch");
  INFO(r.out);
  CHECK(r.out.find("rank 0 of 2: sum 3") != std::string::npos);
  CHECK(r.out.find("rank 1 of 2: sum 3") != std::string::npos);
  // It found the installed library, not one of the build tree (the path
  // as the RUNPATH spells it: pkg-config's may hold "..").
  RunSpec ldd_spec = spec({"/usr/bin/ldd", program});
  ldd_spec.unset_env = {"LD_LIBRARY_PATH"};
  RunResult ldd = must_run(ldd_spec, 30, "ldd");
  INFO("ldd:\n" << ldd.out);
  std::string found;
  for (const auto& line : lines(ldd.out)) {
    const auto arrow = line.find("libdlcoll.so.0 => ");
    if (arrow != std::string::npos) found = words(line.substr(arrow + 18)).at(0);
  }
  REQUIRE_FALSE(found.empty());
  REQUIRE(fs::exists(found));
  CHECK(fs::canonical(found) == fs::canonical(root.libdir + "/libdlcoll.so.0"));
}

// _dlaunch's answers for a line whose words, as bash splits them (':' and
// '=' apart), are `comp_words`, the last one being completed.
std::vector<std::string> complete(const Root& root, const std::string& line, std::vector<std::string> comp_words,
                                  const std::string& cwd, std::map<std::string, std::string> env = {}) {
  env.insert(root.env.begin(), root.env.end());  // the root's isolation, where env does not say otherwise
  std::vector<std::string> argv = {
      "/bin/bash", "--norc", "--noprofile", "-c",
      "source \"$1\" && complete -p dlaunch >/dev/null || exit 3\n"
      "COMP_LINE=$2; COMP_POINT=${#COMP_LINE}; COMP_CWORD=$3; shift 3; COMP_WORDS=(\"$@\")\n"
      "_dlaunch; printf '%s\\n' \"${COMPREPLY[@]}\"",
      "bash", root.dir + "/usr/share/bash-completion/completions/dlaunch", line,
      std::to_string(comp_words.size() - 1)};
  argv.insert(argv.end(), comp_words.begin(), comp_words.end());
  RunResult r = must_run(spec(argv, env, cwd), 30, "completing '" + line + "'");
  auto out = lines(r.out);
  out.erase(std::remove(out.begin(), out.end(), ""), out.end());
  std::sort(out.begin(), out.end());
  return out;
}
}  // namespace

TEST_CASE("the .deb installs into a scratch root: demo, man page, completion, pkg-config and CMake", "[install]") {
  TempDir tmp;
  const std::string work = tmp.path + "/work";
  fs::create_directories(work);

  // The package, built in the temp dir (cpack's staging dir too, so parallel runs share nothing).
  must_run(spec({DLAUNCH_CPACK_COMMAND, "-G", "DEB", "--config", kBuildDir + "/CPackConfig.cmake", "-B",
                 tmp.path + "/pkg"}),
           400, "cpack");
  std::string deb;
  for (const auto& e : fs::recursive_directory_iterator(tmp.path + "/pkg"))
    if (e.path().extension() == ".deb") deb = e.path().string();
  REQUIRE_FALSE(deb.empty());

  // Its dependencies: dpkg-shlibdeps' from the binaries (nettle for the
  // handshake's HMAC among them), and libssh, which dlaunch dlopens (Boost is
  // linked statically).
  const std::string depends = must_run(spec({"/usr/bin/dpkg-deb", "-f", deb, "Depends"}), 30, "dpkg-deb -f").out;
  INFO("Depends: " << depends);
  CHECK(depends.find("libc6") != std::string::npos);
  CHECK(depends.find("libssh-4") != std::string::npos);
  CHECK(depends.find("libpmix2") != std::string::npos);
  CHECK(depends.find("libstdc++6") != std::string::npos);
  CHECK(depends.find("libnettle8") != std::string::npos);

  Root root;
  root.dir = tmp.path + "/root";
  must_run(spec({"/usr/bin/dpkg", "-x", deb, root.dir}), 60, "dpkg -x");
  root.bin = root.dir + "/usr/bin";
  root.dlaunch = root.bin + "/dlaunch";
  root.libdir = fs::path(find_one(root.dir, "dlcoll.pc")).parent_path().parent_path().string();
  std::ofstream(tmp.path + "/empty-config").flush();
  root.env = {{"DLAUNCH_CONFIG", tmp.path + "/empty-config"}, {"DLAUNCH_SYSTEM_CONFIG", tmp.path + "/empty-config"}};

  std::set<std::string> programs;
  for (const auto& e : fs::directory_iterator(root.bin)) programs.insert(e.path().filename().string());
  std::set<std::string> want{"dlaunch", "dlaunch-agent", "dlaunch-hello"};
  if (DLAUNCH_INSTALLS_NCCL_CHECK) want.insert("dlaunch-nccl-check");
  CHECK(programs == want);
  for (const char* f : {"/usr/include/dlcoll.h", "/usr/share/man/man1/dlaunch.1.gz",
                        "/usr/share/bash-completion/completions/dlaunch"}) {
    INFO(f);
    CHECK(fs::is_regular_file(root.dir + f));
  }
  for (const char* f : {"/libdlcoll.so.0", "/pkgconfig/dlaunch.pc", "/cmake/dlaunch/dlaunchConfig.cmake",
                        "/cmake/dlcoll/dlcollConfig.cmake"}) {
    INFO(root.libdir + f);
    CHECK(fs::exists(root.libdir + f));
  }

  // The demo, from the root's bin, with the agent beside it and nothing on PATH.
  {
    RunSpec s = spec({root.dlaunch, "--tag-output", "-n", "4", root.bin + "/dlaunch-hello"}, root.env, work);
    s.set_env["PATH"] = work;
    s.unset_env = {"LD_LIBRARY_PATH"};
    Child c = start(s);
    ChildGuard guard{c, root.dir + "/"};
    RunResult r = wait(c, 60);
    INFO("stdout:\n" << r.out << "stderr:\n" << r.err);
    CHECK(r.code == 0);
    CHECK(hello_ranks_ok(r.out, 4) == 4);
    auto left = wait_gone(root.dir, 5);
    INFO("left running:\n" << describe(left));
    CHECK(left.empty());
  }

  // man -l renders the page, and its sections are the manual's.
  {
    RunSpec s = spec({"/usr/bin/man", "-l", root.dir + "/usr/share/man/man1/dlaunch.1.gz"}, {{"MANWIDTH", "120"}});
    s.unset_env = {"MANPAGER", "PAGER"};
    const std::string page = must_run(s, 60, "man -l").out;
    CHECK(page.find("dlaunch - start one program as many processes on many machines") != std::string::npos);
    // The SYNOPSIS is the manual's synopsis block, not its title line.
    const auto synopsis = page.find("\nSYNOPSIS\n");
    REQUIRE(synopsis != std::string::npos);
    const auto first = page.find_first_not_of(" \n", synopsis + 10);
    INFO("the page's SYNOPSIS: " << page.substr(synopsis, 80));
    CHECK(page.compare(first, 14, "dlaunch [run] ") == 0);
    std::ifstream manual(std::string(DLAUNCH_SOURCE_DIR) + "/docs/dlaunch.md");
    int sections = 0;
    for (std::string l; std::getline(manual, l);) {
      if (l.rfind("## ", 0) != 0) continue;
      ++sections;
      INFO("section of docs/dlaunch.md: " << l);
      CHECK(page.find("\n" + l.substr(3) + "\n") != std::string::npos);
    }
    CHECK(sections >= 8);
    CHECK(page.find("--kill-grace") != std::string::npos);
    // Every page it names is installed, and it says where.
    CHECK(page.find("/usr/share/doc/dlaunch") != std::string::npos);
    std::set<std::string> named;
    const std::string joined = std::regex_replace(page, std::regex("-\n\\s*"), "-");  // a name broken at its hyphen
    const std::regex md("[a-z-]+\\.md");
    for (auto it = std::sregex_iterator(joined.begin(), joined.end(), md); it != std::sregex_iterator(); ++it)
      named.insert(it->str());
    CHECK(named.count("mpi.md") == 1);
    for (const auto& p : named) {
      INFO("a page the man page names: " << p);
      CHECK(fs::is_regular_file(root.dir + "/usr/share/doc/dlaunch/" + p));
    }
  }
  // At 80 columns: no word hyphenated at a line's end (an option name cut
  // in two cannot be copied), troff never stretches or squeezes a line, and
  // every table fits, each column as wide as its longest word
  // (packaging/man_tables.lua).
  {
    RunSpec s = spec({"/usr/bin/man", "--warnings=w", "-l", root.dir + "/usr/share/man/man1/dlaunch.1.gz"},
                     {{"MANWIDTH", "80"}});
    s.unset_env = {"MANPAGER", "PAGER"};
    const RunResult r = must_run(s, 60, "man --warnings -l");
    INFO(r.err);
    CHECK(r.err.find("cannot adjust") == std::string::npos);
    CHECK(r.err.find("can't break line") == std::string::npos);
    CHECK(r.err.find("wider than line width") == std::string::npos);
    for (const auto& line : lines(r.out)) {
      INFO(line);
      CHECK_FALSE((line.size() >= 3 && line.compare(line.size() - 3, 3, "\u2010") == 0));
    }
  }

  // Debian's copyright file, in the copyright format, naming the project.
  {
    std::ifstream in(root.dir + "/usr/share/doc/dlaunch/copyright");
    REQUIRE(in.good());
    std::string format, name;
    std::getline(in, format);
    std::getline(in, name);
    CHECK(format == "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/");
    CHECK(name == "Upstream-Name: dlaunch");
  }

  // Bash completion: commands, options, and hosts from the hostfile given earlier on the line.
  {
    const std::string hosts = work + "/hosts";
    std::ofstream(hosts) << "# the cluster\nalpha slots=2\nbeta:4\nnode[01-02] slots=8\n";
    auto has = [](const std::vector<std::string>& v, const std::string& w) {
      return std::find(v.begin(), v.end(), w) != v.end();
    };
    auto after_host = complete(root, "dlaunch --host", {"dlaunch", "--host"}, work);
    INFO("after --host: " << after_host.size());
    CHECK(has(after_host, "--hostfile"));
    CHECK(has(after_host, "--host"));
    CHECK_FALSE(has(after_host, "--np"));
    CHECK(complete(root, root.dlaunch + " --hostfile " + hosts + " -H ",
                   {root.dlaunch, "--hostfile", hosts, "-H", ""}, work) ==
          std::vector<std::string>{"alpha", "beta", "node01", "node02"});
    CHECK(complete(root, root.dlaunch + " --hostfile=" + hosts + " -H alpha:2,n",
                   {root.dlaunch, "--hostfile", "=", hosts, "-H", "alpha", ":", "2,n"}, work) ==
          std::vector<std::string>{"2,node01", "2,node02"});
    CHECK(complete(root, root.dlaunch + " -H ", {root.dlaunch, "-H", ""}, work).empty());  // no hostfile: no guess
    // ... but the hostfile a config file gives every job.
    const std::string config = work + "/config";
    std::ofstream(config) << "hostfile = " << hosts << "\n";
    CHECK(complete(root, root.dlaunch + " -n 2 -H b", {root.dlaunch, "-n", "2", "-H", "b"}, work,
                   {{"DLAUNCH_CONFIG", config}}) == std::vector<std::string>{"beta"});
    CHECK(has(complete(root, "dlaunch doc", {"dlaunch", "doc"}, work), "doctor"));
    CHECK(complete(root, "dlaunch -n 2 --map-by ", {"dlaunch", "-n", "2", "--map-by", ""}, work) ==
          std::vector<std::string>{"core", "hwthread", "node", "ppr:", "slot"});
    // The values come from the options' own word lists, the spellings of
    // other launchers and torchrun's underscores from the option tables.
    CHECK(complete(root, "dlaunch --mpi p", {"dlaunch", "--mpi", "p"}, work) ==
          std::vector<std::string>{"pmi", "pmix"});
    CHECK(complete(root, "dlaunch --bind-to s", {"dlaunch", "--bind-to", "s"}, work) ==
          std::vector<std::string>{"socket"});
    CHECK(complete(root, "dlaunch --nproc_per", {"dlaunch", "--nproc_per"}, work) ==
          std::vector<std::string>{"--nproc_per_node"});
    CHECK(complete(root, "dlaunch --mc", {"dlaunch", "--mc"}, work) == std::vector<std::string>{"--mca"});
    CHECK(has(complete(root, "dlaunch --mca btl tcp --ta", {"dlaunch", "--mca", "btl", "tcp", "--ta"}, work),
              "--tag-output"));
    CHECK(complete(root, "dlaunch doctor --write-h", {"dlaunch", "doctor", "--write-h"}, work) ==
          std::vector<std::string>{"--write-healthy"});
    CHECK_FALSE(has(complete(root, "dlaunch doctor --", {"dlaunch", "doctor", "--"}, work), "--peer"));
    CHECK(complete(root, "dlaunch --map-by=n", {"dlaunch", "--map-by", "=", "n"}, work) ==
          std::vector<std::string>{"node"});
    // Files after the options that take one, directories after those that take a directory.
    std::ofstream(work + "/job.app") << "-n 1 /bin/true\n";
    fs::create_directories(work + "/jobs.d");
    for (const char* o : {"--app", "--rankfile", "--report-json", "--hostfile", "--token-file"}) {
      INFO(o);
      CHECK(complete(root, std::string("dlaunch ") + o + " jo", {"dlaunch", o, "jo"}, work) ==
            std::vector<std::string>{"job.app", "jobs.d"});
    }
    for (const char* o : {"--report-dir", "--log-dir", "--wdir"}) {
      INFO(o);
      CHECK(complete(root, std::string("dlaunch ") + o + " jo", {"dlaunch", o, "jo"}, work) ==
            std::vector<std::string>{"jobs.d"});
    }
    // After the program, its own arguments: files, never dlaunch's options.
    CHECK(complete(root, "dlaunch ./app --ho", {"dlaunch", "./app", "--ho"}, work).empty());
  }

  // A C++ program against the installed header and library: pkg-config.
  const std::string src = work + "/prog.cc";
  std::ofstream(src) << kProgram;
  {
    const std::map<std::string, std::string> pc_env = {{"PKG_CONFIG_LIBDIR", root.libdir + "/pkgconfig"},
                                                       {"PKG_CONFIG_PATH", ""}};
    const std::string flags = must_run(spec({"/usr/bin/pkg-config", "--cflags", "--libs", "dlaunch"}, pc_env), 30,
                                       "pkg-config dlaunch")
                                  .out;
    INFO("pkg-config: " << flags);
    CHECK(flags.find(root.dir) != std::string::npos);
    std::vector<std::string> cc = {DLAUNCH_CXX_COMPILER, "-std=c++17", src, "-o", work + "/prog-pc"};
    // No -rpath of our own: the flags carry it, or the program would not
    // find libdlcoll.so.0 outside the loader's dirs.
    for (const auto& w : words(flags)) cc.push_back(w);
    must_run(spec(cc), 120, "c++ with pkg-config's flags");
    check_program_runs(root, work + "/prog-pc", work);
  }

  // ... and CMake's find_package(dlaunch), which also names the launcher.
  {
    const std::string proj = work + "/proj";
    fs::create_directories(proj);
    fs::copy_file(src, proj + "/prog.cc");
    std::ofstream(proj + "/CMakeLists.txt")
        << "cmake_minimum_required(VERSION 3.20)\nproject(uses_dlaunch CXX)\n"
           "find_package(dlaunch 0.1 REQUIRED)\n"
           "if(NOT EXISTS \"${dlaunch_EXECUTABLE}\" OR NOT TARGET dlaunch::dlaunch)\n"
           "  message(FATAL_ERROR \"no launcher: ${dlaunch_EXECUTABLE}\")\nendif()\n"
           "message(STATUS \"launcher: ${dlaunch_EXECUTABLE}\")\n"
           "add_executable(prog prog.cc)\ntarget_link_libraries(prog PRIVATE dlaunch::dlcoll)\n";
    RunResult conf = must_run(spec({DLAUNCH_CMAKE_COMMAND, "-S", proj, "-B", proj + "/b",
                                    "-DCMAKE_PREFIX_PATH=" + root.dir + "/usr", "-DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF",
                                    "-DCMAKE_CXX_COMPILER=" + std::string(DLAUNCH_CXX_COMPILER)}),
                              120, "cmake configure");
    CHECK(conf.out.find("launcher: " + root.dir + "/usr/bin/dlaunch") != std::string::npos);
    must_run(spec({DLAUNCH_CMAKE_COMMAND, "--build", proj + "/b"}), 120, "cmake --build");
    check_program_runs(root, proj + "/b/prog", work);
  }
}
