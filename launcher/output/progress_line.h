#pragma once
// `dlaunch: agents 12/64 connected, 3 failed`: one line on a terminal,
// redrawn in place while agents start, erased before anything else prints.
#include <boost/asio.hpp>
#include <functional>
#include <string>

namespace dl::launcher {

class ProgressLine {
 public:
  explicit ProgressLine(boost::asio::io_context& io) : timer_(io) {}
  // Redraws text() every 100 ms until stop().
  void start(std::function<std::string()> text);
  // Erases the line and stops redrawing.
  void stop();
  // Writes `line` (whole lines, with '\n') to stderr over the progress line,
  // and draws the progress line again under it.
  void print_over(const std::string& line);

 private:
  void draw();
  boost::asio::steady_timer timer_;
  std::function<std::string()> text_;
  std::string shown_;  // what is on the terminal, "" when nothing
};

}  // namespace dl::launcher
