#include "tests/doctor/doctor_util.h"

#include "tests/multihost/multihost_util.h"

#include <glob.h>

#include <fstream>
#include <sstream>
#include <thread>

namespace dl::doctor_test {

std::string bin(const std::string& name) { return dl::multihost::bin(name); }

std::string ssh_path(const dl::cluster::Cluster& c) {
  auto r = c.run_in("h0", "ssh -F " + c.ssh_config() + " h0 'printf %s \"$PATH\"'");
  if (r.status != 0) throw std::runtime_error("cannot read h0's PATH over ssh: " + r.output);
  return r.output;
}

namespace {
dl::cluster::RunResult run_doctor_in_path(const dl::cluster::Cluster& c, const std::string& path, const std::string& args,
                                          const std::string& hostfile, std::chrono::milliseconds timeout) {
  const std::string tmp = c.dir() + "/doctor-tmp";
  return c.run_in("h0", "mkdir -p " + tmp + " && TMPDIR=" + tmp + " PATH='" + path + "' " + bin("dlaunch") + " doctor --hostfile " +
                            (hostfile.empty() ? c.hostfile() : hostfile) + " --ssh-config " + c.ssh_config() + " " +
                            args + " </dev/null",
                  timeout);
}
}  // namespace

dl::cluster::RunResult run_doctor(const dl::cluster::Cluster& c, const std::string& args, const std::string& hostfile,
                                  std::chrono::milliseconds timeout) {
  return run_doctor_in_path(c, ssh_path(c), args, hostfile, timeout);
}

dl::cluster::RunResult run_doctor_with_path(const dl::cluster::Cluster& c, const std::string& path, const std::string& args) {
  return run_doctor_in_path(c, path, args, "", std::chrono::seconds(150));
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
  // Peers, and agents of the all_reduce job, on any host.
  std::string left = dl::multihost::wait_clean(c, "doctor --peer", std::chrono::seconds(5));
  glob_t g{};
  if (::glob((c.dir() + "/doctor-tmp/*").c_str(), 0, nullptr, &g) == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i) left += std::string("left behind: ") + g.gl_pathv[i] + "\n";
  ::globfree(&g);
  return left;
}

bool contains(const std::string& hay, const std::string& needle) { return dl::multihost::contains(hay, needle); }

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

std::vector<std::string> failures(const std::string& out, const std::string& check) {
  return lines_starting(out, kFail + " " + check + ": ");
}

int count_failures(const std::string& out) { return static_cast<int>(lines_starting(out, kFail + " ").size()); }

}  // namespace dl::doctor_test
