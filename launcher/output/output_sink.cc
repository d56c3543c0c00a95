#include "launcher/output/output_sink.h"

#include <sys/stat.h>
#include <unistd.h>

#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <system_error>
#include <thread>
#include <cerrno>
#include <cstring>
#include <chrono>
#include <ctime>

#include "errors/error.h"
#include "wire/quiet_thread.h"
#include "wire/socket.h"

namespace dl::launcher {

namespace {
using wire::write_all_fd;

// ConsoleWriter's state: one per process.
struct Console {
  std::mutex mu;
  std::condition_variable work, idle;
  std::deque<std::pair<int, std::string>> q;
  size_t queued = 0;
  bool enabled = false, started = false, writing = false;
  std::function<void()> below_low;

  void start() {  // under mu
    try {
      // SIGPIPE left open: a closed reader ends dlaunch, as a write from the loop did.
      wire::quiet_thread([this] { loop(); }, {SIGPIPE}).detach();
      started = true;
    } catch (const std::system_error&) {
    }
  }
  void loop() {
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      work.wait(lock, [&] { return !q.empty(); });
      auto [fd, bytes] = std::move(q.front());
      q.pop_front();
      writing = true;
      lock.unlock();
      write_all_fd(fd, bytes);
      lock.lock();
      writing = false;
      queued -= bytes.size();
      if (below_low && queued < ConsoleWriter::kLow) std::exchange(below_low, nullptr)();
      if (q.empty()) idle.notify_all();
    }
  }
};
Console& console() {
  static Console* c = new Console;  // leaked: its thread may outlive every destructor
  return *c;
}
}  // namespace

void write_fully(int fd, std::string_view b) {
  if (b.empty()) return;
  if (fd == 1 || fd == 2) {
    Console& c = console();
    std::unique_lock<std::mutex> lock(c.mu);
    if (c.enabled) {
      if (!c.started) c.start();
      if (c.started) {
        c.q.emplace_back(fd, std::string(b));
        c.queued += b.size();
        c.work.notify_one();
        return;
      }
    }
  }
  write_all_fd(fd, b);
}

void ConsoleWriter::enable() {
  std::lock_guard<std::mutex> lock(console().mu);
  console().enabled = true;
}

size_t ConsoleWriter::queued() {
  std::lock_guard<std::mutex> lock(console().mu);
  return console().queued;
}

void ConsoleWriter::when_below_low(std::function<void()> fn) {
  Console& c = console();
  std::unique_lock<std::mutex> lock(c.mu);
  if (fn && c.queued < kLow) {
    lock.unlock();
    return fn();
  }
  c.below_low = std::move(fn);
}

void ConsoleWriter::drain_and_disable() {
  Console& c = console();
  std::unique_lock<std::mutex> lock(c.mu);
  c.idle.wait(lock, [&] { return c.q.empty() && !c.writing; });
  c.enabled = false;
  c.below_low = nullptr;
}

Route route(const OutputOptions& o, int rank, int stream) {
  Route r;
  const int bit = stream == 2 ? 2 : 1;
  if (!o.dir.empty()) {
    // --output-filename: the files replace the console (mpirun's meaning).
    r.file = true;
    r.console = false;
  } else if (!o.log_dir.empty()) {
    // torchrun: a tee'd stream is redirected too and then shown (its "tail -f"),
    // a redirected one only written, any other only shown.
    const size_t i = static_cast<size_t>(rank);
    const int local = i < o.local_ranks.size() ? o.local_ranks[i] : rank;
    const bool tee = (o.tee.mask(local) & bit) != 0;
    r.file = tee || (o.redirects.mask(local) & bit) != 0;
    r.console = tee || !r.file;
  }
  if (r.console && !o.console_ranks.empty() &&
      std::find(o.console_ranks.begin(), o.console_ranks.end(), rank) == o.console_ranks.end())
    r.console = false;
  return r;
}

namespace {
// True when `a` and `b` are one open file (stdout and stderr on one terminal).
bool same_file(int a, int b) {
  struct stat sa {}, sb {};
  return a == b || (::fstat(a, &sa) == 0 && ::fstat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino);
}

const char* stream_file(int stream) { return stream == 2 ? "stderr" : "stdout"; }
}  // namespace

OutputSink::OutputSink(OutputOptions opts, std::vector<std::string> hosts, int out_fd, int err_fd)
    : opts_(std::move(opts)), hosts_(std::move(hosts)), out_fd_(out_fd), err_fd_(err_fd),
      same_console_(same_file(out_fd, err_fd)) {}

OutputSink::~OutputSink() {
  for (auto& [k, fd] : files_) ::close(fd);
}

