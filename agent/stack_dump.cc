#include "agent/stack_dump.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "errors/error.h"
#include "wire/private_dir.h"

extern char** environ;

namespace dl::agent {

namespace asio = boost::asio;
namespace msg = control::msg;
namespace fs = std::filesystem;
using std::chrono::milliseconds;

namespace {
// How often a Python rank's dump file is looked at, and how long it must
// stay the same size to count as complete (faulthandler writes the whole
// dump from its signal handler, in microseconds).
constexpr milliseconds kPythonPoll{20};
// Tools run at once: gdb takes a second and a core to start.
constexpr int kMaxTools = 8;
// A rank's stack text beyond this is cut (a process with thousands of threads).
constexpr size_t kMaxStackText = 1u << 20;

int read_ptrace_scope() {
  std::ifstream f("/proc/sys/kernel/yama/ptrace_scope");
  int v = -1;
  return (f >> v) ? v : -1;
}

// Whether `pid` is stopped by a signal (SIGSTOP, SIGTSTP: state T in
// /proc/PID/stat, after the command name's closing parenthesis). Such a rank
// is why a job stands still, whatever its stack says (a shell shows wait4),
// and a Python rank's fault handler cannot answer while it is stopped.
bool stopped_by_signal(pid_t pid) {
  // read(2), not a stream: libstdc++'s filebuf throws when a read fails, as
  // it does (ESRCH) for a rank that exits meanwhile.
  const int fd = ::open(("/proc/" + std::to_string(pid) + "/stat").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[512];
  const ssize_t n = ::read(fd, buf, sizeof buf);
  ::close(fd);
  if (n <= 0) return false;
  const std::string stat(buf, static_cast<size_t>(n));
  const size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'T';
}

off_t file_size(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? st.st_size : -1;
}

std::string read_range(const std::string& path, off_t from, off_t to) {
  std::ifstream f(path, std::ios::binary);
  f.seekg(from);
  std::string s(static_cast<size_t>(to - from), '\0');
  f.read(s.data(), static_cast<std::streamsize>(s.size()));
  s.resize(static_cast<size_t>(f.gcount()));
  return s;
}

std::string seconds_text(milliseconds t) {
  std::ostringstream s;
  s << static_cast<double>(t.count()) / 1000.0;
  return s.str();
}

// The tool's environment: the agent's, without debuginfod's server list
// (a tool would otherwise fetch debug info over the network, past any deadline).
std::vector<std::string> tool_environment() {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "DEBUGINFOD_URLS=", 16) != 0) env.emplace_back(*e);
  return env;
}
}  // namespace

struct StackDumper::ToolRun {
  explicit ToolRun(asio::io_context& io) : out(io) {}
  size_t index = 0;
  pid_t pid = -1;
  bool reaped = false;
  asio::posix::stream_descriptor out;
  std::array<char, 16384> buf{};
  std::string text;
};

struct StackDumper::Collection : std::enable_shared_from_this<Collection> {
  explicit Collection(asio::io_context& io) : deadline(io) {}
  std::vector<StackTarget> targets;
  std::vector<msg::RankStack> out;
  std::vector<bool> done;
  std::vector<off_t> before, seen;  // Python ranks: the dump file's size before SIGQUIT, at the last poll
  std::vector<std::shared_ptr<asio::steady_timer>> polls;
  std::vector<std::shared_ptr<ToolRun>> runs;
  std::vector<size_t> waiting;  // native ranks whose tool has not started
  size_t remaining = 0;
  milliseconds timeout{0};
  StackTool tool;
  int ptrace_scope = -1;
  std::function<void(std::vector<msg::RankStack>)> done_cb;
  asio::steady_timer deadline;
  bool finished = false;
};

StackDumper::StackDumper(asio::io_context& io, PythonDir& dir) : io_(io), hook_dir_(PythonDir::installed_hook_dir()) {
  if (hook_dir_.empty()) {
    // No installed hook beside this binary: this job's directory gets a copy.
    if (!dir.ensure()) return;  // mode 0700: only this user's ranks write there
    try {
      wire::PrivateDir::open(dir.path(), false).write_file("sitecustomize.py", python_dump_hook());
    } catch (const Error&) {
      return;
    }
    hook_dir_ = dir.path();
  }
  dir_ = dir.path();
}

StackDumper::~StackDumper() { remove(); }

