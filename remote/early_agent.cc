#include "remote/early_agent.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include "control/env_names.h"

namespace dl::remote {

namespace {
AgentMain g_agent_main = nullptr;
char** g_own_argv = nullptr;
AgentGetReady g_get_ready = nullptr;

// Writes `argv` (NUL-separated) over this process's own command line, as far
// as its memory reaches: what /proc/PID/cmdline, ps and pgrep -f read.
void retitle(const std::vector<char*>& argv) {
  if (!g_own_argv || !g_own_argv[0]) return;
  char* begin = g_own_argv[0];
  char* end = begin;
  for (char** a = g_own_argv; *a; ++a) end = *a + std::strlen(*a) + 1;  // the kernel lays them end to end
  std::string title;
  for (char* a : argv)
    if (a) title.append(a).push_back('\0');
  const size_t room = static_cast<size_t>(end - begin);
  const size_t n = std::min(title.size(), room - 1);
  std::memcpy(begin, title.data(), n);
  std::memset(begin + n, 0, room - n);
}

// Where the child keeps its command pipe until it has read it: above the
// control socket (kAgentControlFd), below everything it closes.
constexpr int kGoFd = kAgentControlFd + 1;

// This process's thread count (/proc/self/stat), 0 when unreadable.
long thread_count() {
  std::ifstream f("/proc/self/stat");
  std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const auto close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream fields(stat.substr(close + 1));
  std::string field;
  for (int i = 0; i < 18 && fields >> field; ++i) {}  // state .. num_threads (the 18th after the name)
  return std::strtol(field.c_str(), nullptr, 10);
}

bool read_all(int fd, char* p, size_t n) {
  while (n > 0) {
    const ssize_t k = ::read(fd, p, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k, n -= static_cast<size_t>(k);
  }
  return true;
}

// The child: arranged as spawn_local_agent arranges one before its exec, then
// waits for its command line and runs the agent with it. Never returns.
[[noreturn]] void run_child(pid_t parent, int in, int go, int control, const AgentHint& hint) {
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);  // as spawn_local_agent's: the agent cleans up on SIGTERM
  if (::getppid() != parent) ::_exit(1);
  ::prctl(PR_SET_NAME, "dlaunch-agent", 0, 0, 0);
  // What an exec does: handlers back to the default (ignored signals stay
  // ignored), and nothing blocked.
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) == 0 && old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN)
      ::signal(sig, SIG_DFL);
  }
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  // Its stdin, its control socket at kAgentControlFd and the command pipe at
  // kGoFd (moved above both first, so that no dup2 lands on the other), and
  // nothing else of dlaunch's: an exec would have closed those (close-on-exec).
  ::dup2(in, 0);
  const int go_high = ::fcntl(go, F_DUPFD_CLOEXEC, kGoFd + 1);
  const int control_high = ::fcntl(control, F_DUPFD_CLOEXEC, kGoFd + 1);
  if (go_high < 0 || control_high < 0) ::_exit(1);
  ::dup2(control_high, kAgentControlFd);  // (dup2 clears close-on-exec on the copy)
  ::dup3(go_high, kGoFd, O_CLOEXEC);
  ::close_range(kGoFd + 1, ~0U, 0);
  if (g_get_ready && hint.ranks > 0) g_get_ready(hint.ranks);
  uint32_t size = 0;
  if (!read_all(kGoFd, reinterpret_cast<char*>(&size), sizeof size)) ::_exit(0);  // never started: dlaunch is done
  std::string words(size, '\0');
  if (!read_all(kGoFd, words.data(), size)) ::_exit(0);
  ::close(kGoFd);
  std::vector<char*> argv{const_cast<char*>("dlaunch-agent")};
  for (size_t at = 0; at < words.size(); at = words.find('\0', at) + 1) argv.push_back(words.data() + at);
  argv.push_back(nullptr);
  retitle(argv);
  const int code = g_agent_main(static_cast<int>(argv.size() - 1), argv.data());
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  ::_exit(code);
}
}  // namespace

std::string forked_agent_exit_error(int wait_status) {
  const std::string how = WIFSIGNALED(wait_status)
                              ? "was killed by signal " + std::to_string(WTERMSIG(wait_status)) + " (" +
                                    ::strsignal(WTERMSIG(wait_status)) + ")"
                              : "exited with status " + std::to_string(WEXITSTATUS(wait_status));
  return "the local agent (forked from dlaunch) " + how +
         " before it connected (its own message, if any, is above); to run it as the dlaunch-agent program "
         "instead, set DLAUNCH_LOCAL_AGENT=exec";
}

void set_in_process_agent(AgentMain main, char** own_argv, AgentGetReady get_ready) {
  g_agent_main = main;
  g_own_argv = own_argv;
  g_get_ready = get_ready;
}

std::unique_ptr<EarlyAgent> EarlyAgent::fork_now(const AgentHint& hint) {
  if (!g_agent_main) return nullptr;
  if (const char* how = std::getenv(env::kDlLocalAgent); how && std::string(how) == "exec") return nullptr;
  if (thread_count() != 1) return nullptr;
  int in[2], go[2], control[2];
  if (::pipe2(in, O_CLOEXEC) != 0) return nullptr;
  if (::pipe2(go, O_CLOEXEC) != 0) {
    ::close(in[0]), ::close(in[1]);
    return nullptr;
  }
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, control) != 0) {
    for (int fd : {in[0], in[1], go[0], go[1]}) ::close(fd);
    return nullptr;
  }
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) run_child(parent, in[0], go[0], control[1], hint);
  for (int fd : {in[0], go[0], control[1]}) ::close(fd);
  if (pid < 0) {
    for (int fd : {in[1], go[1], control[0]}) ::close(fd);
    return nullptr;
  }
  ::setpgid(pid, pid);
  std::unique_ptr<EarlyAgent> a(new EarlyAgent);
  a->pid_ = pid, a->stdin_ = in[1], a->go_ = go[1], a->control_ = control[0];
  return a;
}

LocalAgent EarlyAgent::start(const std::vector<std::string>& args, const std::string& token, int* control_fd) {
  std::string words;
  for (const auto& a : args) words.append(a).push_back('\0');
  const uint32_t size = static_cast<uint32_t>(words.size());
  // Both writes fit the pipes' buffers: they return at once, and a child that
  // died meanwhile makes them fail quietly (its exit is seen by the caller).
  (void)write_without_sigpipe(go_, std::string(reinterpret_cast<const char*>(&size), sizeof size) + words);
  ::close(go_), go_ = -1;
  (void)write_without_sigpipe(stdin_, token + "\n");
  started_ = true;
  *control_fd = control_, control_ = -1;
  LocalAgent agent{pid_, stdin_};
  stdin_ = -1;
  return agent;
}

EarlyAgent::~EarlyAgent() {
  for (int fd : {go_, stdin_, control_})
    if (fd >= 0) ::close(fd);
  if (started_ || pid_ <= 0) return;
  // It leaves at the command pipe's EOF.
  int st;
  while (::waitpid(pid_, &st, 0) < 0 && errno == EINTR) {}
}

}  // namespace dl::remote
