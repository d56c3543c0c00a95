#include "tests/multihost/multihost_util.h"

#include <dirent.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <cstdlib>
#include <random>
#include <sstream>
#include <thread>

namespace dl::multihost {
namespace {
std::string cmdline_of(int pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
  std::string s;
  try {
    s.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  } catch (const std::ios_base::failure&) {
    return "";  // it exited while we read (ESRCH): gone, so it matches nothing
  }
  for (auto& ch : s)
    if (ch == '\0') ch = ' ';
  return s;
}
}  // namespace

std::string bin(const std::string& name) {
  const char* copy = std::getenv("DLAUNCH_TEST_BIN_DIR");
  return std::string(copy && *copy ? copy : DLAUNCH_BIN_DIR) + "/" + name;
}

std::string unique_marker() {
  static std::mt19937 rng(std::random_device{}() ^ static_cast<unsigned>(::getpid()));
  return std::to_string(40 + rng() % 20) + "." + std::to_string(100000 + rng() % 899999);
}

std::string dlaunch_cmd(const dl::cluster::Cluster& c, const std::string& args) {
  return bin("dlaunch") + " --hostfile " + c.hostfile() + " --ssh-config " + c.ssh_config() + " " + args;
}

dl::cluster::RunResult run_dlaunch(const dl::cluster::Cluster& c, const std::string& args,
                                   std::chrono::milliseconds timeout) {
  return c.run_in("h0", dlaunch_cmd(c, args) + " </dev/null", timeout);
}

std::future<dl::cluster::RunResult> start_dlaunch(const dl::cluster::Cluster& c, const std::string& args,
                                                  std::chrono::milliseconds timeout) {
  return std::async(std::launch::async, [&c, args, timeout] { return run_dlaunch(c, args, timeout); });
}

std::vector<int> pids_matching(const dl::cluster::Cluster& c, const std::string& host, const std::string& needle) {
  std::vector<int> out;
  for (int pid : c.pids_in(host))
    if (contains(cmdline_of(pid), needle)) out.push_back(pid);
  return out;
}

int launcher_pid(const std::string& marker) {
  DIR* d = ::opendir("/proc");
  int found = -1;
  while (dirent* e = d ? ::readdir(d) : nullptr) {
    const int pid = std::atoi(e->d_name);
    if (pid <= 0) continue;
    std::string cl = cmdline_of(pid);
    auto sp = cl.find(' ');
    std::string argv0 = cl.substr(0, sp);
    if (argv0.size() >= 8 && argv0.compare(argv0.size() - 8, 8, "/dlaunch") == 0 && contains(cl, marker)) found = pid;
  }
  if (d) ::closedir(d);
  return found;
}

bool wait_running(const dl::cluster::Cluster& c, const std::string& needle, int per_host,
                  std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    bool all = true;
    for (auto& h : c.hosts()) all = all && static_cast<int>(pids_matching(c, h, needle).size()) >= per_host;
    if (all) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

std::string wait_clean(const dl::cluster::Cluster& c, const std::string& marker, std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  for (;;) {
    std::ostringstream left;
    for (auto& h : c.hosts())
      for (int pid : c.pids_in(h)) {
        std::string cl = cmdline_of(pid);
        if (contains(cl, marker) || contains(cl, "dlaunch-agent") || contains(cl, "/dlaunch "))
          left << h << ": " << pid << " " << cl << "\n";
      }
    if (left.str().empty() || std::chrono::steady_clock::now() >= end) return left.str();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

bool contains(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

void write_slow_agent(const std::string& dir, const std::string& host, double delay_s) {
  std::filesystem::create_directories(dir + "/bin");
  const std::string path = dir + "/bin/dlaunch-agent";
  std::ofstream f(path);
  f << "#!/bin/sh\n[ \"$(hostname)\" != " << host << " ] || sleep " << delay_s << "\nexec " << bin("dlaunch-agent")
    << " \"$@\"\n";
  f.close();
  std::filesystem::permissions(path, std::filesystem::perms::owner_all);
}

int count_lines_with(const std::string& text, const std::string& needle) {
  std::istringstream in(text);
  std::string l;
  int n = 0;
  while (std::getline(in, l)) n += contains(l, needle) ? 1 : 0;
  return n;
}

}  // namespace dl::multihost
