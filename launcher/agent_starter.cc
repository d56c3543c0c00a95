#include "launcher/agent_starter.h"

#include <fcntl.h>
#include <ifaddrs.h>
#include <limits.h>
#include <netdb.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "errors/error.h"

namespace dl::launcher {

std::string agent_path(const std::string& prefix, bool for_remote) {
  if (!prefix.empty()) return prefix + "/bin/dlaunch-agent";
  char self[PATH_MAX] = {};
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    std::string dir(self, static_cast<size_t>(n));
    dir.resize(dir.rfind('/'));
    std::string beside = dir + "/dlaunch-agent";
    if (::access(beside.c_str(), X_OK) == 0) return beside;
  }
  return "dlaunch-agent";
}

LocalAgent start_local_agent(const std::string& path, const std::vector<std::string>& args, const std::string& token) {
  int in[2];
  if (::pipe2(in, O_CLOEXEC) != 0) throw_errno("creating the agent's stdin pipe");
  std::vector<std::string> argv_s{path};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) throw_errno("fork");
  if (pid == 0) {
    ::setpgid(0, 0);
    // SIGTERM, not SIGKILL: the agent catches it and SIGKILLs its ranks'
    // process groups first (a rank's own children have no PDEATHSIG).
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(1);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::dup2(in[0], 0);
    if (path.find('/') != std::string::npos) ::execv(path.c_str(), argv.data());
    else ::execvp(path.c_str(), argv.data());
    const char* m = "dlaunch: error: cannot run dlaunch-agent: ";
    (void)!::write(2, m, std::strlen(m));
    (void)!::write(2, std::strerror(errno), std::strlen(std::strerror(errno)));
    (void)!::write(2, "\n", 1);
    ::_exit(127);
  }
  ::setpgid(pid, pid);
  ::close(in[0]);
  std::string line = token + "\n";
  (void)!::write(in[1], line.data(), line.size());
  return {pid, in[1]};
}

void reap_local_agent(LocalAgent& a, int ms) {
  if (a.pid <= 0) return;
  if (a.stdin_fd >= 0) ::close(a.stdin_fd), a.stdin_fd = -1;
  for (int waited = 0;; waited += 5) {
    int st;
    pid_t r = ::waitpid(a.pid, &st, WNOHANG);
    if (r == a.pid || (r < 0 && errno == ECHILD)) break;
    if (waited >= ms) {
      ::kill(-a.pid, SIGKILL);
      ::kill(a.pid, SIGKILL);
      ::waitpid(a.pid, &st, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  a.pid = -1;
}

bool is_local_host(const std::string& host) {
  if (host == "localhost" || host == "127.0.0.1" || host == "::1" || host.rfind("127.", 0) == 0) return true;
  char name[HOST_NAME_MAX + 1] = {};
  ::gethostname(name, sizeof name - 1);
  if (host == name) return true;
  std::string short_name(name);
  if (auto dot = short_name.find('.'); dot != std::string::npos && host == short_name.substr(0, dot)) return true;
  ifaddrs* ifs = nullptr;
  if (::getifaddrs(&ifs) != 0) return false;
  bool local = false;
  for (ifaddrs* i = ifs; i && !local; i = i->ifa_next) {
    if (!i->ifa_addr || (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6)) continue;
    char buf[NI_MAXHOST];
    socklen_t len = i->ifa_addr->sa_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    if (::getnameinfo(i->ifa_addr, len, buf, sizeof buf, nullptr, 0, NI_NUMERICHOST) == 0) local = host == buf;
  }
  ::freeifaddrs(ifs);
  return local;
}

}  // namespace dl::launcher
