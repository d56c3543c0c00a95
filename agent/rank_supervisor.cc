#include "agent/rank_supervisor.h"

#include <pthread.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <iostream>
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "control/messages.h"
#include "errors/error.h"
#include "wire/helper_pool.h"

namespace dl::agent {

namespace asio = boost::asio;
namespace msg = control::msg;
using std::chrono::milliseconds;

namespace {
// After a rank exits, how long its pipes may stay open (a child holding
// them) before its exit is reported anyway.
constexpr milliseconds kDrainAfterExit{2000};
// How long a clean exit may wait for the host's other ranks to end, to be
// reported with them (control/messages.h, ExitedClean): the launcher learns
// of a rank that ended early at most this late; the last rank's end sends
// them all at once.
constexpr milliseconds kCleanExitHold{500};
// Reads of one rank's stream in one turn of the loop (drain_output).
constexpr int kReadsPerTurn = 4;
// Said once per agent: the ranks still run, only their stdout is a pipe.
bool pty_warned = false;
// spawn_all: fewer ranks start from the calling thread alone.
constexpr size_t kParallelFrom = 8;
constexpr size_t kMaxSpawnThreads = 4;

// The threads that start `n` ranks, this one included.
size_t spawn_shares(size_t n) {
  if (n < kParallelFrom) return 1;  // (hardware_concurrency reads /sys: not for a small job)
  static const size_t cpus = std::max(1u, std::thread::hardware_concurrency());
  return std::max<size_t>(1, std::min({cpus, n / 4, kMaxSpawnThreads}));
}

// The threads spawn_all starts ranks from besides the agent's own. They live
// as long as the agent: a rank's PR_SET_PDEATHSIG fires when the *thread*
// that cloned it ends, not the process, so a thread that started ranks must
// not end before the agent does. Made on first use (a job of fewer than
// kParallelFrom ranks starts no helper), never destroyed. Their start is
// kept off a launch's path (prestart): a new thread waited 0.6-0.8 ms for a
// CPU (docs/benchmarks.md). A pty master's last close queues the tty's
// release to the closing CPU's kworker, which then preempts the closer: in
// the agent's loop that was 5-10 us per rank at a job's end, in series with
// its exit reports, so closes are posted to a helper.
wire::HelperPool& spawn_helpers() {
  static wire::HelperPool* helpers = new wire::HelperPool(kMaxSpawnThreads - 1);  // leaked: its threads outlive every destructor
  return *helpers;
}

// The thread that takes a batch off the agent's: share 0 of spawn_helpers()'
// run, then the hand back. It clones ranks too, so it lives as long as the
// agent, as the helpers do.
wire::HelperPool& spawn_coordinator() {
  static wire::HelperPool* coordinator = new wire::HelperPool(1);  // leaked, as spawn_helpers()
  return *coordinator;
}
}  // namespace

struct RankSupervisor::Rank {
  Rank(asio::io_context& io, int r) : rank(r), out(io), err(io), in(io), drain(io) {}
  ~Rank() {
    for (int fd : unwatched)
      if (fd >= 0) ::close(fd);
  }
  Rank(const Rank&) = delete;
  Rank& operator=(const Rank&) = delete;
  int rank;
  pid_t pid = -1;
  asio::posix::stream_descriptor out, err, in;
  // A stream's descriptor until it first has to wait (then `out`/`err` own
  // it, in the loop's epoll set); -1 after. A rank that ended before the
  // agent's thread adopted it (most of a big job of short ranks) has its
  // streams read to their end here, never registered: two epoll_ctl and
  // one epoll event less per stream.
  int unwatched[2] = {-1, -1};
  bool out_pty = false;  // out is a pty master
  bool eof[2] = {false, false};
  std::optional<int> status;  // waitpid status
  uint64_t sent = 0;          // bit s: the agent sent signal s before the rank ended
  bool reported = false;
  bool clean_pending = false;  // in clean_, to be reported
  std::deque<std::string> stdin_q;
  bool stdin_writing = false, stdin_eof = false;
  asio::steady_timer drain;
};

// One spawn_all: the ranks' specs as they are prepared (items[0 .. ready)),
// and what starting each gave. The preparing thread writes an item before
// `ready` passes it; each starting thread writes only the elements of the
// items it took (`next`); the agent's thread reads them all once the
// starting threads are done (after a join, or a post from the last).
struct RankSupervisor::Batch {
  explicit Batch(size_t n) : items(n), spawned(n), errors(n) {}
  std::vector<Prepared> items;
  std::vector<Spawned> spawned;
  std::vector<std::string> errors;
  std::exception_ptr failed;  // prepare threw: the rest are not prepared
  std::mutex mu;
  std::condition_variable more;
  size_t ready = 0;  // (under mu)
  std::atomic<size_t> next{0};

