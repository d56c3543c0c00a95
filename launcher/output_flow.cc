#include "launcher/output_flow.h"

namespace dl::launcher {

OutputFlow::OutputFlow(boost::asio::io_context& io, OutputSink& sink, AgentLinks& links)
    : io_(io), sink_(sink), links_(links), timer_(io) {}

OutputFlow::~OutputFlow() { ConsoleWriter::when_below_low(nullptr); }

void OutputFlow::write(const control::DataChunk& c) {
  sink_.write(c.rank, c.stream, c.bytes);
  show_held();
  if (held_ || ConsoleWriter::queued() <= ConsoleWriter::kHigh) return;
  held_ = true;
  links_.hold_reading();
  ConsoleWriter::when_below_low([this] {
    boost::asio::post(io_, [this] {
      held_ = false;
      links_.resume_reading();
    });
  });
}

void OutputFlow::show_held() {
  if (timer_armed_) return;
  const auto due = sink_.next_due();
  if (!due) return;
  timer_armed_ = true;
  timer_.expires_at(*due);
  timer_.async_wait([this](boost::system::error_code ec) {
    timer_armed_ = false;
    if (ec) return;
    sink_.show_held(OutputSink::Clock::now(), held_ || ConsoleWriter::queued() > 0);
    show_held();
  });
}

}  // namespace dl::launcher
