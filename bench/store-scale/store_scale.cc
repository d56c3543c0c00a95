// A store at scale: N real protocol clients, about a thousand per process
// over epoll (storm.h), through connect, one barrier of all N and one
// all-gather of 64-byte values, against dlaunch's store or torch 1.13's
// TCPStore server, each in a process of its own. Prints one line:
//   store-scale clients=N mode=M connect_s=X barrier_s=Y allgather_s=Z failed=F server_conns=C
//   connect_s    from the start signal until the last client connected (and
//                passed the token handshake, for dlaunch; mode=hosts: the
//                hosts' links to the server are made in it too)
//   barrier_s    from the signal until the last client left the barrier (the
//                median of --barriers K barriers, one after another)
//   allgather_s  the same for the all-gather
//   failed       clients that failed any phase (they sit out the later ones)
//   server_conns connections the server held once every client had connected
// usage: store_scale --clients N --mode dlaunch|hosts|torch [--per-process K]
//                    [--timeout-s T] [--python PATH] [--barriers K] [--no-gather]
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <optional>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>

#include "bench/store-scale/storm.h"
#include "rendezvous/host/host_store.h"
#include "rendezvous/tcp_store_server.h"
#include "wire/handshake.h"
#include "wire/socket.h"

using namespace dl::bench;
using Clock = std::chrono::steady_clock;

namespace {

// mode=hosts: clients per simulated host.
constexpr int kRanksPerHost = 8;

struct Options {
  int clients = 1024;
  StormMode mode = StormMode::kDlaunch;
  bool hosts = false;  // mode=hosts: through per-host doors
  int per_process = 1000;
  int timeout_s = 120;
  std::string python = "/usr/bin/python3";
  bool gather = true;  // --no-gather: connect and barrier only (to profile them)
  int client_nice = 0;
  int barriers = 1;  // --barriers K: K barriers, barrier_s their median
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error(a + " needs a value");
      return argv[++i];
    };
    if (a == "--clients") o.clients = std::stoi(next());
    else if (a == "--per-process") o.per_process = std::stoi(next());
    else if (a == "--timeout-s") o.timeout_s = std::stoi(next());
    else if (a == "--python") o.python = next();
    else if (a == "--no-gather") o.gather = false;
    else if (a == "--client-nice") o.client_nice = std::stoi(next());
    else if (a == "--barriers") o.barriers = std::max(1, std::stoi(next()));
    else if (a == "--mode") {
      const std::string m = next();
      if (m != "dlaunch" && m != "hosts" && m != "torch")
        throw std::runtime_error("--mode is dlaunch, hosts or torch, not " + m);
      o.mode = m == "torch" ? StormMode::kTorch : StormMode::kDlaunch;
      o.hosts = m == "hosts";
    } else throw std::runtime_error("unknown option " + a);
  }
  if (o.clients < 1 || o.per_process < 1) throw std::runtime_error("--clients and --per-process must be >= 1");
  if (o.hosts && o.per_process % kRanksPerHost != 0)
    throw std::runtime_error("--per-process must be a multiple of " + std::to_string(kRanksPerHost) + " with --mode hosts");
  return o;
}

double monotonic() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }

// A child process with a pipe each way: commands down, answers up.
struct Child {
  pid_t pid = -1;
  FILE* to = nullptr;
  FILE* from = nullptr;
};

