#pragma once
// Where the ranks' output goes: dlaunch's stdout/stderr, optionally tagged
// "[rank@host] " and timestamped, and/or one file per rank and stream.
// Bytes arrive in arbitrary chunks. The console gets whole lines: each
// (rank, stream) holds its partial last line until the newline comes, it
// has grown to kMaxHeld, or the rank ends; or, where the line is meant to be
// seen before its end, until the console has been quiet for kHoldFor while
// it waited (a shown partial line stays open at the cursor until its stream
// goes on or another stream writes, which first ends it with a newline).
// A line is meant to be seen early when it redraws itself with '\r' (a
// progress bar), or its console is a terminal (a prompt, "Loading..."):
// where dlaunch's output goes to a file or a pipe (a batch job's log, CI,
// `| tee`), a line is never cut on time. The hold is a guess that the rank
// has paused; on a loaded machine a rank can stall mid-write for longer
// than any hold, and a log's lines must not be split by that.
// Files get the rank's bytes as they come, unchanged.
#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "launcher/options/std_spec.h"
#include "wire/private_dir.h"

namespace dl::launcher {

struct OutputOptions {
  bool tag = false;
  bool timestamp = false;
  // --merge-stderr-to-stdout: every rank's stderr is its stdout here (the
  // console's stdout, the stdout file), in the order the chunks arrive.
  bool merge_stderr = false;
  std::string dir;  // --output-filename DIR: every stream to DIR/rank.N/{stdout,stderr}, nothing to the console
  // torchrun's spellings (docs/dlaunch.md): with log_dir, the streams that
  // redirects or tee name go to log_dir/rank.N/{stdout,stderr} (same layout as
  // dir); redirected ones leave the console, tee'd ones stay on it too.
  std::string log_dir;
  StdSpec redirects, tee;
  std::vector<int> console_ranks;  // --local-ranks-filter: only these global ranks reach the console; empty = all
  std::vector<int> local_ranks;    // local rank of each rank, for per-local-rank maps; missing = the rank itself
  // Partial lines of stdout ([0]) and stderr ([1]) are shown after kHoldFor
  // (see above): make_output_sink sets these where dlaunch's stdout or
  // stderr is a terminal. A '\r' redraw is shown on time either way.
  bool live[2] = {false, false};
};

// Where one stream of one rank goes.
struct Route {
  bool console = true;
  bool file = false;
};
// Pure routing: stream 1 = stdout, 2 = stderr.
Route route(const OutputOptions& o, int rank, int stream);

class OutputSink {
 public:
  using Clock = std::chrono::steady_clock;
  // A partial line is shown once it has waited this long with nothing else
  // written to its console (its cursor) meanwhile: a prompt or a '\r'
  // progress bar (tqdm redraws every 0.1 s: two redraws a showing) shows
  // while the rank runs; a line that comes in pieces (a long line, a rank
  // blocked on its full pipe while dlaunch's console is behind) is not cut
  // while other ranks' lines keep coming, which they would end; and several
  // ranks' progress bars take turns instead of ending each other's lines.
  static constexpr std::chrono::milliseconds kHoldFor{200};
  // A partial line is shown at once when it holds this many bytes: a rank
  // that never writes a newline holds no more than this here.
  static constexpr size_t kMaxHeld = 64u << 10;

  // `hosts[r]` names rank r's host for tags. fds default to 1 and 2.
  OutputSink(OutputOptions opts, std::vector<std::string> hosts, int out_fd = 1, int err_fd = 2);
  ~OutputSink();
  // Makes the output files of `ranks` (empty, 0600, in directories 0700:
  // wire/private_dir.h) before they start; throws UsageError naming the
  // option and the path it refuses. Other ranks' files are made when their
  // first bytes come. --log-dir with no stream to files is checked the
  // same way (wire::PrivateDir::check), and nothing is made.
  void make_files(const std::vector<int>& ranks);
  // stream: 1 = stdout, 2 = stderr. A file that cannot be written (its disk
  // full, its file system gone read-only, `ulimit -f`) is said once on
  // dlaunch's stderr, naming the rank, the file and why, and from then on
  // that stream goes to the console instead: the job goes on (a full log
  // disk is no reason to end a training run), and no output is lost unseen.
  void write(int rank, int stream, std::string_view bytes);
  // A rank started after the job's (MPI_Comm_spawn): its host and the name
  // its tag shows in place of the number ("[spawn1:0@node1] ").
  void add_rank(int rank, std::string host, std::string tag);
  // --spares: `rank` runs on `host` from the next attempt on.
  void move_rank(int rank, std::string host) {
    if (static_cast<size_t>(rank) < hosts_.size()) hosts_[static_cast<size_t>(rank)] = std::move(host);
  }
  // The rank ended: its unterminated last lines are written with a '\n'.
  void finish(int rank);
  // finish() for every rank that holds or left a line unended.
  void finish_all();
  // Shows the partial lines that have waited kHoldFor at `now`. While
  // dlaunch's console is `behind` (bytes queued for it), nothing is shown
  // and every wait starts again: the rest of a line may be on its way.
  void show_held(Clock::time_point now, bool behind = false);
  // When the first partial line will have waited kHoldFor; none if none waits.
  std::optional<Clock::time_point> next_due() const;
  // The directory the rank directories are made in: --output-filename's DIR;
  // for --log-dir, LOG_DIR/dlaunch_<date>-<time>_<pid>/attempt_<k> (a fresh
  // one per run and attempt, as torchrun's); "" when no stream goes to files.
  std::string files_path();
  // A restart: the files of `attempt` go to its own directory (--log-dir);
  // --output-filename's files go on, the failed attempt's output kept above.
  void next_attempt(int attempt);
  // Bytes held back waiting for a newline (for tests).
  size_t pending() const;

