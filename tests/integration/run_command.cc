#include "tests/integration/run_command.h"

#include <dirent.h>
#include <grp.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace dl::it {

namespace {
double now_s() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

std::vector<std::string> child_env(const RunSpec& s) {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    auto eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& k : s.unset_env) env.erase(k);
  for (const auto& [k, v] : s.set_env) env[k] = v;
  std::vector<std::string> out;
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

std::vector<char*> c_strings(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (auto& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }
}  // namespace

Child start(const RunSpec& spec) {
  ::signal(SIGPIPE, SIG_IGN);  // a child that dies before reading its stdin must not kill the test
  int out[2], err[2], in[2];
  if (::pipe2(out, O_CLOEXEC) || ::pipe2(err, O_CLOEXEC) || ::pipe2(in, O_CLOEXEC))
    throw std::runtime_error("pipe failed");
  auto env = child_env(spec);
  auto argv_s = spec.argv;
  auto argv = c_strings(argv_s);
  auto envp = c_strings(env);
  Child c;
  c.started = now_s();
  c.pid = ::fork();
  if (c.pid < 0) throw std::runtime_error("fork failed");
  if (c.pid == 0) {
    ::setpgid(0, 0);
    ::signal(SIGPIPE, SIG_DFL);
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    if (spec.stdin_devnull && spec.stdin_data.empty() && !spec.stdin_hold) {
      int dn = ::open("/dev/null", O_RDONLY);
      ::dup2(dn, 0);
    } else {
      ::dup2(in[0], 0);
    }
    if (spec.uid >= 0) {
      if (::setgroups(0, nullptr) != 0 || ::setgid(static_cast<gid_t>(spec.gid)) != 0 ||
          ::setuid(static_cast<uid_t>(spec.uid)) != 0)
        ::_exit(122);
    }
    if (!spec.cwd.empty() && ::chdir(spec.cwd.c_str()) != 0) ::_exit(120);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(121);
  }
  ::close(out[1]);
  ::close(err[1]);
  ::close(in[0]);
  // stdin is small in these tests: write it and close, so the child sees EOF.
  if (!spec.stdin_data.empty()) {
    size_t off = 0;
    while (off < spec.stdin_data.size()) {
      ssize_t n = ::write(in[1], spec.stdin_data.data() + off, spec.stdin_data.size() - off);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
  }
  if (spec.stdin_hold) c.in_fd = in[1];
  else ::close(in[1]);
  c.out_fd = out[0];
  c.err_fd = err[0];
  return c;
}

RunResult wait(Child& c, double timeout_s) {
  RunResult r;
  const double deadline = c.started + timeout_s;
  bool exited = false;
  int status = 0;
  char buf[65536];
  while (true) {
    if (!exited) {
      pid_t p = ::waitpid(c.pid, &status, WNOHANG);
      if (p == c.pid) exited = true, r.seconds = now_s() - c.started;
    }
    if (exited && c.out_fd < 0 && c.err_fd < 0) break;
    if (now_s() > deadline) {
      if (!exited) {
        r.timed_out = true;
        ::kill(-c.pid, SIGKILL);
        ::kill(c.pid, SIGKILL);
        ::waitpid(c.pid, &status, 0);
        exited = true;
        r.seconds = now_s() - c.started;
      }
      break;  // pipes held open by a straggler: stop reading
    }
    pollfd p[2] = {{c.out_fd, POLLIN, 0}, {c.err_fd, POLLIN, 0}};
    ::poll(p, 2, 20);
    for (int i = 0; i < 2; ++i) {
      int& fd = i == 0 ? c.out_fd : c.err_fd;
      if (fd < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t n = ::read(fd, buf, sizeof buf);
      if (n > 0) (i == 0 ? r.out : r.err).append(buf, static_cast<size_t>(n));
      else if (n == 0 || errno != EINTR) ::close(fd), fd = -1;
    }
  }
  if (c.in_fd >= 0) ::close(c.in_fd), c.in_fd = -1;
  if (c.out_fd >= 0) ::close(c.out_fd), c.out_fd = -1;
  if (c.err_fd >= 0) ::close(c.err_fd), c.err_fd = -1;
  if (WIFEXITED(status)) r.code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status), r.code = 128 + r.signal;
  return r;
}

RunResult run(const RunSpec& spec, double timeout_s) {
  Child c = start(spec);
  return wait(c, timeout_s);
}

bool read_fd_until(int fd, std::string& out, const std::string& needle, double seconds) {
  const double deadline = now_s() + seconds;
  char buf[65536];
  while (out.find(needle) == std::string::npos) {
    const double left = deadline - now_s();
    if (left <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left * 1000) + 1) <= 0) continue;
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) out.append(buf, static_cast<size_t>(n));
    else if (n == 0 || errno != EINTR) return false;
  }
  return true;
}