// Forks a child running body(read_fd, write_fd) and exiting with its
// result; the child dies with this process.
template <class Body>
Child spawn(Body body) {
  int down[2], up[2];
  if (::pipe2(down, O_CLOEXEC) != 0 || ::pipe2(up, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  Child c;
  c.pid = ::fork();
  if (c.pid < 0) throw std::runtime_error("fork failed");
  if (c.pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    ::close(down[1]), ::close(up[0]);
    std::fflush(nullptr);
    std::_Exit(body(down[0], up[1]));
  }
  ::close(down[0]), ::close(up[1]);
  c.to = ::fdopen(down[1], "w");
  c.from = ::fdopen(up[0], "r");
  return c;
}

std::string read_line(const Child& c, const char* who) {
  char buf[4096];
  if (!std::fgets(buf, sizeof buf, c.from)) throw std::runtime_error(std::string(who) + " ended without answering");
  std::string line(buf);
  if (!line.empty() && line.back() == '\n') line.pop_back();
  return line;
}

void write_line(const Child& c, const std::string& line) {
  std::fputs((line + "\n").c_str(), c.to);
  std::fflush(c.to);
}

// dlaunch's store in a process of its own, as the launcher hosts it.
Child start_dlaunch_server(const std::string& token) {
  return spawn([&](int in, int out) {
    dl::rdzv::BackgroundStoreServer server("127.0.0.1", 0, token);
    dprintf(out, "%u\n", server.port());
    char b;
    while (::read(in, &b, 1) > 0) {}  // until the driver closes the pipe
    return 0;
  });
}

// torch 1.13's TCPStore server (its master, without waiting for workers).
Child start_torch_server(const std::string& python) {
  static const char* kScript =
      "import sys, datetime, torch.distributed as d\n"
      "s = d.TCPStore('127.0.0.1', 0, None, True, timeout=datetime.timedelta(seconds=600), wait_for_workers=False)\n"
      "print(s.port, flush=True)\n"
      "sys.stdin.read()\n";
  return spawn([&](int in, int out) {
    ::dup2(in, 0), ::dup2(out, 1);
    ::execl(python.c_str(), python.c_str(), "-c", kScript, static_cast<char*>(nullptr));
    std::perror("exec python");
    return 127;
  });
}

// Connections the server process holds on its port: its sockets whose
// inode /proc/net/tcp (or tcp6: torch listens on IPv6 too) lists as
// established on local port `port`.
int server_connections(pid_t pid, uint16_t port) {
  std::set<std::string> inodes;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream tcp(table);
    std::string line;
    std::getline(tcp, line);
    while (std::getline(tcp, line)) {
      std::istringstream f(line);
      std::string sl, local, remote, st, queues, tr, retr, uid, timeout, inode;
      f >> sl >> local >> remote >> st >> queues >> tr >> retr >> uid >> timeout >> inode;
      if (st != "01" || local.size() < 5) continue;
      if (std::stoul(local.substr(local.size() - 4), nullptr, 16) == port) inodes.insert(inode);
    }
  }
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd")) {
    std::error_code ec;
    const std::string target = std::filesystem::read_symlink(e.path(), ec).string();
    if (!ec && target.rfind("socket:[", 0) == 0 && inodes.count(target.substr(8, target.size() - 9))) ++n;
  }
  return n;
}

// mode=hosts: the simulated hosts of ranks [first, first + count), each a
// door and forwarder with its link to the server, on one thread.
class Hosts {
 public:
  Hosts(const StormOptions& so) : so_(so) {}
  ~Hosts() {
    io_.stop();
    if (thread_.joinable()) thread_.join();
    hosts_.clear();
    std::error_code ignored;
    std::filesystem::remove_all(so_.door_dir, ignored);
  }
  // Makes every host's link and door (the links one after another, at once:
  // connect_s then counts them, as a launch's would at the first request),
  // then serves them on a thread of their own.
  void open() {
    const int first_host = so_.first_rank / kRanksPerHost;
    const int last_rank = so_.first_rank + so_.clients;
    for (int h = first_host; h * kRanksPerHost < last_rank; ++h) {
      dl::rdzv::ForwarderOptions fo;
      fo.world_size = so_.world;
      fo.local_ranks = std::min(kRanksPerHost, so_.world - h * kRanksPerHost);
      hosts_.push_back(std::make_unique<dl::rdzv::HostStore>(io_, door_path(so_.door_dir, h), so_.host, so_.port,
                                                             so_.token, fo, so_.connect_timeout,
                                                             dl::rdzv::LinkWhen::kNow));
    }
    thread_ = std::thread([this] {
      auto guard = boost::asio::make_work_guard(io_);
      io_.run();
    });
  }

 private:
  StormOptions so_;
  boost::asio::io_context io_;
  std::vector<std::unique_ptr<dl::rdzv::HostStore>> hosts_;
  std::thread thread_;
};

std::string make_door_dir() {
  char tmpl[] = "/tmp/store-scale-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
  return tmpl;
}

