#include "launcher/output/output_flow.h"

#include <unistd.h>

namespace dl::launcher {

std::unique_ptr<OutputSink> make_output_sink(const RunOptions& o, const hostfiles::Placement& p) {
  std::vector<std::string> rank_hosts;
  OutputOptions out;
  out.tag = o.tag_output, out.timestamp = o.timestamp_output, out.dir = o.output_dir;
  out.log_dir = o.log_dir;
  out.merge_stderr = o.merge_stderr;
  out.redirects = o.redirects, out.tee = o.tee, out.console_ranks = o.console_ranks;
  out.live[0] = ::isatty(1) == 1, out.live[1] = ::isatty(2) == 1;
  for (const auto& r : p.ranks) {
    rank_hosts.push_back(p.nodes.at(static_cast<size_t>(r.node)).host);
    out.local_ranks.push_back(r.local_rank);
  }
  return std::make_unique<OutputSink>(std::move(out), std::move(rank_hosts));
}

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
