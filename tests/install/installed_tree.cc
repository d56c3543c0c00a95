#include "tests/install/installed_tree.h"

#include <dirent.h>
#include <limits.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <set>
#include <thread>

#include "tests/integration/run_command.h"

namespace dl::it {

// Pids of live processes started from a file under prefix: by their argv (a
// rank's or agent's argv[0] is its path) or by /proc/PID/exe.
std::vector<pid_t> from_prefix(const std::string& prefix) {
  std::set<pid_t> out;
  for (pid_t p : marked(prefix + "/")) out.insert(p);
  DIR* d = ::opendir("/proc");
  if (!d) return {out.begin(), out.end()};
  while (dirent* e = ::readdir(d)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (!end || *end || pid <= 0 || pid == ::getpid()) continue;
    char exe[PATH_MAX] = {};
    ssize_t n = ::readlink((std::string("/proc/") + e->d_name + "/exe").c_str(), exe, sizeof exe - 1);
    if (n > 0 && std::string(exe, static_cast<size_t>(n)).rfind(prefix + "/", 0) == 0 && alive(static_cast<pid_t>(pid)))
      out.insert(static_cast<pid_t>(pid));
  }
  ::closedir(d);
  return {out.begin(), out.end()};
}

// Polls until nothing from prefix runs, up to timeout_s; returns what is left.
std::vector<pid_t> wait_gone(const std::string& prefix, double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  auto left = from_prefix(prefix);
  while (!left.empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    left = from_prefix(prefix);
  }
  return left;
}

std::string describe(const std::vector<pid_t>& pids) {
  std::string s;
  for (pid_t p : pids) s += std::to_string(p) + ": " + read_file("/proc/" + std::to_string(p) + "/cmdline") + "\n";
  return s;
}

int hello_ranks_ok(const std::string& out, int size) {
  const std::string n = std::to_string(size);
  int ok = 0;
  for (int rank = 0; rank < size; ++rank) {
    const std::string r = std::to_string(rank);
    const std::string tag = "[" + r + "@", who = "] rank " + r + " of " + n + " on ";
    const std::string passed = "] rank " + r + " passed the barrier with all " + n + " ranks";
    int identity = 0, barrier = 0;
    for (const auto& l : lines(out)) {
      if (l.rfind(tag, 0) != 0) continue;
      if (l.find(who) != std::string::npos && l.find("(identity from dlaunch)") != std::string::npos) ++identity;
      if (l.size() >= passed.size() && l.compare(l.size() - passed.size(), passed.size(), passed) == 0) ++barrier;
    }
    if (identity == 1 && barrier == 1) ++ok;
  }
  return ok;
}

}  // namespace dl::it
