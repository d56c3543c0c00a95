#pragma once
// dlaunch's stdin, for the one rank that reads it (--stdin): read on a thread
// of its own (a blocking read(2) of a terminal or a pipe), each chunk posted
// to the job's io_context as it arrives, then the end.
#include <boost/asio.hpp>
#include <functional>
#include <string>

namespace dl::launcher {

// False for a background job on a terminal: reading it would stop dlaunch with SIGTTIN.
bool may_read_stdin();

// Starts the reader thread (detached: it may sit in read(2) until dlaunch exits).
void forward_stdin(boost::asio::io_context& io, std::function<void(std::string)> data, std::function<void()> eof);

}  // namespace dl::launcher