// One process of clients: ranks [first, first + count) of world.
Child start_clients(const Options& o, uint16_t port, const std::string& token, int first, int count) {
  StormOptions so;
  so.mode = o.mode, so.port = port, so.token = token;
  so.first_rank = first, so.clients = count, so.world = o.clients;
  so.spread_sources = o.clients * (o.mode == StormMode::kTorch ? 2 : 1) > kRanksPerSource;
  so.connect_timeout = so.op_timeout = std::chrono::seconds(o.timeout_s);
  if (o.hosts) so.door_dir = make_door_dir(), so.ranks_per_door = kRanksPerHost;
  return spawn([so, nice = o.client_nice](int in, int out) {
    if (nice != 0 && ::nice(nice) == -1) std::perror("nice");
    std::optional<Hosts> hosts;
    if (!so.door_dir.empty()) hosts.emplace(so);
    Storm storm(so);
    FILE* cmds = ::fdopen(in, "r");
    char buf[512];
    while (std::fgets(buf, sizeof buf, cmds)) {
      std::istringstream cmd(buf);
      std::string what, key;
      cmd >> what >> key;
      PhaseResult r;
      if (what == "connect" && hosts) {
        try {
          hosts->open();
        } catch (const std::exception& e) {
          r.failed = so.clients, r.first_error = std::string("a host's door: ") + e.what();
          hosts.reset();
        }
      }
      if (what == "connect" && r.failed == 0) r = storm.connect();
      else if (what == "barrier") r = storm.barrier(key);
      else if (what == "gather") r = storm.all_gather(key);
      else return 0;
      for (char& ch : r.first_error)
        if (ch == '\n') ch = ' ';
      dprintf(out, "%d %.6f %d %s\n", r.failed, r.last_done, r.retries, r.first_error.c_str());
    }
    return 0;
  });
}

struct Phase {
  double seconds = 0;
  int failed = 0;
  int retries = 0;
};

// Signals every client process, then reads each one's result.
Phase run_phase(std::vector<Child>& procs, const std::string& cmd) {
  const double t0 = monotonic();
  for (auto& p : procs) write_line(p, cmd);
  Phase ph;
  double last = t0;
  for (auto& p : procs) {
    std::istringstream r(read_line(p, "a client process"));
    int failed, retries;
    double done;
    r >> failed >> done >> retries;
    ph.retries += retries;
    std::string err;
    std::getline(r, err);
    if (failed > 0) std::cerr << "store-scale: " << cmd << ": " << failed << " failed, e.g." << err << "\n";
    ph.failed += failed;
    last = std::max(last, done);
  }
  ph.seconds = last - t0;
  return ph;
}

int run(const Options& o) {
  const std::string token = dl::wire::new_token();
  Child server = o.mode == StormMode::kTorch ? start_torch_server(o.python) : start_dlaunch_server(token);
  const std::string port_line = read_line(server, "the store server");
  const auto port = static_cast<uint16_t>(std::stoi(port_line));
  std::vector<Child> procs;
  for (int first = 0; first < o.clients; first += o.per_process)
    procs.push_back(start_clients(o, port, token, first, std::min(o.per_process, o.clients - first)));
  const Phase conn = run_phase(procs, "connect");
  const int conns = server_connections(server.pid, port);
  if (conn.retries > 0) std::cerr << "store-scale: connect: " << conn.retries << " tries again after a failed one\n";
  std::vector<Phase> bars;
  for (int i = 0; i < o.barriers; ++i) bars.push_back(run_phase(procs, "barrier scale/barrier/" + std::to_string(i)));
  std::sort(bars.begin(), bars.end(), [](const Phase& a, const Phase& b) { return a.seconds < b.seconds; });
  Phase bar = bars[bars.size() / 2];
  for (const auto& b : bars) bar.failed = std::max(bar.failed, b.failed);
  const Phase gat = o.gather ? run_phase(procs, "gather scale/gather") : Phase{};
  for (auto& p : procs) write_line(p, "quit"), std::fclose(p.to), std::fclose(p.from), ::waitpid(p.pid, nullptr, 0);
  std::fclose(server.to);  // the server ends when its stdin closes
  std::fclose(server.from);
  ::waitpid(server.pid, nullptr, 0);
  std::printf("store-scale clients=%d mode=%s connect_s=%.3f barrier_s=%.3f allgather_s=%.3f failed=%d server_conns=%d\n",
              o.clients, o.hosts ? "hosts" : o.mode == StormMode::kTorch ? "torch" : "dlaunch", conn.seconds, bar.seconds, gat.seconds,
              conn.failed + bar.failed + gat.failed, conns);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    ::signal(SIGPIPE, SIG_IGN);
    dl::wire::raise_descriptor_limit();
    return run(parse(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "store_scale: error: %s\n", e.what());
    return 2;
  }
}
