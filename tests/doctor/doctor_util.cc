#include "tests/doctor/doctor_util.h"

#include <glob.h>

#include <fstream>
#include <sstream>
#include <thread>

namespace dl::doctor_test {

namespace {
std::string cmdline_of(int pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  for (auto& ch : s)
    if (ch == '\0') ch = ' ';
  return s;
}
}  // namespace

std::string bin(const std::string& name) { return std::string(DLAUNCH_BIN_DIR) + "/" + name; }

std::string ssh_path(const dl::cluster::Cluster& c) {
  auto r = c.run_in("h0", "ssh -F " + c.ssh_config() + " h0 'printf %s \"$PATH\"'");
  if (r.status != 0) throw std::runtime_error("cannot read h0's PATH over ssh: " + r.output);
  return r.output;
}

dl::cluster::RunResult run_doctor(const dl::cluster::Cluster& c, const std::string& args, const std::string& hostfile,
                                  std::chrono::milliseconds timeout) {
  static thread_local std::string path;
  path = ssh_path(c);
  const std::string tmp = c.dir() + "/doctor-tmp";
  return c.run_in("h0", "mkdir -p " + tmp + " && TMPDIR=" + tmp + " PATH='" + path + "' " + bin("dlaunch") + " doctor --hostfile " +
                            (hostfile.empty() ? c.hostfile() : hostfile) + " --ssh-config " + c.ssh_config() + " " +
                            args + " </dev/null",
                  timeout);
}

std::vector<std::string> lines_starting(const std::string& text, const std::string& prefix) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);)
    if (l.rfind(prefix, 0) == 0) out.push_back(l);
  return out;
}

std::string row_of(const std::string& text, const std::string& host) {
  auto rows = lines_starting(text, host + " ");
  return rows.empty() ? "" : rows[0];
}

std::string leftovers(const dl::cluster::Cluster& c) {
  std::string left;
  for (int tries = 0; tries < 50; ++tries) {
    left.clear();
    for (const auto& h : c.hosts())
      for (int pid : c.pids_in(h)) {
        std::string cl = cmdline_of(pid);
        if (contains(cl, "doctor --peer") || contains(cl, "dlaunch-agent")) left += h + ": " + std::to_string(pid) + " " + cl + "\n";
      }
    if (left.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  glob_t g{};
  if (::glob((c.dir() + "/doctor-tmp/*").c_str(), 0, nullptr, &g) == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i) left += std::string("left behind: ") + g.gl_pathv[i] + "\n";
  ::globfree(&g);
  return left;
}

bool contains(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

}  // namespace dl::doctor_test