std::string OutputSink::prefix(int rank) const {
  std::string p;
  if (opts_.timestamp) {
    auto now = std::chrono::system_clock::now();
    std::time_t t = std::chrono::system_clock::to_time_t(now);
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
    char buf[40];
    std::tm tm{};
    ::localtime_r(&t, &tm);
    size_t n = std::strftime(buf, sizeof buf, "%H:%M:%S", &tm);
    std::snprintf(buf + n, sizeof buf - n, ".%03d ", static_cast<int>(ms));
    p += buf;
  }
  if (opts_.tag) {
    auto t = tags_.find(rank);
    p += "[" + (t == tags_.end() ? std::to_string(rank) : t->second) + "@" + hosts_.at(static_cast<size_t>(rank)) + "] ";
  }
  return p;
}

wire::PrivateDir& OutputSink::files_dir() {
  if (files_dir_) return *files_dir_;
  if (!opts_.dir.empty()) return files_dir_.emplace(wire::PrivateDir::open(opts_.dir, true));
  // --log-dir: a directory of this run's own, one of each attempt in it.
  if (run_name_.empty()) {
    char stamp[32];
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
    ::localtime_r(&now, &tm);
    std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
    run_name_ = std::string("dlaunch_") + stamp + "_" + std::to_string(::getpid());
  }
  return files_dir_.emplace(
      wire::PrivateDir::open(opts_.log_dir, true).sub(run_name_).sub("attempt_" + std::to_string(attempt_)));
}

std::string OutputSink::files_path() {
  if (opts_.dir.empty() && (opts_.log_dir.empty() || !(opts_.redirects.any() || opts_.tee.any()))) return "";
  return files_dir().path();
}

void OutputSink::next_attempt(int attempt) {
  if (opts_.log_dir.empty()) return;  // --output-filename: every attempt's bytes, one after the other
  for (auto& [k, fd] : files_) ::close(fd);
  files_.clear();
  failed_files_.clear();  // the new attempt's files are new ones
  made_.clear();
  files_dir_.reset();
  attempt_ = attempt;
}

void OutputSink::make_files(const std::vector<int>& ranks) {
  try {
    for (int rank : ranks)
      for (int stream : {1, 2}) {
        if (!route(opts_, rank, stream).file) continue;
        ::close(files_dir().sub("rank." + std::to_string(rank)).open_file(stream_file(stream), true));
        made_.insert({rank, stream});
      }
    // --log-dir with no stream to write (torchrun's -r/-t 0): nothing is
    // made, but a directory that dlaunch would refuse with -r is refused alike.
    if (files_path().empty() && !opts_.log_dir.empty()) wire::PrivateDir::check(opts_.log_dir);
  } catch (const Error& e) {
    throw UsageError(std::string(opts_.dir.empty() ? "--log-dir" : "--output-filename") + ": " + e.what());
  }
}

int OutputSink::file_for(int rank, int stream) {
  const Key key{rank, stream};
  auto it = files_.find(key);
  if (it != files_.end()) return it->second;
  // Emptied by make_files: written on from its start; any other is emptied now.
  const bool made = made_.erase(key) > 0;
  const int fd = files_dir().sub("rank." + std::to_string(rank)).open_file(stream_file(stream), !made);
  files_[key] = fd;
  return fd;
}

// `text` with the rank's prefix at its start (when `at_start`) and after
// every line end: '\n', "\r\n", and a lone '\r', which takes a progress
// bar's cursor back to where the prefix must be written again (so a text
// that starts with one needs none before it).
std::string OutputSink::prefixed(int rank, std::string_view text, bool at_start) const {
  const std::string p = prefix(rank);
  std::string buf;
  buf.reserve(text.size() + p.size() * 8);
  if (at_start && !(text.size() > 1 && text[0] == '\r' && text[1] != '\n')) buf += p;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find_first_of("\r\n", start);
    if (end == std::string_view::npos) end = text.size() - 1;
    else if (text[end] == '\r' && end + 1 < text.size() && text[end + 1] == '\n') ++end;
    buf.append(text.substr(start, end - start + 1));
    start = end + 1;
    if (start < text.size()) buf += p;
  }
  return buf;
}

// Writes `text` of `key` to the console: whole lines, or a partial line (no
// final '\n') that stays open at the cursor. Another stream's line open at
// this cursor is ended first, so lines of different streams never share one.
void OutputSink::show(Key key, std::string_view text) {
  if (text.empty()) return;
  auto& open = open_line(key.second);
  const bool goes_on = open && open->key == key;
  const bool at_start = !goes_on || open->after_cr;
  if (open && !goes_on) end_open_line(open);
  const int fd = console_fd(key.second);
  if (!opts_.tag && !opts_.timestamp) write_fully(fd, text);
  else write_fully(fd, prefixed(key.first, text, at_start));
  if (text.back() == '\n') open.reset();
  else open = OpenLine{key, text.back() == '\r'};
  last_shown_[cursor(key.second)] = Clock::now();
}