  void publish(size_t upto) {
    {
      std::lock_guard<std::mutex> lock(mu);
      ready = upto;
    }
    more.notify_all();
  }
  void prepare_all(const std::function<Prepared(size_t)>& prepare) {
    for (size_t i = 0; i < items.size(); ++i) {
      try {
        items[i] = prepare(i);
      } catch (...) {
        failed = std::current_exception();
        return publish(items.size());  // items[i..] stay empty: nothing waits for them
      }
      publish(i + 1);
    }
  }
  // Starts the ranks in the order they were prepared, each by whichever
  // thread takes it next, waiting for the preparing where it is behind.
  void start_ready() {
    for (size_t i; (i = next.fetch_add(1)) < items.size();) {
      {
        std::unique_lock<std::mutex> lock(mu);
        more.wait(lock, [&] { return ready > i; });
      }
      if (!items[i]) continue;
      try {
        spawned[i] = spawn_rank(items[i]->second);
      } catch (const Error& e) {
        errors[i] = e.what();
      }
    }
  }
};

RankSupervisor::RankSupervisor(asio::io_context& io, Hooks hooks)
    : io_(io), hooks_(std::move(hooks)), sigchld_(io, SIGCHLD), kill_timer_(io), clean_timer_(io) {
  sigchld_.async_wait([this](auto ec, int) { if (!ec) reap(); });
}

RankSupervisor::~RankSupervisor() = default;

void RankSupervisor::refuse(int rank, int code, const std::string& message) {
  auto r = std::make_unique<Rank>(io_, rank);
  r->status = code << 8;
  r->reported = true;
  ranks_[rank] = std::move(r);
  hooks_.send(control::frame(msg::SpawnFailed{rank, code, message}));
  hooks_.reported();
}

void RankSupervisor::spawn(int rank, const SpawnSpec& s) { adopt(rank, spawn_rank(s)); }

void RankSupervisor::get_ready_for(size_t n) {
  // While this is the only thread: a table grown later, beside a thread,
  // waits for an RCU grace period (reserve_fd_table).
  reserve_fd_table(std::max(kAgentFdsReserved, fds_for_ranks(n)));
  if (n < kParallelFrom) return;
  // The spawn slots first, so that they are the lowest free descriptors.
  reserve_spawn_slots(static_cast<int>(kMaxSpawnThreads) + 1);
  if (spawn_shares(n) > 1) spawn_coordinator().prestart(1);
  spawn_helpers().prestart(spawn_shares(n) - 1);
}

void RankSupervisor::spawn_all(size_t n, const std::function<Prepared(size_t)>& prepare, std::function<void()> started) {
  auto batch = std::make_shared<Batch>(n);
  const size_t shares = spawn_shares(n);
  wire::HelperPool& coordinator = spawn_coordinator();
  if (shares > 1) coordinator.prestart(1);
  if (shares == 1 || coordinator.helpers() == 0) {
    // Here, and joined: this thread prepares them all, then starts its share.
    // (Handing each rank back to the io_context as it started, so that this
    // thread handled the first ranks' ends while the last ones started,
    // measured no faster (docs/benchmarks.md): that work then took CPU from
    // the starts. Not done.)
    if (shares == 1) {
      batch->prepare_all(prepare);
      batch->start_ready();
    } else {
      spawn_helpers().run(shares, [&](size_t share) {
        if (share == 0) batch->prepare_all(prepare);
        batch->start_ready();
      });
    }
    adopt_batch(*batch, started);
    if (batch->failed) std::rethrow_exception(batch->failed);
    return;
  }
  spawning_ = true;
  coordinator.post([this, batch, shares, started = std::move(started)] {
    spawn_helpers().run(shares, [&](size_t) { batch->start_ready(); });
    asio::post(io_, [this, batch, started] { adopt_batch(*batch, started); });
  });
  batch->prepare_all(prepare);
  if (batch->failed) std::rethrow_exception(batch->failed);  // (the ranks prepared are started and adopted all the same)
}

void RankSupervisor::adopt_batch(Batch& b, const std::function<void()>& started) {
  spawning_ = false;
  // What was started is supervised, even when the preparing failed.
  for (size_t i = 0; i < b.items.size(); ++i) {
    if (!b.items[i]) continue;
    if (!b.errors[i].empty()) refuse(b.items[i]->first, 1, b.errors[i]);
    else adopt(b.items[i]->first, std::move(b.spawned[i]));
  }
  signals_on_adopt_ = 0;  // this batch's: a later one starts unsignalled
  if (reap_pending_) {
    reap_pending_ = false;
    reap_children();
  }
  if (started) started();
}

void RankSupervisor::adopt(int rank, Spawned sp) {
  auto r = std::make_unique<Rank>(io_, rank);
  if (!sp.pty_error.empty() && !pty_warned) {
    pty_warned = true;
    std::cerr << "dlaunch-agent: warning: " << sp.pty_error
              << "; the ranks' stdout is a pipe, so their stdio may hold output until they exit "
                 "(set PYTHONUNBUFFERED=1, or flush)\n";
  }
  r->pid = sp.pid;
  // What signal_all sent while this rank was being started, in signal order.
  for (int sig = 1; sig < 64 && sp.pid > 0; ++sig)
    if (signals_on_adopt_ >> sig & 1) ::kill(-sp.pid, sig), r->sent |= uint64_t{1} << sig;
  r->out_pty = sp.out_is_pty;
  r->unwatched[0] = sp.out_fd, r->unwatched[1] = sp.err_fd;
  // Read by drain_output's own read(2), which must not block.
  for (int fd : r->unwatched) {
    int on = 1;
    ::ioctl(fd, FIONBIO, &on);
  }
  if (sp.in_fd >= 0) r->in.assign(sp.in_fd);
  Rank& ref = *r;
  ranks_[rank] = std::move(r);
  hooks_.send(control::frame(msg::Started{rank, sp.pid}));
  // What the streams hold now, up to their end or their first wait
  // (read_output registers them then).
  drain_output(ref, 0);
  drain_output(ref, 1);
}

int RankSupervisor::stream_fd(Rank& r, int stream) {
  if (r.unwatched[stream] >= 0) return r.unwatched[stream];
  auto& d = stream == 0 ? r.out : r.err;
  return d.is_open() ? d.native_handle() : -1;
}

// A rank's stream is read only once it is readable, into the one buffer
// all ranks share: a rank holds no buffer of its own while it waits (two
// 64 KiB buffers per rank were 8 MiB of mappings made, faulted in and
// unmapped again for a 64-rank job, on its start's path).
void RankSupervisor::read_output(Rank& r, int stream) {
  auto& d = stream == 0 ? r.out : r.err;
  if (r.unwatched[stream] >= 0) {
    boost::system::error_code ec;
    d.assign(r.unwatched[stream], ec);
    if (ec) return end_output(r, stream);  // (closes it)
    r.unwatched[stream] = -1;
  }
  d.async_wait(asio::posix::descriptor_base::wait_read, [this, &r, stream](boost::system::error_code ec) {
    if (!ec) return drain_output(r, stream);
    if (ec != asio::error::operation_aborted) end_output(r, stream);
  });
}

// Reads what the stream holds: until it would block (then waits for more;
// Asio's epoll registration is edge-triggered, so only an emptied stream may
// wait), a few reads at most in one turn (then the other ranks' turn first),
// or while the link to the launcher is congested (resume_output goes on).
void RankSupervisor::drain_output(Rank& r, int stream) {
  const int fd = stream_fd(r, stream);
  if (fd < 0) return;
  for (int turn = 0; turn < kReadsPerTurn; ++turn) {
    if (hooks_.congested()) {
      paused_.emplace_back(&r, stream);
      return;
    }
    const ssize_t n = ::read(fd, read_buf_.data(), read_buf_.size());
    if (n > 0) {
      hooks_.send(control::data_frame(r.rank, stream == 0 ? control::kStdout : control::kStderr,
                                      std::string_view(read_buf_.data(), static_cast<size_t>(n))));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return read_output(r, stream);
    // The end: 0 from a pipe; EIO from a pty master, which is how Linux says
    // every holder of the slave closed it (the rank and its children exited),
    // and comes only after what they wrote was read. Any other error ends the
    // stream too.
    return end_output(r, stream);
  }
  asio::post(io_, [this, &r, stream] { drain_output(r, stream); });
}

void RankSupervisor::end_output(Rank& r, int stream) {
  r.eof[stream] = true;
  boost::system::error_code ec;
  const int unwatched = std::exchange(r.unwatched[stream], -1);
  if (stream == 0 && r.out_pty) {
    const int fd = unwatched >= 0 ? unwatched : r.out.release();  // out of the loop now; closed beside it
    if (fd >= 0) spawn_helpers().post([fd] { ::close(fd); });
  } else if (unwatched >= 0) {
    ::close(unwatched);
  } else {
    (stream == 0 ? r.out : r.err).close(ec);
  }
  maybe_report(r);
}

void RankSupervisor::resume_output() {
  auto paused = std::move(paused_);
  paused_.clear();
  for (auto [r, stream] : paused) drain_output(*r, stream);
}

void RankSupervisor::stdin_data(int rank, std::string_view bytes) {
  auto it = ranks_.find(rank);
  if (it == ranks_.end() || !it->second->in.is_open()) return;
  Rank& r = *it->second;
  r.stdin_q.emplace_back(bytes);
  if (!r.stdin_writing) {
    r.stdin_writing = true;
    write_stdin(r);
  }
}

// Drains the rank's stdin queue, one write at a time.
void RankSupervisor::write_stdin(Rank& r) {
  if (r.stdin_q.empty()) {
    r.stdin_writing = false;
    if (r.stdin_eof) r.in.close();
    return;
  }
  asio::async_write(r.in, asio::buffer(r.stdin_q.front()), [this, &r](boost::system::error_code ec, size_t) {
    if (ec) {
      r.stdin_q.clear();
      r.in.close();
      r.stdin_writing = false;
      return;
    }
    r.stdin_q.pop_front();
    write_stdin(r);
  });
}

void RankSupervisor::stdin_eof(int rank) {
  auto it = ranks_.find(rank);
  if (it == ranks_.end()) return;
  it->second->stdin_eof = true;
  if (!it->second->stdin_writing) it->second->in.close();
}

void RankSupervisor::reap() {
  if (spawning_) reap_pending_ = true;
  else reap_children();
  sigchld_.async_wait([this](auto ec, int) { if (!ec) reap(); });
}

void RankSupervisor::reap_children() {
  int st = 0;
  pid_t pid;
  while ((pid = ::waitpid(-1, &st, WNOHANG)) > 0) {
    bool rank_pid = false;
    for (auto& [rank, r] : ranks_) {
      if (r->pid != pid) continue;
      rank_pid = true;
      r->status = st;
      // Stragglers the rank left in its group go with it.
      ::kill(-pid, SIGKILL);
      // Its output's end usually came first: then no drain timer to arm and
      // cancel (two timerfd updates per rank at the end of a big job). The
      // report may end the attempt and forget every rank (the agent's
      // `reported` hook, when a restart waits): ranks_ is empty then, and
      // the Rank itself lives on in retired_, reported.
      Rank& ended = *r;
      maybe_report(ended);
      if (!ended.reported) arm_drain(ended);
      break;
    }
    if (!rank_pid && hooks_.other_child) hooks_.other_child(pid);
  }
}

// Gives up waiting for the end of a rank's output kDrainAfterExit after it
// exited: a child that left the process group may hold the pipe or pty for
// ever. Not while its reads wait for the link to drain: then the output is
// there, only held up by us, and reporting the exit first would put it after
// the exit (or lose it when the job ends).
void RankSupervisor::arm_drain(Rank& r) {
  r.drain.expires_after(kDrainAfterExit);
  r.drain.async_wait([this, rp = &r](boost::system::error_code ec) {
    if (ec) return;
    const bool paused = std::any_of(paused_.begin(), paused_.end(), [rp](auto& p) { return p.first == rp; });
    if (paused) return arm_drain(*rp);
    rp->eof[0] = rp->eof[1] = true;
    maybe_report(*rp);
  });
}

void RankSupervisor::maybe_report(Rank& r) {
  if (r.reported || r.clean_pending || !r.status || !r.eof[0] || !r.eof[1]) return;
  r.drain.cancel();
  const int st = *r.status;
  if (WIFEXITED(st) && WEXITSTATUS(st) == 0 && r.sent == 0) {
    r.clean_pending = true;
    clean_.push_back(&r);
    const bool all_ended = std::all_of(ranks_.begin(), ranks_.end(),
                                       [](const auto& x) { return x.second->reported || x.second->clean_pending; });
    if (all_ended) return send_clean_exits();
    if (clean_.size() == 1) {
      clean_timer_.expires_after(kCleanExitHold);
      clean_timer_.async_wait([this](boost::system::error_code ec) {
        if (!ec) send_clean_exits();
      });
    }
    return;
  }
  send_clean_exits();  // the launcher hears of the ranks in the order they ended
  r.reported = true;
  msg::Exited m;
  m.rank = r.rank, m.pid = r.pid;
  if (WIFSIGNALED(st)) m.signal = WTERMSIG(st), m.core = static_cast<bool>(WCOREDUMP(st));
  else m.code = WEXITSTATUS(st);
  // Did the rank end by itself, or because of a signal this agent sent (a
  // teardown or a forwarded signal)? The launcher names ranks that failed by
  // themselves even when another rank's failure reached it first.
  m.by_agent = WIFSIGNALED(st) ? (r.sent >> WTERMSIG(st)) & 1 : r.sent != 0;
  if (hooks_.annotate_exit) hooks_.annotate_exit(m);
  hooks_.send(control::frame(m));
  hooks_.reported();
}

void RankSupervisor::send_clean_exits() {
  clean_timer_.cancel();
  if (clean_.empty()) return;
  msg::ExitedClean m;
  for (Rank* r : clean_) {
    m.ranks.push_back(r->rank), m.pids.push_back(r->pid);
    r->reported = true, r->clean_pending = false;
  }
  clean_.clear();
  m.last = all_reported();
  hooks_.send(control::frame(m));
  hooks_.reported();
}

void RankSupervisor::signal_all(int sig) {
  // The batch being started gets it as each rank is adopted (adopt).
  if (spawning_ && sig > 0 && sig < 64) signals_on_adopt_ |= uint64_t{1} << sig;
  for (auto& [rank, r] : ranks_)
    if (r->pid > 0 && !r->status) {
      ::kill(-r->pid, sig);
      if (sig > 0 && sig < 64) r->sent |= uint64_t{1} << sig;
    }
}

void RankSupervisor::teardown(milliseconds grace) {
  signal_all(SIGTERM);
  kill_timer_.expires_after(grace);
  kill_timer_.async_wait([this](boost::system::error_code ec) {
    if (!ec) signal_all(SIGKILL);
  });
}

void RankSupervisor::kill_all() {
  if (spawning_) signals_on_adopt_ |= uint64_t{1} << SIGKILL;  // as signal_all
  for (auto& [rank, r] : ranks_)
    if (r->pid > 0) ::kill(-r->pid, SIGKILL);
}

void RankSupervisor::forget_reported() {
  // The last teardown's SIGKILL must not reach the next attempt's ranks.
  kill_timer_.cancel();
  for (auto& [rank, r] : ranks_) {
    boost::system::error_code ec;
    r->out.close(ec), r->err.close(ec), r->in.close(ec);
    for (int& fd : r->unwatched)
      if (fd >= 0) ::close(std::exchange(fd, -1));
    r->drain.cancel();
    r->stdin_q.clear();
    retired_.push_back(std::move(r));
  }
  ranks_.clear();
  paused_.clear();  // reported ranks have no paused reads (arm_drain waits for them)
}

bool RankSupervisor::all_reported() const {
  if (spawning_) return false;
  for (auto& [rank, r] : ranks_)
    if (!r->reported) return false;
  return true;
}

std::vector<StackTarget> RankSupervisor::targets() const {
  std::vector<StackTarget> out;
  for (auto& [rank, r] : ranks_)
    if (r->pid > 0) out.push_back({rank, r->pid, !r->status});
  return out;
}

bool RankSupervisor::any_running() const {
  if (spawning_) return true;
  for (auto& [rank, r] : ranks_)
    if (r->pid > 0 && !r->status) return true;
  return false;
}

}  // namespace dl::agent
