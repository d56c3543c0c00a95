// Option defaults from config files and DLAUNCH_<OPTION> variables
// (launcher/options/option_sources.h), read against the real option table, with the
// environment injected and the files in a temp dir.
#include <catch2/catch.hpp>

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <fstream>

#include "errors/error.h"
#include "launcher/options/option_sources.h"
#include "launcher/options/options.h"
#include "wire/socket_owner.h"

using namespace dl::launcher;
namespace fs = std::filesystem;

namespace {
struct Scratch {
  Scratch() {
    char tmpl[] = "/tmp/dl-optsrc-XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    dir = tmpl;
  }
  ~Scratch() { fs::remove_all(dir); }
  std::string write(const std::string& name, const std::string& text) const {
    const std::string p = dir + "/" + name;
    std::ofstream(p) << text;
    return p;
  }
  std::string dir;
};

// An environment whose config paths are the two given files (or none there).
dl::rdzv::Environment env_with(const std::string& system, const std::string& user) {
  return {{"DLAUNCH_SYSTEM_CONFIG", system}, {"DLAUNCH_CONFIG", user}, {"HOME", "/nonexistent-home"}};
}

OptionDefaults load(const dl::rdzv::Environment& env) { return load_option_defaults(run_option_table(), env); }

RunOptions parse(std::vector<std::string> args, const OptionDefaults& d) {
  bool help = false;
  return parse_run_options(args, &help, d);
}

const OptionSetting* find(const OptionDefaults& d, const std::string& name) {
  for (const auto& s : d.settings)
    if (s.name == name) return &s;
  return nullptr;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const dl::Error& e) {
    return e.what();
  }
  return "(no error)";
}
}  // namespace

TEST_CASE("option defaults: command line > env > user config > system config > built in", "[launcher]") {
  Scratch s;
  const auto sys = s.write("system", "kill-grace = 7\ntimeout = 70\nssh-timeout = 17\n");
  const auto user = s.write("user", "# mine\n\nkill-grace = 6   # shorter\ntimeout = 60\n");
  auto env = env_with(sys, user);
  env["DLAUNCH_KILL_GRACE"] = "5";
  const auto d = load(env);
  REQUIRE(find(d, "kill-grace"));
  CHECK(find(d, "kill-grace")->value == "5");
  CHECK(find(d, "kill-grace")->origin == "env DLAUNCH_KILL_GRACE");
  CHECK(find(d, "timeout")->origin == "user config " + user + ":4");
  CHECK(find(d, "ssh-timeout")->origin == "system config " + sys + ":3");
  CHECK(d.system_read);
  CHECK(d.user_read);

  auto o = parse({"./app"}, d);
  CHECK(o.kill_grace_s == 5);
  CHECK(o.timeout_s == 60);
  CHECK(o.ssh_timeout_s == 17);
  CHECK(o.heartbeat_timeout_s == RunOptions{}.heartbeat_timeout_s);  // built in
  o = parse({"--kill-grace", "2", "--timeout=9", "./app"}, d);
  CHECK(o.kill_grace_s == 2);
  CHECK(o.timeout_s == 9);
}

TEST_CASE("option defaults: switches take true or false, and false hides a lower source", "[launcher]") {
  Scratch s;
  const auto sys = s.write("system", "tag-output = true\nno-output-pty = yes\n");
  const auto user = s.write("user", "output-pty = false\n");
  auto d = load(env_with(sys, user));
  auto o = parse({"./app"}, d);
  CHECK(o.tag_output);
  CHECK(o.output_pty);  // the user's output-pty = false hid the system's no-output-pty, and sets nothing
  auto env = env_with(sys, user);
  env["DLAUNCH_TAG_OUTPUT"] = "0";
  CHECK_FALSE(parse({"./app"}, load(env)).tag_output);
  env["DLAUNCH_TAG_OUTPUT"] = "";  // empty: as if unset
  CHECK(parse({"./app"}, load(env)).tag_output);
  env["DLAUNCH_TAG_OUTPUT"] = "maybe";
  CHECK_THAT(error_of([&] { load(env); }), Catch::Contains("DLAUNCH_TAG_OUTPUT=maybe: expected true or false"));
}

