#include "launcher/output/progress_line.h"

#include "errors/error.h"
#include "launcher/output/output_sink.h"

namespace dl::launcher {

void ProgressLine::start(std::function<std::string()> text) {
  text_ = std::move(text);
  draw();
}

void ProgressLine::draw() {
  if (!text_) return;
  const std::string line = text_();
  if (line != shown_) write_fully(2, "\r\033[Kdlaunch: " + line), shown_ = line;
  timer_.expires_after(std::chrono::milliseconds(100));
  timer_.async_wait([this](boost::system::error_code ec) { if (!ec) draw(); });
}

void ProgressLine::stop() {
  text_ = nullptr;
  timer_.cancel();
  if (!shown_.empty()) write_fully(2, "\r\033[K");
  shown_.clear();
}

void ProgressLine::print_over(const std::string& line) {
  write_fully(2, std::string(shown_.empty() ? "" : "\r\033[K") + line);
  shown_.clear();
  // Back at once, not at the next tick: what just happened (one more failed
  // host) shows even when the job ends before the tick.
  if (text_) write_fully(2, "dlaunch: " + (shown_ = text_()));
}

}  // namespace dl::launcher
