#include "tests/security/other_user.h"

#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

namespace dl::sec {
namespace {

constexpr const char* kPrefix = "dlsec";

// useradd/userdel take a lock on /etc/passwd; tests running in parallel
// contend for it, and the tools fail at once instead of waiting.
int run_retrying(const std::vector<std::string>& argv, std::string* out = nullptr) {
  it::RunResult r;
  for (int attempt = 0; attempt < 50; ++attempt) {
    it::RunSpec spec;
    spec.argv = argv;
    r = it::run(spec, 30);
    if (r.code == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100 + 20 * attempt));
  }
  if (out) *out = r.out + r.err;
  return r.code;
}

std::string which(const char* tool) {
  for (const char* d : {"/usr/sbin/", "/sbin/", "/usr/bin/", "/bin/"}) {
    std::string p = std::string(d) + tool;
    if (::access(p.c_str(), X_OK) == 0) return p;
  }
  return "";
}

void kill_all_of(uid_t uid) {
  const std::string pkill = which("pkill");
  if (pkill.empty()) return;
  for (int i = 0; i < 3; ++i) {
    it::RunSpec spec;
    spec.argv = {pkill, "-KILL", "-U", std::to_string(uid)};
    it::run(spec, 10);
  }
}

void remove_user(const std::string& name, uid_t uid) {
  kill_all_of(uid);
  run_retrying({which("userdel"), name});
}

// Users of test processes that are gone: their destructor never ran.
void remove_orphans() {
  std::vector<std::pair<std::string, uid_t>> dead;
  ::setpwent();
  while (passwd* pw = ::getpwent()) {
    std::string n = pw->pw_name;
    if (n.rfind(kPrefix, 0) != 0) continue;
    const size_t x = n.find('x', 5);
    if (x == std::string::npos || x == 5) continue;
    const pid_t pid = static_cast<pid_t>(std::atol(n.substr(5, x - 5).c_str()));
    if (pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH) dead.emplace_back(n, pw->pw_uid);
  }
  ::endpwent();
  for (auto& [n, uid] : dead) {
    remove_user(n, uid);
    std::error_code ec;
    std::filesystem::remove_all("/tmp/" + n, ec);
  }
}

}  // namespace

bool OtherUser::available() { return ::geteuid() == 0 && !which("useradd").empty() && !which("userdel").empty(); }

OtherUser::OtherUser() {
  static std::atomic<int> counter{0};
  remove_orphans();
  name_ = std::string(kPrefix) + std::to_string(::getpid()) + "x" + std::to_string(counter++);
  std::string out;
  if (run_retrying({which("useradd"), "--system", "--no-create-home", "--user-group", "--shell", "/usr/sbin/nologin",
                    name_},
                   &out) != 0)
    throw std::runtime_error("useradd " + name_ + " failed: " + out);
  passwd* pw = ::getpwnam(name_.c_str());
  if (pw == nullptr) throw std::runtime_error("useradd made no " + name_);
  uid_ = pw->pw_uid;
  gid_ = pw->pw_gid;
  dir_ = "/tmp/" + name_;
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
  if (::mkdir(dir_.c_str(), 0755) != 0 || ::chown(dir_.c_str(), uid_, gid_) != 0) {
    remove_user(name_, uid_);
    throw std::runtime_error("cannot make " + dir_);
  }
}

OtherUser::~OtherUser() {
  remove_user(name_, uid_);
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

it::RunSpec OtherUser::as(it::RunSpec spec) const {
  spec.uid = uid_;
  spec.gid = gid_;
  if (spec.cwd.empty()) spec.cwd = dir_;
  spec.set_env["HOME"] = dir_;
  spec.set_env["USER"] = name_;
  spec.set_env["LOGNAME"] = name_;
  return spec;
}

std::vector<unsigned> listening_ports(pid_t pid) {
  std::set<std::string> inodes;
  std::error_code ec;
  for (auto& e : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
    std::error_code lec;
    const std::string t = std::filesystem::read_symlink(e.path(), lec).string();
    if (!lec && t.rfind("socket:[", 0) == 0) inodes.insert(t.substr(8, t.size() - 9));
  }
  std::vector<unsigned> ports;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream f(table);
    std::string line;
    std::getline(f, line);  // the header
    while (std::getline(f, line)) {
      std::istringstream in(line);
      std::string sl, local, remote, st, queues, timer, retr, uid, timeout, inode;
      in >> sl >> local >> remote >> st >> queues >> timer >> retr >> uid >> timeout >> inode;
      if (st == "0A" && inodes.count(inode))
        ports.push_back(static_cast<unsigned>(std::stoul(local.substr(local.find(':') + 1), nullptr, 16)));
    }
  }
  return ports;
}

std::string compile_c(const std::string& dir, const std::string& name, const std::string& source,
                      const std::string& cc_args) {
  const std::string src = dir + "/" + name + ".c", bin = dir + "/" + name;
  {
    std::ofstream f(src);
    f << source;
  }
  it::RunSpec spec;
  spec.argv = {"/bin/sh", "-c", "cc -O1 -o '" + bin + "' '" + src + "' " + cc_args};
  auto r = it::run(spec, 120);
  if (r.code != 0) throw std::runtime_error("cannot compile " + name + ": " + r.out + r.err);
  ::chmod(bin.c_str(), 0755);
  return bin;
}

}  // namespace dl::sec