TEST_CASE("option defaults: a group given on the command line takes none of its defaults", "[launcher]") {
  Scratch s;
  const auto user = s.write("user", "hostfile = ~/hosts\ngpu-bind = isolate\nnpernode = 2\n");
  auto env = env_with(s.write("empty", ""), user);
  env["HOME"] = "/home/someone";
  const auto d = load(env);
  auto o = parse({"./app"}, d);
  CHECK(o.hostfile == "/home/someone/hosts");  // a leading ~/ is HOME
  CHECK(o.gpu_bind_mode == dl::hostfiles::GpuBind::kIsolate);
  CHECK(o.per_node == 2);
  o = parse({"-H", "a,b", "--no-gpu-bind", "--ppn", "3", "./app"}, d);
  CHECK(o.hostfile.empty());
  CHECK(o.hosts == "a,b");
  CHECK(o.gpu_bind_mode == dl::hostfiles::GpuBind::kNone);
  CHECK(o.per_node == 3);
  // --rdzv names where the nodes meet: a default hostfile would contradict it.
  o = parse({"--rdzv", "tcp://h:1", "--nnodes", "2", "--node-rank", "0", "./app"}, d);
  CHECK(o.hostfile.empty());
  // Members of one group from one source all apply.
  const auto both = load(env_with(s.write("empty2", ""), s.write("both", "hostfile = hf\nhost = h1:2\n")));
  o = parse({"./app"}, both);
  CHECK(o.hostfile == "hf");
  CHECK(o.hosts == "h1:2");
}

TEST_CASE("option defaults: bad lines name FILE:LINE and what was expected", "[launcher]") {
  Scratch s;
  const auto empty = s.write("empty", "");
  auto bad = [&](const std::string& text) {
    return error_of([&] { load(env_with(empty, s.write("bad", text))); });
  };
  const std::string f = s.dir + "/bad";
  CHECK(bad("tag-output = true\nkil-grace = 5\n") ==
        f + ":2: expected an option of `dlaunch help run` (long name, without dashes), got 'kil-grace'; did you "
            "mean 'kill-grace'?");
  CHECK_THAT(bad("kill-grace 5\n"), Catch::StartsWith(f + ":1: expected 'option = value'"));
  CHECK(bad("np = 4\n") == f + ":1: 'np' cannot be a default: a job's size belongs to the job (and -n does not mix "
                             "with --rdzv): give -n on the command line");
  CHECK_THAT(bad("x = NCCL_*\n"), Catch::Contains(":1: 'x' cannot be a default: it is a list"));
  CHECK_THAT(bad("tag-output = sure\n"),
             Catch::Equals(f + ":1: expected true or false for the switch 'tag-output', got 'sure'"));
  CHECK_THAT(bad("wdir =\n"), Catch::Equals(f + ":1: expected a value after 'wdir ='"));
  CHECK_THAT(bad("timeout = 1\n\ntimeout = 2\n"),
             Catch::Equals(f + ":3: 'timeout' is set twice in this file (first on line 1); keep one"));
  // Dashes and torchrun's underscores are forgiven.
  CHECK(find(load(env_with(empty, s.write("ok", "--kill_grace = 4\n"))), "kill-grace")->value == "4");

  // A value the option's type refuses: named with where it came from.
  const auto d = load(env_with(empty, s.write("typed", "\nkill-grace = soon\n")));
  CHECK_THAT(error_of([&] { parse({"./app"}, d); }),
             Catch::StartsWith("--kill-grace takes seconds") &&
                 Catch::Contains("kill-grace = soon from user config " + s.dir + "/typed:2"));
  // A value refused by the checks after parsing: the defaults in effect are named.
  const auto neg = load(env_with(empty, s.write("neg", "kill-grace = -1\n")));
  CHECK_THAT(error_of([&] { parse({"./app"}, neg); }),
             Catch::Contains("(option defaults in effect: kill-grace = -1 from user config " + s.dir + "/neg:1)"));
}

TEST_CASE("option defaults: a config file another user could have written is refused, naming the fix",
          "[launcher]") {
  Scratch s;
  const auto empty = s.write("empty", "");
  auto config = [&](const std::string& name, mode_t mode) {
    const auto p = s.write(name, "launcher-exec = /bin/false\n");
    REQUIRE(::chmod(p.c_str(), mode) == 0);
    return p;
  };
  // Its own, 0644 (and 0600): read.
  CHECK(find(load(env_with(empty, config("mine", 0644))), "launcher-exec")->value == "/bin/false");
  CHECK(find(load(env_with(config("sys", 0600), empty)), "launcher-exec"));
  const auto every = config("every", 0666), group = config("group", 0664);
  CHECK(error_of([&] { load(env_with(empty, every)); }) ==
        "user config " + every + ": mode 0666 lets every user change it, and a config file can name a program "
        "that dlaunch runs (launcher-exec); run `chmod go-w " + every + "`");
  CHECK_THAT(error_of([&] { load(env_with(group, empty)); }),
             Catch::StartsWith("system config " + group + ": mode 0664 lets its group change it") &&
                 Catch::EndsWith("run `chmod go-w " + group + "`"));
  // The default path is judged alike.
  fs::create_directories(s.dir + "/.config/dlaunch");
  const auto home = s.dir + "/.config/dlaunch/config";
  fs::rename(every, home);
  CHECK_THAT(error_of([&] { load({{"HOME", s.dir}, {"DLAUNCH_SYSTEM_CONFIG", empty}}); }),
             Catch::StartsWith("user config " + home + ": mode 0666"));
  if (::geteuid() != 0) {
    WARN("chown to another uid needs root; that part skipped");
    return;
  }
  const auto theirs = config("theirs", 0644);
  REQUIRE(::chown(theirs.c_str(), 54321, 54321) == 0);
  CHECK(error_of([&] { load(env_with(empty, theirs)); }) ==
        "user config " + theirs + ": belongs to " + dl::wire::describe_uid(54321) + ", not to you (" + dl::wire::describe_uid(0) +
        ") or root, and a config file can name a program that dlaunch runs (launcher-exec); use a file of your "
        "own, or fix or unset DLAUNCH_CONFIG");
}