TaskEnv StackDumper::task_env(int, const RankEnvSoFar& so_far) {
  TaskEnv t;
  if (dir_.empty()) return t;
  const std::string* path = so_far.find("PYTHONPATH");
  t.vars.emplace_back("PYTHONPATH", !path || path->empty() ? hook_dir_ : hook_dir_ + ":" + *path);
  t.vars.emplace_back(PythonDir::kEnvVar, dir_);
  return t;
}

std::string StackDumper::dump_file(pid_t pid) const { return dir_ + "/py." + std::to_string(pid) + ".stack"; }

// True when `pid` holds its dump file open: its interpreter ran our hook and
// has not exec'd since (the file is close-on-exec), so SIGQUIT makes it dump.
bool StackDumper::holds_dump_file(pid_t pid) const {
  if (dir_.empty()) return false;
  const std::string want = dump_file(pid);
  std::error_code ec;
  for (fs::directory_iterator it("/proc/" + std::to_string(pid) + "/fd", ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code lec;
    if (fs::read_symlink(it->path(), lec) == want) return true;
  }
  return false;
}

void StackDumper::collect(std::vector<StackTarget> targets, milliseconds timeout,
                          std::function<void(std::vector<msg::RankStack>)> done) {
  auto c = std::make_shared<Collection>(io_);
  c->targets = std::move(targets);
  c->timeout = timeout;
  c->done_cb = std::move(done);
  queue_.push_back(std::move(c));
  if (queue_.size() == 1) start_next();
}

void StackDumper::start_next() {
  if (queue_.empty()) return;
  Collection& c = *queue_.front();
  const size_t n = c.targets.size();
  c.out.resize(n), c.done.assign(n, false), c.before.assign(n, -1), c.seen.assign(n, -1);
  c.polls.resize(n), c.runs.resize(n);
  c.remaining = n;
  const char* path = ::getenv("PATH");
  c.tool = find_stack_tool(path ? path : "/usr/bin:/bin");
  c.ptrace_scope = read_ptrace_scope();
  c.deadline.expires_after(c.timeout);
  c.deadline.async_wait([this, cp = c.shared_from_this()](boost::system::error_code ec) {
    if (!ec) finish(*cp);
  });
  for (size_t i = 0; i < n; ++i) {
    const StackTarget& t = c.targets[i];
    c.out[i].rank = t.rank, c.out[i].pid = static_cast<int>(t.pid);
    if (!t.running) {
      c.out[i].error = "had ended";
      finish_entry(c, i);
    } else if (stopped_by_signal(t.pid)) {
      c.out[i].error = "stopped by a signal (SIGSTOP or SIGTSTP: it runs again only after SIGCONT)";
      finish_entry(c, i);
    } else if (holds_dump_file(t.pid)) {
      start_python(c, i);
    } else if (c.tool.name.empty()) {
      c.out[i].error = "neither eu-stack nor gdb is installed on this host (looked in the agent's PATH): install "
                       "elfutils or gdb there for native ranks' stacks";
      finish_entry(c, i);
    } else {
      c.waiting.push_back(i);
    }
  }
  for (int k = 0; k < kMaxTools && !c.waiting.empty(); ++k) {
    const size_t i = c.waiting.front();
    c.waiting.erase(c.waiting.begin());
    start_tool(c, i);
  }
  if (c.remaining == 0) finish(c);
}

void StackDumper::start_python(Collection& c, size_t i) {
  const pid_t pid = c.targets[i].pid;
  c.out[i].how = "python";
  c.before[i] = c.seen[i] = file_size(dump_file(pid));
  if (::kill(pid, SIGQUIT) != 0) {
    c.out[i].error = std::string("could not signal it: ") + std::strerror(errno);
    return finish_entry(c, i);
  }
  c.polls[i] = std::make_shared<asio::steady_timer>(io_);
  poll_python(c, i);
}

void StackDumper::poll_python(Collection& c, size_t i) {
  auto timer = c.polls[i];
  timer->expires_after(kPythonPoll);
  timer->async_wait([this, cp = c.shared_from_this(), i, timer](boost::system::error_code ec) {
    Collection& c = *cp;
    if (ec || c.finished || c.done[i]) return;
    const std::string file = dump_file(c.targets[i].pid);
    const off_t now = file_size(file);
    if (now > c.before[i] && now == c.seen[i]) {
      c.out[i].text = read_range(file, c.before[i], std::min<off_t>(now, c.before[i] + kMaxStackText));
      return finish_entry(c, i);
    }
    c.seen[i] = now;
    poll_python(c, i);
  });
}

void StackDumper::start_tool(Collection& c, size_t i) {
  const pid_t target = c.targets[i].pid;
  c.out[i].how = c.tool.name;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    c.out[i].error = std::string("could not start ") + c.tool.name + ": " + std::strerror(errno);
    return finish_entry(c, i);
  }
  auto argv_s = tool_argv(c.tool, target);
  auto env_s = tool_environment();
  std::vector<char*> argv, envp;
  for (auto& a : argv_s) argv.push_back(a.data());
  for (auto& e : env_s) envp.push_back(e.data());
  argv.push_back(nullptr), envp.push_back(nullptr);
  const int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  const pid_t pid = ::fork();
  if (pid == 0) {
    // A tool stays our child (not reparented), so under Yama's
    // ptrace_scope 1 it counts as the agent's descendant that the ranks
    // named with PR_SET_PTRACER (rank_process.cc).
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    for (int sig = 1; sig < NSIG; ++sig) ::signal(sig, SIG_DFL);
    if (devnull >= 0) ::dup2(devnull, 0);
    ::dup2(fds[1], 1);
    ::dup2(fds[1], 2);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  if (devnull >= 0) ::close(devnull);
  ::close(fds[1]);
  if (pid < 0) {
    ::close(fds[0]);
    c.out[i].error = std::string("could not start ") + c.tool.name + ": fork: " + std::strerror(errno);
    return finish_entry(c, i);
  }
  auto run = std::make_shared<ToolRun>(io_);
  run->index = i, run->pid = pid;
  run->out.assign(fds[0]);
  c.runs[i] = run;
  tools_[pid] = run;
  read_tool(c, *run);
}

void StackDumper::read_tool(Collection& c, ToolRun& t) {
  auto keep = c.runs[t.index];
  t.out.async_read_some(asio::buffer(t.buf), [this, cp = c.shared_from_this(), keep](boost::system::error_code ec, size_t n) {
    Collection& c = *cp;
    if (c.finished) return;
    ToolRun& t = *keep;
    if (t.text.size() < kMaxStackText) t.text.append(t.buf.data(), n);
    if (!ec) return read_tool(c, t);
    // EOF: the tool has finished (or closed its output, which it does only by exiting).
    t.out.close();
    const size_t i = t.index;
    if (std::string why = tool_failure(c.tool, c.targets[i].pid, t.text, c.ptrace_scope); !why.empty())
      c.out[i].error = why;
    c.out[i].text = std::move(t.text);
    if (!c.waiting.empty()) {
      const size_t next = c.waiting.front();
      c.waiting.erase(c.waiting.begin());
      start_tool(c, next);
    }
    finish_entry(c, i);
  });
}

void StackDumper::finish_entry(Collection& c, size_t i) {
  if (c.done[i]) return;
  c.done[i] = true;
  if (--c.remaining == 0 && !c.finished) asio::post(io_, [this, cp = c.shared_from_this()] { finish(*cp); });
}

void StackDumper::child_reaped(pid_t pid) {
  auto it = tools_.find(pid);
  if (it == tools_.end()) return;
  it->second->reaped = true;  // its pid may be reused now: never killed again
  tools_.erase(it);
}

// The deadline passed or every rank answered: whoever did not is said so,
// its tool killed and the rank continued, and the answer goes out.
void StackDumper::finish(Collection& c) {
  if (c.finished) return;
  c.finished = true;
  c.deadline.cancel();
  const std::string late = "did not answer within " + seconds_text(c.timeout) + " s";
  for (size_t i = 0; i < c.targets.size(); ++i) {
    if (c.polls[i]) c.polls[i]->cancel();
    if (auto& r = c.runs[i]) {
      if (r->out.is_open()) {
        r->out.close();
        if (!r->reaped) ::kill(r->pid, SIGKILL);
        ::kill(c.targets[i].pid, SIGCONT);  // a tracer killed mid-attach can leave it stopped
      }
    }
    if (!c.done[i]) {
      c.out[i].error = c.out[i].how == "python" ? late + " (its fault handler did not run: is it stopped, or did it "
                                                         "replace the SIGQUIT handler?)"
                                                : late;
      c.done[i] = true;
    }
  }
  auto done = std::move(c.done_cb);
  auto out = std::move(c.out);
  // The collection goes once its handlers, cancelled above, have run.
  asio::post(io_, [this] {
    queue_.erase(queue_.begin());
    start_next();
  });
  done(std::move(out));
}

void StackDumper::remove() {
  for (auto& [pid, run] : tools_)
    if (!run->reaped) ::kill(pid, SIGKILL);
}

}  // namespace dl::agent
