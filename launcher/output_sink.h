#pragma once
// Where the ranks' output goes: dlaunch's stdout/stderr, whole lines only,
// optionally tagged "[rank@host] " and timestamped, or one file per rank.
// Bytes arrive in arbitrary chunks; each (rank, stream) keeps its partial
// last line until the newline comes or the rank ends.
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace dl::launcher {

struct OutputOptions {
  bool tag = false;
  bool timestamp = false;
  std::string dir;  // non-empty: DIR/rank.N/stdout and DIR/rank.N/stderr
};

class OutputSink {
 public:
  // `hosts[r]` names rank r's host for tags. fds default to 1 and 2.
  OutputSink(OutputOptions opts, std::vector<std::string> hosts, int out_fd = 1, int err_fd = 2);
  ~OutputSink();
  // stream: 1 = stdout, 2 = stderr.
  void write(int rank, int stream, std::string_view bytes);
  // The rank ended: its unterminated last lines are written with a '\n'.
  void finish(int rank);
  // Bytes held back waiting for a newline (for tests).
  size_t pending() const;

 private:
  std::string prefix(int rank) const;
  void emit(int rank, int stream, std::string_view whole_lines);
  int fd_for(int rank, int stream);

  OutputOptions opts_;
  std::vector<std::string> hosts_;
  int out_fd_, err_fd_;
  std::map<std::pair<int, int>, std::string> partial_;
  std::map<std::pair<int, int>, int> files_;
};

// write(2) until done, waiting out EAGAIN; errors (a closed pipe) are dropped.
void write_fully(int fd, std::string_view bytes);

}  // namespace dl::launcher