std::string bin(const std::string& name) { return std::string(DLAUNCH_BIN_DIR) + "/" + name; }

std::string new_marker() {
  static std::atomic<int> counter{0};
  std::random_device rd;
  char buf[64];
  std::snprintf(buf, sizeof buf, "1000.%07d%03d%06u", static_cast<int>(::getpid()) % 10000000, counter++ % 1000,
                rd() % 1000000u);
  return buf;
}

namespace {
// (state, ppid) from /proc/pid/stat; state 0 when gone.
std::pair<char, pid_t> stat_of(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  auto rp = s.rfind(')');
  if (rp == std::string::npos || rp + 4 >= s.size()) return {0, -1};
  std::istringstream rest(s.substr(rp + 2));
  char state = 0;
  long ppid = -1;
  rest >> state >> ppid;
  return {state, static_cast<pid_t>(ppid)};
}
}  // namespace

pid_t parent_of(pid_t pid) {
  auto [state, ppid] = stat_of(pid);
  return state ? ppid : -1;
}

bool alive(pid_t pid) {
  char state = stat_of(pid).first;
  return state != 0 && state != 'Z' && state != 'X';
}

std::vector<pid_t> marked(const std::string& marker, pid_t exclude) {
  std::vector<pid_t> out;
  DIR* d = ::opendir("/proc");
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (!end || *end || pid <= 0 || pid == ::getpid() || pid == exclude) continue;
    std::string cmd;
    try {
      std::ifstream f(std::string("/proc/") + e->d_name + "/cmdline");
      cmd.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    } catch (const std::ios_base::failure&) {
      continue;  // it exited while we read (ESRCH): not alive, so not marked
    }
    if (cmd.find(marker) != std::string::npos && alive(static_cast<pid_t>(pid))) out.push_back(static_cast<pid_t>(pid));
  }
  ::closedir(d);
  return out;
}

std::vector<pid_t> wait_marked_gone(const std::string& marker, double timeout_s, pid_t exclude) {
  const double deadline = now_s() + timeout_s;
  auto left = marked(marker, exclude);
  while (!left.empty() && now_s() < deadline) {
    sleep_ms(20);
    left = marked(marker, exclude);
  }
  return left;
}

std::vector<pid_t> wait_marked(const std::string& marker, size_t n, double timeout_s, pid_t exclude) {
  const double deadline = now_s() + timeout_s;
  auto found = marked(marker, exclude);
  while (found.size() < n && now_s() < deadline) {
    sleep_ms(20);
    found = marked(marker, exclude);
  }
  return found;
}

void kill_marked(const std::string& marker) {
  for (pid_t p : marked(marker)) ::kill(p, SIGKILL);
}

TempDir::TempDir() {
  char tmpl[] = "/tmp/dlaunch-it-XXXXXX";
  if (!::mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
  path = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

std::pair<int, std::string> run_ld_debug_libs(const std::vector<std::string>& argv) {
  TempDir tmp;
  RunSpec s;
  s.argv = argv;
  // ld.so writes what it loads to <prefix>.<pid>, one file per process.
  s.set_env = {{"LD_DEBUG", "libs"}, {"LD_DEBUG_OUTPUT", tmp.path + "/ld"}};
  RunResult r = run(s, 30);
  std::string log;
  for (const auto& e : std::filesystem::directory_iterator(tmp.path)) log += read_file(e.path().string());
  return {r.code, log};
}

std::string print_maps_sh(const std::string& name, const std::string& pid_var) {
  const std::string maps = "/proc/$" + pid_var + "/maps";
  return "echo \"" + name + " $(readlink /proc/$" + pid_var + "/exe)\"; " +
         "for t in 1 2 3 4 5 6 7 8 9 10; do m=$(cat " + maps + "); "
         "case \"$m\" in *libc.so.6*) break;; esac; sleep 0.1; done; "
         "echo \"maps: read $t times, ${#m} bytes\"; printf '%s\\n' \"$m\"";
}

void write_file(const std::string& path, const std::string& text, int mode) {
  {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f << text;
  }
  ::chmod(path.c_str(), static_cast<mode_t>(mode));
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string::npos) nl = text.size();
    out.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  return out;
}

std::map<std::string, std::string> parse_env(const std::string& text) {
  std::map<std::string, std::string> env;
  for (const auto& l : lines(text)) {
    auto eq = l.find('=');
    if (eq != std::string::npos && eq > 0) env[l.substr(0, eq)] = l.substr(eq + 1);
  }
  return env;
}

ChildGuard::~ChildGuard() {
  if (child.pid > 0 && ::waitpid(child.pid, nullptr, WNOHANG) == 0) {
    ::kill(-child.pid, SIGKILL);
    ::kill(child.pid, SIGKILL);
    ::waitpid(child.pid, nullptr, 0);
  }
  if (!marker.empty()) kill_marked(marker);
}

}  // namespace dl::it