void OutputSink::show_held_line(std::map<Key, Held>::iterator it) {
  show(it->first, it->second.line);
  held_.erase(it);
}

void OutputSink::end_open_line(std::optional<OpenLine>& open) {
  write_fully(console_fd(open->key.second), "\n");
  open.reset();
}

bool OutputSink::write_file(Key key, std::string_view bytes) {
  const int fd = file_for(key.first, key.second);
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const std::string path = files_path() + "/rank." + std::to_string(key.first) + "/" + stream_file(key.second);
      write_fully(2, "dlaunch: warning: rank " + std::to_string(key.first) + "'s " + stream_file(key.second) +
                         " file " + path + " cannot be written (" + std::strerror(errno) +
                         "); from here on that output goes to this console\n");
      failed_files_.insert(key);
      return false;
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

void OutputSink::write(int rank, int stream, std::string_view bytes) {
  if (opts_.merge_stderr) stream = 1;
  const Key key{rank, stream};
  Route r = route(opts_, rank, stream);
  if (failed_files_.count(key)) r.file = false, r.console = true;
  // A chunk whose write failed is shown whole (a part of it may be in the file too).
  if (r.file && !write_file(key, bytes)) r.console = true;
  if (!r.console || bytes.empty()) return;
  auto it = held_.find(key);
  if (const size_t last_nl = bytes.rfind('\n'); last_nl != std::string_view::npos) {
    if (it == held_.end()) {
      show(key, bytes.substr(0, last_nl + 1));
    } else {
      it->second.line.append(bytes.substr(0, last_nl + 1));
      show_held_line(it);
      it = held_.end();
    }
    bytes.remove_prefix(last_nl + 1);
    if (bytes.empty()) return;
  }
  if (it == held_.end()) it = held_.emplace(key, Held{std::string(), Clock::now()}).first;
  it->second.line.append(bytes);
  if (it->second.line.size() >= kMaxHeld) show_held_line(it);
}

void OutputSink::add_rank(int rank, std::string host, std::string tag) {
  if (static_cast<size_t>(rank) >= hosts_.size()) hosts_.resize(static_cast<size_t>(rank) + 1);
  hosts_[static_cast<size_t>(rank)] = std::move(host);
  tags_[rank] = std::move(tag);
}

void OutputSink::finish(int rank) {
  for (int stream : {1, 2}) {
    const Key key{rank, stream};
    auto& open = open_line(stream);
    if (auto it = held_.find(key); it != held_.end()) {
      it->second.line.push_back('\n');
      show_held_line(it);
    } else if (open && open->key == key) {
      end_open_line(open);
    }
  }
}

void OutputSink::finish_all() {
  std::set<int> ranks;
  for (auto& [key, h] : held_) ranks.insert(key.first);
  for (auto& open : open_)
    if (open) ranks.insert(open->key.first);
  for (int rank : ranks) finish(rank);
}

namespace {
// A line that goes back to its start with '\r' and goes on (a progress
// bar's redraw), not one that only ends in a "\r\n" cut before its '\n'.
bool redraws(std::string_view line) {
  const size_t cr = line.find('\r');
  return cr != std::string_view::npos && (cr == 0 || cr + 1 < line.size());
}
}  // namespace

// A partial line's wait ends kHoldFor after its first byte came or the
// last thing written to its cursor, whichever was later.
std::optional<OutputSink::Clock::time_point> OutputSink::due(Key key, const Held& h) const {
  if (!opts_.live[key.second == 2 ? 1 : 0] && !redraws(h.line)) return std::nullopt;
  return std::max(h.since, last_shown_[cursor(key.second)]) + kHoldFor;
}

void OutputSink::show_held(Clock::time_point now, bool behind) {
  if (behind) {
    for (auto& t : last_shown_) t = now;
    return;
  }
  std::vector<Key> ready;  // all that are due now (showing one restarts the others' waits)
  for (auto& [key, h] : held_)
    if (const auto d = due(key, h); d && *d <= now) ready.push_back(key);
  for (const Key& key : ready) show_held_line(held_.find(key));
}

std::optional<OutputSink::Clock::time_point> OutputSink::next_due() const {
  std::optional<Clock::time_point> first;
  for (auto& [key, h] : held_)
    if (const auto d = due(key, h); d && (!first || *d < *first)) first = d;
  return first;
}

size_t OutputSink::pending() const {
  size_t n = 0;
  for (auto& [k, h] : held_) n += h.line.size();
  return n;
}

}  // namespace dl::launcher