 private:
  using Key = std::pair<int, int>;  // (rank, stream)
  struct Held {
    std::string line;         // the partial line not shown yet (never empty)
    Clock::time_point since;  // when its first byte came
  };
  // A line of one stream shown in part: the console's cursor is at its end.
  struct OpenLine {
    Key key;
    bool after_cr = false;  // its last byte was '\r': its next bytes start at column 0
  };
  std::string prefix(int rank) const;
  std::string prefixed(int rank, std::string_view text, bool at_start) const;
  void show(Key key, std::string_view text);
  void show_held_line(std::map<Key, Held>::iterator it);  // shows it, then forgets it
  void end_open_line(std::optional<OpenLine>& open);
  int cursor(int stream) const { return same_console_ || stream != 2 ? 0 : 1; }
  std::optional<OpenLine>& open_line(int stream) { return open_[cursor(stream)]; }
  // When a held line is shown on time; none when only its newline, size or
  // rank's end shows it.
  std::optional<Clock::time_point> due(Key key, const Held& h) const;
  int console_fd(int stream) const { return stream == 2 ? err_fd_ : out_fd_; }
  int file_for(int rank, int stream);
  wire::PrivateDir& files_dir();

  OutputOptions opts_;
  std::vector<std::string> hosts_;
  std::map<int, std::string> tags_;  // add_rank's names
  int out_fd_, err_fd_;
  bool same_console_ = false;  // out_fd_ and err_fd_ are one file (a terminal): one cursor
  std::map<Key, Held> held_;  // the streams holding a partial line
  std::optional<OpenLine> open_[2];  // per cursor: out_fd_'s, err_fd_'s
  Clock::time_point last_shown_[2];  // per cursor: when something was last written there
  std::optional<wire::PrivateDir> files_dir_;
  std::string run_name_;  // --log-dir: this run's directory in it
  int attempt_ = 0;
  std::set<Key> made_;  // files make_files emptied, not yet opened again
  std::map<Key, int> files_;
  std::set<Key> failed_files_;  // written to the console instead (write's note)
  // Writes `bytes` to the key's file; false (after saying why) when it cannot.
  bool write_file(Key key, std::string_view bytes);
};

// write(2) until done, waiting out EAGAIN; errors (a closed pipe) are dropped.
// To dlaunch's stdout or stderr (fd 1 or 2) while the console writer is on:
// queued for its thread, in order, and returns at once.
void write_fully(int fd, std::string_view bytes);

// dlaunch's stdout and stderr written by a thread of their own while a job
// runs, so that a reader that does not keep up (`dlaunch ... | less` left
// unscrolled, a slow tee, a terminal on hold) holds up the output, not the
// launcher's loop: before, write(2) blocked the loop, no heartbeat went out,
// and after --heartbeat-timeout the agents killed the job as launcher-less.
// The job holds its agents' output back (their connections stop being read)
// while more than kHigh bytes wait here, and reads them again below kLow:
// the ranks then wait on their own writes, as under mpirun.
// Everything goes through write_fully; the thread starts with the first
// write after enable(). SIGPIPE is not blocked on it: a reader that went
// away (`| head`) ends dlaunch as before.
class ConsoleWriter {
 public:
  static constexpr size_t kHigh = 4u << 20;
  static constexpr size_t kLow = 1u << 20;
  // From now on writes to fd 1 and 2 are queued.
  static void enable();
  // Bytes waiting to be written.
  static size_t queued();
  // `fn` runs once, on the writer's thread, when fewer than kLow bytes wait
  // (at once, here, if that is so now); nullptr forgets a pending one.
  static void when_below_low(std::function<void()> fn);
  // Waits until everything queued is written; then writes are direct again.
  static void drain_and_disable();
};

}  // namespace dl::launcher
