#pragma once
// The ranks' output on its way from the agents' links to dlaunch's console
// (launcher/output/output_sink.h). Two duties beside the sink's own:
//  - partial lines meant to be seen early (a progress bar; a prompt on a
//    terminal: OutputSink's header) are shown once they have waited
//    OutputSink::kHoldFor, with one timer for the first due; while the
//    console is behind (reading held, or bytes queued) their waits start again;
//  - while dlaunch's own stdout or stderr is not keeping up (ConsoleWriter
//    above its high mark), the agents' connections are not read until it
//    has, rather than queue output without bound.
// Everything runs on the Job's io_context thread.
#include <boost/asio.hpp>
#include <memory>

#include "control/protocol.h"
#include "launcher/agent_links.h"
#include "launcher/options/options.h"
#include "hostfiles/placement.h"
#include "launcher/output/output_sink.h"

namespace dl::launcher {

// The job's OutputSink as the options and placement ask: tags, timestamps,
// --output-filename, --log-dir, torchrun's -r/-t (keyed by local rank).
std::unique_ptr<OutputSink> make_output_sink(const RunOptions& o, const hostfiles::Placement& p);

class OutputFlow {
 public:
  OutputFlow(boost::asio::io_context& io, OutputSink& sink, AgentLinks& links);
  ~OutputFlow();
  OutputFlow(const OutputFlow&) = delete;
  OutputFlow& operator=(const OutputFlow&) = delete;
  // A chunk of rank c.rank's output, already checked to be its node's.
  void write(const control::DataChunk& c);

 private:
  void show_held();

  boost::asio::io_context& io_;
  OutputSink& sink_;
  AgentLinks& links_;
  boost::asio::steady_timer timer_;  // the oldest partial line is due
  bool timer_armed_ = false;
  bool held_ = false;  // the agents' connections are not read: the console is behind
};

}  // namespace dl::launcher