TEST_CASE("option defaults: the config paths (XDG, HOME, overrides)", "[launcher]") {
  CHECK(config_paths({{"HOME", "/h"}}).user == "/h/.config/dlaunch/config");
  CHECK(config_paths({{"HOME", "/h"}, {"XDG_CONFIG_HOME", "/x"}}).user == "/x/dlaunch/config");
  CHECK(config_paths({{"HOME", "/h"}, {"XDG_CONFIG_HOME", "rel"}}).user == "/h/.config/dlaunch/config");
  CHECK(config_paths({}).system == "/etc/dlaunch/config");
  CHECK_FALSE(config_paths({}).explicit_system);
  CHECK(config_paths({{"DLAUNCH_CONFIG", "/c"}}).explicit_user);
  // A file named explicitly must be there; a default one need not.
  Scratch s;
  CHECK_THAT(error_of([&] { load(env_with(s.write("e", ""), s.dir + "/missing")); }),
             Catch::Contains("user config " + s.dir + "/missing: cannot read it (No such file or directory); fix or "
                             "unset DLAUNCH_CONFIG"));
  const auto d = load({{"HOME", s.dir}, {"DLAUNCH_SYSTEM_CONFIG", s.write("e2", "")}});
  CHECK_FALSE(d.user_read);
  CHECK(d.settings.empty());
}

TEST_CASE("option defaults: DLAUNCH_<OPTION> never takes a name dlaunch uses for something else", "[launcher]") {
  CHECK(env_name_for("kill-grace") == "DLAUNCH_KILL_GRACE");
  CHECK(env_name_for("nnodes").empty());     // DLAUNCH_NNODES is in every rank's environment
  CHECK(env_name_for("node-rank").empty());  // DLAUNCH_NODE_RANK too
  CHECK(env_name_for("np").empty());
  const auto& reserved = reserved_env_names();
  int settable = 0;
  for (const auto& spec : run_option_table()) {
    const std::string v = env_name_for(spec.name);
    INFO(spec.name << " -> " << v);
    CHECK(std::find(reserved.begin(), reserved.end(), v) == reserved.end());
    if (!v.empty()) ++settable;
    // An option either can be a default (and has a variable) or says why not.
    CHECK((v.empty() != not_a_default(spec.name).empty()));
  }
  CHECK(settable > 30);
  // A rank's own DLAUNCH_ variables change no option of a dlaunch it runs.
  dl::rdzv::Environment rank_env = {{"DLAUNCH_NNODES", "4"}, {"DLAUNCH_NODE_RANK", "1"}, {"DLAUNCH_RANK", "3"},
                                    {"DLAUNCH_CONFIG", "/dev/null"}, {"DLAUNCH_SYSTEM_CONFIG", "/dev/null"}};
  CHECK(load(rank_env).settings.empty());
}

TEST_CASE("option defaults: help run shows each value and where it came from", "[launcher]") {
  Scratch s;
  const auto user = s.write("user", "kill-grace = 6\ntag-output = on\n");
  auto env = env_with(s.write("system", "timeout = 70\n"), user);
  env["DLAUNCH_SSH_TIMEOUT"] = "4";
  const std::string help = run_options_help(load(env));
  CHECK_THAT(help, Catch::Contains("--kill-grace arg (=6)"));
  CHECK_THAT(help, Catch::Contains("--timeout arg (=70)"));
  CHECK_THAT(help, Catch::Contains("--ssh-timeout arg (=4)"));
  CHECK_THAT(help, Catch::Contains("kill-grace = 6"));
  CHECK_THAT(help, Catch::Contains("user config " + user + ":1"));
  CHECK_THAT(help, Catch::Contains("tag-output = true"));
  CHECK_THAT(help, Catch::Contains("env DLAUNCH_SSH_TIMEOUT"));
  CHECK_THAT(help, Catch::Contains("system config: " + s.dir + "/system (read) from DLAUNCH_SYSTEM_CONFIG"));
  CHECK_THAT(help, Catch::Contains("every other option: built in"));
  CHECK_THAT(run_options_help(OptionDefaults{}), Catch::Contains("--heartbeat-timeout arg (=10)"));
}
